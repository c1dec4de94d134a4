#include "throttlekit/twotier/two_tier.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "support/manual_store.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace two_tier_test {
namespace {

using Clock = testing::ManualClockRef;
using Env = testing::ManualStore;

LeasedLimiterOptions batch_of(int64_t batch) {
  LeasedLimiterOptions o;
  o.batch = batch;
  return o;
}

// 20 per second in `mode` (leased: batches of 5) on `s`.
absl::StatusOr<std::unique_ptr<TwoTier<FixedWindow, Clock>>> twenty_per_second(
    Env& s, TwoTierMode mode) {
  return TwoTier<FixedWindow, Clock>::create(
      {.limit = 20, .window_ms = 1000}, s.store,
      {.mode = mode,
       .prefix = "p",
       .leased = mode == TwoTierMode::kLeased
                     ? std::optional<LeasedLimiterOptions>(batch_of(5))
                     : std::nullopt},
      Clock(s.clock));
}

// Every mode admits exactly the window's limit from one node and then
// denies until the window rolls; they differ in round trips.
class TwoTierModes : public ::testing::TestWithParam<TwoTierMode> {};

TEST_P(TwoTierModes, OneWindowAdmitsTheLimitThenDenies) {
  Env s;
  auto limiter = twenty_per_second(s, GetParam());
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  EXPECT_EQ((*limiter)->mode(), GetParam());
  int admitted = 0;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<Decision> d = (*limiter)->check("k");
    ASSERT_TRUE(d.ok()) << d.status();
    admitted += d->allowed;
    if (!d->allowed) {
      EXPECT_EQ(d->retry_after_ms, 1000);
    }
  }
  EXPECT_EQ(admitted, 20);
  s.clock.advance_ms(1000);
  EXPECT_TRUE((*limiter)->check("k")->allowed);
  EXPECT_TRUE((*limiter)->close().ok());
}

// check_async on twin stores: the same decisions as check, call for call,
// across a window roll (the memory store answers inline).
TEST_P(TwoTierModes, CheckAsyncEqualsCheck) {
  Env a, b;
  auto blocking = *twenty_per_second(a, GetParam());
  auto async = *twenty_per_second(b, GetParam());
  static_assert(AsyncRateEngine<TwoTier<FixedWindow, Clock>>);
  for (int i = 0; i < 120; ++i) {
    if (i == 60) {
      a.clock.advance_ms(1000);
      b.clock.advance_ms(1000);
    }
    const double cost = 1 + i % 3;
    absl::StatusOr<Decision> want = blocking->check("k", cost);
    std::optional<absl::StatusOr<Decision>> got;
    async->check_async(
        "k", cost, [&got](absl::StatusOr<Decision> d) { got = std::move(d); });
    ASSERT_TRUE(got.has_value()) << "the memory store answers inline";
    ASSERT_TRUE(want.ok() && got->ok()) << want.status() << got->status();
    EXPECT_EQ(**got, *want) << "call " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(All, TwoTierModes,
                         ::testing::Values(TwoTierMode::kStrict,
                                           TwoTierMode::kCachedDeny,
                                           TwoTierMode::kLeased));

TEST(TwoTier, EachModeReachesItsEngine) {
  Env s;
  auto strict = *TwoTier<Gcra, Clock>::create({.limit = 5, .period_ms = 1000},
                                              s.store, {}, Clock(s.clock));
  EXPECT_NE(strict->strict(), nullptr);
  EXPECT_EQ(strict->leased(), nullptr);
  auto cached = *TwoTier<Gcra, Clock>::create(
      {.limit = 5, .period_ms = 1000}, s.store,
      {.mode = TwoTierMode::kCachedDeny}, Clock(s.clock));
  ASSERT_NE(cached->cached_deny(), nullptr);
  for (int i = 0; i < 50; ++i) (void)cached->check("k");
  EXPECT_EQ(cached->cached_deny()->stats().store_checks, 6);
  auto leased = *TwoTier<FixedWindow, Clock>::create(
      {.limit = 100, .window_ms = 1000}, s.store,
      {.mode = TwoTierMode::kLeased, .prefix = "l", .leased = batch_of(10)},
      Clock(s.clock));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(leased->check("k")->allowed);
  EXPECT_EQ(leased->leased()->stats().leases, 5);
}

TEST(TwoTier, LeasedNeedsAFixedWindowAndValidOptions) {
  Env s;
  auto gcra = TwoTier<Gcra>::create({.limit = 5, .period_ms = 1000}, s.store,
                                    {.mode = TwoTierMode::kLeased});
  EXPECT_EQ(gcra.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gcra.status().message().find("fixed window"), std::string::npos);
  auto bad_window = TwoTier<FixedWindow>::create(
      {.limit = 5, .window_ms = 0}, s.store, {.mode = TwoTierMode::kLeased});
  EXPECT_NE(bad_window.status().message().find("window_ms"), std::string::npos);
  auto bad_batch = TwoTier<FixedWindow>::create(
      {.limit = 5, .window_ms = 1000}, s.store,
      {.mode = TwoTierMode::kLeased, .leased = batch_of(6)});
  EXPECT_NE(bad_batch.status().message().find("batch"), std::string::npos);
}

// An option the chosen mode would not read is refused, naming it.
TEST(TwoTier, OptionsAModeWouldIgnoreAreRefused) {
  Env s;
  auto strict_keys = TwoTier<Gcra>::create({.limit = 5, .period_ms = 1000},
                                           s.store, {.max_keys = 1024});
  EXPECT_EQ(strict_keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(strict_keys.status().message().find("two_tier.max_keys"),
            std::string::npos);
  auto cached_leased = TwoTier<Gcra>::create(
      {.limit = 5, .period_ms = 1000}, s.store,
      {.mode = TwoTierMode::kCachedDeny, .leased = batch_of(5)});
  EXPECT_NE(cached_leased.status().message().find("two_tier.leased"),
            std::string::npos);
  LeasedLimiterOptions own_prefix = batch_of(5);
  own_prefix.prefix = "x";
  auto shadowed = TwoTier<FixedWindow>::create(
      {.limit = 5, .window_ms = 1000}, s.store,
      {.mode = TwoTierMode::kLeased, .leased = own_prefix});
  EXPECT_NE(shadowed.status().message().find("two_tier.leased: prefix"),
            std::string::npos);
  auto bad_policy =
      TwoTier<Gcra>::create({.limit = 5, .period_ms = 1000}, s.store,
                            {.fail_policy = {FailPolicy::kClosed, 0}});
  EXPECT_NE(bad_policy.status().message().find(
                "strict_rate_limiter.fail_policy.closed_retry_ms"),
            std::string::npos);
  auto bad_mode =
      TwoTier<FixedWindow>::create({.limit = 5, .window_ms = 1000}, s.store,
                                   {.mode = static_cast<TwoTierMode>(7)});
  EXPECT_EQ(bad_mode.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace two_tier_test
}  // namespace throttlekit
