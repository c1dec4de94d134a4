// Federation on a real Postgres (src/postgres/federation.sql): equal to the
// C++ core (federation_core.h) step for step over random timelines; one
// row per key on the store clock (`clock_timestamp()`), collected by the
// sweep once its window is over; other state and bad input refused;
// atomic under threads on separate connections; `ping`.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/federation_timeline.h"
#include "support/other_state_keys.h"
#include "support/pg_test_env.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace federation_test {
namespace {

std::unique_ptr<PostgresCoordinator> make(const char* stem, int connections) {
  return testing::make_pg(testing::pg_table_options(stem, connections));
}

TEST(PostgresFederationConformance, EqualsTheCoreStepForStep) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_fed_conf", 1);
  ASSERT_NE(pg, nullptr);
  EXPECT_EQ(testing::expect_federation_matches_core(*pg, "fed:", 3, 200),
            2 * 3 * 200);
}

TEST(PostgresFederation, ReadsTheStoreClockInOneRoundTripAndSweepsOldRows) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_fed_clock", 1);
  ASSERT_NE(pg, nullptr);
  const LeaseBudget b = *LeaseBudget::create({50, 60'000});
  absl::StatusOr<int64_t> before = pg->now_ms();
  ASSERT_TRUE(before.ok()) << before.status();
  const BackendStats stats = pg->stats();
  absl::StatusOr<LeaseGrant> g = pg->lease_windowed(b, "live", 16);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(pg->stats().batches, stats.batches + 1);
  EXPECT_EQ(g->granted, 16);
  EXPECT_GE(g->now_ms, *before);
  EXPECT_LE(g->now_ms, *pg->now_ms());
  EXPECT_EQ(g->window_start_ms, b.window_start(g->now_ms));
  EXPECT_EQ(*pg->reconcile(b, "live", g->window_start_ms, 4, "eu"), 4);
  EXPECT_EQ(*pg->reconcile(b, "live", g->window_start_ms, 4, "eu"), 0);
  // A window long over (a caller time in 2001): its row is collected.
  ASSERT_TRUE(pg->lease_windowed(b, "old", 3, 1'000'000'000'000).ok());
  absl::StatusOr<int64_t> swept = pg->sweep(100);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 1);
  // The live key kept its window.
  g = pg->lease_windowed(b, "live", 100);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 50 - 16 + 4);
  EXPECT_TRUE(pg->is_healthy());
}

TEST(PostgresFederation, RefusesOtherStateAndBadInput) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_fed_bad", 1);
  ASSERT_NE(pg, nullptr);
  ASSERT_NO_FATAL_FAILURE(testing::seed_other_state_keys(*pg));
  testing::expect_federation_refuses_bad_input(*pg, "fresh", {"gcra", "lease"});
  EXPECT_TRUE(pg->check(testing::other_state_gcra(), "gcra2", 0).ok());
}

TEST(PostgresFederation, ConcurrentLeasesNeverOvergrant) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_fed_atomic", 4);
  ASSERT_NE(pg, nullptr);
  testing::expect_concurrent_federation_is_atomic(*pg, "hot");
}

}  // namespace
}  // namespace federation_test
}  // namespace throttlekit
