// Faults against a private redis-server: killed mid-run and restarted,
// frozen with SIGSTOP. Calls return the right status within their deadline,
// the fail policy decides, and service resumes with the same client.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "support/call_outcomes.h"
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

// Starts `server` and connects a client that has had one answer from it
// (a check of `s`); null when either fails.
std::shared_ptr<RedisCoordinator> answered_client(testing::PrivateRedis& server,
                                                  const AnyStrategy& s) {
  if (!server.start()) return nullptr;
  std::shared_ptr<RedisCoordinator> redis = connect(server.port());
  if (!redis->check(s, "k", 0).ok()) return nullptr;
  return redis;
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
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  auto redis = answered_client(server, gcra);
  ASSERT_NE(redis, nullptr);

  // Four threads check continuously while a fifth kills the server.
  constexpr int kCallers = 4;
  std::atomic<bool> stop{false};
  testing::CallOutcomes calls;
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
      calls.count(s);
    }
  });
  EXPECT_GT(calls.ok.load(), 0);
  EXPECT_GT(calls.outage.load(), 0);
  EXPECT_EQ(calls.other.load(), 0);
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

// Connections open off every call's path: every connection is open and set
// up (scripts loaded) before any call (wait_ready), a call never connects,
// and after a restart the connector reconnects without a call waiting on
// it: calls are kUnavailable at once while the server is down, then
// served.
TEST(RedisFaults, ConnectionsOpenBeforeCallsAndAgainAfterARestart) {
  testing::PrivateRedis server(testing::redis_port() + 21);
  ASSERT_TRUE(server.start());
  auto redis = std::shared_ptr<RedisCoordinator>(
      *RedisCoordinator::create({.port = server.port(),
                                 .connections = 2,
                                 .connect_timeout = absl::Milliseconds(300),
                                 .command_timeout = kTimeout}));
  ASSERT_TRUE(redis->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(redis->stats().connects, 2);
  EXPECT_EQ(redis->stats().requests, 0);  // no call made it ready
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(redis->check(gcra, "k", 0).ok());
  EXPECT_EQ(redis->stats().connects, 2);  // the calls found them open

  server.kill();
  // The connections break under the first calls; then the connector's
  // refused attempts answer every call at once.
  for (int i = 0; i < 4; ++i) {
    const absl::Time begin = absl::Now();
    EXPECT_FALSE(redis->check(gcra, "k", 0).ok());
    EXPECT_LE(absl::Now() - begin, kTimeout + kMargin);
  }
  const absl::Time begin = absl::Now();
  const absl::Status refused = redis->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_LE(absl::Now() - begin, kMargin);
  const absl::Status not_ready = redis->wait_ready(absl::Now());
  EXPECT_TRUE(absl::IsUnavailable(not_ready)) << not_ready;

  const int64_t before = redis->stats().connects;
  ASSERT_TRUE(server.start());
  // Ready again with no call made: the connector reconnected by itself.
  ASSERT_TRUE(redis->wait_ready(absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(redis->stats().connects, before + 2);
  ASSERT_TRUE(redis->check(gcra, "k", 0).ok());
  EXPECT_EQ(redis->stats().connects, before + 2);
}

// Nothing listening: not ready, naming why, and calls answered at once.
TEST(RedisFaults, NothingListeningIsNotReadyAndAnsweredAtOnce) {
  auto redis = connect(1);  // nothing listens on port 1
  const absl::Status s = redis->wait_ready(absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("cannot connect to 127.0.0.1:1"),
            std::string::npos)
      << s;
  const AnyStrategy gcra = *make_strategy(Gcra::Options{10, 1000});
  const absl::Time begin = absl::Now();
  const absl::Status call = redis->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(call)) << call;
  EXPECT_LE(absl::Now() - begin, kMargin);
}

TEST(RedisFaults, FrozenServerHitsTheDeadline) {
  testing::PrivateRedis server(testing::redis_port() + 12);
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  auto redis = answered_client(server, gcra);
  ASSERT_NE(redis, nullptr);
  server.freeze();
  // The call on the open connection waits its deadline; the connection is
  // dropped, and calls wait for the connector's attempt (their deadline
  // at most) until it fails for want of an answer within the connect
  // timeout; from then on they fail at once.
  for (int i = 0; i < 6; ++i) {
    const absl::Time begin = absl::Now();
    absl::Status s = redis->check(gcra, "k", 0).status();
    const absl::Duration took = absl::Now() - begin;
    if (i == 0) {
      EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
      EXPECT_GE(took, kTimeout - absl::Milliseconds(5));
    } else {
      EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) << s;
    }
    EXPECT_LE(took, kTimeout + kMargin);
  }
  const absl::Status known = redis->check(gcra, "k", 0).status();
  EXPECT_TRUE(absl::IsUnavailable(known)) << known;
  EXPECT_NE(known.message().find("no answer within the connect timeout"),
            std::string::npos)
      << known;
  auto closed = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kClosed});
  absl::StatusOr<Decision> d = closed->check("u");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(closed->outages(), 1);
  server.thaw();
  EXPECT_TRUE(recovers(*redis, gcra));
  EXPECT_GE(redis->stats().timeouts, 1);
}

}  // namespace
}  // namespace redis_fault_test
}  // namespace throttlekit
