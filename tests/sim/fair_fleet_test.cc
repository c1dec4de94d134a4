// The fleet simulator's federated weighted-fair escrow fleet
// (sim/fair_fleet.h, docs/simulation.md): production
// `FederatedFairEscrow`s in 1 to 4 regions over one region pool hold the
// global budget on every seed under every fault, and, in the windows
// whose assumptions hold, every tenant's admissions stay inside the
// fairness band the header states; a region that reports twice its weight
// is caught; a run replays byte for byte.

#include "sim/fair_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

using testing::sound;

TEST(FairFleetSim, EverySeedHoldsTheBudgetAndTheFairnessBand) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 40));
  testing::SwarmTally tally;
  int64_t checks = 0, judged_seeds = 0, below = 0, above = 0;
  int regions_seen = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const int regions = 1 + static_cast<int>(seed % 4);
    const FairFleetConfig c = swarm_fair_config(seed, regions);
    const SimResult r = run_fair_fleet(seed, c);
    ASSERT_TRUE(sound(r, fair_replay_command(seed, c)));
    EXPECT_GT(r.admitted, 0) << fair_replay_command(seed, c);
    checks += r.fairness_checks;
    judged_seeds += r.fairness_checks > 0;
    if (r.fairness_checks > 0) regions_seen |= 1 << regions;
    tally.add(r, c.fleet.limit);
    below = std::max(below, r.fairness_most_below);
    above = std::max(above, r.fairness_most_above);
  }
  // The budget was reached, faults ran, and the band was judged on many
  // seeds, with every region count among them.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(tally.errors, 0);
  EXPECT_GT(tally.crashes, 0);
  EXPECT_GT(judged_seeds, static_cast<int64_t>(seeds) / 5);
  EXPECT_EQ(regions_seen, 0b11110);
  std::printf("%s\n", tally.summary().c_str());
  std::printf(
      "%lld (tenant, window) pairs judged on %lld seeds; farthest below "
      "min(d, s) %lld, above %lld\n",
      static_cast<long long>(checks), static_cast<long long>(judged_seeds),
      static_cast<long long>(below), static_cast<long long>(above));
}

// The mutation table's row: region 0 reporting twice its weight keeps
// the budget but breaks the band; caught within 20 seeds.
TEST(FairFleetSim, AGreedyRegionIsCaughtWithinTwentySeeds) {
  testing::expect_caught_within(
      20, "greedy region",
      [](uint64_t seed) {
        FairFleetConfig c =
            swarm_fair_config(seed, 2 + static_cast<int>(seed % 3));
        c.greedy_region = true;
        return run_fair_fleet(seed, c);
      },
      "outside [");
}

TEST(FairFleetSim, ARunReplaysByteForByte) {
  FairFleetConfig c = swarm_fair_config(5, 3);
  c.fleet.partitions = true;
  c.fleet.crashes = true;
  testing::expect_replays(run_fair_fleet, c, 5, 6);
}

}  // namespace
}  // namespace throttlekit::sim
