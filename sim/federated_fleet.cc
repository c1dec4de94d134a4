// sim/federated_fleet.cc: the federated-fleet scenario (see the header and
// docs/simulation.md).

#include "sim/federated_fleet.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/strategy/fixed_window.h"

namespace throttlekit::sim {
namespace {

using Limiter = BasicFederatedLimiter<ClockRef<NodeClock>>;

WindowedFleetShape shape_of(const FederatedFleetConfig& c) {
  WindowedFleetShape s = windowed_shape(c.fleet);
  if (c.clocks_behind) {
    s.clock_offset_min_us = -50'000;
    s.clock_offset_max_us = 0;
  }
  return s;
}

AnyStrategy strategy_of(const FederatedFleetConfig& c) {
  absl::StatusOr<AnyStrategy> s = make_strategy(FixedWindow::Options{
      .limit = c.fleet.limit, .window_ms = c.fleet.window_ms});
  if (!s.ok()) fail_setup(s.status());
  return *std::move(s);
}

class Run final : public WindowedFleetRun<Limiter> {
 public:
  Run(uint64_t seed, const FederatedFleetConfig& c, bool keep_trace)
      : WindowedFleetRun(seed, shape_of(c), c.fleet.network,
                         c.fleet.timeout_ms * 1000, keep_trace),
        config_(c),
        strategy_(strategy_of(c)) {
    for (int r = 0; c.escrow && r < c.regions; ++r) {
      absl::StatusOr<std::unique_ptr<MemoryCoordinator>> e =
          MemoryCoordinator::create(
              {}, std::make_shared<ClockAdapter<TrueClock>>(TrueClock(loop_)));
      if (!e.ok()) fail_setup(e.status());
      escrows_.push_back(std::shared_ptr<Coordinator>(*std::move(e)));
    }
  }

 private:
  std::unique_ptr<Limiter> make_engine(int n) override {
    const int region = n % config_.regions;
    FederationOptions o;
    o.region = absl::StrCat("r", region);
    o.batch = config_.fleet.batch;
    if (config_.escrow) {
      o.regional_escrow = escrows_[static_cast<size_t>(region)];
      if (config_.regional_only) {
        o.on_outage = FederationOutage::kRegionalOnly;
      }
    }
    // A process cut off re-probes within a window, not after 5 s.
    o.health_check_ms = config_.fleet.window_ms;
    o.background_worker = false;
    absl::StatusOr<std::unique_ptr<Limiter>> limiter =
        Limiter::create(strategy_, coordinators_[static_cast<size_t>(n)],
                        std::move(o), ClockRef<NodeClock>(*clocks_[n]));
    if (!limiter.ok()) fail_setup(limiter.status());
    return *std::move(limiter);
  }

  const FederatedFleetConfig config_;
  const AnyStrategy strategy_;
  std::vector<std::shared_ptr<Coordinator>> escrows_;  // by region
};

}  // namespace

FederatedFleetConfig swarm_federated_config(uint64_t seed, int nodes) {
  FederatedFleetConfig c;
  c.fleet = swarm_config(seed, nodes);
  c.fleet.fail_mode = FailPolicy::kPropagate;  // its outage modes are its own
  Rng rng(seed ^ 0xFEDE7A7Eull);
  c.regions = 1 + static_cast<int>(rng.next() % 4);
  c.escrow = rng.uniform() < 0.5;
  c.regional_only = c.escrow && rng.uniform() < 0.5;
  return c;
}

std::string federated_replay_command(uint64_t seed,
                                     const FederatedFleetConfig& c) {
  return absl::StrCat(replay_command(seed, c.fleet, "federated"), " --regions ",
                      c.regions, " --escrow ", c.escrow ? 1 : 0,
                      " --regional-only ", c.regional_only ? 1 : 0,
                      c.clocks_behind ? " --clocks-behind" : "");
}

SimResult run_federated_fleet(uint64_t seed, const FederatedFleetConfig& config,
                              bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

}  // namespace throttlekit::sim
