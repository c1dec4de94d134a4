#include "throttlekit/twotier/cached_deny_limiter.h"

#include <gtest/gtest.h>

#include <memory>

#include "support/manual_store.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace cached_deny_limiter_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Clock = testing::ManualClockRef;
using Env = testing::ManualStore;

TEST(CachedDenyLimiter, AFloodOnABlockedKeyCostsNoRoundTrips) {
  Env s;
  auto limiter = *CachedDenyLimiter<FixedWindow, Clock>::create(
      {.limit = 3, .window_ms = 1000}, s.store, {.prefix = "t"},
      Clock(s.clock));
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
  auto cached = *CachedDenyLimiter<Gcra, Clock>::create(
      {.limit = 5, .period_ms = 1000}, a.store, {}, Clock(a.clock));
  auto strict = *StrictRateLimiter<Gcra>::create(
      {.limit = 5, .period_ms = 1000}, b.store);
  uint64_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    const int64_t step = static_cast<int64_t>((x >> 33) % 90);
    const double cost = 1 + static_cast<double>((x >> 20) % 3);
    a.clock.advance_ms(step);
    b.clock.advance_ms(step);
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
  auto limiter = *CachedDenyLimiter<FixedWindow, Clock>::create(
      {.limit = 10, .window_ms = 1000}, s.store, {}, Clock(s.clock));
  EXPECT_TRUE(limiter->check("k", 8)->allowed);
  EXPECT_FALSE(limiter->check("k", 5)->allowed);
  EXPECT_FALSE(limiter->check("k", 6)->allowed);  // cached
  EXPECT_TRUE(limiter->check("k", 2)->allowed);   // the store
  EXPECT_EQ(limiter->stats().store_checks, 3);
}

TEST(CachedDenyLimiter, ResetForgetsTheCachedDenial) {
  Env s;
  auto limiter = *CachedDenyLimiter<FixedWindow, Clock>::create(
      {.limit = 1, .window_ms = 1000}, s.store, {}, Clock(s.clock));
  EXPECT_TRUE(limiter->check("k")->allowed);
  EXPECT_FALSE(limiter->check("k")->allowed);
  EXPECT_EQ(limiter->cached(), 1u);
  ASSERT_TRUE(limiter->reset("k").ok());
  EXPECT_EQ(limiter->cached(), 0u);
  EXPECT_TRUE(limiter->check("k")->allowed);
}

TEST(CachedDenyLimiter, CheckAtDrivesStoreAndCacheWithOneClock) {
  Env s;
  auto limiter = *CachedDenyLimiter<FixedWindow, Clock>::create(
      {.limit = 1, .window_ms = 1000}, s.store, {}, Clock(s.clock));
  const int64_t t = kEpoch + 10'000;
  EXPECT_TRUE(limiter->check_at("k", t)->allowed);
  EXPECT_EQ(limiter->check_at("k", t + 400)->retry_after_ms, 600);
  EXPECT_EQ(limiter->check_at("k", t + 900)->retry_after_ms, 100);
  EXPECT_EQ(limiter->stats().store_checks, 2);
  EXPECT_TRUE(limiter->check_at("k", t + 1000)->allowed);
}

TEST(CachedDenyLimiter, BadInputIsAStatus) {
  Env s;
  auto limiter = *CachedDenyLimiter<FixedWindow, Clock>::create(
      {.limit = 1, .window_ms = 1000}, s.store, {}, Clock(s.clock));
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
