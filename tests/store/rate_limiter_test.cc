#include "throttlekit/store/rate_limiter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace rate_limiter_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;
using ManualLimiter = RateLimiter<Gcra, ClockRef<ManualClock>>;

ManualLimiter make(ManualClock& clock, int64_t limit = 3) {
  auto l = ManualLimiter::create({limit, 1000, 0}, {.prefix = "api"},
                                 ClockRef<ManualClock>(clock));
  EXPECT_TRUE(l.ok()) << l.status();
  return *std::move(l);
}

TEST(RateLimiter, ChecksReadTheInjectedClock) {
  ManualClock clock(kEpoch);
  ManualLimiter limiter = make(clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.check("u")->allowed);
  absl::StatusOr<Decision> d = limiter.check("u");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after_ms, 334);  // T = 333.3.., ceil
  clock.advance_ms(334);
  EXPECT_TRUE(limiter.check("u")->allowed);
  EXPECT_EQ(limiter.prefix(), "api");
}

TEST(RateLimiter, CheckAtUsesCallerNow) {
  ManualClock clock(0);
  ManualLimiter limiter = make(clock, 1);
  EXPECT_TRUE(limiter.check_at("u", kEpoch)->allowed);
  EXPECT_FALSE(limiter.check_at("u", kEpoch)->allowed);
  EXPECT_TRUE(limiter.check_at("u", kEpoch + 1000)->allowed);
}

TEST(RateLimiter, InvalidArgumentsNameTheProblem) {
  ManualClock clock(kEpoch);
  ManualLimiter limiter = make(clock);
  struct Case {
    std::string key;
    double cost;
    const char* mentions;
  } cases[] = {
      {"", 1, "key"},
      {std::string(kMaxKeyBytes + 1, 'k'), 1, "key"},
      {"u", 0, "cost"},
      {"u", -1, "cost"},
      {"u", std::nan(""), "NaN"},
      {"u", std::numeric_limits<double>::infinity(), "finite"},
      {"u", 9007199254740994.0, "2^53-1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Decision> d = limiter.check(c.key, c.cost);
    ASSERT_FALSE(d.ok()) << c.cost;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(c.mentions), std::string::npos)
        << d.status();
  }
  EXPECT_EQ(limiter.store().size(), 0u);  // nothing reached the store
  EXPECT_FALSE(limiter.peek("").ok());
  EXPECT_FALSE(limiter.forecast("u", 0).ok());
  EXPECT_FALSE(limiter.reset("").ok());
}

TEST(RateLimiter, BadConfigurationIsRejectedAtCreate) {
  auto l = RateLimiter<Gcra>::create({0, 1000, 0});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("gcra.limit"), std::string::npos);
  auto s = RateLimiter<Gcra>::create({1, 1000, 0}, {.store = {.max_keys = 0}});
  EXPECT_FALSE(s.ok());
}

TEST(RateLimiter, CheckManyUsesOneNowAndChecksEachKey) {
  ManualClock clock(kEpoch);
  ManualLimiter limiter = make(clock, 1);
  std::vector<std::string_view> keys = {"a", "b", "a"};
  absl::StatusOr<std::vector<Decision>> ds = limiter.check_many(keys);
  ASSERT_TRUE(ds.ok());
  ASSERT_EQ(ds->size(), 3u);
  EXPECT_TRUE((*ds)[0].allowed);
  EXPECT_TRUE((*ds)[1].allowed);
  EXPECT_FALSE((*ds)[2].allowed);
  EXPECT_EQ((*ds)[0].reset_at_ms, (*ds)[1].reset_at_ms);  // one now
  // An invalid key anywhere: nothing is checked.
  std::vector<std::string_view> bad = {"c", ""};
  EXPECT_FALSE(limiter.check_many(bad).ok());
  EXPECT_TRUE(limiter.check("c")->allowed);
}

TEST(RateLimiter, PeekForecastResetAndBackwardClock) {
  ManualClock clock(kEpoch);
  ManualLimiter limiter = make(clock, 2);
  EXPECT_EQ(limiter.peek("u")->remaining, 2);
  ASSERT_TRUE(limiter.check("u", 2)->allowed);
  EXPECT_EQ(limiter.peek("u")->remaining, 0);
  EXPECT_EQ(limiter.forecast("u", 1)->next_replenish_at_ms, kEpoch + 500);
  clock.advance_ms(-10'000);  // backwards: stricter, never looser
  EXPECT_FALSE(limiter.check("u")->allowed);
  clock.set_ms(kEpoch);
  ASSERT_TRUE(limiter.reset("u").ok());
  EXPECT_TRUE(limiter.check("u", 2)->allowed);
}

}  // namespace
}  // namespace rate_limiter_test
}  // namespace throttlekit
