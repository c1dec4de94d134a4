// The Redis heartbeat script (src/redis/lua/heartbeat.lua) equals the C++
// coordinator core (heartbeat_core.h, as MemoryCoordinator runs it) step for
// step on a real Redis: random timelines under every option set, grants
// and stored tables compared after every step (tests/support/
// heartbeat_timeline.h). Also: the store clock, keys of other layouts and
// bad reports refused, and the script's atomicity while threads beat.

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "support/heartbeat_timeline.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_heartbeat_conformance_test {
namespace {

std::string run_prefix(const char* stem) {
  return std::string(stem) + ":" + std::to_string(getpid()) + ":";
}

// No TTL slack: a table's expiry is part of its history (one that expired
// starts again at generation 1), compared with the core's.
TEST(RedisHeartbeatConformance, ScriptEqualsTheCoreStepForStep) {
  std::unique_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.ttl_slack_ms = 0});
  const int steps = testing::expect_heartbeats_match_memory(
      *redis, run_prefix("hb-conf"), /*timelines=*/4, /*steps=*/60);
  EXPECT_EQ(steps, 8 * 4 * 60);
}

TEST(RedisHeartbeat, ReadsTheRedisClock) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const std::string key = run_prefix("hb-clock") + "k";
  absl::StatusOr<int64_t> before = redis->now_ms();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<HeartbeatGrant> g =
      redis->heartbeat(key, {.node_id = "a", .seq = 1, .local_limit = 8},
                       {.lease_ttl_ms = 5000});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->share, 8);
  EXPECT_GE(g->lease_expires_at_ms, *before + 5000);
  EXPECT_LE(g->lease_expires_at_ms, *redis->now_ms() + 5000);
  absl::StatusOr<std::vector<HeartbeatNode>> nodes =
      redis->heartbeat_nodes(key);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].id, "a");
  EXPECT_EQ((*nodes)[0].share, 8);
}

TEST(RedisHeartbeat, RefusesOtherLayoutsAndBadInput) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const std::string p = run_prefix("hb-bad");
  const AnyStrategy gcra =
      *make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000});
  const AnyStrategy bucket =
      *make_strategy(TokenBucket::Options{.capacity = 5, .refill_per_sec = 1});
  ASSERT_TRUE(redis->check(gcra, p + "string", 0).ok());
  ASSERT_TRUE(redis->check(bucket, p + "hash", 0).ok());
  const int64_t requests = redis->stats().requests;
  testing::expect_heartbeat_refuses_bad_input(*redis, p + "fresh",
                                              {p + "string", p + "hash"});
  // 4 refusals by the server and the final read; the bad reports never
  // reached it.
  EXPECT_EQ(redis->stats().requests, requests + 5);
  absl::StatusOr<Forecast> f = redis->forecast(bucket, p + "hash", 0);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->spendable_now, 4);  // the refused calls left it as it was
}

TEST(RedisHeartbeat, ConcurrentBeatsNeverOvercommit) {
  RedisCoordinatorOptions o;
  o.connections = 4;
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator(o);
  testing::expect_concurrent_beats_never_overcommit(
      *redis, run_prefix("hb-atomic"), /*beats_per_thread=*/150);
}

}  // namespace
}  // namespace redis_heartbeat_conformance_test
}  // namespace throttlekit
