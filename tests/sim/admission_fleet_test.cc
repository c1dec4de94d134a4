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

#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(AdmissionFleetSim, EverySeedHoldsEveryAxis) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  int64_t admitted = 0, full_windows = 0, lost = 0, crashes = 0, timeouts = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const AdmissionFleetConfig c = swarm_admission_config(seed, 8);
    const SimResult r = run_admission_fleet(seed, c);
    ASSERT_EQ(r.violations, 0)
        << r.first_violation
        << "\n  replay: " << admission_replay_command(seed, c);
    EXPECT_GT(r.admitted, 0) << admission_replay_command(seed, c);
    admitted += r.admitted;
    full_windows += r.worst_window == c.fleet.limit;
    lost += r.messages_lost;
    crashes += r.crashes;
    timeouts += r.timeouts;
  }
  // The rate limit was reached, not just respected, and every fault ran.
  EXPECT_GT(full_windows, static_cast<int64_t>(seeds) / 10);
  EXPECT_GT(lost, 0);
  EXPECT_GT(crashes, 0);
  EXPECT_GT(timeouts, 0);
  std::printf(
      "%llu seeds: %lld admitted, %lld seeds with a rate window at the "
      "limit, %lld messages lost, %lld crashes, %lld timeouts\n",
      static_cast<unsigned long long>(seeds), static_cast<long long>(admitted),
      static_cast<long long>(full_windows), static_cast<long long>(lost),
      static_cast<long long>(crashes), static_cast<long long>(timeouts));
}

// The mutation table's row: both leased axes carrying credits past their
// window break the rate or the cost bound within 20 seeds.
TEST(AdmissionFleetSim, CarriedCreditsAreCaughtWithinTwentySeeds) {
  uint64_t caught = 0;
  for (uint64_t seed = 1; seed <= 20 && caught == 0; ++seed) {
    AdmissionFleetConfig c = swarm_admission_config(seed, 8);
    c.fleet.window_coupled = false;
    if (run_admission_fleet(seed, c).violations > 0) caught = seed;
  }
  ASSERT_GT(caught, 0u) << "the mutation survived 20 seeds";
  std::printf("window coupling off: caught at seed %llu\n",
              static_cast<unsigned long long>(caught));
}

TEST(AdmissionFleetSim, ARunReplaysByteForByte) {
  AdmissionFleetConfig c = swarm_admission_config(5, 8);
  c.fleet.crashes = true;
  const SimResult a = run_admission_fleet(5, c, /*keep_trace=*/true);
  const SimResult b = run_admission_fleet(5, c, /*keep_trace=*/true);
  ASSERT_GT(a.trace.size(), 100u);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.events, b.events);
  const SimResult other = run_admission_fleet(6, c);
  EXPECT_NE(other.trace_hash, a.trace_hash);
}

}  // namespace
}  // namespace throttlekit::sim
