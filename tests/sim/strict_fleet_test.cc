// The fleet simulator's strict fleet (sim/strict_fleet.h,
// docs/simulation.md): the production strict limiter on 8 nodes, each
// check crossing a simulated network to one store whose keys expire on its
// own clock (as Redis's do), holds the window bound on every seed when the
// store's clock decides; nodes that name their own `now` (a stale-`now`
// re-grant: a check that reaches the store after its window's key expired
// counts that window afresh) are caught within a stated number of seeds;
// a run replays byte for byte. The same fleet in the two-tier cached-deny
// mode holds the bound and denies from memory only within a window the
// store refused in; clocks that run slow (which stretch a remembered
// denial) are caught. Every seed also judges its drawn fail policy, and a
// fleet whose engines drop the configured policy is caught.

#include "sim/strict_fleet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

using testing::sound;

TEST(StrictFleetSim, EverySeedHoldsTheWindowBound) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  LivenessTally liveness;
  testing::SwarmTally tally;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const StrictFleetConfig c = swarm_strict_config(seed, 8);
    const SimResult r = run_strict_fleet(seed, c);
    ASSERT_TRUE(sound(r, strict_replay_command(seed, c)));
    liveness.add(r, c.fleet.partitions || c.fleet.crashes);
    EXPECT_GT(r.admitted, 0) << strict_replay_command(seed, c);
    tally.add(r, c.fleet.limit);
  }
  // The bound was reached and the network lost messages and timed out.
  EXPECT_GT(tally.full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(tally.timeouts, 0);
  // Liveness: windows judged after the faults healed, on seeds whose
  // partitions or crashes had healed among them, none below the floor.
  EXPECT_GT(liveness.windows, static_cast<int64_t>(seeds) / 2);
  EXPECT_GT(liveness.healed_seeds, 0);
  std::printf("%s\n", liveness.summary().c_str());
  std::printf("%s\n", tally.summary().c_str());
}

// `nodes` nodes asking `per_sec_per_node` for one key of 100 per 100 ms
// window, no fault, a network delay of about a millisecond.
StrictFleetConfig one_key_fleet(int nodes, double per_sec_per_node) {
  StrictFleetConfig c;
  c.fleet.nodes = nodes;
  c.fleet.keys = 1;
  c.fleet.limit = 100;
  c.fleet.window_ms = 100;
  c.fleet.requests_per_sec_per_node = per_sec_per_node;
  c.fleet.network.median_delay_us = 1'000;
  return c;
}

// The mechanism alone: one node, no fault, a clock that keeps the store's
// time, a network delay of about a millisecond, demand twice the limit.
// On a store without TTL slack, naming the node's `now` revives ended
// windows; the store's clock never does, nor the node's `now` on the
// default slack (core/ttl_slack.h).
TEST(StrictFleetSim, AStaleNowRevivesAnEndedWindowOnlyWithoutTheSlack) {
  StrictFleetConfig c = one_key_fleet(1, 2'000);
  c.store_ttl_slack_ms = 0;
  const SimResult on_store = run_strict_fleet(1, c);
  EXPECT_EQ(on_store.violations, 0) << on_store.first_violation;
  EXPECT_EQ(on_store.worst_window, c.fleet.limit);
  c.stale_now = true;
  c.store_ttl_slack_ms = kDefaultTtlSlackMs;
  const SimResult slack = run_strict_fleet(1, c);
  EXPECT_EQ(slack.violations, 0) << slack.first_violation;
  EXPECT_EQ(slack.worst_window, c.fleet.limit);
  c.store_ttl_slack_ms = 0;
  const SimResult stale = run_strict_fleet(1, c);
  EXPECT_GT(stale.violations, 0);
  EXPECT_GT(stale.worst_window, c.fleet.limit);
  std::printf("stale now, one node: worst window %lld (limit %lld): %s\n",
              static_cast<long long>(stale.worst_window),
              static_cast<long long>(c.fleet.limit),
              stale.first_violation.c_str());
}

// The liveness check can fail: with a deadline shorter than the network's
// delay, the store counts checks whose answers come too late, and the
// windows judged fall below the floor.
TEST(StrictFleetSim, AnswersPastTheDeadlineFailTheLivenessFloor) {
  StrictFleetConfig c = one_key_fleet(4, 1'000);
  const SimResult healthy = run_strict_fleet(1, c);
  EXPECT_GT(healthy.liveness_windows, 5);
  EXPECT_EQ(healthy.liveness_failures, 0) << healthy.first_liveness_failure;
  c.fleet.timeout_ms = 1;
  const SimResult late = run_strict_fleet(1, c);
  EXPECT_GT(late.liveness_failures, 0);
  EXPECT_LT(late.lowest_utilisation, 1.0);
  std::printf("deadline 1 ms: %s\n", late.first_liveness_failure.c_str());
}

// Runs `seeds` seeds with the store fault `fault` set on each fleet (and
// each mode in `modes`): the bound plus what the lost writes counted holds
// on every run, writes were lost, and some window went over its limit.
// Prints `name`'s tally.
template <class Fault>
void lost_writes_hold(const char* name, std::initializer_list<bool> modes,
                      Fault fault) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(200, 20));
  int64_t lost = 0, over_limit = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    for (const bool cached : modes) {
      StrictFleetConfig c = swarm_strict_config(seed, 8);
      fault(c.fleet);
      c.cached_deny = cached;
      const SimResult r = run_strict_fleet(seed, c);
      ASSERT_TRUE(sound(r, strict_replay_command(seed, c)));
      lost += r.failover_lost;
      over_limit += r.worst_window > c.fleet.limit;
    }
  }
  EXPECT_GT(lost, 0);
  EXPECT_GT(over_limit, 0) << name << ": nothing re-admitted";
  std::printf(
      "%s: %lld admissions lost over %llu seeds, %lld runs with a window "
      "over its limit (within what was lost)\n",
      name, static_cast<long long>(lost),
      static_cast<unsigned long long>(seeds),
      static_cast<long long>(over_limit));
}

// A store failover to a replica 5 ms behind (asynchronous replication):
// the writes not yet replicated are lost and re-admitted, so a window may
// admit more than its limit, by at most what the lost writes counted (the
// cost docs/redis.md states for a strict check), on every seed.
TEST(StrictFleetSim, AFailoverReAdmitsWhatItsLostWritesCountedAndNoMore) {
  lost_writes_hold("failover", {false},
                   [](LeasedFleetConfig& f) { f.store_failover = true; });
}

// A coordinator restart that loses all its state (a Redis without
// persistence restarting) forgets what the window counted so far, so the
// window may admit up to its limit again: at most the limit plus what the
// lost state counted, in both modes.
TEST(StrictFleetSim, ARestartReAdmitsWhatTheLostStateCountedAndNoMore) {
  lost_writes_hold("restart (strict and cached deny)", {false, true},
                   [](LeasedFleetConfig& f) { f.store_restart = true; });
}

// The same swarm of faults with the nodes naming their own `now` on the
// store's default slack: no seed breaks the bound.
TEST(StrictFleetSim, StaleNowsOnTheDefaultSlackHoldTheBoundOnEverySeed) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    StrictFleetConfig c = swarm_strict_config(seed, 8);
    c.stale_now = true;
    const SimResult r = run_strict_fleet(seed, c);
    EXPECT_EQ(r.violations, 0) << "seed " << seed << ": " << r.first_violation;
  }
}

// The mutation table's row: a stale-`now` re-grant is caught within 20
// seeds.
TEST(StrictFleetSim, AStaleNowReGrantIsCaughtWithinTwentySeeds) {
  // A stale `now` on a store without TTL slack.
  testing::expect_caught_within(20, "stale now", [](uint64_t seed) {
    StrictFleetConfig c = swarm_strict_config(seed, 8);
    c.stale_now = true;
    c.store_ttl_slack_ms = 0;
    return run_strict_fleet(seed, c);
  });
}

// The cached-deny mode on the same seeds: the bound, the liveness floor,
// and no denial from memory outside a window the store refused in; the
// cache did answer (it is exercised, not merely present).
TEST(StrictFleetSim, CachedDenyNodesHoldTheBoundAndDenyOnlyInRefusedWindows) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 30));
  LivenessTally liveness;
  int64_t cached = 0, full_windows = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    StrictFleetConfig c = swarm_strict_config(seed, 8);
    c.cached_deny = true;
    const SimResult r = run_strict_fleet(seed, c);
    ASSERT_TRUE(sound(r, strict_replay_command(seed, c)));
    liveness.add(r, c.fleet.partitions || c.fleet.crashes);
    cached += r.cached_denials;
    full_windows += r.worst_window == c.fleet.limit;
  }
  EXPECT_GT(cached, 0);
  EXPECT_GT(full_windows, static_cast<int64_t>(seeds) / 4);
  EXPECT_GT(liveness.windows, static_cast<int64_t>(seeds) / 2);
  std::printf("cached deny: %lld denials from memory over %llu seeds; %s\n",
              static_cast<long long>(cached),
              static_cast<unsigned long long>(seeds),
              liveness.summary().c_str());
}

// The cached-deny row of the mutation table: node clocks at half speed
// hold each remembered denial for twice its hint, past the window that
// refused it; caught within 20 seeds.
TEST(StrictFleetSim, SlowClocksStretchingCachedDenialsAreCaughtWithin20Seeds) {
  testing::expect_caught_within(
      20, "slow clocks",
      [](uint64_t seed) {
        StrictFleetConfig c = swarm_strict_config(seed, 8);
        c.cached_deny = true;
        c.slow_clocks = true;
        return run_strict_fleet(seed, c);
      },
      "from its cache");
}

// The fail policy, on the seeds of each mode: outages were decided by the
// policy (fail-open admitted, fail-closed refused), no outage reached a
// caller as a status under either, and every answer came within the
// deadline (the run's own checks; none failed).
TEST(StrictFleetSim, EveryOutageIsDecidedByTheDrawnFailPolicy) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(300, 60));
  int64_t decided[3] = {}, open_admitted = 0, errors_propagated = 0;
  int64_t longest_us = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    for (const bool cached : {false, true}) {
      StrictFleetConfig c = swarm_strict_config(seed, 8);
      c.cached_deny = cached;
      const SimResult r = run_strict_fleet(seed, c);
      ASSERT_TRUE(sound(r, strict_replay_command(seed, c)));
      decided[c.fleet.fail_mode] += r.outage_decisions;
      open_admitted += r.fail_open_admitted;
      if (c.fleet.fail_mode == FailPolicy::kPropagate) {
        errors_propagated += r.errors;
      }
      longest_us = std::max(longest_us, r.longest_answer_us);
    }
  }
  EXPECT_EQ(decided[FailPolicy::kPropagate], 0);
  EXPECT_GT(decided[FailPolicy::kOpen], 0);
  EXPECT_GT(decided[FailPolicy::kClosed], 0);
  EXPECT_EQ(open_admitted, decided[FailPolicy::kOpen]);
  EXPECT_GT(errors_propagated, 0);
  EXPECT_LE(longest_us, 50'000);
  std::printf(
      "fail policy: %lld outages decided open, %lld closed, %lld statuses "
      "propagated; longest answer %lld us\n",
      static_cast<long long>(decided[FailPolicy::kOpen]),
      static_cast<long long>(decided[FailPolicy::kClosed]),
      static_cast<long long>(errors_propagated),
      static_cast<long long>(longest_us));
}

// The fail policy's row of the mutation table: engines built without the
// configured policy are caught within 20 seeds, in both modes.
TEST(StrictFleetSim, ADroppedFailPolicyIsCaughtWithin20Seeds) {
  for (const bool cached : {false, true}) {
    // A failure here ends only this mode's run: the other is still tried.
    testing::expect_caught_within(
        20, std::string(cached ? "cached deny" : "strict") + ", policy dropped",
        [cached](uint64_t seed) {
          StrictFleetConfig c = swarm_strict_config(seed, 8);
          c.cached_deny = cached;
          c.fleet.policy_dropped = true;
          return run_strict_fleet(seed, c);
        });
  }
}

TEST(StrictFleetSim, ARunReplaysByteForByte) {
  StrictFleetConfig c = swarm_strict_config(7, 8);
  c.fleet.partitions = true;
  c.fleet.crashes = true;
  c.stale_now = true;
  testing::expect_replays(run_strict_fleet, c, 7, 8);
}

}  // namespace
}  // namespace throttlekit::sim
