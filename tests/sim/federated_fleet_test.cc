// The fleet simulator's federated fleet (sim/federated_fleet.h,
// docs/simulation.md): the production federated limiter on 9 processes in
// 1 to 4 regions, leasing windowed credits over a simulated network from
// the production memory coordinator, with and without regional escrows
// (and their regional-only outage policy), holds the federation's bound
// (admitted per key per coordinator window <= limit: overshoot 0) on every
// seed under the faults each seed draws; process clocks behind the
// coordinator's, the bound's stated assumption broken, are caught within
// a stated number of seeds; a run replays byte for byte.

#include "sim/federated_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(FederatedFleetSim, EverySeedHoldsTheWindowBound) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  testing::SwarmTally tally;
  int64_t escrow = 0, regional_only = 0, many_regions = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const FederatedFleetConfig c = swarm_federated_config(seed, 9);
    const SimResult r = run_federated_fleet(seed, c);
    ASSERT_NO_FATAL_FAILURE(
        testing::expect_seed_holds(r, federated_replay_command(seed, c)));
    tally.add(r, c.fleet.limit);
    escrow += c.escrow;
    regional_only += c.regional_only;
    many_regions += c.regions > 1;
  }
  // The bound was reached, every fault kind ran, and the seeds covered
  // escrows, the regional-only policy and several regions.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(tally.crashes, 0);
  EXPECT_GT(tally.timeouts, 0);
  EXPECT_GT(escrow, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(regional_only, 0);
  EXPECT_GT(many_regions, static_cast<int64_t>(seeds) / 2);
  std::printf("%s; %lld with escrows (%lld regional-only)\n",
              tally.summary().c_str(), static_cast<long long>(escrow),
              static_cast<long long>(regional_only));
}

// The mutation table's row for the federated fleet: process clocks up to
// 50 ms behind the coordinator's (a process spends a rolled window's
// credits for as long as it lags) are caught within 20 seeds.
TEST(FederatedFleetSim, ClocksBehindAreCaughtWithinTwentySeeds) {
  testing::expect_caught_within(20, "clocks behind", [](uint64_t seed) {
    FederatedFleetConfig c = swarm_federated_config(seed, 9);
    c.clocks_behind = true;
    return run_federated_fleet(seed, c);
  });
}

TEST(FederatedFleetSim, ARunReplaysByteForByte) {
  FederatedFleetConfig c = swarm_federated_config(7, 9);
  c.escrow = true;
  c.regional_only = true;
  c.fleet.partitions = true;
  testing::expect_replays(run_federated_fleet, c, 7, 8);
}

}  // namespace
}  // namespace throttlekit::sim
