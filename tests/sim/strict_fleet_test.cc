// The fleet simulator's strict fleet (sim/strict_fleet.h,
// docs/simulation.md): the production strict limiter on 8 nodes, each
// check crossing a simulated network to one store whose keys expire on its
// own clock (as Redis's do), holds the window bound on every seed when the
// store's clock decides; nodes that name their own `now` (a stale-`now`
// re-grant: a check that reaches the store after its window's key expired
// counts that window afresh) are caught within a stated number of seeds;
// a run replays byte for byte.

#include "sim/strict_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(StrictFleetSim, EverySeedHoldsTheWindowBound) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  int64_t admitted = 0, full_windows = 0, lost = 0, timeouts = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const StrictFleetConfig c = swarm_strict_config(seed, 8);
    const SimResult r = run_strict_fleet(seed, c);
    ASSERT_EQ(r.violations, 0)
        << r.first_violation
        << "\n  replay: " << strict_replay_command(seed, c);
    EXPECT_GT(r.admitted, 0) << strict_replay_command(seed, c);
    admitted += r.admitted;
    full_windows += r.worst_window == c.fleet.limit;
    lost += r.messages_lost;
    timeouts += r.timeouts;
  }
  // The bound was reached and the network lost messages and timed out.
  EXPECT_GT(full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(lost, 0);
  EXPECT_GT(timeouts, 0);
  std::printf(
      "%llu seeds: %lld admitted, %lld seeds with a window at the limit, "
      "%lld messages lost, %lld timeouts\n",
      static_cast<unsigned long long>(seeds), static_cast<long long>(admitted),
      static_cast<long long>(full_windows), static_cast<long long>(lost),
      static_cast<long long>(timeouts));
}

// The mechanism alone: one node, no fault, a clock that keeps the store's
// time, a network delay of about a millisecond, demand twice the limit.
// Naming the node's `now` revives ended windows; the store's clock never
// does.
TEST(StrictFleetSim, AStaleNowRevivesAnEndedWindowAndTheStoresClockNever) {
  StrictFleetConfig c;
  c.fleet.nodes = 1;
  c.fleet.keys = 1;
  c.fleet.limit = 100;
  c.fleet.window_ms = 100;
  c.fleet.requests_per_sec_per_node = 2'000;
  c.fleet.network.median_delay_us = 1'000;
  const SimResult on_store = run_strict_fleet(1, c);
  EXPECT_EQ(on_store.violations, 0) << on_store.first_violation;
  EXPECT_EQ(on_store.worst_window, c.fleet.limit);
  c.stale_now = true;
  const SimResult stale = run_strict_fleet(1, c);
  EXPECT_GT(stale.violations, 0);
  EXPECT_GT(stale.worst_window, c.fleet.limit);
  std::printf("stale now, one node: worst window %lld (limit %lld): %s\n",
              static_cast<long long>(stale.worst_window),
              static_cast<long long>(c.fleet.limit),
              stale.first_violation.c_str());
}

// The first seed (from 1) on which a stale `now` breaks the bound.
uint64_t first_failing_stale_seed(uint64_t within) {
  for (uint64_t seed = 1; seed <= within; ++seed) {
    StrictFleetConfig c = swarm_strict_config(seed, 8);
    c.stale_now = true;
    if (run_strict_fleet(seed, c).violations > 0) return seed;
  }
  return 0;
}

// The mutation table's row: a stale-`now` re-grant is caught within 20
// seeds.
TEST(StrictFleetSim, AStaleNowReGrantIsCaughtWithinTwentySeeds) {
  const uint64_t seed = first_failing_stale_seed(20);
  ASSERT_GT(seed, 0u) << "the mutation survived 20 seeds";
  std::printf("stale now: caught at seed %llu\n",
              static_cast<unsigned long long>(seed));
}

TEST(StrictFleetSim, ARunReplaysByteForByte) {
  StrictFleetConfig c = swarm_strict_config(7, 8);
  c.fleet.partitions = true;
  c.fleet.crashes = true;
  c.stale_now = true;
  const SimResult a = run_strict_fleet(7, c, /*keep_trace=*/true);
  const SimResult b = run_strict_fleet(7, c, /*keep_trace=*/true);
  ASSERT_GT(a.trace.size(), 100u);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.first_violation, b.first_violation);
  const SimResult other = run_strict_fleet(8, c);
  EXPECT_NE(other.trace_hash, a.trace_hash);
}

}  // namespace
}  // namespace throttlekit::sim
