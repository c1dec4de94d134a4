// Tests of heartbeat_step (coordinator/heartbeat_core.h): the step's rules
// one by one (upsert, stale beats, eviction with self surviving, min and
// lower-median aggregates, the equal split with its remainder by id, the
// occupancy cap, generations and acknowledgements, demand-proportional
// targets, bad reports), then two properties over random fleets:
// sum(share) <= L after every step, and with acknowledged handoff the
// true sum(inflight) <= L at every step under delayed, reordered grant
// delivery and lagging reports (and without handoff the same search finds
// an overshoot: the handoff is necessary).

#include "throttlekit/coordinator/heartbeat_core.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace heartbeat_core_test {
namespace {

constexpr int64_t kNow = 1'000'000;
const HeartbeatOptions kOpts{.lease_ttl_ms = 1000};

HeartbeatGrant beat(std::vector<HeartbeatNode>& t, std::string_view id,
                    int64_t seq, int64_t inflight, int64_t local,
                    int64_t now = kNow, HeartbeatOptions o = kOpts,
                    int64_t applied_gen = 0, int64_t demand = 0) {
  absl::StatusOr<HeartbeatGrant> g = heartbeat_step(t,
                                                    {.node_id = id,
                                                     .seq = seq,
                                                     .applied_gen = applied_gen,
                                                     .inflight = inflight,
                                                     .local_limit = local,
                                                     .demand = demand},
                                                    now, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : HeartbeatGrant{};
}

TEST(HeartbeatCore, EqualSplitWithTheRemainderToTheFirstIds) {
  std::vector<HeartbeatNode> t;
  EXPECT_EQ(beat(t, "a", 1, 0, 10).share, 10);  // alone: everything
  // b joins; a still holds 10, so b gets nothing until a gives it back.
  HeartbeatGrant b = beat(t, "b", 1, 0, 10);
  EXPECT_EQ(b.share, 0);
  EXPECT_EQ(b.live_nodes, 2);
  EXPECT_EQ(b.global_limit, 10);
  EXPECT_EQ(beat(t, "a", 2, 0, 10).share, 5);  // target 10 / 2
  EXPECT_EQ(beat(t, "b", 2, 0, 10).share, 5);
  // 11 over 3 nodes: 4, 4, 3 (the remainder to "a", then "b").
  beat(t, "c", 1, 0, 11);
  for (int round = 0; round < 3; ++round) {
    beat(t, "a", 3 + round, 0, 11);
    beat(t, "b", 3 + round, 0, 11);
    beat(t, "c", 2 + round, 0, 11);
  }
  std::map<std::string, int64_t> share;
  for (const HeartbeatNode& n : t) share[n.id] = n.share;
  EXPECT_EQ(share["a"], 4);
  EXPECT_EQ(share["b"], 4);
  EXPECT_EQ(share["c"], 3);
}

TEST(HeartbeatCore, MinOrLowerMedianNeverASum) {
  std::vector<HeartbeatNode> t;
  beat(t, "a", 1, 0, 8);
  beat(t, "b", 1, 0, 20);
  EXPECT_EQ(beat(t, "c", 1, 0, 12).global_limit, 8);  // min
  std::vector<HeartbeatNode> m;
  const HeartbeatOptions median{.lease_ttl_ms = 1000,
                                .aggregate = HeartbeatAggregate::kLowerMedian};
  beat(m, "a", 1, 0, 8, kNow, median);
  beat(m, "b", 1, 0, 20, kNow, median);
  EXPECT_EQ(beat(m, "c", 1, 0, 12, kNow, median).global_limit, 12);
  EXPECT_EQ(beat(m, "d", 1, 0, 30, kNow, median).global_limit,
            12);  // 8,12,20,30
}

TEST(HeartbeatCore, TheCapReservesAPeersInflightAboveItsShare) {
  std::vector<HeartbeatNode> t;
  beat(t, "a", 1, 0, 10);
  beat(t, "b", 1, 0, 10);
  beat(t, "a", 2, 9, 10);  // a's share falls to 5, but 9 are in flight
  EXPECT_EQ(beat(t, "b", 2, 0, 10).share, 1);  // 10 - max(5, 9)
  beat(t, "a", 3, 3, 10);                      // a drained to 3
  EXPECT_EQ(beat(t, "b", 3, 0, 10).share, 5);
}

TEST(HeartbeatCore, StaleBeatsChangeNothingAndPeersExpireButSelfSurvives) {
  std::vector<HeartbeatNode> t;
  beat(t, "a", 5, 0, 10);
  beat(t, "b", 1, 0, 10, kNow + 10);
  const std::vector<HeartbeatNode> before = t;
  HeartbeatGrant old = beat(t, "a", 4, 7, 3, kNow + 20);  // seq 4 < 5
  EXPECT_TRUE(old.stale);
  EXPECT_EQ(t[0].inflight, before[0].inflight);
  EXPECT_EQ(t[0].local_limit, 10);
  // At kNow + 1000 a's lease (kNow + 1000) has expired: b evicts it.
  HeartbeatGrant b = beat(t, "b", 2, 0, 10, kNow + 1000);
  EXPECT_EQ(b.live_nodes, 1);
  EXPECT_EQ(b.share, 10);
  ASSERT_EQ(t.size(), 1u);
  // A lone node whose own lease lapsed still survives its beat.
  EXPECT_EQ(beat(t, "b", 3, 0, 10, kNow + 99'999).live_nodes, 1);
}

TEST(HeartbeatCore, GenerationsAndAcknowledgedHandoff) {
  const HeartbeatOptions h{.lease_ttl_ms = 1000, .handoff = true};
  std::vector<HeartbeatNode> t;
  HeartbeatGrant a = beat(t, "a", 1, 0, 10, kNow, h, 0);
  EXPECT_EQ(a.share, 10);
  EXPECT_EQ(a.generation, 1);
  // b joins; a's grant of 10 is unacknowledged, so b is reserved out.
  EXPECT_EQ(beat(t, "b", 1, 0, 10, kNow, h, 0).share, 0);
  // a acknowledges gen 1 and is cut to 5 (gen 2, unacknowledged): the
  // coordinator still reserves 10 for a (acked share) until a applies it.
  a = beat(t, "a", 2, 0, 10, kNow, h, 1);
  EXPECT_EQ(a.share, 5);
  EXPECT_EQ(a.generation, 2);
  EXPECT_EQ(beat(t, "b", 2, 0, 10, kNow, h, 0).share, 0);
  // a applies gen 2 and says so: b may have the other 5.
  beat(t, "a", 3, 0, 10, kNow, h, 2);
  EXPECT_EQ(beat(t, "b", 3, 0, 10, kNow, h, 0).share, 5);
  // An unchanged share is not a new generation.
  EXPECT_EQ(beat(t, "a", 4, 0, 10, kNow, h, 2).generation, 2);
}

// A node evicted and back reports a generation the table never issued:
// its next grant is newer still, so the handoff reserve covers it (found
// by the property below).
TEST(HeartbeatCore, AReturningNodesGenerationOnlyGrows) {
  const HeartbeatOptions h{.lease_ttl_ms = 1000, .handoff = true};
  std::vector<HeartbeatNode> t;
  beat(t, "b", 1, 0, 10, kNow, h, 0);
  HeartbeatGrant a = beat(t, "a", 9, 0, 10, kNow + 5000, h, 5);
  EXPECT_EQ(a.generation, 6);  // "b" expired; "a" is new here
  EXPECT_EQ(a.share, 10);
  // Unacknowledged: a newcomer is reserved out.
  EXPECT_EQ(beat(t, "c", 1, 0, 10, kNow + 5000, h, 0).share, 0);
}

// A node that held share 4 under generation 3 of a table since lost (the
// store restarted) beats into a fresh table whose peers occupy the whole
// limit: its grant of 0 is a new generation, so the node applies it instead
// of keeping its old share (which nothing reserves any more).
TEST(HeartbeatCore, AFreshRowsFirstGrantIsNewEvenWhenZero) {
  for (const bool handoff : {false, true}) {
    const HeartbeatOptions o{.lease_ttl_ms = 1000, .handoff = handoff};
    std::vector<HeartbeatNode> t;
    EXPECT_EQ(beat(t, "b", 1, 8, 8, kNow, o, 0).share, 8);
    const HeartbeatGrant a = beat(t, "a", 7, 2, 8, kNow, o, 3);
    EXPECT_EQ(a.share, 0) << handoff;
    EXPECT_EQ(a.generation, 4) << handoff;
    // Its next beat, unchanged, is not a new generation.
    EXPECT_EQ(beat(t, "a", 8, 2, 8, kNow, o, 4).generation, 4) << handoff;
    // The same after its lease lapsed while "b" kept beating.
    EXPECT_EQ(beat(t, "b", 2, 8, 8, kNow + 1500, o, 1).share, 8);
    const HeartbeatGrant back = beat(t, "a", 9, 0, 8, kNow + 1500, o, 4);
    EXPECT_EQ(back.share, 0) << handoff;
    EXPECT_EQ(back.generation, 5) << handoff;
  }
}

TEST(HeartbeatCore, DemandProportionalTargetsWithAFloorOfOne) {
  const HeartbeatOptions d{.lease_ttl_ms = 1000, .demand_proportional = true};
  std::vector<HeartbeatNode> t;
  beat(t, "idle", 1, 0, 20, kNow, d, 0, 0);
  beat(t, "hungry", 1, 0, 20, kNow, d, 0, 50);
  beat(t, "idle", 2, 0, 20, kNow, d, 0, 0);
  EXPECT_EQ(beat(t, "hungry", 2, 0, 20, kNow, d, 0, 50).share, 19);
  EXPECT_EQ(beat(t, "idle", 3, 0, 20, kNow, d, 0, 0).share, 1);
}

TEST(HeartbeatCore, BadReportsNameTheFieldAndChangeNothing) {
  std::vector<HeartbeatNode> t;
  const auto code = [&](HeartbeatReport r, HeartbeatOptions o = kOpts) {
    return heartbeat_step(t, r, kNow, o).status();
  };
  EXPECT_NE(code({.node_id = "", .seq = 1}).message().find("node_id"),
            std::string::npos);
  EXPECT_NE(code({.node_id = "a", .seq = 0}).message().find("seq"),
            std::string::npos);
  EXPECT_NE(code({.node_id = "a", .seq = 1, .inflight = -1})
                .message()
                .find("inflight"),
            std::string::npos);
  EXPECT_NE(code({.node_id = "a", .seq = 1, .local_limit = int64_t{1} << 31})
                .message()
                .find("local_limit"),
            std::string::npos);
  EXPECT_NE(code({.node_id = "a", .seq = 1}, {.lease_ttl_ms = 0})
                .message()
                .find("lease_ttl_ms"),
            std::string::npos);
  EXPECT_TRUE(t.empty());
}

// Random fleets with joins, crashes (their leases expire), out-of-order
// beats and changing in-flight: after every step the live nodes' shares
// sum to at most L (all nodes report the same local limit L).
RC_GTEST_PROP(HeartbeatCoreProperty, SharesNeverSumAboveTheLimit, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 40);
  const bool handoff = *rc::gen::arbitrary<bool>();
  const HeartbeatOptions o{.lease_ttl_ms = 100, .handoff = handoff};
  std::vector<HeartbeatNode> t;
  std::map<int, int64_t> seq, gen;
  int64_t now = kNow;
  const int steps = *rc::gen::inRange(1, 200);
  for (int i = 0; i < steps; ++i) {
    const int node = *rc::gen::inRange(0, 6);
    const std::string id = "n" + std::to_string(node);
    now += *rc::gen::inRange<int64_t>(0, 40);
    // Sometimes replay an old sequence number (a delayed beat).
    const int64_t s = *rc::gen::inRange(0, 5) == 0
                          ? std::max<int64_t>(1, seq[node] - 1)
                          : ++seq[node];
    absl::StatusOr<HeartbeatGrant> g =
        heartbeat_step(t,
                       {.node_id = id,
                        .seq = s,
                        .applied_gen = gen[node],
                        .inflight = *rc::gen::inRange<int64_t>(0, limit + 3),
                        .local_limit = limit},
                       now, o);
    RC_ASSERT(g.ok());
    if (*rc::gen::arbitrary<bool>()) gen[node] = g->generation;
    int64_t live_shares = 0;
    for (const HeartbeatNode& n : t) {
      if (n.expires_at_ms > now) live_shares += n.share;
    }
    RC_ASSERT(live_shares <= limit);
  }
}

// A fleet simulated step by step: nodes acquire only below the share they
// have applied, grants reach them late and out of order (applied only if
// newer), reports are atomic snapshots that reach the coordinator late and
// out of order; nodes join, leave (stop taking slots, drain and stop
// beating) and crash (their slots die with them; reports already sent may
// still arrive); a silent node's row lapses, as when the others have beaten
// on past its lease, and the next step evicts it; a crashed node restarts
// under its id with nothing applied and later seqs. Returns the worst true
// sum(inflight) seen, and checks the live shares never sum above `limit`.
int64_t worst_inflight(uint64_t seed, bool handoff, int64_t limit) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t n) {
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  };
  const HeartbeatOptions o{.lease_ttl_ms = int64_t{1} << 40,
                           .handoff = handoff};
  struct Node {
    int64_t applied_share = 0, applied_gen = 0, inflight = 0, seq = 0;
    bool leaving = false;  // takes no more slots; silent once drained
    bool crashed = false;
  };
  struct Report {
    int node;
    HeartbeatReport r;
  };
  struct Grant {
    int node;
    int64_t gen, share;
  };
  std::vector<Node> nodes(2);
  // A deque: the reports' node_id views must survive a node joining.
  std::deque<std::string> ids = {"n0", "n1"};
  std::vector<Report> reports;
  std::vector<Grant> grants;
  std::vector<HeartbeatNode> table;
  int64_t worst = 0;
  for (int step = 0; step < 400; ++step) {
    const int64_t action = pick(13);
    const int i = static_cast<int>(pick(static_cast<int64_t>(nodes.size())));
    Node& n = nodes[static_cast<size_t>(i)];
    const bool silent = n.crashed || (n.leaving && n.inflight == 0);
    if (action < 3 && !n.crashed && !n.leaving) {  // acquire below the share
      if (n.inflight < n.applied_share) ++n.inflight;
    } else if (action < 5 && !n.crashed) {  // release
      if (n.inflight > 0) --n.inflight;
    } else if (action < 7 && !silent) {  // snapshot a report
      reports.push_back({i,
                         {.node_id = ids[static_cast<size_t>(i)],
                          .seq = ++n.seq,
                          .applied_gen = n.applied_gen,
                          .inflight = n.inflight,
                          .local_limit = limit}});
    } else if (action < 8 && !reports.empty()) {  // the coordinator steps
      const size_t k =
          static_cast<size_t>(pick(static_cast<int64_t>(reports.size())));
      const Report rep = reports[k];
      reports.erase(reports.begin() + static_cast<std::ptrdiff_t>(k));
      absl::StatusOr<HeartbeatGrant> g = heartbeat_step(table, rep.r, kNow, o);
      if (g.ok() && !g->stale)
        grants.push_back({rep.node, g->generation, g->share});
    } else if (action < 9 && !grants.empty()) {  // a grant arrives
      const size_t k =
          static_cast<size_t>(pick(static_cast<int64_t>(grants.size())));
      const Grant gr = grants[k];
      grants.erase(grants.begin() + static_cast<std::ptrdiff_t>(k));
      Node& to = nodes[static_cast<size_t>(gr.node)];
      if (!to.crashed && gr.gen > to.applied_gen) {
        to.applied_gen = gr.gen;
        to.applied_share = gr.share;
      }
    } else if (action < 10 && nodes.size() < 5) {  // a node joins
      nodes.push_back({});
      ids.push_back("n" + std::to_string(nodes.size() - 1));
    } else if (action < 11 && !n.crashed) {  // a crash, or a leave
      if (pick(2) == 0) {
        n.crashed = true;
        n.inflight = 0;  // its work dies with it
      } else {
        n.leaving = true;
      }
    } else if (action < 12 && silent) {  // its row lapses
      for (HeartbeatNode& row : table) {
        if (row.id == ids[static_cast<size_t>(i)]) row.expires_at_ms = kNow;
      }
    } else if (action < 13 && n.crashed) {  // restarts under its id
      n = Node{.seq = n.seq + 1000};
    }
    int64_t sum = 0;
    for (const Node& x : nodes) sum += x.inflight;
    worst = std::max(worst, sum);
    int64_t shares = 0;
    for (const HeartbeatNode& row : table) {
      if (row.expires_at_ms > kNow) shares += row.share;
    }
    EXPECT_LE(shares, limit) << "seed " << seed << " step " << step;
  }
  return worst;
}

TEST(HeartbeatCoreFleet, HandoffHoldsInflightAtTheLimitUnderLag) {
  int64_t worst = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    const int64_t limit = 2 + static_cast<int64_t>(seed % 5);
    const int64_t w = worst_inflight(seed, /*handoff=*/true, limit);
    ASSERT_LE(w, limit) << "seed " << seed;
    worst = std::max(worst, w - limit);
  }
  EXPECT_EQ(worst, 0);
}

// The negative control: the same fleets without handoff overshoot.
TEST(HeartbeatCoreFleet, WithoutHandoffTheSameLagOvershoots) {
  int64_t over = 0, runs_over = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    const int64_t limit = 2 + static_cast<int64_t>(seed % 5);
    const int64_t w = worst_inflight(seed, /*handoff=*/false, limit);
    if (w > limit) {
      ++runs_over;
      over = std::max(over, w - limit);
    }
  }
  std::printf("without handoff: %lld of 3000 fleets overshoot, by up to %lld\n",
              static_cast<long long>(runs_over), static_cast<long long>(over));
  EXPECT_GT(runs_over, 0);
}

// The memory coordinator runs the core under its shard lock on its own
// clock: the table lives as the key's state and expires with its last
// node; other keys' states are refused; the other backends say
// kUnimplemented (tested with their servers later).
TEST(MemoryCoordinatorHeartbeat, RunsTheCoreOnTheStoreClock) {
  ManualClock clock(kNow);
  auto store = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(clock)));
  const HeartbeatOptions o{.lease_ttl_ms = 100};
  HeartbeatReport a{.node_id = "a", .seq = 1, .local_limit = 10};
  HeartbeatReport b{.node_id = "b", .seq = 1, .local_limit = 10};
  absl::StatusOr<HeartbeatGrant> g = store->heartbeat("k", a, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->share, 10);
  EXPECT_EQ(g->lease_expires_at_ms, kNow + 100);
  EXPECT_EQ(store->heartbeat("k", b, o)->share, 0);  // a holds all 10
  a.seq = 2;
  EXPECT_EQ(store->heartbeat("k", a, o)->share, 5);
  b.seq = 2;
  EXPECT_EQ(store->heartbeat("k", b, o)->share, 5);
  // Every lease lapses: the table expires and starts again.
  clock.advance_ms(100);
  a.seq = 3;
  g = store->heartbeat("k", a, o);
  EXPECT_EQ(g->live_nodes, 1);
  EXPECT_EQ(g->share, 10);
  // Bad input, other state, other backends.
  EXPECT_EQ(store->heartbeat("", a, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  HeartbeatReport bad = a;
  bad.seq = 0;
  EXPECT_EQ(store->heartbeat("k", bad, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(
      store
          ->check(*make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000}),
                  "g", 0)
          .ok());
  absl::Status other = store->heartbeat("g", a, o).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.message().find("asked for heartbeat"), std::string::npos)
      << other;
}

}  // namespace
}  // namespace heartbeat_core_test
}  // namespace throttlekit
