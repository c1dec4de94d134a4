#include "throttlekit/twotier/cached_deny_limiter.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <utility>

#include "support/allocation_counter.h"
#include "support/created.h"
#include "support/manual_store.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace cached_deny_limiter_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Clock = testing::ManualClockRef;
using Env = testing::ManualStore;

// A cached-deny limiter over `env`'s store, on its clock.
template <class S>
std::unique_ptr<CachedDenyLimiter<S, Clock>> cached_deny(
    Env& env, const typename S::Options& strategy,
    CachedDenyOptions options = {}) {
  return testing::made(CachedDenyLimiter<S, Clock>::create(
      strategy, env.store, std::move(options), Clock(env.clock)));
}

// Seeded traffic on twin stores: each call steps both clocks by 0..89 ms
// and costs 1..3.
struct Traffic {
  uint64_t x;
  // Advances both twins' clocks by the next step; returns the next cost.
  double next(Env& a, Env& b) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    const auto step = static_cast<int64_t>((x >> 33) % 90);
    a.clock.advance_ms(step);
    b.clock.advance_ms(step);
    return 1 + static_cast<double>((x >> 20) % 3);
  }
};

TEST(CachedDenyLimiter, AFloodOnABlockedKeyCostsNoRoundTrips) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 3, .window_ms = 1000},
                                          {.prefix = "t"});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter->check("k")->allowed);
  absl::StatusOr<Decision> first = limiter->check("k");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->allowed);
  EXPECT_EQ(first->retry_after_ms, 1000);
  for (int i = 0; i < 1000; ++i) {
    s.clock.advance_ms(i % 2);
    absl::StatusOr<Decision> d = limiter->check("k");
    ASSERT_TRUE(d.ok());
    ASSERT_FALSE(d->allowed);
    // The hint counts down on the node's clock.
    ASSERT_EQ(d->retry_after_ms, kEpoch + 1000 - s.clock.now_ms());
  }
  EXPECT_EQ(limiter->stats().store_checks, 4);
  EXPECT_EQ(limiter->stats().cached_denials, 1000);
  // Once the window rolls the store is asked again and admits.
  s.clock.set_ms(kEpoch + 1000);
  EXPECT_TRUE(limiter->check("k")->allowed);
  EXPECT_EQ(limiter->stats().store_checks, 5);
}

TEST(CachedDenyLimiter, DecisionsEqualStrictModeOnEveryCall) {
  // Same traffic through cached-deny and through strict on twin stores:
  // every decision's verdict is the same (cached denials are exact here,
  // one node, no resets), and cached-deny makes fewer round trips.
  Env a, b;
  auto cached = cached_deny<Gcra>(a, {.limit = 5, .period_ms = 1000});
  auto strict = *StrictRateLimiter<Gcra>::create(
      {.limit = 5, .period_ms = 1000}, b.store);
  Traffic traffic{12345};
  for (int i = 0; i < 5000; ++i) {
    const double cost = traffic.next(a, b);
    absl::StatusOr<Decision> dc = cached->check("k", cost);
    absl::StatusOr<Decision> ds = strict->check("k", cost);
    ASSERT_TRUE(dc.ok() && ds.ok());
    ASSERT_EQ(dc->allowed, ds->allowed) << "call " << i;
  }
  EXPECT_GT(cached->stats().cached_denials, 0);
  EXPECT_LT(cached->stats().store_checks, 5000);
}

TEST(CachedDenyLimiter, ASmallerCostStillAsksTheStore) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 10, .window_ms = 1000});
  EXPECT_TRUE(limiter->check("k", 8)->allowed);
  EXPECT_FALSE(limiter->check("k", 5)->allowed);
  EXPECT_FALSE(limiter->check("k", 6)->allowed);  // cached
  EXPECT_TRUE(limiter->check("k", 2)->allowed);   // the store
  EXPECT_EQ(limiter->stats().store_checks, 3);
}

TEST(CachedDenyLimiter, ResetForgetsTheCachedDenial) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 1, .window_ms = 1000});
  EXPECT_TRUE(limiter->check("k")->allowed);
  EXPECT_FALSE(limiter->check("k")->allowed);
  EXPECT_EQ(limiter->cached(), 1u);
  ASSERT_TRUE(limiter->reset("k").ok());
  EXPECT_EQ(limiter->cached(), 0u);
  EXPECT_TRUE(limiter->check("k")->allowed);
}

TEST(CachedDenyLimiter, CheckAtDrivesStoreAndCacheWithOneClock) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 1, .window_ms = 1000});
  const int64_t t = kEpoch + 10'000;
  EXPECT_TRUE(limiter->check_at("k", t)->allowed);
  EXPECT_EQ(limiter->check_at("k", t + 400)->retry_after_ms, 600);
  EXPECT_EQ(limiter->check_at("k", t + 900)->retry_after_ms, 100);
  EXPECT_EQ(limiter->stats().store_checks, 2);
  EXPECT_TRUE(limiter->check_at("k", t + 1000)->allowed);
}

static_assert(AsyncRateEngine<CachedDenyLimiter<Gcra>>);

TEST(CachedDenyLimiter, CheckAsyncDecidesAsCheckDoes) {
  // Twin stores, the same traffic: check_async (over the memory
  // coordinator, whose step completes inline) gives check's decision and
  // the same counters.
  Env a, b;
  auto sync = cached_deny<Gcra>(a, {.limit = 5, .period_ms = 1000});
  auto async = cached_deny<Gcra>(b, {.limit = 5, .period_ms = 1000});
  Traffic traffic{777};
  for (int i = 0; i < 3000; ++i) {
    const double cost = traffic.next(a, b);
    absl::StatusOr<Decision> want = sync->check("k", cost);
    std::optional<absl::StatusOr<Decision>> got;
    async->check_async("k", cost, [&](absl::StatusOr<Decision> d) { got = d; });
    ASSERT_TRUE(got.has_value()) << "completed inline on memory, call " << i;
    ASSERT_TRUE(want.ok() && got->ok());
    ASSERT_EQ(**got, *want) << "call " << i;
  }
  EXPECT_EQ(async->stats().store_checks, sync->stats().store_checks);
  EXPECT_EQ(async->stats().cached_denials, sync->stats().cached_denials);
  EXPECT_GT(async->stats().cached_denials, 0);
}

TEST(CachedDenyLimiter, ACachedDenialCompletesInlineWithoutAllocating) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 1, .window_ms = 1000});
  ASSERT_TRUE(limiter->check("k")->allowed);
  ASSERT_FALSE(limiter->check("k")->allowed);  // now cached
  int denied = 0;
  const long before = testing::allocations();
  for (int i = 0; i < 100; ++i) {
    limiter->check_async("k", [&](absl::StatusOr<Decision> d) {
      if (d.ok() && !d->allowed) ++denied;
    });
  }
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_EQ(denied, 100);
  EXPECT_EQ(limiter->stats().store_checks, 2);
}

TEST(CachedDenyLimiter, BadInputIsAStatus) {
  Env s;
  auto limiter = cached_deny<FixedWindow>(s, {.limit = 1, .window_ms = 1000});
  EXPECT_EQ(limiter->check("").status().code(),
            absl::StatusCode::kInvalidArgument);
  for (double cost : {0.0, -1.0, std::nan("")}) {
    EXPECT_EQ(limiter->check("k", cost).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  auto bad = CachedDenyLimiter<FixedWindow>::create(
      {.limit = 1, .window_ms = 1000}, s.store, {.max_keys = 3});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("max_keys"), std::string::npos);
  auto no_store = CachedDenyLimiter<FixedWindow>::create(
      {.limit = 1, .window_ms = 1000}, nullptr);
  EXPECT_EQ(no_store.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_strategy = CachedDenyLimiter<FixedWindow>::create(
      {.limit = 0, .window_ms = 1000}, s.store);
  EXPECT_NE(bad_strategy.status().message().find("limit"), std::string::npos);
}

}  // namespace
}  // namespace cached_deny_limiter_test
}  // namespace throttlekit
