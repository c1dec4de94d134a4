// sim/strict_fleet.cc: the strict-fleet scenario (see the header and
// docs/simulation.md).

#include "sim/strict_fleet.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/strategy/fixed_window.h"

namespace throttlekit::sim {
namespace {

using Limiter = StrictRateLimiter<FixedWindow, ClockRef<NodeClock>>;

class Run final : public WindowedFleetRun<Limiter> {
 public:
  Run(uint64_t seed, const StrictFleetConfig& c, bool keep_trace)
      : WindowedFleetRun(seed, windowed_shape(c.fleet), c.fleet.network,
                         c.fleet.timeout_ms * 1000, keep_trace),
        config_(c) {}

 private:
  std::unique_ptr<Limiter> make_engine(int n) override {
    auto limiter = Limiter::create(
        {.limit = config_.fleet.limit, .window_ms = config_.fleet.window_ms},
        coordinators_[static_cast<size_t>(n)], {.prefix = "strict"},
        ClockRef<NodeClock>(*clocks_[n]));
    if (!limiter.ok()) fail_setup(limiter.status());
    return *std::move(limiter);
  }

  // On the store's clock (`now` 0), or, mutated, on the node's.
  void ask(int n, int key, const std::string& name, uint64_t generation,
           int64_t asked_ms) override {
    const int64_t now_ms = config_.stale_now ? clocks_[n]->now_ms() : 0;
    engines_[n]->check_at_async(
        name, now_ms, 1,
        [this, n, key, generation, asked_ms](absl::StatusOr<Decision> d) {
          decided(n, key, generation, asked_ms, d);
        });
  }

  // Every check is decided at the store and nothing is stranded: once no
  // message is lost or late (an answer past the deadline was counted by the
  // store and fails its caller), a window asked for twice its limit admits
  // all of it.
  int64_t liveness_floor() const override {
    if (config_.stale_now || config_.fleet.network.loss > 0 ||
        config_.fleet.network.delay_sigma >= 1) {
      return -1;
    }
    return config_.fleet.limit;
  }

  const StrictFleetConfig config_;
};

}  // namespace

StrictFleetConfig swarm_strict_config(uint64_t seed, int nodes) {
  return StrictFleetConfig{.fleet = swarm_config(seed, nodes)};
}

std::string strict_replay_command(uint64_t seed, const StrictFleetConfig& c) {
  return absl::StrCat(replay_command(seed, c.fleet, "strict"),
                      c.stale_now ? " --stale-now" : "");
}

SimResult run_strict_fleet(uint64_t seed, const StrictFleetConfig& config,
                           bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

}  // namespace throttlekit::sim
