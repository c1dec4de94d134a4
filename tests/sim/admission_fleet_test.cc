// The fleet simulator's unified-admission fleet (sim/admission_fleet.h,
// docs/simulation.md): eight nodes, each a production UnifiedAdmission
// with a concurrency ceiling and two leased axes (rate and cost) over one
// simulated coordinator, hold all three bounds on every seed under the
// faults each seed draws (the rate axis's allowed decisions per window <=
// limit, the cost axis's units per window <= budget, a node's requests in
// service <= its ceiling); both axes carrying credits past their window
// is caught within a stated number of seeds; a run replays byte for byte.

#include "sim/admission_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(AdmissionFleetSim, EverySeedHoldsEveryAxis) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  testing::SwarmTally tally;  // full windows: of the rate axis
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const AdmissionFleetConfig c = swarm_admission_config(seed, 8);
    const SimResult r = run_admission_fleet(seed, c);
    ASSERT_NO_FATAL_FAILURE(
        testing::expect_seed_holds(r, admission_replay_command(seed, c)));
    tally.add(r, c.fleet.limit);
  }
  // The rate limit was reached, not just respected, and every fault ran.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 10);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(tally.crashes, 0);
  EXPECT_GT(tally.timeouts, 0);
  std::printf("%s\n", tally.summary().c_str());
}

// The mutation table's row: both leased axes carrying credits past their
// window break the rate or the cost bound within 20 seeds.
TEST(AdmissionFleetSim, CarriedCreditsAreCaughtWithinTwentySeeds) {
  testing::expect_caught_within(20, "window coupling off", [](uint64_t seed) {
    AdmissionFleetConfig c = swarm_admission_config(seed, 8);
    c.fleet.window_coupled = false;
    return run_admission_fleet(seed, c);
  });
}

TEST(AdmissionFleetSim, ARunReplaysByteForByte) {
  AdmissionFleetConfig c = swarm_admission_config(5, 8);
  c.fleet.crashes = true;
  testing::expect_replays(run_admission_fleet, c, 5, 6);
}

}  // namespace
}  // namespace throttlekit::sim
