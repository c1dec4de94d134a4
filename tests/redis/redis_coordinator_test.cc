// RedisCoordinator against a real redis-server: the store clock, leases,
// scripts lost and reloaded, wrong types, hostile keys, AUTH and SELECT.

#include "throttlekit/redis/redis_coordinator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "support/redis_test_server.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace redis_coordinator_test {
namespace {

using testing::redis_coordinator;
using testing::redis_port;

// A key no other run or test uses.
std::string fresh(const std::string& name) {
  static const std::string run = std::to_string(getpid()) + "." +
                                 std::to_string(absl::ToUnixNanos(absl::Now()));
  return "it:" + run + ":" + name;
}

int redis_cli(const std::string& args, int port = redis_port()) {
  return std::system(
      ("redis-cli -p " + std::to_string(port) + " " + args + " >/dev/null")
          .c_str());
}

TEST(RedisCoordinator, NowZeroUsesTheServerClock) {
  auto redis = redis_coordinator();
  const int64_t before = SystemClock{}.now_ms();
  absl::StatusOr<int64_t> now = redis->now_ms();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_NEAR(static_cast<double>(*now), static_cast<double>(before), 2000);
  const AnyStrategy fixed = *make_strategy(FixedWindow::Options{5, 60'000});
  absl::StatusOr<Decision> d = redis->check(fixed, fresh("clock"), 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  // The window holding the server's now.
  EXPECT_GT(d->reset_at_ms, before - 2000);
  EXPECT_LE(d->reset_at_ms, before + 62'000);
  EXPECT_EQ(d->reset_at_ms % 60'000, 0);
}

TEST(RedisCoordinator, LeasesFollowTheServerWindow) {
  auto redis = redis_coordinator();
  const LeaseBudget budget = *LeaseBudget::create({10, 400});
  const std::string key = fresh("lease");
  absl::StatusOr<LeaseGrant> g = redis->lease(budget, key, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  // Start over if the window is about to roll (the test needs ~50 ms).
  while (g->expires_at_ms - g->now_ms < 150) {
    absl::SleepFor(absl::Milliseconds(g->expires_at_ms - g->now_ms + 1));
    g = redis->lease(budget, key, 4);
    ASSERT_TRUE(g.ok());
  }
  EXPECT_EQ(g->granted, 4);
  EXPECT_EQ(g->window_remaining, 6);
  EXPECT_EQ(g->window_start_ms % 400, 0);
  EXPECT_EQ(g->expires_at_ms, g->window_start_ms + 400);
  EXPECT_GE(g->now_ms, g->window_start_ms);
  EXPECT_LT(g->now_ms, g->expires_at_ms);
  const int64_t start = g->window_start_ms;
  absl::StatusOr<LeaseGrant> g2 = redis->lease(budget, key, 100);
  ASSERT_TRUE(g2.ok());
  if (g2->window_start_ms == start) {
    EXPECT_EQ(g2->granted, 10 - g->granted);
    EXPECT_EQ(*redis->give_back(budget, key, start, 3, "n1:1"), 3);
    EXPECT_EQ(*redis->give_back(budget, key, start, 3, "n1:1"), 0);
    EXPECT_EQ(redis->lease(budget, key, 100)->granted, 3);
  }
  // After the roll: the old window's leftover is forfeited.
  absl::SleepFor(absl::Milliseconds(450));
  EXPECT_EQ(*redis->give_back(budget, key, start, 5, "n1:2"), 0);
  absl::StatusOr<LeaseGrant> g3 = redis->lease(budget, key, 100);
  ASSERT_TRUE(g3.ok());
  EXPECT_GT(g3->window_start_ms, start);
  EXPECT_EQ(g3->granted, 10);
}

TEST(RedisCoordinator, LostScriptsAreSentAgain) {
  // One connection, so the call after the flush reuses the loaded one.
  auto redis = redis_coordinator({.connections = 1});
  const AnyStrategy gcra = *make_strategy(Gcra::Options{2, 1000});
  const std::string key = fresh("noscript");
  ASSERT_TRUE(redis->check(gcra, key, 0)->allowed);
  ASSERT_EQ(redis_cli("SCRIPT FLUSH"), 0);
  absl::StatusOr<Decision> d = redis->check(gcra, key, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  EXPECT_FALSE(redis->check(gcra, key, 0)->allowed);
  EXPECT_GE(redis->stats().reloads, 1);
}

TEST(RedisCoordinator, WrongTypeIsAPreconditionError) {
  auto redis = redis_coordinator();
  const std::string key = fresh("wrongtype");
  const AnyStrategy gcra = *make_strategy(Gcra::Options{2, 1000});
  const AnyStrategy bucket = *make_strategy(TokenBucket::Options{2, 1});
  ASSERT_TRUE(redis->check(gcra, key, 0)->allowed);
  absl::Status s = redis->check(bucket, key, 0).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  ASSERT_TRUE(redis->reset(bucket, key).ok());
  EXPECT_TRUE(redis->check(bucket, key, 0)->allowed);
}

TEST(RedisCoordinator, HostileKeysAreJustKeys) {
  auto redis = redis_coordinator();
  const AnyStrategy fixed = *make_strategy(FixedWindow::Options{1, 60'000});
  const std::string base = fresh("hostile");
  std::vector<std::string> keys = {
      base + " with spaces",
      base + "{braces}{}",
      base + "\"quotes' and \\backslash",
      base + "new\nline\r\n",
      base + std::string("nul\0byte", 8),
      base + "\xff\xfe non-UTF-8 \xc3\xa9",
      base + "'); FLUSHALL; --",
      base + "]] redis.call('FLUSHALL') --[[",
      base + std::string(kMaxKeyBytes - base.size(), 'k'),
  };
  for (const std::string& k : keys) {
    absl::StatusOr<Decision> first = redis->check(fixed, k, 0);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE(first->allowed) << k.substr(0, 60);
    EXPECT_FALSE(redis->check(fixed, k, 0)->allowed) << k.substr(0, 60);
  }
  // Each was its own key, and nothing was executed: all still there.
  for (const std::string& k : keys) {
    EXPECT_EQ(redis->peek(fixed, k, 0)->remaining, 0) << k.substr(0, 60);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(redis->check(fixed, "", 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      redis->check(fixed, std::string(kMaxKeyBytes + 1, 'k'), 0).status()));
}

TEST(RedisCoordinator, OptionsAreValidated) {
  EXPECT_TRUE(
      absl::IsInvalidArgument(RedisCoordinator::create({.port = 0}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(RedisCoordinator::create({.host = ""}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RedisCoordinator::create({.connections = 0}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RedisCoordinator::create({.command_timeout = absl::ZeroDuration()})
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RedisCoordinator::create({.ttl_slack_ms = -1}).status()));
  absl::Status s = RedisCoordinator::create({.connections = 65}).status();
  EXPECT_EQ(s.message(),
            "redis_coordinator.connections must be in [1, 64]; got 65");
}

TEST(RedisCoordinator, NothingListeningIsUnavailable) {
  auto redis = *RedisCoordinator::create({.port = redis_port() + 9});
  const AnyStrategy gcra = *make_strategy(Gcra::Options{2, 1000});
  absl::Status s = redis->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

TEST(RedisCoordinator, AuthAndDatabaseSelection) {
  testing::PrivateRedis server(redis_port() + 7);
  ASSERT_TRUE(server.start());
  ASSERT_EQ(redis_cli("CONFIG SET requirepass s3cret", server.port()), 0);
  const AnyStrategy gcra = *make_strategy(Gcra::Options{2, 1000});
  auto anonymous = *RedisCoordinator::create({.port = server.port()});
  absl::Status s = anonymous->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("NOAUTH"), absl::string_view::npos) << s;
  auto wrong =
      *RedisCoordinator::create({.port = server.port(), .password = "nope"});
  EXPECT_TRUE(absl::IsUnavailable(wrong->check(gcra, "k", 0).status()));
  auto good = *RedisCoordinator::create(
      {.port = server.port(), .password = "s3cret", .database = 3});
  absl::StatusOr<Decision> d = good->check(gcra, "in-db-3", 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(
      std::system(("test \"$(redis-cli -p " + std::to_string(server.port()) +
                   " -a s3cret --no-auth-warning -n 3 EXISTS in-db-3)\""
                   " = 1")
                      .c_str()),
      0);
}

}  // namespace
}  // namespace redis_coordinator_test
}  // namespace throttlekit
