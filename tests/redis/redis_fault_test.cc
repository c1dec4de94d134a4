// Faults against a private redis-server: killed mid-run and restarted,
// frozen with SIGSTOP. Calls return the right status within their deadline,
// the fail policy decides, and service resumes with the same client.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "support/redis_test_server.h"
#include "support/run_threads.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_fault_test {
namespace {

constexpr absl::Duration kTimeout = absl::Milliseconds(200);
// Scheduling slack on a loaded 2-core machine; a hang would be seconds.
constexpr absl::Duration kMargin = absl::Milliseconds(400);

std::shared_ptr<RedisCoordinator> connect(int port) {
  return std::shared_ptr<RedisCoordinator>(
      *RedisCoordinator::create({.port = port,
                                 .connect_timeout = absl::Milliseconds(300),
                                 .command_timeout = kTimeout}));
}

// Polls until a check succeeds (the server is back), for up to 10 s.
bool recovers(Coordinator& redis, const AnyStrategy& s) {
  for (int i = 0; i < 200; ++i) {
    if (redis.check(s, "recover", 0).ok()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST(RedisFaults, KilledMidRunThenRestarted) {
  testing::PrivateRedis server(testing::redis_port() + 11);
  ASSERT_TRUE(server.start());
  auto redis = connect(server.port());
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  ASSERT_TRUE(redis->check(gcra, "k", 0).ok());

  // Four threads check continuously while a fifth kills the server.
  constexpr int kCallers = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, outage{0}, other{0};
  std::atomic<int64_t> slowest_ns{0};
  testing::run_threads(kCallers + 1, [&](int t) {
    if (t == kCallers) {
      absl::SleepFor(absl::Milliseconds(200));
      server.kill();
      absl::SleepFor(absl::Milliseconds(500));
      stop.store(true);
      return;
    }
    while (!stop.load()) {
      const absl::Time begin = absl::Now();
      absl::Status s = redis->check(gcra, "k", 0).status();
      const int64_t ns = absl::ToInt64Nanoseconds(absl::Now() - begin);
      int64_t prev = slowest_ns.load();
      while (ns > prev && !slowest_ns.compare_exchange_weak(prev, ns)) {
      }
      if (s.ok()) {
        ok.fetch_add(1);
      } else if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
        outage.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    }
  });
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(outage.load(), 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_LE(slowest_ns.load(), absl::ToInt64Nanoseconds(kTimeout + kMargin));

  // While down: a prompt kUnavailable, and the fail policy decides.
  const absl::Time begin = absl::Now();
  absl::Status down = redis->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
  EXPECT_LE(absl::Now() - begin, kTimeout + kMargin);
  auto closed = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kClosed});
  auto open = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kOpen});
  EXPECT_FALSE(closed->check("u")->allowed);
  EXPECT_TRUE(open->check("u")->allowed);

  // Restarted: the same coordinator serves again.
  ASSERT_TRUE(server.start());
  EXPECT_TRUE(recovers(*redis, gcra));
  EXPECT_TRUE(closed->check("u")->allowed);
}

TEST(RedisFaults, FrozenServerHitsTheDeadline) {
  testing::PrivateRedis server(testing::redis_port() + 12);
  ASSERT_TRUE(server.start());
  auto redis = connect(server.port());
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  ASSERT_TRUE(redis->check(gcra, "k", 0).ok());
  server.freeze();
  for (int i = 0; i < 3; ++i) {
    const absl::Time begin = absl::Now();
    absl::Status s = redis->check(gcra, "k", 0).status();
    const absl::Duration took = absl::Now() - begin;
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    EXPECT_GE(took, kTimeout - absl::Milliseconds(5));
    EXPECT_LE(took, kTimeout + kMargin);
  }
  auto closed = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kClosed});
  absl::StatusOr<Decision> d = closed->check("u");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(closed->outages(), 1);
  server.thaw();
  EXPECT_TRUE(recovers(*redis, gcra));
  EXPECT_GE(redis->stats().timeouts, 3);
}

}  // namespace
}  // namespace redis_fault_test
}  // namespace throttlekit
