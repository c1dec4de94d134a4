// The asynchronous path over a real Redis (docs/async.md): the same
// decisions as the blocking path, step for step; thousands of checks in
// flight from one thread, each completed exactly once; every completion
// within its deadline while the server is frozen, killed and restarted;
// the destructor completing what is queued; C++20 coroutines and Asio
// (use_awaitable on one event-loop thread, use_future, a callback bound to
// a strand).

// Asio 1.22 enables `co_await` on clang only with <experimental/coroutine>;
// clang 14 with libstdc++ has the standard <coroutine>, which Asio uses once
// told (docs/async.md, "Asio").
#if defined(__clang__) && !defined(ASIO_HAS_CO_AWAIT)
#define ASIO_HAS_CO_AWAIT 1
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "asio/bind_executor.hpp"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/strand.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "support/eager_task.h"
#include "support/redis_test_server.h"
#include "support/run_threads.h"
#include "throttlekit/asio/async_check.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {
namespace redis_async_test {
namespace {

static_assert(AsyncRateEngine<StrictRateLimiter<Gcra>>);

std::string run_id() { return absl::StrCat(absl::ToUnixNanos(absl::Now())); }

// A future's answer, for tests that wait for one completion.
struct Waiter {
  std::promise<absl::StatusOr<Decision>> promise;
  DecisionCompletion completion() {
    return [this](absl::StatusOr<Decision> d) { promise.set_value(d); };
  }
  absl::StatusOr<Decision> get() { return promise.get_future().get(); }
};

TEST(RedisAsync, SameDecisionsAsTheBlockingPathForEveryStrategy) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  const std::string id = run_id();
  const std::vector<AnyStrategy> strategies = {
      *make_strategy(Gcra::Options{3, 1000, 0}),
      *make_strategy(TokenBucket::Options{3, 0.5}),
      *make_strategy(FixedWindow::Options{5, 1000}),
      *make_strategy(SlidingWindow::Options{10, 1000, 4}),
      *make_strategy(SlidingLog::Options{3, 700}),
      *make_strategy(Quota::Options{5, QuotaPeriod::kDay, 1, 0}),
      *make_strategy(TokenBudget::Options{5, 1000}),
  };
  constexpr int kSteps = 60;
  for (size_t s = 0; s < strategies.size(); ++s) {
    // One timeline: times that cross windows, costs 1..3.
    std::vector<int64_t> at(kSteps);
    std::vector<double> cost(kSteps);
    int64_t now = 1'700'000'000'000;
    for (int i = 0; i < kSteps; ++i) {
      now += (i * 37) % 211;
      at[i] = now;
      cost[i] = 1 + (i * 7) % 3;
    }
    const std::string blocking_key = absl::StrCat("async-conf:b:", id, s);
    const std::string async_key = absl::StrCat("async-conf:a:", id, s);
    // Every asynchronous step goes out at once: the connection keeps their
    // order, so they see the same states the blocking steps do.
    std::vector<Waiter> waiters(kSteps);
    for (int i = 0; i < kSteps; ++i) {
      redis->check_async(strategies[s], async_key, at[i], cost[i],
                         waiters[i].completion());
    }
    for (int i = 0; i < kSteps; ++i) {
      absl::StatusOr<Decision> blocking =
          redis->check(strategies[s], blocking_key, at[i], cost[i]);
      absl::StatusOr<Decision> async = waiters[i].get();
      ASSERT_TRUE(blocking.ok()) << blocking.status();
      ASSERT_TRUE(async.ok()) << async.status();
      EXPECT_EQ(*async, *blocking) << "strategy " << s << " step " << i;
    }
  }
}

TEST(RedisAsync, InvalidArgumentsCompleteInline) {
  std::shared_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const AnyStrategy gcra = *make_strategy(Gcra::Options{3, 1000});
  std::optional<absl::StatusOr<Decision>> got;
  redis->check_async(gcra, "", 0, 1,
                     [&](absl::StatusOr<Decision> d) { got = d; });
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(got->status())) << got->status();
  got.reset();
  redis->check_async(gcra, "k", 0, -1,
                     [&](absl::StatusOr<Decision> d) { got = d; });
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(got->status())) << got->status();
  EXPECT_EQ(redis->stats().requests, 0);
}

// One thread keeps up to `window` checks in flight, `total` in all, each
// completion counted in its own slot.
TEST(RedisAsync, ThousandsInFlightFromOneThreadEachCompletedOnce) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(10)});
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 5000, .window_ms = 60'000}, redis,
      {.prefix = absl::StrCat("async-many:", run_id())});
  constexpr int kTotal = 20'000;
  constexpr int kWindow = 1024;
  const int64_t now = 1'700'000'000'000;  // one window for every check
  std::vector<std::atomic<int>> completed(kTotal);
  std::atomic<int> in_flight{0}, allowed{0}, failed{0};
  for (int i = 0; i < kTotal; ++i) {
    while (in_flight.load() >= kWindow) std::this_thread::yield();
    in_flight.fetch_add(1);
    limiter->check_at_async("k", now, 1, [&, i](absl::StatusOr<Decision> d) {
      completed[i].fetch_add(1);
      if (!d.ok()) {
        failed.fetch_add(1);
      } else if (d->allowed) {
        allowed.fetch_add(1);
      }
      in_flight.fetch_sub(1);
    });
  }
  while (in_flight.load() > 0) std::this_thread::yield();
  for (int i = 0; i < kTotal; ++i) ASSERT_EQ(completed[i].load(), 1) << i;
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(allowed.load(), 5000);
  // Pipelined: far fewer batches than requests.
  const BackendStats stats = redis->stats();
  EXPECT_LT(stats.batches, stats.requests / 4) << stats.batches;
}

// A stream of asynchronous checks from two threads, up to 256 in flight
// each, while the server is frozen, thawed, killed and restarted.
TEST(RedisAsync, EveryCallCompletesOnceWithinItsDeadlineThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 14);
  ASSERT_TRUE(server.start());
  constexpr absl::Duration kCommand = absl::Milliseconds(100);
  constexpr absl::Duration kConnect = absl::Milliseconds(200);
  // Scheduling slack on a loaded 2-core machine (and ThreadSanitizer); a
  // hang would be seconds.
  constexpr absl::Duration kMargin = absl::Milliseconds(400);
  std::shared_ptr<RedisCoordinator> redis =
      *RedisCoordinator::create({.port = server.port(),
                                 .connect_timeout = kConnect,
                                 .command_timeout = kCommand});
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});

  constexpr int kSlots = 1 << 21;
  std::vector<std::atomic<int>> completed(kSlots);
  std::vector<int64_t> began_ns(kSlots);
  std::atomic<int> next{0};
  std::atomic<int64_t> slowest_ns{0};
  // Phase 0: up; 1: frozen; 2: thawed; 3: killed; 4: restarted.
  std::atomic<int> phase{0};
  std::array<std::atomic<int>, 5> ok{}, late{}, down{};
  std::atomic<int> other{0};
  std::atomic<bool> stop{false};
  std::atomic<int> in_flight{0};
  constexpr int kSubmitters = 2;
  testing::run_threads(kSubmitters + 1, [&](int t) {
    if (t == kSubmitters) {
      const auto wait_ok = [&](int p) {
        for (int i = 0; i < 500 && ok[p].load() == 0; ++i) {
          absl::SleepFor(absl::Milliseconds(20));
        }
      };
      wait_ok(0);
      absl::SleepFor(absl::Milliseconds(200));
      server.freeze();
      phase.store(1);
      absl::SleepFor(absl::Milliseconds(400));
      server.thaw();
      phase.store(2);
      wait_ok(2);
      absl::SleepFor(absl::Milliseconds(200));
      server.kill();
      phase.store(3);
      absl::SleepFor(absl::Milliseconds(400));
      EXPECT_TRUE(server.start());
      phase.store(4);
      wait_ok(4);
      absl::SleepFor(absl::Milliseconds(200));
      stop.store(true);
      return;
    }
    while (!stop.load()) {
      if (in_flight.load() >= 256 * kSubmitters) {
        std::this_thread::yield();
        continue;
      }
      const int slot = next.fetch_add(1);
      if (slot >= kSlots) break;
      // At most ~32 k submissions per second per thread: the slots last.
      if (slot % 32 == 0) absl::SleepFor(absl::Milliseconds(1));
      in_flight.fetch_add(1);
      const int p = phase.load();
      began_ns[slot] = absl::GetCurrentTimeNanos();
      redis->check_async(
          gcra, "k", 0, 1, [&, slot, p](absl::StatusOr<Decision> d) {
            const int64_t ns = absl::GetCurrentTimeNanos() - began_ns[slot];
            int64_t prev = slowest_ns.load();
            while (ns > prev && !slowest_ns.compare_exchange_weak(prev, ns)) {
            }
            completed[slot].fetch_add(1);
            if (d.ok()) {
              ok[p].fetch_add(1);
            } else if (absl::IsDeadlineExceeded(d.status())) {
              late[p].fetch_add(1);
            } else if (absl::IsUnavailable(d.status())) {
              down[p].fetch_add(1);
            } else {
              other.fetch_add(1);
            }
            in_flight.fetch_sub(1);
          });
    }
  });
  // Everything submitted completes (the last within its deadline).
  for (int i = 0; i < 200 && in_flight.load() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(in_flight.load(), 0);
  const int submitted = std::min(next.load(), kSlots);
  ASSERT_LT(next.load(), kSlots) << "the test ran out of slots";
  for (int i = 0; i < submitted; ++i) ASSERT_EQ(completed[i].load(), 1) << i;
  EXPECT_LE(slowest_ns.load(),
            absl::ToInt64Nanoseconds(kCommand + kConnect + kMargin));
  EXPECT_GT(ok[0].load(), 0);
  EXPECT_GT(late[1].load(), 0) << "the frozen server timed calls out";
  EXPECT_GT(ok[2].load(), 0) << "service resumed after the thaw";
  EXPECT_GT(down[3].load() + late[3].load(), 0) << "the kill was seen";
  EXPECT_GT(ok[4].load(), 0) << "service resumed after the restart";
  EXPECT_EQ(other.load(), 0);
}

TEST(RedisAsync, FailPolicyDecidesAnOutageAsynchronously) {
  testing::PrivateRedis server(testing::redis_port() + 15);
  ASSERT_TRUE(server.start());
  std::shared_ptr<RedisCoordinator> redis =
      *RedisCoordinator::create({.port = server.port(),
                                 .connect_timeout = absl::Milliseconds(200),
                                 .command_timeout = absl::Milliseconds(100)});
  auto closed = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kClosed});
  auto open = *StrictRateLimiter<Gcra>::create(
      {10, 1000}, redis, {.fail_policy = FailPolicy::kOpen});
  auto propagate = *StrictRateLimiter<Gcra>::create({10, 1000}, redis);
  Waiter up;
  closed->check_async("u", up.completion());
  ASSERT_TRUE(up.get().ok());
  server.kill();
  Waiter c, o, p;
  closed->check_async("u", c.completion());
  open->check_async("u", o.completion());
  propagate->check_async("u", p.completion());
  absl::StatusOr<Decision> cd = c.get(), od = o.get(), pd = p.get();
  ASSERT_TRUE(cd.ok()) << cd.status();
  EXPECT_FALSE(cd->allowed);
  ASSERT_TRUE(od.ok()) << od.status();
  EXPECT_TRUE(od->allowed);
  EXPECT_TRUE(absl::IsUnavailable(pd.status()) ||
              absl::IsDeadlineExceeded(pd.status()))
      << pd.status();
  EXPECT_EQ(closed->outages(), 1);
  EXPECT_EQ(open->outages(), 1);
}

TEST(RedisAsync, DestroyingTheCoordinatorCompletesWhatIsQueued) {
  std::shared_ptr<RedisCoordinator> redis = testing::redis_coordinator(
      {.connections = 2, .command_timeout = absl::Seconds(5)});
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});
  const std::string key = absl::StrCat("async-drain:", run_id());
  constexpr int kCalls = 3000;
  std::atomic<int> completed{0}, ok{0};
  for (int i = 0; i < kCalls; ++i) {
    redis->check_async(gcra, key, 0, 1, [&](absl::StatusOr<Decision> d) {
      if (d.ok()) ok.fetch_add(1);
      completed.fetch_add(1);
    });
  }
  redis.reset();  // the last reference: the destructor drains
  EXPECT_EQ(completed.load(), kCalls);
  EXPECT_EQ(ok.load(), kCalls);
}

using Task = testing::EagerTask;

Task admit(StrictRateLimiter<FixedWindow>& limiter, std::atomic<int>& allowed,
           std::atomic<int>& done) {
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Decision> d = co_await limiter.async_check("user");
    if (d.ok() && d->allowed) allowed.fetch_add(1);
  }
  done.fetch_add(1);
}

TEST(RedisAsync, CoroutinesAwaitStrictChecks) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  // One window of ~31 years: no boundary is crossed during the test.
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 700, .window_ms = 1'000'000'000'000}, redis,
      {.prefix = absl::StrCat("async-co:", run_id())});
  constexpr int kCoroutines = 100;
  std::atomic<int> allowed{0}, done{0};
  for (int i = 0; i < kCoroutines; ++i) admit(*limiter, allowed, done);
  for (int i = 0; i < 1000 && done.load() < kCoroutines; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(done.load(), kCoroutines);
  EXPECT_EQ(allowed.load(), 700);
}

asio::awaitable<void> asio_admit(StrictRateLimiter<FixedWindow>& limiter,
                                 std::thread::id loop,
                                 std::atomic<int>& allowed,
                                 std::atomic<int>& elsewhere) {
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Decision> d =
        co_await async_check(limiter, "user", 1, asio::use_awaitable);
    if (std::this_thread::get_id() != loop) elsewhere.fetch_add(1);
    if (d.ok() && d->allowed) allowed.fetch_add(1);
  }
}

TEST(RedisAsio, OneEventLoopThreadServesManyCoroutines) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 1500, .window_ms = 1'000'000'000'000}, redis,
      {.prefix = absl::StrCat("async-asio:", run_id())});
  asio::io_context io(1);
  std::atomic<int> allowed{0}, elsewhere{0};
  for (int i = 0; i < 256; ++i) {
    asio::co_spawn(
        io,
        asio_admit(*limiter, std::this_thread::get_id(), allowed, elsewhere),
        asio::detached);
  }
  io.run();  // returns when every coroutine is done
  EXPECT_EQ(allowed.load(), 1500);
  EXPECT_EQ(elsewhere.load(), 0) << "resumed off the event loop";
  EXPECT_GT(
      redis->stats().requests / std::max<int64_t>(1, redis->stats().batches), 1)
      << "256 coroutines on one thread pipeline their checks";
}

TEST(RedisAsio, FutureAndStrandCallback) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 2, .window_ms = 1'000'000'000'000}, redis,
      {.prefix = absl::StrCat("async-asio2:", run_id())});
  asio::io_context io(1);
  auto guard = asio::make_work_guard(io);
  std::thread loop([&] { io.run(); });
  std::future<absl::StatusOr<Decision>> f =
      async_check(*limiter, "u", 1, asio::use_future);
  absl::StatusOr<Decision> first = f.get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->allowed);

  auto strand = asio::make_strand(io);
  std::promise<std::pair<bool, bool>> seen;  // (allowed, on the strand)
  async_check(
      *limiter, "u", 1,
      asio::bind_executor(strand, [&](absl::StatusOr<Decision> d) {
        seen.set_value({d.ok() && d->allowed, strand.running_in_this_thread()});
      }));
  const std::pair<bool, bool> second = seen.get_future().get();
  EXPECT_TRUE(second.first);
  EXPECT_TRUE(second.second);

  // A memory-speed answer is still posted, never run inside async_check.
  auto bad = async_check(*limiter, "", 1, asio::use_future);
  absl::StatusOr<Decision> invalid = bad.get();
  EXPECT_TRUE(absl::IsInvalidArgument(invalid.status()));
  guard.reset();
  loop.join();
}

}  // namespace
}  // namespace redis_async_test
}  // namespace throttlekit
