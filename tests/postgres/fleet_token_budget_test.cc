// FleetTokenBudget on a real Postgres: C in {1, 2, 8, 32} gateway threads
// and {2, 8} gateway processes debiting one shared key on the store's
// clock: no window serves more than budget + largest debit - 1, and
// per-token debits never overspend at all.

#include "throttlekit/federation/fleet_token_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/fleet_budget_run.h"
#include "support/pg_test_env.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace fleet_token_budget_test {
namespace {

constexpr int64_t kBudget = 200;
constexpr int64_t kWindowMs = 100;

TEST(FleetTokenBudgetPostgres, GatewaysNeverOverspend) {
  const PostgresCoordinatorOptions o = testing::pg_table_options("tk_ftb", 8);
  std::shared_ptr<PostgresCoordinator> pg = testing::make_pg(o);
  ASSERT_NE(pg, nullptr);
  auto budget =
      FleetTokenBudget::create({.budget = kBudget, .window_ms = kWindowMs}, pg);
  ASSERT_TRUE(budget.ok());
  testing::check_gateway_thread_sweep(**budget, "threads:", 800, kBudget,
                                      "postgres");
  for (const int gateways : {2, 8}) {
    const auto make = [&] {
      // One single-threaded gateway per process: one connection each.
      PostgresCoordinatorOptions one = o;
      one.connections = 1;
      std::shared_ptr<PostgresCoordinator> c = testing::make_pg(one);
      // Connected now, in the setup: the first call connects, sets up the
      // schema and prepares every statement, which on a loaded machine
      // with eight processes doing it at once once took most of the run.
      if (c == nullptr || !c->ping().ok()) {
        return std::unique_ptr<FleetTokenBudget>();
      }
      auto b = FleetTokenBudget::create(
          {.budget = kBudget, .window_ms = kWindowMs}, c);
      return b.ok() ? *std::move(b) : nullptr;
    };
    EXPECT_EQ(
        testing::check_budget_bound(
            testing::run_gateway_processes(make,
                                           "procs:" + std::to_string(gateways),
                                           gateways, kWindowMs, 10, {1}),
            kBudget,
            "postgres, " + std::to_string(gateways) + " processes, per token"),
        0);
  }
}

}  // namespace
}  // namespace fleet_token_budget_test
}  // namespace throttlekit
