// The fleet simulator's leased fleet (sim/leased_fleet.h,
// docs/simulation.md): the production leased limiter on 8 nodes, leasing
// over a simulated network from the production memory coordinator, holds
// its window bound (admitted per key per window <= limit) on every seed,
// each seed drawing its own faults (loss, reordering, partitions, crashes,
// clocks ahead with drift), and the faults do happen across the seeds; the
// mutation that carries credits past their window is caught within a
// stated number of seeds; a failing seed replays byte for byte; the
// shrinker's smaller configuration still fails.

#include "sim/leased_fleet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

using testing::first_failing_seed;
using testing::sound;

TEST(LeasedFleetSim, EverySeedHoldsTheWindowBound) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(400, 40));
  LivenessTally liveness;
  testing::SwarmTally tally;
  int64_t windows = 0;
  int64_t decided[3] = {};  // outages decided, per drawn fail policy
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const LeasedFleetConfig c = swarm_config(seed, 8);
    const SimResult r = run_leased_fleet(seed, c);
    ASSERT_TRUE(sound(r, replay_command(seed, c)));
    liveness.add(r, c.partitions || c.crashes);
    EXPECT_GT(r.admitted, 0) << replay_command(seed, c);
    tally.add(r, c.limit);
    windows += r.windows_checked;
    decided[c.fail_mode] += r.outage_decisions;
  }
  // The bound was reached, not just respected, and every fault kind ran.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(tally.crashes, 0);
  EXPECT_GT(tally.timeouts, 0);
  // Each fail policy decided outages (each checked as it was decided),
  // except kPropagate, which decides none.
  EXPECT_EQ(decided[FailPolicy::kPropagate], 0);
  EXPECT_GT(decided[FailPolicy::kOpen], 0);
  EXPECT_GT(decided[FailPolicy::kClosed], 0);
  // Liveness: windows judged after the faults healed, on seeds whose
  // partitions or crashes had healed among them, none below the floor.
  EXPECT_GT(liveness.windows, static_cast<int64_t>(seeds) / 2);
  EXPECT_GT(liveness.healed_seeds, 0);
  std::printf("%s\n", liveness.summary().c_str());
  std::printf("outages decided: %lld fail-open, %lld fail-closed\n",
              static_cast<long long>(decided[FailPolicy::kOpen]),
              static_cast<long long>(decided[FailPolicy::kClosed]));
  std::printf("%s; over %lld (key, window) pairs\n", tally.summary().c_str(),
              static_cast<long long>(windows));
}

// The workloads average the configured rate and never pass their peak
// (the thinning that draws them needs both).
TEST(LeasedFleetSim, WorkloadsAverageTheirRateUnderTheirPeak) {
  for (const Workload w :
       {Workload::kPoisson, Workload::kBursts, Workload::kDiurnal}) {
    double sum = 0;
    constexpr int64_t kRunUs = 1'000'000;
    for (int64_t t = 0; t < kRunUs; t += 10) {
      const double f = workload_factor(w, t, kRunUs);
      ASSERT_GE(f, 0);
      ASSERT_LE(f, workload_peak(w));
      sum += f;
    }
    EXPECT_NEAR(sum / (kRunUs / 10), 1.0, 1e-3) << static_cast<int>(w);
  }
}

// Bursts (the whole fleet at 4x for 40 ms of every 200) and a compressed
// day: the bound and the liveness floor hold on every seed, and the
// requests still average the configured rate.
TEST(LeasedFleetSim, BurstsAndADayHoldTheBoundAndTheFloor) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(150, 15));
  for (const Workload w : {Workload::kBursts, Workload::kDiurnal}) {
    int64_t requests = 0, poisson_requests = 0, full_windows = 0;
    LivenessTally liveness;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      LeasedFleetConfig c = swarm_config(seed, 8);
      poisson_requests += run_leased_fleet(seed, c).requests;
      c.workload = w;
      const SimResult r = run_leased_fleet(seed, c);
      ASSERT_TRUE(sound(r, replay_command(seed, c)));
      requests += r.requests;
      full_windows += r.worst_window == c.limit;
      liveness.add(r, c.partitions || c.crashes);
    }
    EXPECT_NEAR(
        static_cast<double>(requests) / static_cast<double>(poisson_requests),
        1.0, 0.05);
    EXPECT_GT(full_windows, static_cast<int64_t>(seeds) / 4);
    EXPECT_GT(liveness.windows, 0);
    std::printf("%s: %lld requests (Poisson: %lld), %s\n",
                w == Workload::kBursts ? "bursts" : "diurnal",
                static_cast<long long>(requests),
                static_cast<long long>(poisson_requests),
                liveness.summary().c_str());
  }
}

// Seed `seed`'s swarm with window coupling off: credits carried past
// their window, with the coupled bound asserted.
LeasedFleetConfig uncoupled_config(uint64_t seed) {
  LeasedFleetConfig c = swarm_config(seed, 8);
  c.window_coupled = false;
  return c;
}

SimResult run_uncoupled(uint64_t seed) {
  return run_leased_fleet(seed, uncoupled_config(seed));
}

// The first seed (from 1) on which carried credits break the coupled bound.
uint64_t first_failing_uncoupled_seed(uint64_t within) {
  return first_failing_seed(within, run_uncoupled);
}

// The mutation table's row for the leased fleet: window coupling off with
// the coupled bound asserted is caught within 20 seeds.
TEST(LeasedFleetSim, CarriedCreditsAreCaughtWithinTwentySeeds) {
  testing::expect_caught_within(20, "window coupling off", run_uncoupled);
}

// The fail policy's row: engines built without the configured policy
// (an outage reaches the caller as a status under fail-open or
// fail-closed) are caught within 20 seeds.
TEST(LeasedFleetSim, ADroppedFailPolicyIsCaughtWithinTwentySeeds) {
  testing::expect_caught_within(
      20, "policy dropped",
      [](uint64_t seed) {
        LeasedFleetConfig c = swarm_config(seed, 8);
        c.policy_dropped = true;
        return run_leased_fleet(seed, c);
      },
      "under fail policy");
}

TEST(LeasedFleetSim, AFailingSeedReplaysByteForByte) {
  const uint64_t seed = first_failing_uncoupled_seed(20);
  ASSERT_GT(seed, 0u);
  const LeasedFleetConfig c = uncoupled_config(seed);
  testing::expect_replays(run_leased_fleet, c, seed, seed + 1000);
}

TEST(LeasedFleetSim, TheShrinkerKeepsTheFailureWithLess) {
  const uint64_t seed = first_failing_uncoupled_seed(20);
  ASSERT_GT(seed, 0u);
  const LeasedFleetConfig c = uncoupled_config(seed);
  const LeasedFleetConfig small = shrink(seed, c);
  EXPECT_GT(run_leased_fleet(seed, small).violations, 0)
      << replay_command(seed, small);
  EXPECT_LE(small.nodes, c.nodes);
  EXPECT_LE(small.duration_ms, c.duration_ms);
  EXPECT_FALSE(small.partitions);  // no fault is needed to break it
  EXPECT_FALSE(small.crashes);
  std::printf("shrunk: %s\n", replay_command(seed, small).c_str());
}

}  // namespace
}  // namespace throttlekit::sim
