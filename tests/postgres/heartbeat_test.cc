// The Postgres heartbeat path ({{t}}_heartbeat, src/postgres/heartbeat.sql:
// a PL/pgSQL transcription of heartbeat_core.h's step, run in the database
// under the key's row lock) equals MemoryCoordinator (the C++ core) step
// for step on a real Postgres: random timelines under every option set,
// grants and stored tables compared after every step
// (tests/support/heartbeat_timeline.h). Also: the store clock, keys of
// other state and bad reports refused, the step's atomicity while threads
// beat on separate connections, and one round trip per beat.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/heartbeat_timeline.h"
#include "support/other_state_keys.h"
#include "support/pg_test_env.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace heartbeat_test {
namespace {

// Slack 0, as the memory reference of the conformance timelines: a table
// whose last lease lapsed is gone at once on both.
std::unique_ptr<PostgresCoordinator> make(const char* stem, int connections) {
  PostgresCoordinatorOptions o = testing::pg_table_options(stem, connections);
  o.ttl_slack_ms = 0;
  return testing::make_pg(o);
}

TEST(PostgresHeartbeatConformance, EqualsTheCoreStepForStep) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_hb_conf", 1);
  ASSERT_NE(pg, nullptr);
  const int steps = testing::expect_heartbeats_match_memory(
      *pg, "hb-conf:", /*timelines=*/3, /*steps=*/60);
  EXPECT_EQ(steps, 8 * 3 * 60);
}

TEST(PostgresHeartbeat, ReadsTheStoreClockInOneRoundTrip) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_hb_clock", 1);
  ASSERT_NE(pg, nullptr);
  absl::StatusOr<int64_t> before = pg->now_ms();
  ASSERT_TRUE(before.ok()) << before.status();
  const BackendStats stats = pg->stats();
  absl::StatusOr<HeartbeatGrant> g =
      pg->heartbeat("k", {.node_id = "a", .seq = 1, .local_limit = 8},
                    {.lease_ttl_ms = 5000});
  ASSERT_TRUE(g.ok()) << g.status();
  // The step runs in the database: one statement.
  EXPECT_EQ(pg->stats().batches, stats.batches + 1);
  EXPECT_EQ(g->share, 8);
  EXPECT_GE(g->lease_expires_at_ms, *before + 5000);
  EXPECT_LE(g->lease_expires_at_ms, *pg->now_ms() + 5000);
  absl::StatusOr<std::vector<HeartbeatNode>> nodes = pg->heartbeat_nodes("k");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].share, 8);
  // A stale beat writes nothing and leaves the session usable.
  g = pg->heartbeat("k", {.node_id = "a", .seq = 1, .local_limit = 3},
                    {.lease_ttl_ms = 5000});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->stale);
  EXPECT_EQ((*pg->heartbeat_nodes("k"))[0].local_limit, 8);
}

TEST(PostgresHeartbeat, RefusesOtherStateAndBadInput) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_hb_bad", 1);
  ASSERT_NE(pg, nullptr);
  ASSERT_NO_FATAL_FAILURE(testing::seed_other_state_keys(*pg));
  testing::expect_heartbeat_refuses_bad_input(*pg, "fresh", {"gcra", "lease"});
  // A refused step rolled its transaction back: the session still works.
  absl::StatusOr<HeartbeatGrant> g =
      pg->heartbeat("fresh", {.node_id = "a", .seq = 1, .local_limit = 2},
                    {.lease_ttl_ms = 5000});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->share, 2);
  EXPECT_TRUE(pg->check(testing::other_state_gcra(), "gcra2", 0).ok());
}

TEST(PostgresHeartbeat, ConcurrentBeatsNeverOvercommit) {
  std::unique_ptr<PostgresCoordinator> pg = make("tk_hb_atomic", 4);
  ASSERT_NE(pg, nullptr);
  testing::expect_concurrent_beats_never_overcommit(*pg, "hb-atomic:",
                                                    /*beats_per_thread=*/60);
}

}  // namespace
}  // namespace heartbeat_test
}  // namespace throttlekit
