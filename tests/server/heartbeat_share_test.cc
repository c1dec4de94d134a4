// The quota door's fleet shares (src/server/heartbeat_share.h,
// docs/rlqs.md "The fleet"): sources of two or three servers beating to one
// memory store on the real clock, each tracking one budget whose usage the
// test sets. Options are validated; nothing is assigned before the first
// answered beat; shares follow demand and never sum above the limit; a
// lowered share stays reserved while the server reports its commitments; a
// server cut off from the store fences before the store can give its part
// to others; a restarted server is a new node; `changed` tells the door
// when the share moved; a dropped budget is no longer beaten; and the pure
// lease rule (share_lease.h).

#include "heartbeat_share.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "share_lease.h"
#include "support/forwarding_coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit::server {
namespace heartbeat_share_test {
namespace {

constexpr int64_t kLimit = 100;
constexpr int64_t kHeartbeatMs = 20;
constexpr int64_t kCommitMs = 200;

int64_t now_ms() { return ServerClock{}.now_ms(); }

// The memory store, cut off while `down` is set (every verb UNAVAILABLE).
class SwitchedStore final : public testing::ForwardingCoordinator {
 public:
  SwitchedStore() : ForwardingCoordinator(*MemoryCoordinator::create()) {}
  std::atomic<bool> down{false};

 protected:
  absl::Status admit(std::string_view) override {
    return down.load() ? absl::UnavailableError("switched off")
                       : absl::OkStatus();
  }
};

// One server's source tracking the budget ("edge", "api") with usage the
// test sets.
struct Server {
  std::unique_ptr<HeartbeatShare> source;
  std::shared_ptr<BudgetShare> share;
  std::atomic<int64_t> committed{0};
  std::atomic<int64_t> demand{0};
  std::atomic<int64_t> changes{0};
  std::atomic<bool> dropped{false};
  std::atomic<int64_t> limit{kLimit};  // the rule's requests in force

  std::optional<int64_t> at() { return share->at(now_ms(), limit.load()); }
  HeartbeatShareView view() { return *source->view("edge", "api"); }
};

std::unique_ptr<Server> serve(const std::shared_ptr<Coordinator>& store,
                              const std::string& node, int64_t demand) {
  auto s = std::make_unique<Server>();
  s->demand = demand;
  auto source = HeartbeatShare::create(
      {.node_id = node, .heartbeat_ms = kHeartbeatMs, .fence_margin_ms = 10},
      store);
  EXPECT_TRUE(source.ok()) << source.status();
  s->source = *std::move(source);
  Server* raw = s.get();
  s->share = s->source->track(
      QuotaBudgetRef{.domain = "edge",
                     .budget_key = "api",
                     .limit = {.requests = kLimit, .fill_interval_s = 1},
                     .commit_ms = kCommitMs,
                     .usage = [raw](int64_t) -> std::optional<QuotaUsage> {
                       if (raw->dropped.load()) return std::nullopt;
                       return QuotaUsage{.committed = raw->committed.load(),
                                         .demand = raw->demand.load(),
                                         .limit = raw->limit.load()};
                     },
                     .changed = [raw] { raw->changes.fetch_add(1); }});
  return s;
}

// Waits up to `ms` for `pred`.
template <typename F>
bool eventually(F pred, int64_t ms = 3000) {
  const int64_t end = now_ms() + ms;
  while (!pred()) {
    if (now_ms() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(HeartbeatShare, BadOptionsAreRefusedNamingTheOption) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  const auto refused = [&](HeartbeatShareOptions o,
                           std::shared_ptr<Coordinator> s,
                           std::string_view what) {
    auto r = HeartbeatShare::create(std::move(o), std::move(s));
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), std::string(what)))
        << r.status();
  };
  refused({.node_id = "a"}, nullptr, "store");
  refused({.node_id = ""}, store, "node_id");
  refused({.node_id = std::string(201, 'n')}, store, "node_id");
  refused({.node_id = "a", .heartbeat_ms = 9}, store, "heartbeat_ms");
  refused({.node_id = "a", .heartbeat_ms = 60'001}, store, "heartbeat_ms");
  refused({.node_id = "a", .fence_margin_ms = -1}, store, "fence_margin_ms");
}

TEST(HeartbeatShare, NothingIsAssignedBeforeTheFirstAnsweredBeat) {
  auto store = std::make_shared<SwitchedStore>();
  store->down = true;
  std::unique_ptr<Server> a = serve(store, "a", 40);
  std::this_thread::sleep_for(std::chrono::milliseconds(5 * kHeartbeatMs));
  EXPECT_EQ(a->at(), std::nullopt);
  EXPECT_EQ(a->changes.load(), 0);
  EXPECT_GT(a->view().failed_beats, 0);
  store->down = false;
  // Alone, the server's share is its demand (the step is demand-
  // proportional, not work-conserving), and the door is told.
  ASSERT_TRUE(eventually([&] { return a->at() == 40; }));
  EXPECT_GE(a->changes.load(), 1);
}

TEST(HeartbeatShare, SharesFollowDemandAndNeverSumAboveTheLimit) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", 30);
  std::unique_ptr<Server> b = serve(store, "b", 200);
  const auto split = [&](int64_t x, int64_t y) {
    return eventually([&] { return a->at() == x && b->at() == y; });
  };
  EXPECT_TRUE(split(30, 70)) << *a->at() << " " << *b->at();
  // a's demand rises: b's share falls to 50, and a's rises to 50 once b
  // applied (acknowledged) it; at every sample the two sum to the limit at
  // most.
  a->demand = 200;
  const int64_t end = now_ms() + 2000;
  bool reached = false;
  while (now_ms() < end && !reached) {
    const int64_t x = a->at().value_or(0), y = b->at().value_or(0);
    EXPECT_LE(x + y, kLimit);
    reached = x == 50 && y == 50;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(reached) << *a->at() << " " << *b->at();
}

TEST(HeartbeatShare, ALoweredShareStaysReservedWhileItsCommitmentsCount) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", 100);
  ASSERT_TRUE(eventually([&] { return a->at() == 100; }));
  a->committed = 100;  // a handed all of it out
  std::unique_ptr<Server> b = serve(store, "b", 100);
  // a's target is now 50, but its commitments (100) stay reserved: b gets
  // nothing until a reports them lower.
  ASSERT_TRUE(eventually([&] { return a->at() == 50; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * kHeartbeatMs));
  EXPECT_EQ(b->at().value_or(-1), 0);
  a->committed = 50;  // the old assignments expired
  EXPECT_TRUE(eventually([&] { return b->at() == 50; }));
}

TEST(HeartbeatShare, ACutOffServerFencesBeforeTheStoreGivesItsPartAway) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", 100);
  std::unique_ptr<Server> b = serve(store, "b", 100);
  ASSERT_TRUE(eventually([&] { return a->at() == 50 && b->at() == 50; }));
  a->committed = 50;
  b->committed = 50;
  // a is cut off from the store (its beats stop; b's go on).
  a->source->stop();
  const HeartbeatShareView last = a->view();
  const int64_t fence_at = last.lease_until_ms - kCommitMs;
  // Until its fence a still serves its share; from it, 0.
  if (now_ms() < fence_at - 5) EXPECT_EQ(a->at(), 50);
  ASSERT_TRUE(eventually([&] { return a->at() == 0; }));
  EXPECT_GE(now_ms(), fence_at);
  // Read as a fence (the door holds its clients), not a share of 0.
  EXPECT_TRUE(a->share->fenced(now_ms()));
  // b gets a's part only once the store evicted a, after everything a
  // sent before its fence has expired (fence + commit = lease_until).
  ASSERT_TRUE(eventually([&] { return b->at() == 100; }));
  EXPECT_GE(now_ms(), last.lease_until_ms);
}

TEST(HeartbeatShare, ARestartedServerIsANewNodeAndWaitsForTheOldLease) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", 100);
  ASSERT_TRUE(eventually([&] { return a->at() == 100; }));
  a->committed = 100;
  const HeartbeatShareView old = a->view();
  const std::string old_node = a->source->node();
  a->source->stop();  // killed: its row stays until its lease lapses
  std::unique_ptr<Server> again = serve(store, "a", 100);
  EXPECT_NE(again->source->node(), old_node);
  EXPECT_TRUE(absl::StartsWith(again->source->node(), "a#"));
  // Its first grant comes at once, and is 0 while the old incarnation's
  // row holds the limit.
  ASSERT_TRUE(eventually([&] { return again->at().has_value(); }));
  if (now_ms() < old.lease_until_ms) EXPECT_EQ(again->at(), 0);
  ASSERT_TRUE(eventually([&] { return again->at() == 100; }));
  EXPECT_GE(now_ms(), old.lease_until_ms);
}

TEST(HeartbeatShare, ADroppedBudgetIsNoLongerBeaten) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", 10);
  ASSERT_TRUE(eventually([&] { return a->at() == 10; }));
  a->dropped = true;
  EXPECT_TRUE(
      eventually([&] { return !a->source->view("edge", "api").has_value(); }));
  // The same budget made again beats on the row its predecessor left
  // (still live at the store): its beats are newer there, never stale.
  std::shared_ptr<BudgetShare> again = a->source->track(QuotaBudgetRef{
      .domain = "edge",
      .budget_key = "api",
      .limit = {.requests = kLimit, .fill_interval_s = 1},
      .commit_ms = kCommitMs,
      .usage = [](int64_t) -> std::optional<QuotaUsage> {
        return QuotaUsage{.committed = 0, .demand = 10, .limit = kLimit};
      },
      .changed = [] {}});
  ASSERT_TRUE(eventually([&] { return again->at(now_ms(), kLimit) == 10; }));
  EXPECT_EQ(a->source->view("edge", "api")->failed_beats, 0);
}

TEST(HeartbeatShare, ALimitLoweredByAReloadBindsAtOnceAndReachesTheStore) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::unique_ptr<Server> a = serve(store, "a", kLimit);
  ASSERT_TRUE(eventually([&] { return a->at() == kLimit; }));
  a->limit = 40;
  EXPECT_EQ(a->at(), 40) << "the lowered limit binds before any beat";
  // The next beats report it, and the store's step grants no more.
  EXPECT_TRUE(eventually([&] { return a->view().share == 40; }))
      << a->view().share;
  // Raised again: the grant follows at the next beats.
  a->limit = kLimit;
  EXPECT_TRUE(eventually([&] { return a->at() == kLimit; }));
}

TEST(ShareLease, AppliesNewerGrantsAndFencesBeforeTheLeaseLapses) {
  ShareLease l{.commit_ms = 2500, .lease_ttl_ms = 2900, .margin_ms = 100};
  EXPECT_EQ(l.at(0), std::nullopt);
  l.apply({.share = 40, .generation = 3}, /*sent_ms=*/1000);
  // lease_until = 1000 + 2900 - 100 = 3800: a send at t expires by
  // t + 2500, so sends are allowed through t = 1300.
  EXPECT_EQ(l.lease_until_ms, 3800);
  EXPECT_EQ(l.at(1300), 40);
  EXPECT_FALSE(l.fenced(1300));
  EXPECT_EQ(l.at(1301), 0);
  EXPECT_TRUE(l.fenced(1301));  // 0 though the share is 40
  // An older generation is not applied, but its beat renews the lease.
  l.apply({.share = 90, .generation = 2}, 1200);
  EXPECT_EQ(l.at(1500), 40);
  // A late answer of an earlier beat never shortens the lease.
  l.apply({.share = 40, .generation = 3}, 1100);
  EXPECT_EQ(l.lease_until_ms, 4000);
  l.apply({.share = 10, .generation = 4}, 1300);
  EXPECT_EQ(l.lease_until_ms, 4100);
  EXPECT_EQ(l.at(1600), 10);
  // A share of 0 is not a fence: there is nothing to hold.
  l.apply({.share = 0, .generation = 5}, 1400);
  EXPECT_EQ(l.at(2000), 0);
  EXPECT_FALSE(l.fenced(2000));
}

TEST(HeartbeatShare, TheLeaseCoversTheCommitmentsThreeBeatsAndASecond) {
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  auto fast = HeartbeatShare::create(
      {.node_id = "a", .heartbeat_ms = 20, .fence_margin_ms = 10}, store);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_EQ((*fast)->lease_ttl_ms(2500), 2500 + kMinBeatToleranceMs + 10);
  auto slow = HeartbeatShare::create({.node_id = "b"}, store);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ((*slow)->lease_ttl_ms(7000), 7000 + 3000 + 100);
}

TEST(HeartbeatShare, StoreKeysAreLengthPrefixed) {
  EXPECT_EQ(HeartbeatShare::store_key("edge", "1:0"),
            "throttlekit-rlqs:4:edge3:1:0");
  EXPECT_NE(HeartbeatShare::store_key("a:", "b"),
            HeartbeatShare::store_key("a", ":b"));
}

}  // namespace
}  // namespace heartbeat_share_test
}  // namespace throttlekit::server
