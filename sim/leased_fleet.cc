// sim/leased_fleet.cc: the leased-fleet scenario (see the header and
// docs/simulation.md).

#include "sim/leased_fleet.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/random.h"
#include "sim/shrink.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit::sim {
namespace {

using Limiter = BasicLeasedLimiter<ClockRef<NodeClock>>;

class Run final : public WindowedFleetRun<Limiter> {
 public:
  Run(uint64_t seed, const LeasedFleetConfig& c, bool keep_trace)
      : WindowedFleetRun(seed, windowed_shape(c), c.network,
                         c.timeout_ms * 1000, keep_trace),
        config_(c) {}

 private:
  std::unique_ptr<Limiter> make_engine(int n) override {
    LeasedLimiterOptions o;
    o.limit = config_.limit;
    o.window_ms = config_.window_ms;
    o.batch = config_.batch;
    o.window_coupled = config_.window_coupled;
    o.background_worker = false;
    o.fail_policy = config_.policy_dropped
                        ? FailPolicy::kPropagate
                        : windowed_shape(config_).fail_policy;
    auto limiter = Limiter::create(std::move(o), coordinators_[n],
                                   ClockRef<NodeClock>(*clocks_[n]));
    if (!limiter.ok()) fail_setup(limiter.status());
    return *std::move(limiter);
  }

  // At a window's end each node may strand what it leased and did not
  // spend: under a batch per node, and nothing more once no message is
  // lost or late (a lost grant, or one past the deadline, strands its
  // credits: faults that never heal, so seeds with loss or the wide delay
  // shape are not judged) and no clock runs ahead (a node ahead drops its
  // credits before the store's window ends).
  bool judges_fail_policy() const override { return true; }
  int64_t outages_decided(int n) const override {
    return engines_[n]->stats().outages;
  }

  int64_t liveness_floor() const override {
    if (!config_.window_coupled || config_.network.loss > 0 ||
        config_.network.delay_sigma >= 1 || config_.clock_skew) {
      return -1;
    }
    const int64_t floor = config_.limit - config_.nodes * config_.batch;
    return floor > 0 ? floor : -1;
  }

  const LeasedFleetConfig config_;
};

}  // namespace

WindowedFleetShape windowed_shape(const LeasedFleetConfig& c) {
  return WindowedFleetShape{
      .nodes = c.nodes,
      .keys = c.keys,
      .limit = c.limit,
      .window_ms = c.window_ms,
      .requests_per_sec_per_node = c.requests_per_sec_per_node,
      .duration_ms = c.duration_ms,
      .partitions = c.partitions,
      .crashes = c.crashes,
      .clock_offset_min_us = 0,
      .clock_offset_max_us = c.clock_skew ? 50'000 : 0,
      .workload = c.workload,
      .store_failover = c.store_failover || c.store_restart,
      // A restart: a replica that receives no write within the run.
      .replication_lag_ms = c.store_restart ? c.duration_ms + 1 : 5,
      .fail_policy = FailPolicy(c.fail_mode, c.window_ms)};
}

LeasedFleetConfig swarm_config(uint64_t seed, int nodes) {
  Rng rng(seed ^ 0x5EEDF1EE7ull);
  LeasedFleetConfig c;
  c.nodes = nodes;
  c.keys = 1 + static_cast<int>(rng.next() % 6);
  c.batch = int64_t{1} << (rng.next() % 6);  // 1 .. 32
  c.limit = 50 + static_cast<int64_t>(rng.next() % 300);
  c.window_ms = 20 + static_cast<int64_t>(rng.next() % 200);
  c.network.median_delay_us = 100 + rng.uniform() * 2'000;
  c.network.delay_sigma = rng.uniform() < 0.3 ? 1.5 : 0.4;  // 1.5: reorders
  c.network.loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.partitions = rng.uniform() < 0.3;
  c.crashes = rng.uniform() < 0.3;
  c.clock_skew = rng.uniform() < 0.5;
  // Demand around 0.5x to 4x the limit, so windows run out.
  const double limit_per_sec = c.limit * 1000.0 / c.window_ms;
  c.requests_per_sec_per_node =
      limit_per_sec * (0.5 + rng.uniform() * 3.5) / nodes;
  // Drawn last, so that every earlier draw (and each seed's history under
  // kPropagate) is what it was before the policy was drawn.
  constexpr FailPolicy::Mode kModes[] = {
      FailPolicy::kPropagate, FailPolicy::kOpen, FailPolicy::kClosed};
  c.fail_mode = kModes[rng.next() % 3];
  return c;
}

std::string replay_command(uint64_t seed, const LeasedFleetConfig& c,
                           std::string_view scenario) {
  // Doubles in full (`exact`), so the command replays exactly.
  return absl::StrCat(
      "tk_sim ", absl::string_view(scenario.data(), scenario.size()),
      " --seed ", seed, " --nodes ", c.nodes, " --keys ", c.keys, " --limit ",
      c.limit, " --window-ms ", c.window_ms, " --batch ", c.batch, " --rate ",
      exact(c.requests_per_sec_per_node), " --duration-ms ", c.duration_ms,
      " --delay-us ", exact(c.network.median_delay_us), " --sigma ",
      exact(c.network.delay_sigma), " --loss ", exact(c.network.loss),
      " --partitions ", c.partitions ? 1 : 0, " --crashes ", c.crashes ? 1 : 0,
      " --clock-skew ", c.clock_skew ? 1 : 0, " --timeout-ms ", c.timeout_ms,
      c.workload == Workload::kBursts    ? " --bursts"
      : c.workload == Workload::kDiurnal ? " --diurnal"
                                         : "",
      c.store_failover ? " --failover" : "",
      c.store_restart ? " --restart" : "",
      c.fail_mode != FailPolicy::kPropagate ? " --fail " : "",
      c.fail_mode != FailPolicy::kPropagate ? fail_mode_name(c.fail_mode) : "",
      c.policy_dropped ? " --policy-dropped" : "",
      c.window_coupled ? "" : " --uncoupled");
}

SimResult run_leased_fleet(uint64_t seed, const LeasedFleetConfig& config,
                           bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

LeasedFleetConfig shrink(uint64_t seed, LeasedFleetConfig failing, int rounds) {
  using C = LeasedFleetConfig;
  const std::vector<std::function<void(C&)>> steps = {
      [](C& c) { c.partitions = false; },
      [](C& c) { c.crashes = false; },
      [](C& c) { c.clock_skew = false; },
      [](C& c) { c.fail_mode = FailPolicy::kPropagate; },
      [](C& c) { c.network.loss = 0; },
      [](C& c) { c.network.delay_sigma = 0.4; },
      [](C& c) {
        // Halving the fleet keeps the whole fleet's demand.
        const int nodes = std::max(1, c.nodes / 2);
        c.requests_per_sec_per_node *= static_cast<double>(c.nodes) / nodes;
        c.nodes = nodes;
      },
      [](C& c) { c.keys = std::max(1, c.keys / 2); },
      [](C& c) { c.duration_ms = std::max(c.window_ms, c.duration_ms / 2); },
  };
  return shrink_seed(
      seed, std::move(failing), steps, run_leased_fleet,
      [](uint64_t s, const C& c) { return replay_command(s, c); }, rounds);
}

}  // namespace throttlekit::sim
