// The federation core (coordinator/federation_core.h) on hand-worked cases,
// and MemoryCoordinator running it: equal to the pure core over random
// timelines, bad input refused before any write, atomic under threads.

#include "throttlekit/coordinator/federation_core.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/federation_timeline.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace federation_core_test {
namespace {

const LeaseBudget kBudget = *LeaseBudget::create({10, 1000});

TEST(FederationCore, GrantsPartiallyAndEndsTheWindowOnTheStoreClock) {
  FederationState s;
  EXPECT_EQ(federation_lease(s, kBudget, 4, 12'345),
            (LeaseGrant{4, 6, 12'000, 13'000, 12'345}));
  EXPECT_EQ(federation_lease(s, kBudget, 9, 12'999),
            (LeaseGrant{6, 0, 12'000, 13'000, 12'999}));
  // Spent: a denial changes nothing.
  const FederationState spent = s;
  EXPECT_EQ(federation_lease(s, kBudget, 1, 12'999).granted, 0);
  EXPECT_EQ(s, spent);
  // The next window starts full.
  EXPECT_EQ(federation_lease(s, kBudget, 3, 13'000),
            (LeaseGrant{3, 7, 13'000, 14'000, 13'000}));
}

TEST(FederationCore, AClockSteppedBackDrawsFromTheStoredWindow) {
  FederationState s;
  ASSERT_EQ(federation_lease(s, kBudget, 8, 20'500).granted, 8);
  // 19'900 lies in the previous window; a fresh budget there would grant
  // 10 more for instants the fleet already spent.
  EXPECT_EQ(federation_lease(s, kBudget, 5, 19'900),
            (LeaseGrant{2, 0, 20'000, 21'000, 19'900}));
}

TEST(FederationCore, ReconcileAppliesOncePerWindowAndTokenAndForfeitsRolled) {
  FederationState s;
  ASSERT_EQ(federation_lease(s, kBudget, 7, 5'100).granted, 7);
  EXPECT_EQ(federation_reconcile(s, kBudget, 5'000, 2, "a", 5'200), 2);
  EXPECT_EQ(federation_reconcile(s, kBudget, 5'000, 2, "a", 5'300), 0);
  EXPECT_EQ(s.budget, 5);
  // Another region's reconcile of the same window applies; the cap holds.
  EXPECT_EQ(federation_reconcile(s, kBudget, 5'000, 9, "b", 5'300), 5);
  EXPECT_EQ(s.budget, 10);
  // A window that is not the current one: forfeited.
  EXPECT_EQ(federation_reconcile(s, kBudget, 4'000, 3, "c", 5'300), 0);
  const FederationState before = s;
  EXPECT_EQ(federation_reconcile(s, kBudget, 5'000, 3, "c", 6'000), 0);
  EXPECT_EQ(s, before);
  // The markers die with their window.
  ASSERT_EQ(federation_lease(s, kBudget, 10, 6'000).granted, 10);
  EXPECT_TRUE(s.reconciled.empty());
  EXPECT_EQ(federation_reconcile(s, kBudget, 6'000, 4, "a", 6'001), 4);
}

TEST(FederationCore, ReconcileOfAWindowNeverLeasedRestoresNothing) {
  FederationState s;
  EXPECT_EQ(federation_reconcile(s, kBudget, 5'000, 3, "", 5'100), 0);
  EXPECT_EQ(s, FederationState{});
}

TEST(EscrowCore, TakesRefillsAndReleasesOneWindow) {
  EscrowState s;
  EXPECT_EQ(escrow_take(s, 3, 100).granted, 0);
  EXPECT_EQ(escrow_refill(s, 5, 0, 1000, 100), 5);
  EXPECT_EQ(escrow_refill(s, 2, 0, 1000, 200), 7);
  EXPECT_EQ(escrow_take(s, 3, 300), (LeaseGrant{3, 4, 0, 1000, 300}));
  // A grant of a finished window is dropped; of an older one too.
  EXPECT_EQ(escrow_refill(s, 9, -1000, 0, 300), 4);
  // A newer window replaces: the old credits died with their window.
  EXPECT_EQ(escrow_refill(s, 6, 1000, 2000, 999), 6);
  EXPECT_EQ(escrow_refill(s, 9, 0, 1000, 999), 6);
  EXPECT_EQ(escrow_release(s, 0, 1500), 0);
  EXPECT_EQ(escrow_release(s, 1000, 1500), 6);
  EXPECT_EQ(escrow_release(s, 1000, 1500), 0);  // the first releaser won
  EXPECT_EQ(s, EscrowState{});
  // A dead balance gives nothing.
  EXPECT_EQ(escrow_refill(s, 4, 2000, 3000, 2500), 4);
  EXPECT_EQ(escrow_take(s, 1, 3000).granted, 0);
}

std::unique_ptr<MemoryCoordinator> memory() {
  // A slack longer than any timeline: the state lives as long as the core's.
  return *MemoryCoordinator::create({.ttl_slack_ms = int64_t{1} << 40});
}

TEST(MemoryFederation, EqualsTheCoreStepForStep) {
  std::unique_ptr<MemoryCoordinator> m = memory();
  EXPECT_EQ(testing::expect_federation_matches_core(*m, "fed:", 6, 200),
            2 * 6 * 200);
}

TEST(MemoryFederation, EscrowEqualsTheCoreStepForStep) {
  std::unique_ptr<MemoryCoordinator> m = memory();
  EXPECT_EQ(testing::expect_escrow_matches_core(*m, "l2:", 6, 300), 6 * 300);
}

TEST(MemoryFederation, RefusesOtherStateAndBadInput) {
  std::unique_ptr<MemoryCoordinator> m = memory();
  const AnyStrategy gcra =
      *make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000});
  ASSERT_TRUE(m->check(gcra, "gcra", 0).ok());
  const LeaseBudget b = *LeaseBudget::create({5, 1000});
  ASSERT_TRUE(m->lease(b, "lease", 1).ok());
  testing::expect_federation_refuses_bad_input(*m, "fresh", {"gcra", "lease"});
  // And the federation state is refused by the other verbs.
  ASSERT_TRUE(m->lease_windowed(b, "fed", 1).ok());
  EXPECT_EQ(m->check(gcra, "fed", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->lease(b, "fed", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m->is_healthy());
}

TEST(MemoryFederation, ConcurrentLeasesNeverOvergrant) {
  std::unique_ptr<MemoryCoordinator> m = memory();
  testing::expect_concurrent_federation_is_atomic(*m, "hot");
}

}  // namespace
}  // namespace federation_core_test
}  // namespace throttlekit
