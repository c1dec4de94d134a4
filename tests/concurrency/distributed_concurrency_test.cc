// DistributedConcurrency on a MemoryCoordinator and a manual clock, beats
// run by a ManualBeatScheduler (no sleeps): option checks, the fleet
// sharing one ceiling, grants applied only when newer, outage modes, the
// lease deadline, self-fencing with `on_fenced` once per fence, eager beats
// and their debounce, the demand report. A coordinator that can be made to
// fail (a wrapper around the real MemoryCoordinator) stands for a network
// that drops beats.

#include "throttlekit/concurrency/distributed_concurrency.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/forwarding_coordinator.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace distributed_concurrency_test {
namespace {

using Clock = NanoClockRef<ManualMonotonicClock>;
using Node = BasicDistributedConcurrency<Clock>;
constexpr int64_t kMs = 1'000'000;

// The store's clock in ms, read from the nodes' manual ns clock.
class MsOfNs final : public throttlekit::Clock {
 public:
  explicit MsOfNs(const ManualMonotonicClock& c) : c_(c) {}
  int64_t now_ms() const noexcept override { return c_.now_ns() / kMs; }

 private:
  const ManualMonotonicClock& c_;
};

// The real MemoryCoordinator behind a switch that fails heartbeats (a
// partition) or answers one recorded grant again (a delayed reply).
class SwitchedCoordinator final : public testing::ForwardingCoordinator {
 public:
  explicit SwitchedCoordinator(std::shared_ptr<MemoryCoordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}

  std::atomic<bool> fail{false};
  std::atomic<int> calls{0};
  bool replay_first = false;  // answer the first grant ever issued
  std::vector<HeartbeatGrant> grants;

 protected:
  // Every beat is answered on the calling thread, waited for or not.
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override {
    calls.fetch_add(1);
    if (fail.load()) {
      std::move(done)(absl::UnavailableError("partitioned"));
      return;
    }
    absl::StatusOr<HeartbeatGrant> g =
        inner().heartbeat(key, report, options, now_ms);
    if (g.ok()) grants.push_back(*g);
    if (replay_first && !grants.empty()) {
      std::move(done)(grants.front());
      return;
    }
    std::move(done)(std::move(g));
  }
};

class DistributedConcurrencyTest : public ::testing::Test {
 protected:
  DistributedConcurrencyTest()
      : memory_(
            *MemoryCoordinator::create({}, std::make_shared<MsOfNs>(clock_))),
        coordinator_(std::make_shared<SwitchedCoordinator>(memory_)) {}

  // A node whose local limit stays `local` (no samples: releases are
  // kIgnored in these tests).
  static DistributedConcurrencyOptions options(std::string id, int64_t local,
                                               int64_t heartbeat_ms = 100) {
    DistributedConcurrencyOptions o;
    o.node_id = std::move(id);
    o.key = "fleet";
    o.heartbeat_ms = heartbeat_ms;
    o.local.initial_limit = local;
    o.local.max_limit = 1000;
    return o;
  }

  struct Started {
    std::unique_ptr<Node> node;
    ManualBeatScheduler* beats = nullptr;
  };

  Started start(DistributedConcurrencyOptions o) {
    auto scheduler = std::make_unique<ManualBeatScheduler>();
    ManualBeatScheduler* raw = scheduler.get();
    absl::StatusOr<std::unique_ptr<Node>> node = Node::create(
        std::move(o), coordinator_, Clock(clock_), std::move(scheduler));
    EXPECT_TRUE(node.ok()) << node.status();
    return {node.ok() ? *std::move(node) : nullptr, raw};
  }

  // Grants as many permits as `node` admits now.
  static std::vector<Node::Permit> fill(Node& node) {
    std::vector<Node::Permit> held;
    for (;;) {
      Node::Permit p = node.acquire();
      if (!p) return held;
      held.push_back(std::move(p));
    }
  }

  void advance_ms(int64_t ms) { clock_.advance_ns(ms * kMs); }

  ManualMonotonicClock clock_{1'700'000'000'000 * kMs};
  std::shared_ptr<MemoryCoordinator> memory_;
  std::shared_ptr<SwitchedCoordinator> coordinator_;
};

TEST_F(DistributedConcurrencyTest, RefusesBadOptionsNamingTheField) {
  const auto status = [&](DistributedConcurrencyOptions o) {
    return Node::create(std::move(o), coordinator_, Clock(clock_),
                        std::make_unique<ManualBeatScheduler>())
        .status();
  };
  const auto expect_bad = [&](DistributedConcurrencyOptions o,
                              const std::string& field) {
    const absl::Status s = status(std::move(o));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
  };
  DistributedConcurrencyOptions o = options("a", 8);
  o.node_id = "";
  expect_bad(o, "node_id");
  o.node_id = std::string(257, 'x');
  expect_bad(o, "node_id");
  o = options("a", 8);
  o.key = "";
  expect_bad(o, "distributed_concurrency.key");
  o = options("a", 8);
  o.heartbeat_ms = 0;
  expect_bad(o, "heartbeat_ms");
  o = options("a", 8);
  o.lease_ttl_ms = 100;  // not longer than the beat
  expect_bad(o, "lease_ttl_ms");
  o = options("a", 8);
  o.eager_debounce_ms = 101;
  expect_bad(o, "eager_debounce_ms");
  o = options("a", 8);
  o.self_fencing = true;
  o.outage = ConcurrencyOutageMode::kLocalOnly;
  expect_bad(o, "self_fencing");
  o = options("a", 8);
  o.self_fencing = true;
  o.fence_safety_margin_ms = 100;  // ttl 200 - beat 100: margin < 100
  expect_bad(o, "fence_safety_margin_ms");
  o.fence_safety_margin_ms = -1;
  expect_bad(o, "fence_safety_margin_ms");
  o = options("a", 8);
  o.local.initial_limit = 0;
  expect_bad(o, "initial_limit");
  EXPECT_EQ(Node::create(options("a", 8), nullptr, Clock(clock_),
                         std::make_unique<ManualBeatScheduler>())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // And a good one, with the defaults filled in.
  o = options("a", 8);
  o.self_fencing = true;
  o.fence_safety_margin_ms = 99;
  absl::StatusOr<std::unique_ptr<Node>> good = Node::create(
      o, coordinator_, Clock(clock_), std::make_unique<ManualBeatScheduler>());
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)->options().lease_ttl_ms, 200);
  EXPECT_EQ((*good)->options().eager_debounce_ms, 10);
}

// Before its first answered beat a node is in an outage; fail-closed admits
// nothing, then the grant opens it; the row lives two beats.
TEST_F(DistributedConcurrencyTest, StartsClosedAndBeatsAtOnce) {
  Started a = start(options("a", 8));
  EXPECT_TRUE(a.beats->started());
  EXPECT_FALSE(a.node->acquire());
  EXPECT_TRUE(a.node->stats().outage);
  EXPECT_EQ(a.beats->run_tick(), 100);  // beat, then the next in 100 ms
  const DistributedConcurrencyStats s = a.node->stats();
  EXPECT_FALSE(s.outage);
  EXPECT_EQ(s.share, 8);
  EXPECT_EQ(s.global_limit, 8);
  EXPECT_EQ(s.live_nodes, 1);
  EXPECT_EQ(s.beats, 1);
  EXPECT_EQ(s.local.ceiling, 8);
  EXPECT_EQ(fill(*a.node).size(), 8u);
  absl::StatusOr<std::vector<HeartbeatNode>> rows =
      memory_->heartbeat_nodes("fleet");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].expires_at_ms, clock_.now_ns() / kMs + 200);
  // Not due yet: a tick before the period sends nothing.
  advance_ms(50);
  EXPECT_EQ(a.beats->run_tick(), 50);
  EXPECT_EQ(coordinator_->calls.load(), 1);
}

// Three nodes (local limits 12, 20, 30) share min = 12; what they can
// acquire together never exceeds it, and an incumbent's in-flight is
// reserved from a newcomer until it drains.
TEST_F(DistributedConcurrencyTest, TheFleetSharesOneCeiling) {
  Started a = start(options("a", 12));
  Started b = start(options("b", 20));
  Started c = start(options("c", 30));
  a.beats->run_tick();
  std::vector<Node::Permit> held_a = fill(*a.node);
  EXPECT_EQ(held_a.size(), 12u);
  b.beats->run_tick();
  c.beats->run_tick();
  EXPECT_EQ(b.node->stats().share, 0);  // a occupies all 12
  EXPECT_EQ(c.node->stats().share, 0);
  // a drains to 2 and beats: its share falls to its third (4).
  held_a.resize(2);
  advance_ms(100);
  a.beats->run_tick();
  EXPECT_EQ(a.node->stats().share, 4);
  b.beats->run_tick();
  c.beats->run_tick();
  EXPECT_EQ(b.node->stats().share, 4);
  EXPECT_EQ(c.node->stats().share, 4);
  // Each node pins on its own schedule: its seed comes from its id.
  EXPECT_NE(a.node->limiter()->options().recalibration_seed,
            b.node->limiter()->options().recalibration_seed);
  EXPECT_NE(a.node->limiter()->options().recalibration_seed, 0u);
  std::vector<Node::Permit> held_b = fill(*b.node);
  std::vector<Node::Permit> held_c = fill(*c.node);
  std::vector<Node::Permit> more_a = fill(*a.node);
  EXPECT_EQ(held_b.size(), 4u);
  EXPECT_EQ(held_c.size(), 4u);
  EXPECT_EQ(held_a.size() + more_a.size(), 4u);
  EXPECT_EQ(a.node->stats().global_limit, 12);
  EXPECT_EQ(c.node->stats().live_nodes, 3);
}

// A delayed reply carrying an older generation is not applied: grants are
// monotone per node.
TEST_F(DistributedConcurrencyTest, AppliesOnlyNewerGenerations) {
  Started a = start(options("a", 10));
  Started b = start(options("b", 10));
  a.beats->run_tick();
  EXPECT_EQ(a.node->stats().share, 10);
  b.beats->run_tick();
  advance_ms(100);
  a.beats->run_tick();
  EXPECT_EQ(a.node->stats().share, 5);
  const int64_t gen = a.node->stats().generation;
  coordinator_->replay_first = true;  // answer a's first grant (10) again
  advance_ms(100);
  a.beats->run_tick();
  EXPECT_EQ(a.node->stats().share, 5);
  EXPECT_EQ(a.node->stats().generation, gen);
  EXPECT_EQ(fill(*a.node).size(), 5u);
}

// A stale answer (another process beats with this node id and newer seqs)
// is a failed beat that changes nothing.
TEST_F(DistributedConcurrencyTest, AStaleAnswerIsAFailedBeat) {
  Started a = start(options("a", 10));
  a.beats->run_tick();
  ASSERT_TRUE(
      memory_
          ->heartbeat(
              "fleet",
              {.node_id = "a", .seq = int64_t{1} << 52, .local_limit = 3},
              {.lease_ttl_ms = 200})
          .ok());
  advance_ms(100);
  a.beats->run_tick();
  const DistributedConcurrencyStats s = a.node->stats();
  EXPECT_EQ(s.failed_beats, 1);
  EXPECT_EQ(s.share, 10);
  EXPECT_EQ(a.node->last_error().code(), absl::StatusCode::kAborted);
  EXPECT_NE(a.node->last_error().message().find("node_id"), std::string::npos);
}

// A partition: the share holds until the lease (measured from the last
// answered beat's send) lapses, then fail-closed admits nothing and
// local-only admits the local limit; the first answered beat restores the
// share.
TEST_F(DistributedConcurrencyTest, OutageModesAfterTheLeaseLapses) {
  for (const ConcurrencyOutageMode mode : {ConcurrencyOutageMode::kFailClosed,
                                           ConcurrencyOutageMode::kLocalOnly}) {
    SCOPED_TRACE(mode == ConcurrencyOutageMode::kFailClosed ? "fail-closed"
                                                            : "local-only");
    coordinator_->fail = false;
    DistributedConcurrencyOptions o =
        options(mode == ConcurrencyOutageMode::kFailClosed ? "x" : "y", 16);
    o.key = mode == ConcurrencyOutageMode::kFailClosed ? "k1" : "k2";
    o.outage = mode;
    Started a = start(o);
    ASSERT_TRUE(
        memory_
            ->heartbeat(o.key, {.node_id = "peer", .seq = 1, .local_limit = 16},
                        {.lease_ttl_ms = 100'000})
            .ok());
    a.beats->run_tick();
    EXPECT_EQ(a.node->stats().share, 0);  // the peer holds all 16
    advance_ms(100);
    ASSERT_TRUE(memory_
                    ->heartbeat(o.key,
                                {.node_id = "peer",
                                 .seq = 2,
                                 .applied_gen = 1,
                                 .local_limit = 16},
                                {.lease_ttl_ms = 100'000})
                    .ok());
    a.beats->run_tick();
    EXPECT_EQ(a.node->stats().share, 8);
    coordinator_->fail = true;
    advance_ms(100);
    EXPECT_EQ(a.beats->run_tick(), 100);  // failed; the lease lapses at 200
    EXPECT_EQ(a.node->stats().failed_beats, 1);
    EXPECT_FALSE(a.node->stats().outage);
    EXPECT_EQ(fill(*a.node).size(), 8u);
    advance_ms(99);
    a.beats->run_tick();
    EXPECT_FALSE(a.node->stats().outage);
    advance_ms(1);
    a.beats->run_tick();
    EXPECT_TRUE(a.node->stats().outage);
    EXPECT_EQ(
        a.node->stats().local.ceiling,
        mode == ConcurrencyOutageMode::kFailClosed ? 0 : kNoConcurrencyCeiling);
    EXPECT_EQ(fill(*a.node).size(),
              mode == ConcurrencyOutageMode::kFailClosed ? 0u : 16u);
    EXPECT_EQ(a.node->last_error().code(), absl::StatusCode::kUnavailable);
    coordinator_->fail = false;
    EXPECT_TRUE(a.node->beat_now().ok());
    EXPECT_FALSE(a.node->stats().outage);
    EXPECT_EQ(a.node->stats().local.ceiling, 8);
  }
}

// Self-fencing: acquire refuses from `lease - margin` on the node's clock
// even before any tick has run (a process stopped past its lease admits
// nothing when it resumes); `on_fenced` runs once per fence; an answered
// beat lifts it.
TEST_F(DistributedConcurrencyTest, SelfFencingRefusesAtTheFenceAndFiresOnce) {
  int fired = 0;
  DistributedConcurrencyOptions o = options("a", 4);
  o.self_fencing = true;
  o.fence_safety_margin_ms = 30;
  o.on_fenced = [&fired] { ++fired; };
  Started a = start(o);
  a.beats->run_tick();
  coordinator_->fail = true;
  advance_ms(100);
  // Next: the fence at 200 - 30 = 170 ms after the beat, sooner than a beat.
  EXPECT_EQ(a.beats->run_tick(), 70);
  advance_ms(69);
  {
    Node::Permit p = a.node->acquire();
    EXPECT_TRUE(p);
  }
  advance_ms(1);
  Node::Permit refused = a.node->acquire();
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.limit_at_acquire(), 0);
  EXPECT_EQ(fired, 0);  // no tick yet
  a.beats->run_tick();
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(a.node->stats().fenced);
  for (int i = 0; i < 5; ++i) {
    advance_ms(10);
    a.beats->run_tick();
  }
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(a.node->stats().fences, 1);
  coordinator_->fail = false;
  ASSERT_TRUE(a.node->beat_now().ok());
  EXPECT_FALSE(a.node->stats().fenced);
  EXPECT_EQ(fill(*a.node).size(), 4u);
  coordinator_->fail = true;
  advance_ms(170);
  a.beats->run_tick();
  EXPECT_EQ(fired, 2);
  // A process stopped past its fence (no tick ran) that resumes and beats
  // successfully at once: the lapse still fires, once, and the beat lifts
  // the fence.
  coordinator_->fail = false;
  ASSERT_TRUE(a.node->beat_now().ok());
  advance_ms(500);
  EXPECT_FALSE(a.node->acquire());
  a.beats->run_tick();
  EXPECT_EQ(fired, 3);
  EXPECT_FALSE(a.node->stats().fenced);
  EXPECT_EQ(a.node->stats().fences, 3);
  EXPECT_TRUE(a.node->acquire());
}

// Eager beats: a newcomer capped below its fair share re-beats after the
// debounce; the incumbent, its share lowered while above it, beats as soon
// as it has drained; the newcomer's next eager beat gets its share, long
// before the regular period. At most kMaxEagerBeatsPerPeriod per period.
TEST_F(DistributedConcurrencyTest, EagerBeatsCollapseTheRamp) {
  DistributedConcurrencyOptions oa = options("a", 10, 1000);
  oa.eager_heartbeats = true;
  oa.handoff = true;
  DistributedConcurrencyOptions ob = oa;
  ob.node_id = "b";
  Started a = start(oa);
  a.beats->run_tick();
  a.beats->run_tick();  // nothing due: the ack waits for the debounce
  advance_ms(100);
  a.beats->run_tick();  // the eager ack of its first grant
  EXPECT_EQ(a.node->stats().eager_beats, 1);
  std::vector<Node::Permit> held = fill(*a.node);
  ASSERT_EQ(held.size(), 10u);
  advance_ms(100);
  Started b = start(ob);
  EXPECT_EQ(b.beats->run_tick(), 100);  // capped at 0: again after 100 ms
  EXPECT_EQ(b.node->stats().share, 0);
  // a's regular beat lowers it to 5 while it holds 10.
  advance_ms(800);
  a.beats->run_tick();
  EXPECT_EQ(a.node->stats().share, 5);
  held.resize(5);
  advance_ms(100);
  a.beats->run_tick();  // drained to 5: reports it at once
  EXPECT_EQ(a.node->stats().eager_beats, 2);
  b.beats->run_tick();  // 100 ms before its regular beat
  EXPECT_EQ(b.node->stats().eager_beats, 1);
  EXPECT_EQ(b.node->stats().share, 5);
  // Without eager beats a capped node waits for its period.
  DistributedConcurrencyOptions oc = oa;
  oc.node_id = "c";
  oc.eager_heartbeats = false;
  Started c = start(oc);
  EXPECT_EQ(c.beats->run_tick(), 1000);
  EXPECT_EQ(c.node->stats().share, 0);
}

// With demand-proportional targets the node reports L_local when it is at
// its ceiling and in-flight + 1 otherwise.
TEST_F(DistributedConcurrencyTest, ReportsDemandForProportionalTargets) {
  DistributedConcurrencyOptions o = options("a", 6);
  o.demand_proportional = true;
  Started a = start(o);
  a.beats->run_tick();
  std::vector<Node::Permit> held = fill(*a.node);
  advance_ms(100);
  a.beats->run_tick();
  EXPECT_EQ((*memory_->heartbeat_nodes("fleet"))[0].demand, 6);
  held.resize(2);
  advance_ms(100);
  a.beats->run_tick();
  EXPECT_EQ((*memory_->heartbeat_nodes("fleet"))[0].demand, 3);
}

}  // namespace
}  // namespace distributed_concurrency_test
}  // namespace throttlekit
