// Federation on a real Redis (src/redis/lua/fed_lease.lua,
// fed_reconcile.lua): equal to the C++ core (federation_core.h) step for
// step over random timelines; the original's layout (hash `budget`,
// `expiresAt`, `rec_<window start>[:<token>]`); the Redis clock; other
// layouts and bad input refused; atomic under threads; `ping`.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/federation_timeline.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_federation_test {
namespace {

std::string run_prefix(const char* stem) {
  return std::string(stem) + ":" + std::to_string(getpid()) + ":";
}

std::unique_ptr<RedisCoordinator> redis(int connections = 1) {
  RedisCoordinatorOptions o;
  o.connections = connections;
  o.ttl_slack_ms = 600'000;  // keys outlive a timeline's caller times
  return testing::redis_coordinator(o);
}

TEST(RedisFederationConformance, ScriptsEqualTheCoreStepForStep) {
  std::unique_ptr<RedisCoordinator> r = redis();
  EXPECT_EQ(testing::expect_federation_matches_core(*r, run_prefix("fed-conf"),
                                                    4, 200),
            2 * 4 * 200);
}

TEST(RedisFederationConformance, EscrowScriptEqualsTheCoreStepForStep) {
  std::unique_ptr<RedisCoordinator> r = redis();
  EXPECT_EQ(
      testing::expect_escrow_matches_core(*r, run_prefix("fed-l2"), 4, 300),
      4 * 300);
}

TEST(RedisFederation, KeepsTheOriginalsLayoutOnTheRedisClock) {
  std::unique_ptr<RedisCoordinator> r = redis();
  const std::string key = run_prefix("fed-layout") + "k";
  const LeaseBudget b = *LeaseBudget::create({50, 60'000});
  absl::StatusOr<int64_t> before = r->now_ms();
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<LeaseGrant> g = r->lease_windowed(b, key, 16);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 16);
  EXPECT_GE(g->now_ms, *before);
  EXPECT_EQ(g->window_start_ms, b.window_start(g->now_ms));
  EXPECT_EQ(g->expires_at_ms, g->window_start_ms + 60'000);
  ASSERT_EQ(*r->reconcile(b, key, g->window_start_ms, 5, "eu"), 5);
  // Any other Redis client (here redis-cli) reads the same fields.
  const std::vector<std::string> hash = testing::redis_cli("HGETALL " + key);
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < hash.size(); i += 2) fields[hash[i]] = hash[i + 1];
  const std::vector<std::string> pttl = testing::redis_cli("PTTL " + key);
  ASSERT_EQ(pttl.size(), 1u);
  const long long ttl = std::atoll(pttl[0].c_str());
  EXPECT_EQ(fields["budget"], "39");
  EXPECT_EQ(fields["expiresAt"], std::to_string(g->expires_at_ms));
  EXPECT_EQ(fields["rec_" + std::to_string(g->window_start_ms) + ":eu"], "1");
  EXPECT_EQ(fields.size(), 3u);
  // The key lives until its window ends plus the slack.
  EXPECT_GT(ttl, 600'000);
  EXPECT_LE(ttl, 600'000 + 60'000);
}

TEST(RedisFederation, RefusesOtherLayoutsAndBadInput) {
  std::unique_ptr<RedisCoordinator> r = redis();
  const std::string p = run_prefix("fed-bad");
  const AnyStrategy gcra =
      *make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000});
  const AnyStrategy bucket =
      *make_strategy(TokenBucket::Options{.capacity = 5, .refill_per_sec = 1});
  ASSERT_TRUE(r->check(gcra, p + "string", 0).ok());
  ASSERT_TRUE(r->check(bucket, p + "hash", 0).ok());
  testing::expect_federation_refuses_bad_input(*r, p + "fresh",
                                               {p + "string", p + "hash"});
  // The refused calls left the bucket as it was.
  absl::StatusOr<Forecast> f = r->forecast(bucket, p + "hash", 0);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->spendable_now, 4);
  EXPECT_TRUE(r->is_healthy());
}

TEST(RedisFederation, ConcurrentLeasesNeverOvergrant) {
  std::unique_ptr<RedisCoordinator> r = redis(4);
  testing::expect_concurrent_federation_is_atomic(*r, run_prefix("fed-hot"));
}

TEST(RedisFederation, PingFailsFastWhenTheServerIsGone) {
  testing::PrivateRedis server(testing::redis_port() + 27);
  ASSERT_TRUE(server.start());
  RedisCoordinatorOptions o;
  o.port = server.port();
  o.command_timeout = absl::Milliseconds(300);
  std::unique_ptr<RedisCoordinator> r = testing::redis_coordinator(o);
  EXPECT_TRUE(r->ping().ok());
  server.kill();
  const absl::Status s = r->ping();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kDeadlineExceeded)
      << s;
  EXPECT_FALSE(r->is_healthy());
}

}  // namespace
}  // namespace redis_federation_test
}  // namespace throttlekit
