// The self-fence model: derives the exact fence safety margin of
// DistributedConcurrency from the production code, and refutes a smaller
// one.
//
// A node beats once (at real time 0) and is then cut off from the
// coordinator. Real time advances 1 ms per step for T ms; the node's clock
// keeps real time, the coordinator's runs fast, gaining `drift` ms over one
// lease (`lease_ttl_ms`), the dangerous direction: coord(t) =
// floor(t * ttl / (ttl - drift)), so the coordinator reaches the lease's
// end at real time ttl - drift. Every ms the node tries one acquire
// (production `acquire`, with the grant deadline its fence installed), and
// a granted slot is held for `hold` ms (the ms of the admission included:
// 1 is work cancelled at the fence, more is work that cannot be); and a
// peer beats (production `MemoryCoordinator::heartbeat`), which evicts the
// node once its lease has lapsed on the coordinator's clock, handing its
// budget to the peer. A violation: the node admits, or still holds a slot,
// at a real ms at which it has been evicted.
//
// The search runs every margin from 0 up and finds the least that is safe:
// it must be drift + hold - 1 (the margin must cover the clock drift over
// one lease plus the longest non-cancellable request), and one less must
// be violated. For drift in {0, 1, 3, 7} and hold in {1, 2, 5}.

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace self_fence_model_test {
namespace {

using Node = BasicDistributedConcurrency<NanoClockRef<ManualMonotonicClock>>;
constexpr int64_t kTtl = 20;
constexpr int64_t kBaseMs = 1'700'000'000'000;
constexpr int64_t kNsPerMs = 1'000'000;

// The node's clock and the coordinator's, a memory coordinator on the
// latter, and one node on the former (beating by hand only): the node with
// self-fencing at `margin` when `fencing`, without it otherwise.
struct Partition {
  ManualMonotonicClock node_clock{kBaseMs * kNsPerMs};
  ManualClock coordinator_clock{kBaseMs};
  std::shared_ptr<MemoryCoordinator> memory = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(coordinator_clock)));
  std::unique_ptr<Node> node;

  Partition(bool fencing, int64_t margin) {
    DistributedConcurrencyOptions o;
    o.node_id = "node";
    o.key = "fleet";
    o.heartbeat_ms = 1;
    o.lease_ttl_ms = kTtl;
    o.self_fencing = fencing;
    o.fence_safety_margin_ms = margin;
    o.local.initial_limit = 1000;
    absl::StatusOr<std::unique_ptr<Node>> made =
        Node::create(o, memory, NanoClockRef<ManualMonotonicClock>(node_clock),
                     std::make_unique<ManualBeatScheduler>());
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) node = *std::move(made);
  }
};

// True iff the node admits or holds a slot at a real ms at which the
// coordinator has evicted it.
bool violated(int64_t drift, int64_t hold, int64_t margin) {
  Partition p(/*fencing=*/true, margin);
  ManualMonotonicClock& node_clock = p.node_clock;
  ManualClock& coordinator_clock = p.coordinator_clock;
  const std::shared_ptr<MemoryCoordinator>& memory = p.memory;
  EXPECT_TRUE(p.node->beat_now().ok());
  // Slots held: the real ms at which each is released.
  std::deque<std::pair<int64_t, Node::Permit>> held;
  bool bad = false;
  for (int64_t t = 0; t <= 2 * kTtl; ++t) {
    node_clock.advance_ns((kBaseMs * kNsPerMs + t * kNsPerMs) -
                          node_clock.now_ns());
    coordinator_clock.set_ms(kBaseMs + t * kTtl / (kTtl - drift));
    while (!held.empty() && held.front().first <= t) held.pop_front();
    Node::Permit slot = p.node->acquire();
    if (slot) held.emplace_back(t + hold, std::move(slot));
    // The peer beats (seq t + 1): the node is evicted once its lease has
    // lapsed on the coordinator's clock.
    absl::StatusOr<HeartbeatGrant> peer = memory->heartbeat(
        "fleet", {.node_id = "peer", .seq = t + 1, .local_limit = 1000},
        {.lease_ttl_ms = kTtl});
    EXPECT_TRUE(peer.ok()) << peer.status();
    absl::StatusOr<std::vector<HeartbeatNode>> rows =
        memory->heartbeat_nodes("fleet");
    bool evicted = true;
    for (const HeartbeatNode& r : *rows) {
      if (r.id == "node") evicted = false;
    }
    if (evicted && !held.empty()) bad = true;
  }
  return bad;
}

TEST(SelfFenceModel, TheExactMarginIsDriftPlusHoldMinusOne) {
  for (const int64_t drift : {0, 1, 3, 7}) {
    for (const int64_t hold : {1, 2, 5}) {
      SCOPED_TRACE("drift " + std::to_string(drift) + " ms, hold " +
                   std::to_string(hold) + " ms");
      int64_t least_safe = -1;
      for (int64_t m = 0; m < kTtl - 1 && least_safe < 0; ++m) {
        if (!violated(drift, hold, m)) least_safe = m;
      }
      const int64_t exact = drift + hold - 1;
      EXPECT_EQ(least_safe, exact);
      // The derived margin is safe and every larger one tried is too; one
      // less is refuted.
      EXPECT_FALSE(violated(drift, hold, exact));
      EXPECT_FALSE(violated(drift, hold, exact + 2));
      if (exact > 0) {
        EXPECT_TRUE(violated(drift, hold, exact - 1));
      }
    }
  }
}

// Without self-fencing the partitioned node keeps admitting on its last
// share after the coordinator handed it on: violated at any drift.
TEST(SelfFenceModel, WithoutFencingThePartitionedNodeOverlaps) {
  Partition p(/*fencing=*/false, 0);
  ManualMonotonicClock& node_clock = p.node_clock;
  ManualClock& coordinator_clock = p.coordinator_clock;
  const std::shared_ptr<MemoryCoordinator>& memory = p.memory;
  const std::unique_ptr<Node>& node = p.node;
  ASSERT_TRUE(node->beat_now().ok());
  node_clock.advance_ns(kTtl * kNsPerMs);  // no tick ran: no outage yet
  coordinator_clock.set_ms(kBaseMs + kTtl);
  ASSERT_TRUE(
      memory
          ->heartbeat("fleet",
                      {.node_id = "peer", .seq = 1, .local_limit = 1000},
                      {.lease_ttl_ms = kTtl})
          .ok());
  EXPECT_EQ(memory->heartbeat_nodes("fleet")->size(), 1u);  // evicted
  EXPECT_TRUE(node->acquire());  // and still admitting
}

}  // namespace
}  // namespace self_fence_model_test
}  // namespace throttlekit
