// The fleet simulator's quota door fleet (sim/rlqs_fleet.h,
// docs/simulation.md): Envoys emulated as the filter behaves, on servers
// running the production QuotaBudget and ShareLease and beating to the
// production heartbeat step, keep every budget's commitments within R at
// every assignment, the buckets they hold within R, and their admissions
// within the bound of docs/rlqs.md in every window of F, L, 2L and 5L, on
// every seed, each drawing its faults (stream breaks, lost responses,
// partitions, crashes, clock drift, demand shifts, buckets abandoned and
// idle budgets dropped), and the faults happen; the mutations the proofs
// call unsafe (the commitments' time to live dropped from the reserves,
// self-fencing off, handoff off) and clients admitting without an
// assignment (against A4) are caught within a stated number of seeds; a
// run replays byte for byte.

#include "sim/rlqs_fleet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "support/sim_seeds.h"
#include "support/test_work.h"

namespace throttlekit::sim {
namespace {

TEST(RlqsFleetSim, EverySeedHoldsTheCommitmentsAndTheBound) {
  const uint64_t seeds = static_cast<uint64_t>(testing::scaled_work(500, 50));
  testing::SwarmTally tally;
  int64_t at_limit = 0, breaks = 0, replies_lost = 0, fenced = 0;
  int64_t failed_beats = 0, checks = 0, most_committed = 0, abandoned = 0;
  int64_t dropped = 0;
  double closest = 0, capacity = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const RlqsFleetConfig c = swarm_rlqs_config(seed, 3);
    const SimResult r = run_rlqs_fleet(seed, c);
    ASSERT_NO_FATAL_FAILURE(
        testing::expect_seed_holds(r, rlqs_replay_command(seed, c)));
    tally.add(r, c.limit);
    at_limit += r.worst_window >= c.limit;
    breaks += r.rlqs.stream_breaks;
    replies_lost += r.rlqs.replies_lost;
    fenced += r.rlqs.fenced_assigns;
    failed_beats += r.rlqs.failed_beats;
    checks += r.rlqs.commitment_checks;
    abandoned += r.rlqs.abandoned;
    dropped += r.rlqs.budgets_dropped;
    most_committed = std::max(most_committed, r.rlqs.most_committed);
    closest = std::max(closest, r.rlqs.closest_to_bound);
    for (int b = 0; b < c.budgets; ++b) {
      capacity += static_cast<double>(rlqs_budget_limit(c, b)) *
                  static_cast<double>(c.duration_ms) / 1000.0 /
                  static_cast<double>(c.fill_interval_s);
    }
  }
  // The budgets were spent, not just respected: some window of F reached
  // R on a quarter of the seeds or more, and the commitments reached R
  // exactly; and the faults ran.
  EXPECT_GT(at_limit, static_cast<int64_t>(seeds) / 4);
  EXPECT_EQ(most_committed, 100);
  EXPECT_GT(tally.crashes, 0);
  EXPECT_GT(tally.lost, 0);
  EXPECT_GT(breaks, 0);
  EXPECT_GT(replies_lost, 0);
  EXPECT_GT(fenced, 0);
  EXPECT_GT(failed_beats, 0);
  EXPECT_GT(abandoned, 0);
  EXPECT_GT(dropped, 0);
  std::printf(
      "%s\n%lld seeds with a window of F at R or more, %.3f of the budgets "
      "admitted, %lld commitment checks (the most committed %lld%% of R), "
      "%lld stream breaks, %lld responses lost, %lld beats failed, %lld "
      "fenced assigns, %lld buckets abandoned, %lld idle budgets dropped, "
      "the closest window to its bound at %.3f of it\n",
      tally.summary().c_str(), static_cast<long long>(at_limit),
      static_cast<double>(tally.admitted) / capacity,
      static_cast<long long>(checks), static_cast<long long>(most_committed),
      static_cast<long long>(breaks), static_cast<long long>(replies_lost),
      static_cast<long long>(failed_beats), static_cast<long long>(fenced),
      static_cast<long long>(abandoned), static_cast<long long>(dropped),
      closest);
}

// A run of seed `seed`'s swarm with `mutate` applied to its configuration.
auto mutated(std::function<void(RlqsFleetConfig&)> mutate) {
  return testing::mutated_swarm(swarm_rlqs_config, 3, run_rlqs_fleet,
                                std::move(mutate));
}

void no_ttl_accounting(RlqsFleetConfig& c) { c.ttl_accounting = false; }
void no_fencing(RlqsFleetConfig& c) {
  c.self_fencing = false;
  c.partitions = true;
}

TEST(RlqsFleetSim, DroppingTheTtlAccountingIsCaughtWithinTwentySeeds) {
  testing::expect_caught_within(20, "no TTL accounting",
                                mutated(no_ttl_accounting), "commitments sum");
}

TEST(RlqsFleetSim, SelfFencingOffIsCaughtWithinTwentySeeds) {
  testing::expect_caught_within(20, "self-fencing off", mutated(no_fencing));
}

TEST(RlqsFleetSim, HandoffOffIsCaughtWithin1000Seeds) {
  testing::expect_caught_within(
      1000, "handoff off",
      mutated([](RlqsFleetConfig& c) { c.handoff = false; }));
}

// The window check's own teeth: clients that admit while they hold no
// assignment (against A4) break the admissions bound.
TEST(RlqsFleetSim, AdmittingWithoutAnAssignmentBreaksTheBoundWithin400Seeds) {
  testing::expect_caught_within(
      400, "allow without an assignment",
      mutated([](RlqsFleetConfig& c) { c.allow_without_assignment = true; }),
      "admissions in a window");
}

// The shrinker on the fencing row's first failing seed: a configuration
// no larger that still fails, with something smaller.
TEST(RlqsFleetSim, TheShrinkerKeepsTheFailureWithLess) {
  const uint64_t seed = testing::first_failing_seed(20, mutated(no_fencing));
  ASSERT_GT(seed, 0u);
  RlqsFleetConfig c = swarm_rlqs_config(seed, 3);
  no_fencing(c);
  const RlqsFleetConfig small = shrink_rlqs(seed, c);
  std::printf("drawn: %s\n", rlqs_replay_command(seed, c).c_str());
  EXPECT_GT(run_rlqs_fleet(seed, small).violations, 0)
      << rlqs_replay_command(seed, small);
  EXPECT_LE(small.servers, c.servers);
  EXPECT_LE(small.clients, c.clients);
  EXPECT_LE(small.duration_ms, c.duration_ms);
  EXPECT_LE(small.crashes, c.crashes);
  EXPECT_NE(rlqs_replay_command(seed, small), rlqs_replay_command(seed, c))
      << "nothing shrank";
  std::printf("shrunk: %s\n", rlqs_replay_command(seed, small).c_str());
}

// Buckets abandoned and back within their old assignment's life, on a
// budget per minute (abandonIdle far below F): each gets a full bucket no
// new commitment paid for (docs/simulation.md, "The rlqs fleet"). The
// fleet then admits well above R per F over the run, and the bound, which
// allows R per L, still holds. Prints what was admitted, with and without
// abandon, as a multiple of R per F over the run.
TEST(RlqsFleetSim, AbandonedBucketsBackSoonStayWithinTheBound) {
  for (const int64_t abandon_idle_ms : {int64_t{0}, int64_t{1000}}) {
    std::string line;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      RlqsFleetConfig c;
      c.servers = 1;
      c.clients = 5;
      c.limit = 40;
      c.fill_interval_s = 60;
      c.ttl_s = 6;
      c.report_period_ms = 1000;
      c.demand = 30;
      c.shifts = 0;
      c.onoff_ms = 1500;
      c.onoff_together = true;
      c.abandon_idle_ms = abandon_idle_ms;
      c.duration_ms = 120'000;
      c.stream_delay_us = 2000;
      const SimResult r = run_rlqs_fleet(seed, c);
      EXPECT_EQ(r.violations, 0)
          << r.first_violation
          << "\n  replay: " << rlqs_replay_command(seed, c);
      char part[64];
      std::snprintf(part, sizeof part, " %.2f",
                    static_cast<double>(r.admitted) / (40.0 * 120 / 60));
      line += part;
      if (abandon_idle_ms > 0) EXPECT_GT(r.rlqs.abandoned, 0);
    }
    std::printf("abandonIdle %lld ms: admitted, as a multiple of R per F:%s\n",
                static_cast<long long>(abandon_idle_ms), line.c_str());
  }
}

TEST(RlqsFleetSim, ARunReplaysByteForByte) {
  RlqsFleetConfig c = swarm_rlqs_config(7, 3);
  c.crashes = c.partitions = true;
  c.breaks_per_min = 10;
  testing::expect_replays(run_rlqs_fleet, c, 7, 8);
}

}  // namespace
}  // namespace throttlekit::sim
