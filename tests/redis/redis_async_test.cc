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
#include "support/async_load.h"
#include "support/eager_task.h"
#include "support/redis_test_server.h"
#include "support/run_id.h"
#include "support/run_threads.h"
#include "throttlekit/asio/async_check.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/federation/redis_region_pool.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"
#include "throttlekit/twotier/cached_deny_limiter.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit {
namespace redis_async_test {
namespace {

static_assert(AsyncRateEngine<StrictRateLimiter<Gcra>>);

using testing::run_id;

TEST(RedisAsync, SameDecisionsAsTheBlockingPathForEveryStrategy) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  testing::expect_async_equals_blocking(
      *redis, testing::async_conformance_strategies(), 60,
      absl::StrCat("async-conf:", run_id()));
}

TEST(RedisAsync, LeasesGiveBacksAndBeatsEqualTheBlockingVerbs) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  testing::expect_async_verbs_equal_blocking(
      *redis, absl::StrCat("async-verbs:", run_id()), /*heartbeat=*/true);
}

TEST(RedisAsync, FederationVerbsEqualTheBlockingVerbs) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  testing::expect_async_federation_verbs_equal_blocking(
      *redis, absl::StrCat("async-fed:", run_id()), /*escrow=*/true);
}

TEST(RedisAsync, CheckManyIsPipelinedInOrderAtOneNow) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  testing::expect_check_many_pipelined(
      redis, absl::StrCat("async-many-keys:", run_id()));
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
  const int64_t now = 1'700'000'000'000;  // one window for every check
  const testing::WindowResult r =
      testing::run_in_window(20'000, 1024, [&](auto on_done) {
        limiter->check_at_async("k", now, 1, std::move(on_done));
      });
  testing::expect_each_once_admitting(r, 5000);
  // Pipelined: far fewer batches than requests.
  const BackendStats stats = redis->stats();
  EXPECT_LT(stats.batches, stats.requests / 4) << stats.batches;
}

// A stream of asynchronous checks from two threads, up to 256 in flight
// each, while the server is frozen, thawed, killed and restarted.
TEST(RedisAsync, EveryCallCompletesOnceWithinItsDeadlineThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 14);
  ASSERT_TRUE(server.start());
  std::shared_ptr<RedisCoordinator> redis = testing::fault_coordinator(server);
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});
  // Phase 0: up; 1: frozen; 2: thawed; 3: killed; 4: restarted.
  testing::FaultStream stream;
  stream.run_through_freeze_then_kill(
      server, 2, 256,
      testing::kFaultCommandTimeout + testing::kFaultConnectTimeout +
          testing::kFaultMargin,
      [&](auto on_done) {
        redis->check_async(gcra, "k", 0, 1, std::move(on_done));
      });
}

// A stream of asynchronous admissions of `escrow` (tenants "a" and "b")
// from two threads, up to 256 in flight each, while `server` is frozen,
// thawed, killed and restarted: every call completes once, within a
// round trip's deadline (plus a connect) and the margin, calls queued
// behind a round trip that fails failing with it at once.
template <class Escrow>
void expect_escrow_admissions_through_faults(Escrow& escrow,
                                             testing::PrivateRedis& server) {
  std::atomic<int> next{0};
  testing::FaultStream stream;
  stream.run_through_freeze_then_kill(
      server, 2, 256,
      testing::kFaultCommandTimeout + testing::kFaultConnectTimeout +
          testing::kFaultMargin,
      [&](auto on_done) {
        escrow.admit_async(next.fetch_add(1) % 3 ? "b" : "a", 1,
                           std::move(on_done));
      });
}

// Both escrows' configuration beside `o`'s store: 10^9 an hour on key
// "fair" for tenants "a" and "b" (weight 2), quantum 4.
template <class Options>
Options two_tenants(Options o) {
  o.limit = 1'000'000'000;
  o.window_ms = 3'600'000;
  o.tenants = {{.name = "a"}, {.name = "b", .weight = 2}};
  o.key = "fair";
  o.quantum = 4;
  return o;
}

// The weighted-fair escrow over Redis (leases through `lease_async`).
TEST(RedisAsync,
     FairEscrowAdmissionsCompleteOnceWithinTheDeadlineThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 19);
  ASSERT_TRUE(server.start());
  auto escrow =
      *WeightedFairEscrow::create(two_tenants(WeightedFairEscrowOptions{
          .coordinator = testing::fault_coordinator(server)}));
  expect_escrow_admissions_through_faults(*escrow, server);
  EXPECT_GT(escrow->stats().leases, 100);
}

// The federated fair escrow over the Redis region pool (`grant_async` on
// the coordinator's pipelined path).
TEST(RedisAsync,
     FederatedFairEscrowAdmissionsCompleteOnceWithinTheDeadlineThroughFaults) {
  testing::PrivateRedis server(testing::redis_port() + 20);
  ASSERT_TRUE(server.start());
  auto escrow =
      *FederatedFairEscrow::create(two_tenants(FederatedFairEscrowOptions{
          .pool = *RedisRegionPool::create(
              {.coordinator = testing::fault_coordinator(server)}),
          .region = "eu"}));
  expect_escrow_admissions_through_faults(*escrow, server);
  EXPECT_GT(escrow->stats().pool_requests, 100);
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
  testing::DecisionWaiter up;
  closed->check_async("u", up.completion());
  ASSERT_TRUE(up.get().ok());
  server.kill();
  testing::DecisionWaiter c, o, p;
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
  testing::expect_destruction_completes_queued(
      redis, 3000, absl::StrCat("async-drain:", run_id()));
}

TEST(RedisAsync, CachedDenyFloodCostsNoRoundTrips) {
  std::shared_ptr<RedisCoordinator> redis =
      testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
  auto limiter = *CachedDenyLimiter<FixedWindow>::create(
      {.limit = 3, .window_ms = 1'000'000'000'000}, redis,
      {.prefix = absl::StrCat("async-deny:", run_id())});
  const testing::WindowResult first = testing::run_in_window(
      10, 10,
      [&](auto on_done) { limiter->check_async("k", 1, std::move(on_done)); });
  EXPECT_EQ(first.allowed, 3);
  EXPECT_EQ(first.not_once, 0);
  const int64_t requests = redis->stats().requests;
  // Denied and cached: the flood completes inline, with no store request.
  int denied = 0;
  for (int i = 0; i < 1000; ++i) {
    limiter->check_async("k", 1, [&](absl::StatusOr<Decision> d) {
      if (d.ok() && !d->allowed) ++denied;
    });
  }
  EXPECT_EQ(denied, 1000);
  EXPECT_EQ(redis->stats().requests, requests);
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
