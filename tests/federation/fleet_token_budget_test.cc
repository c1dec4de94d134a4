// FleetTokenBudget (federation/fleet_token_budget.h) on the memory
// coordinator: the token-budget rule on one shared key at the store's
// clock (hand-worked on a manual clock), bad input refused, and C in
// {1, 2, 8, 32} gateway threads on the real clock: no window serves more
// than budget + largest debit - 1, and exactly the budget per token.

#include "throttlekit/federation/fleet_token_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/fleet_budget_run.h"
#include "support/manual_store.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace fleet_token_budget_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;

TEST(FleetTokenBudget, TheCrossingDebitCountsAndTheStoreClockDecides) {
  testing::ManualStore m;
  auto a =
      FleetTokenBudget::create({.budget = 100, .window_ms = 1000}, m.store);
  auto b =
      FleetTokenBudget::create({.budget = 100, .window_ms = 1000}, m.store);
  ASSERT_TRUE(a.ok() && b.ok());
  m.clock.advance_ms(300);
  EXPECT_EQ(*(*a)->debit("t", 60), (Decision{true, 100, 40, kEpoch + 1000, 0}));
  EXPECT_EQ(*(*b)->remaining("t"), 40);
  // The crossing debit: 40 left, 70 asked, all of it counts.
  EXPECT_EQ(*(*b)->debit("t", 70), (Decision{true, 100, 0, kEpoch + 1000, 0}));
  // Then every debit of the window is refused and writes nothing.
  EXPECT_EQ(*(*a)->debit("t", 1),
            (Decision{false, 100, 0, kEpoch + 1000, 700}));
  EXPECT_EQ(*(*a)->remaining("t"), 0);
  // The store's clock rolls the window.
  m.clock.advance_ms(700);
  EXPECT_EQ(*(*a)->remaining("t"), 100);
  EXPECT_TRUE((*b)->debit("t", 100)->allowed);
  EXPECT_EQ((*a)->stats().debits, 1);
  EXPECT_EQ((*a)->stats().denials, 1);
  EXPECT_EQ((*b)->stats().tokens, 170);
  ASSERT_TRUE((*a)->reset("t").ok());
  EXPECT_EQ(*(*a)->remaining("t"), 100);
}

TEST(FleetTokenBudget, RefusesBadInput) {
  testing::ManualStore m;
  EXPECT_EQ(FleetTokenBudget::create({.budget = 0, .window_ms = 1000}, m.store)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FleetTokenBudget::create({.budget = 5, .window_ms = 0}, m.store)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FleetTokenBudget::create({.budget = 5, .window_ms = 10}, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto b = FleetTokenBudget::create({.budget = 5, .window_ms = 1000}, m.store);
  ASSERT_TRUE(b.ok());
  for (int64_t bad : {int64_t{0}, int64_t{-3}, int64_t{1} << 53}) {
    const absl::Status s = (*b)->debit("t", bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find("tokens"), std::string::npos);
  }
  EXPECT_EQ((*b)->debit("", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*b)->remaining("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*(*b)->remaining("t"), 5);  // nothing was written
}

TEST(FleetTokenBudgetRealClock, GatewayThreadsNeverOverspendAWindow) {
  std::shared_ptr<Coordinator> m = *MemoryCoordinator::create();
  constexpr int64_t kBudget = 400;
  for (const int gateways : {1, 2, 8, 32}) {
    auto budget =
        FleetTokenBudget::create({.budget = kBudget, .window_ms = 20}, m);
    ASSERT_TRUE(budget.ok());
    const std::string key = "per-token:" + std::to_string(gateways);
    const testing::BudgetRun per_token =
        testing::run_gateway_threads(**budget, key, gateways, 400, {1});
    EXPECT_EQ(
        testing::check_budget_bound(
            per_token, kBudget,
            "memory, " + std::to_string(gateways) + " threads, per token"),
        0);
    const testing::BudgetRun chunks = testing::run_gateway_threads(
        **budget, "chunks:" + std::to_string(gateways), gateways, 400,
        {1, 7, 40, 3});
    testing::check_budget_bound(
        chunks, kBudget,
        "memory, " + std::to_string(gateways) + " threads, chunks");
  }
}

}  // namespace
}  // namespace fleet_token_budget_test
}  // namespace throttlekit
