// tests/support/heartbeat_timeline.h
//
// Provides the checks every backend's heartbeat path passes (one place,
// called by the Redis and Postgres tests):
// - `HeartbeatTimeline`, a seeded random sequence of node beats on one key;
// - `expect_heartbeats_match_memory`: timelines run through a backend and
//   through a `MemoryCoordinator` (the C++ core, heartbeat_core.h); grants
//   and stored tables compared after every step;
// - `expect_heartbeat_refuses_bad_input`: keys of other state and bad
//   reports refused, with the right codes, before any write;
// - `expect_concurrent_beats_never_overcommit`: the step's atomicity.
//
// A timeline has nodes joining, beating with fresh snapshots, replaying old
// beats (stale), acknowledging their last grant or an older one, restarting
// (seq and generation from the start), falling silent until peers evict
// them, and the whole table lapsing; time moves in small and large steps.
// Node ids include bytes above 127, a space and mixed case, so the order of
// ids is byte order whatever the server's locale.

#ifndef THROTTLEKIT_TESTS_SUPPORT_HEARTBEAT_TIMELINE_H_
#define THROTTLEKIT_TESTS_SUPPORT_HEARTBEAT_TIMELINE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/run_threads.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::testing {

class HeartbeatTimeline {
 public:
  struct Beat {
    HeartbeatReport report;  // node_id points into the timeline
    int64_t now_ms = 0;
  };

  HeartbeatTimeline(uint64_t seed, int64_t start_ms, int64_t ttl_ms)
      : rng_(seed), now_(start_ms), ttl_(ttl_ms) {}

  // The next beat; its node id stays valid as long as the timeline.
  Beat next() {
    const int time_kind = pick(100);
    if (time_kind < 70) {
      now_ += pick(40);
    } else if (time_kind < 90) {
      now_ += ttl_ / 2 + pick(ttl_ / 2);
    } else if (time_kind < 98) {
      now_ += ttl_ + pick(ttl_);
    } else {
      now_ += 5 * ttl_;  // every lease lapses
    }
    current_ = pick(static_cast<int>(nodes_.size()));
    Node& n = nodes_[current_];
    const int kind = pick(100);
    int64_t seq = 0;
    if (kind < 10 && n.seq > 0) {
      seq = n.seq - pick(3);  // a delayed or replayed beat
      if (seq < 1) seq = 1;
    } else if (kind < 14) {
      n.seq = 1;  // restarted: everything from the start
      n.gen = 0;
      seq = 1;
    } else {
      seq = ++n.seq;
    }
    int64_t applied = n.gen;  // acknowledges its last grant
    const int ack = pick(100);
    if (ack < 20) {
      applied = n.gen > 0 ? n.gen - 1 : 0;
    } else if (ack < 30) {
      applied = 0;
    }
    const int64_t local = 1 + pick(12);
    return Beat{HeartbeatReport{.node_id = n.id,
                                .seq = seq,
                                .applied_gen = applied,
                                .inflight = pick(static_cast<int>(local) + 4),
                                .local_limit = local,
                                .demand = pick(16)},
                now_};
  }

  // What the last beat's node was granted (it acknowledges it later).
  void granted(const HeartbeatGrant& g) {
    if (!g.stale) nodes_[current_].gen = g.generation;
  }

 private:
  struct Node {
    std::string id;
    int64_t seq = 0;
    int64_t gen = 0;
  };

  int64_t pick(int64_t n) {
    return n <= 0 ? 0 : static_cast<int64_t>(rng_() % static_cast<uint64_t>(n));
  }
  int pick(int n) { return static_cast<int>(pick(static_cast<int64_t>(n))); }

  std::mt19937_64 rng_;
  int64_t now_;
  int64_t ttl_;
  std::vector<Node> nodes_ = {{"a"},        {"b"},     {"Z"},
                              {"node 10"},  {"node9"}, {"\xc3\xa9t\xc3\xa9"},
                              {"\x7f\x01"}, {"a-"}};
  size_t current_ = 0;
};

inline void expect_nodes_equal(const std::vector<HeartbeatNode>& got,
                               const std::vector<HeartbeatNode>& want,
                               const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    const HeartbeatNode& g = got[i];
    const HeartbeatNode& w = want[i];
    EXPECT_EQ(g.id, w.id) << where << " row " << i;
    EXPECT_EQ(g.seq, w.seq) << where << " row " << i;
    EXPECT_EQ(g.local_limit, w.local_limit) << where << " row " << i;
    EXPECT_EQ(g.inflight, w.inflight) << where << " row " << i;
    EXPECT_EQ(g.demand, w.demand) << where << " row " << i;
    EXPECT_EQ(g.expires_at_ms, w.expires_at_ms) << where << " row " << i;
    EXPECT_EQ(g.share, w.share) << where << " row " << i;
    EXPECT_EQ(g.generation, w.generation) << where << " row " << i;
    EXPECT_EQ(g.acked_share, w.acked_share) << where << " row " << i;
    EXPECT_EQ(g.max_unacked, w.max_unacked) << where << " row " << i;
  }
}

// Runs `timelines` timelines of `steps` beats under every option set (min
// and lower median, with and without handoff, equal and
// demand-proportional targets) on fresh keys `<prefix><n>` of `backend`,
// and the same beats on a MemoryCoordinator at the same caller times;
// after every step the grants must be equal and the stored tables
// (`heartbeat_nodes`) identical. Returns the steps compared.
inline int expect_heartbeats_match_memory(Coordinator& backend,
                                          const std::string& prefix,
                                          int timelines, int steps) {
  ManualClock clock(1);
  // No TTL slack, as `backend` must have: a table's expiry is part of its
  // history (one that expired starts again at generation 1).
  std::unique_ptr<MemoryCoordinator> memory = *MemoryCoordinator::create(
      {.ttl_slack_ms = 0},
      std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
          ClockRef<ManualClock>(clock)));
  int compared = 0;
  int key = 0;
  for (const HeartbeatAggregate aggregate :
       {HeartbeatAggregate::kMin, HeartbeatAggregate::kLowerMedian}) {
    for (const bool handoff : {false, true}) {
      for (const bool demand : {false, true}) {
        const HeartbeatOptions o{.lease_ttl_ms = 1000,
                                 .aggregate = aggregate,
                                 .handoff = handoff,
                                 .demand_proportional = demand};
        for (int t = 0; t < timelines; ++t, ++key) {
          const std::string k = prefix + std::to_string(key);
          HeartbeatTimeline timeline(0x5eed + static_cast<uint64_t>(key),
                                     1'700'000'000'000, o.lease_ttl_ms);
          for (int i = 0; i < steps; ++i) {
            const HeartbeatTimeline::Beat beat = timeline.next();
            const std::string where =
                k + " step " + std::to_string(i) + " node " +
                std::string(beat.report.node_id) + " seq " +
                std::to_string(beat.report.seq) + " at " +
                std::to_string(beat.now_ms);
            clock.set_ms(beat.now_ms);
            absl::StatusOr<HeartbeatGrant> want =
                memory->heartbeat(k, beat.report, o, beat.now_ms);
            absl::StatusOr<HeartbeatGrant> got =
                backend.heartbeat(k, beat.report, o, beat.now_ms);
            if (!want.ok() || !got.ok()) {
              ADD_FAILURE()
                  << where << ": " << want.status() << " / " << got.status();
              return compared;
            }
            EXPECT_EQ(got->share, want->share) << where;
            EXPECT_EQ(got->generation, want->generation) << where;
            EXPECT_EQ(got->global_limit, want->global_limit) << where;
            EXPECT_EQ(got->live_nodes, want->live_nodes) << where;
            EXPECT_EQ(got->lease_expires_at_ms, want->lease_expires_at_ms)
                << where;
            EXPECT_EQ(got->stale, want->stale) << where;
            timeline.granted(*want);
            absl::StatusOr<std::vector<HeartbeatNode>> got_nodes =
                backend.heartbeat_nodes(k);
            absl::StatusOr<std::vector<HeartbeatNode>> want_nodes =
                memory->heartbeat_nodes(k);
            if (!got_nodes.ok() || !want_nodes.ok()) {
              ADD_FAILURE() << where << ": " << got_nodes.status() << " / "
                            << want_nodes.status();
              return compared;
            }
            expect_nodes_equal(*got_nodes, *want_nodes, where);
            if (::testing::Test::HasFailure()) return compared;
            ++compared;
          }
        }
      }
    }
  }
  return compared;
}

// Keys holding a strategy's state (`strategy_keys`, one per layout the
// backend has) are refused by `heartbeat` and `heartbeat_nodes` with
// kFailedPrecondition; bad reports, options and times are kInvalidArgument.
// `key` is a fresh key.
inline void expect_heartbeat_refuses_bad_input(
    Coordinator& backend, const std::string& key,
    const std::vector<std::string>& strategy_keys) {
  const HeartbeatOptions o{.lease_ttl_ms = 5000};
  const HeartbeatReport good{.node_id = "a", .seq = 1, .local_limit = 8};
  for (const std::string& k : strategy_keys) {
    absl::Status s = backend.heartbeat(k, good, o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << k << s;
    EXPECT_EQ(backend.heartbeat_nodes(k).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << k;
  }
  const auto code = [&](const HeartbeatReport& r, const HeartbeatOptions& opt,
                        int64_t now = 0) {
    return backend.heartbeat(key, r, opt, now).status().code();
  };
  HeartbeatReport r = good;
  r.node_id = "";
  EXPECT_EQ(code(r, o), absl::StatusCode::kInvalidArgument);
  r = good;
  r.seq = 0;
  EXPECT_EQ(code(r, o), absl::StatusCode::kInvalidArgument);
  r = good;
  r.inflight = -1;
  EXPECT_EQ(code(r, o), absl::StatusCode::kInvalidArgument);
  r = good;
  r.local_limit = (int64_t{1} << 30) + 1;
  EXPECT_EQ(code(r, o), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(good, {}), absl::StatusCode::kInvalidArgument);  // ttl 0
  EXPECT_EQ(code(good, o, -5), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.heartbeat("", good, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  // None of them wrote anything.
  absl::StatusOr<std::vector<HeartbeatNode>> t = backend.heartbeat_nodes(key);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->empty());
}

// Six threads beat as distinct nodes on fresh keys `<prefix>plain` and
// `<prefix>handoff` while a reader takes the table (one read, atomic with
// respect to a step): the shares never sum above the limit, with and
// without handoff, and every node ends in the table.
inline void expect_concurrent_beats_never_overcommit(Coordinator& backend,
                                                     const std::string& prefix,
                                                     int beats_per_thread) {
  for (const bool handoff : {false, true}) {
    const std::string key = prefix + (handoff ? "handoff" : "plain");
    const HeartbeatOptions o{.lease_ttl_ms = 60'000, .handoff = handoff};
    constexpr int64_t kLimit = 12;
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0}, violations{0};
    std::thread reader([&] {
      while (!stop.load()) {
        absl::StatusOr<std::vector<HeartbeatNode>> t =
            backend.heartbeat_nodes(key);
        if (!t.ok()) continue;
        int64_t sum = 0;
        for (const HeartbeatNode& n : *t) sum += n.share;
        if (sum > kLimit) violations.fetch_add(1);
        reads.fetch_add(1);
      }
    });
    std::atomic<int> errors{0};
    run_threads(6, [&](int thread) {
      const std::string id = "node" + std::to_string(thread);
      int64_t gen = 0;
      for (int64_t seq = 1; seq <= beats_per_thread; ++seq) {
        absl::StatusOr<HeartbeatGrant> g =
            backend.heartbeat(key,
                              {.node_id = id,
                               .seq = seq,
                               .applied_gen = gen,
                               .inflight = seq % 3,
                               .local_limit = kLimit},
                              o);
        if (!g.ok()) {
          errors.fetch_add(1);
          continue;
        }
        gen = g->generation;
      }
    });
    stop.store(true);
    reader.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(violations.load(), 0) << (handoff ? "handoff" : "plain");
    absl::StatusOr<std::vector<HeartbeatNode>> t = backend.heartbeat_nodes(key);
    ASSERT_TRUE(t.ok()) << t.status();
    int64_t sum = 0;
    for (const HeartbeatNode& n : *t) sum += n.share;
    EXPECT_EQ(t->size(), 6u);
    EXPECT_LE(sum, kLimit);
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_HEARTBEAT_TIMELINE_H_
