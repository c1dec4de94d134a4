// Many threads on shared connections (leader/follower hand-over, pipelined
// batches, callers abandoning at their deadline), run under
// ThreadSanitizer in CI.

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "support/call_outcomes.h"
#include "support/redis_test_server.h"
#include "support/run_id.h"
#include "support/run_threads.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_concurrency_test {
namespace {

using testing::run_id;

TEST(RedisConcurrency, ThreadsOnSharedConnectionsAdmitExactlyTheLimit) {
  auto redis = testing::redis_coordinator({.connections = 2});
  const AnyStrategy fixed =
      *make_strategy(FixedWindow::Options{1000, 3'600'000});
  const std::string key = "conc:" + run_id();
  std::atomic<int> errors{0};
  const long admitted = testing::run_threads(8, [&](int) {
    long n = 0;
    for (int i = 0; i < 200; ++i) {
      absl::StatusOr<Decision> d = redis->check(fixed, key, 0);
      if (!d.ok()) {
        errors.fetch_add(1);
      } else if (d->allowed) {
        ++n;
      }
    }
    return n;
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted, 1000);
  EXPECT_GE(redis->stats().requests, 1600);
}

TEST(RedisConcurrency, CallersGiveUpAtTheirDeadlineWhileOthersWait) {
  testing::PrivateRedis server(testing::redis_port() + 13);
  ASSERT_TRUE(server.start());
  auto redis =
      *RedisCoordinator::create({.port = server.port(),
                                 .connections = 1,
                                 .connect_timeout = absl::Milliseconds(100),
                                 .command_timeout = absl::Milliseconds(60)});
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1000000, 1000});
  std::atomic<bool> stop{false};
  testing::CallOutcomes calls;
  int ok_before_end = 0;
  // Six callers, and one more thread that freezes and thaws the server
  // while they run.
  constexpr int kCallers = 6;
  testing::run_threads(kCallers + 1, [&](int t) {
    if (t == kCallers) {
      absl::SleepFor(absl::Milliseconds(150));
      server.freeze();
      absl::SleepFor(absl::Milliseconds(300));
      server.thaw();
      absl::SleepFor(absl::Milliseconds(300));
      ok_before_end = calls.ok.load();
      absl::SleepFor(absl::Milliseconds(150));
      stop.store(true);
      return;
    }
    while (!stop.load()) calls.count(redis->check(gcra, "k", 0).status());
  });
  EXPECT_GT(calls.outage.load(), 0);
  EXPECT_EQ(calls.other.load(), 0);
  EXPECT_GT(calls.ok.load(), ok_before_end);  // served again after the thaw
}

}  // namespace
}  // namespace redis_concurrency_test
}  // namespace throttlekit
