// LeasedLimiter without waiting over a real Redis (docs/async.md,
// docs/twotier.md): thousands of checks in flight from one thread, each
// completed once, exactly the limit admitted at about one lease per batch;
// a fleet on the real clock, more threads than cores, asynchronous and
// blocking checks mixed, admitting at most the limit in every 50 ms window
// (counted per store window); and every completion exactly once within its
// bound while the server is frozen, killed and restarted.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/async_load.h"
#include "support/redis_test_server.h"
#include "support/run_id.h"
#include "support/run_threads.h"
#include "support/test_work.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace leased_async_redis_test {
namespace {

using testing::run_id;

TEST(LeasedAsyncRedis, ThousandsInFlightAdmitExactlyTheLimit) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(10)});
  // One window of ~31 years: no boundary is crossed during the test.
  auto limiter =
      *LeasedLimiter::create({.prefix = absl::StrCat("la:", run_id()),
                              .limit = 5000,
                              .window_ms = 1'000'000'000'000,
                              .batch = 50},
                             redis);
  const testing::WindowResult r = testing::run_in_window(
      20'000, 1024,
      [&](auto on_done) { limiter->check_async("k", 1, std::move(on_done)); });
  testing::expect_each_once_admitting(r, 5000);
  EXPECT_LE(limiter->stats().leases, 5000 / 50 + 2) << "one lease per batch";
}

// Three nodes (each its own coordinator), six threads on two cores, 50 ms
// windows crossed dozens of times; each thread keeps up to 16 asynchronous
// checks in flight and makes every fourth check blocking. Every admission
// is counted in the store window whose credit it spent (`reset_at_ms` is
// that window's end): at most the limit in each, and the limit reached.
TEST(LeasedAsyncRedis, AFleetAdmitsAtMostTheLimitInEveryWindowOnTheRealClock) {
  constexpr int64_t kLimit = 100;
  constexpr int64_t kWindowMs = 50;
  const std::string prefix = absl::StrCat("lw:", run_id());
  std::vector<std::shared_ptr<RedisCoordinator>> stores;
  std::vector<std::unique_ptr<LeasedLimiter>> nodes;
  for (int i = 0; i < 3; ++i) {
    stores.push_back(
        testing::redis_coordinator({.command_timeout = absl::Seconds(5)}));
    nodes.push_back(*LeasedLimiter::create(
        {.prefix = prefix, .limit = kLimit, .window_ms = kWindowMs, .batch = 8},
        stores.back()));
  }
  const absl::Time until =
      absl::Now() + absl::Milliseconds(testing::scaled_work(3000, 800));
  std::mutex mu;
  std::map<int64_t, int64_t> per_window;
  std::atomic<int64_t> submitted{0}, completed{0}, failed{0};
  testing::run_threads(6, [&](int t) {
    std::mutex mine_mu;
    std::map<int64_t, int64_t> mine;
    std::atomic<int> in_flight{0};
    LeasedLimiter& node = *nodes[t % nodes.size()];
    const auto record = [&](absl::StatusOr<Decision> d) {
      if (!d.ok()) {
        failed.fetch_add(1);
      } else if (d->allowed) {
        std::lock_guard<std::mutex> lock(mine_mu);
        ++mine[d->reset_at_ms];
      }
      completed.fetch_add(1);
    };
    for (int64_t n = 0; absl::Now() < until; ++n) {
      submitted.fetch_add(1);
      if (n % 4 == 3) {
        record(node.check("k"));
        continue;
      }
      while (in_flight.load() >= 16) std::this_thread::yield();
      in_flight.fetch_add(1);
      node.check_async("k", 1, [&](absl::StatusOr<Decision> d) {
        record(std::move(d));
        in_flight.fetch_sub(1);
      });
    }
    while (in_flight.load() > 0) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mine_mu);
    std::lock_guard<std::mutex> merge(mu);
    for (auto& [w, c] : mine) per_window[w] += c;
  });
  EXPECT_EQ(completed.load(), submitted.load());
  EXPECT_EQ(failed.load(), 0);
  int64_t worst = 0;
  for (auto& [end, c] : per_window) {
    EXPECT_LE(c, kLimit) << "window ending " << end;
    worst = std::max(worst, c);
  }
  EXPECT_GE(per_window.size(), 10u) << "windows crossed";
  EXPECT_EQ(worst, kLimit) << "some window was filled";
}

// Checks on 16 keys (batches of 4, so misses are frequent) from two
// threads, up to 128 in flight each, while the server is frozen, thawed,
// killed and restarted: each completes exactly once, within two lease
// deadlines (a waiter may wait for the lease in flight, then its own).
TEST(LeasedAsyncRedis, EveryCallCompletesOnceWithinItsBoundThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 16);
  ASSERT_TRUE(server.start());
  std::shared_ptr<RedisCoordinator> redis = testing::fault_coordinator(server);
  auto limiter = *LeasedLimiter::create(
      {.limit = 1'000'000, .window_ms = 1000, .batch = 4}, redis);
  std::atomic<int> next_key{0};
  testing::FaultStream stream;
  stream.run_through_freeze_then_kill(
      server, 2, 128,
      2 * (testing::kFaultCommandTimeout + testing::kFaultConnectTimeout) +
          testing::kFaultMargin,
      [&](auto on_done) {
        const std::string key = absl::StrCat("k", next_key.fetch_add(1) % 16);
        limiter->check_async(key, 1, std::move(on_done));
      });
}

}  // namespace
}  // namespace leased_async_redis_test
}  // namespace throttlekit
