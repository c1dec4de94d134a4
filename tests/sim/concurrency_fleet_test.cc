// The fleet simulator's distributed-concurrency fleet
// (sim/concurrency_fleet.h, docs/simulation.md): five nodes of the
// production DistributedConcurrency beating to the production heartbeat
// step hold the fleet's slots at or under the global limit at every
// acquisition, on every seed, each drawing its faults (loss, partitions,
// crashes, drift within the fencing margin), and the faults happen; the
// mutations the proofs call unsafe (handoff off, self-fencing off, a
// fencing margin below the clock drift) are each caught within a stated
// number of seeds; a run replays byte for byte.

#include "sim/concurrency_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(ConcurrencyFleetSim, EverySeedHoldsTheGlobalCeiling) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(150, 20));
  // Admitted: acquisitions; a window at the limit: a seed at the ceiling.
  testing::SwarmTally tally;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const ConcurrencyFleetConfig c = swarm_concurrency_config(seed, 5);
    const SimResult r = run_concurrency_fleet(seed, c);
    ASSERT_NO_FATAL_FAILURE(
        testing::expect_seed_holds(r, concurrency_replay_command(seed, c)));
    tally.add(r, c.local_limit);
  }
  // The ceiling was reached, not just respected, and the faults ran.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(tally.crashes, 0);
  std::printf("%s\n", tally.summary().c_str());
}

// A run of seed `seed`'s swarm with `mutate` applied to its configuration.
auto mutated(std::function<void(ConcurrencyFleetConfig&)> mutate) {
  return testing::mutated_swarm(swarm_concurrency_config, 5,
                                run_concurrency_fleet, std::move(mutate));
}

TEST(ConcurrencyFleetSim, HandoffOffIsCaughtWithinFiftySeeds) {
  testing::expect_caught_within(
      50, "handoff off",
      mutated([](ConcurrencyFleetConfig& c) { c.handoff = false; }));
}

// The shrinker on the handoff row's first failing seed: a configuration
// no larger that still breaks the ceiling, with less of the fleet or the
// run, or fewer faults.
TEST(ConcurrencyFleetSim, TheShrinkerKeepsTheFailureWithLess) {
  const auto no_handoff = [](ConcurrencyFleetConfig& c) { c.handoff = false; };
  const uint64_t seed = testing::first_failing_seed(50, mutated(no_handoff));
  ASSERT_GT(seed, 0u);
  ConcurrencyFleetConfig c = swarm_concurrency_config(seed, 5);
  no_handoff(c);
  const ConcurrencyFleetConfig small = shrink_concurrency(seed, c);
  EXPECT_GT(run_concurrency_fleet(seed, small).violations, 0)
      << concurrency_replay_command(seed, small);
  EXPECT_LE(small.nodes, c.nodes);
  EXPECT_GE(small.nodes, 2);
  EXPECT_LE(small.duration_ms, c.duration_ms);
  EXPECT_LE(small.partitions, c.partitions);
  EXPECT_LE(small.crashes, c.crashes);
  EXPECT_NE(concurrency_replay_command(seed, small),
            concurrency_replay_command(seed, c))
      << "nothing shrank";
  std::printf("shrunk: %s\n", concurrency_replay_command(seed, small).c_str());
}

TEST(ConcurrencyFleetSim, SelfFencingOffIsCaughtWithinFiftySeeds) {
  testing::expect_caught_within(50, "self-fencing off",
                                mutated([](ConcurrencyFleetConfig& c) {
                                  c.self_fencing = false;
                                  c.partitions = true;
                                }));
}

TEST(ConcurrencyFleetSim, AFencingMarginBelowTheDriftIsCaughtWithinFiftySeeds) {
  // 40% slow clocks: over a 250 ms lease, 100 ms, twice the 50 ms margin.
  testing::expect_caught_within(50, "margin below the drift",
                                mutated([](ConcurrencyFleetConfig& c) {
                                  c.drift_ppm = 400'000;
                                  c.partitions = true;
                                }));
}

// The permit-leak check has teeth: a fleet where one admitted request
// never releases its permit is caught at the end of the run; the same
// fleet releasing everything is clean.
TEST(ConcurrencyFleetSim, AForgottenReleaseIsCaughtAsAPermitLeak) {
  ConcurrencyFleetConfig c = swarm_concurrency_config(1, 5);
  c.crashes = false;  // a crash would take the unreleased slot with it
  c.partitions = false;
  EXPECT_EQ(run_concurrency_fleet(1, c).violations, 0);
  c.drop_a_release = true;
  const SimResult leaked = run_concurrency_fleet(1, c);
  EXPECT_GT(leaked.violations, 0);
  EXPECT_NE(leaked.first_violation.find("permit leak"), std::string::npos)
      << leaked.first_violation;
  std::printf("forgotten release: %s\n", leaked.first_violation.c_str());
}

TEST(ConcurrencyFleetSim, ARunReplaysByteForByte) {
  const ConcurrencyFleetConfig c = swarm_concurrency_config(7, 5);
  testing::expect_replays(run_concurrency_fleet, c, 7, std::nullopt);
}

}  // namespace
}  // namespace throttlekit::sim
