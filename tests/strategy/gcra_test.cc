#include "throttlekit/strategy/gcra.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/created.h"
#include "support/repeated_denial.h"
#include "support/test_time.h"

namespace throttlekit {
namespace gcra_test {
namespace {

using testing::kEpoch;  // large epochs, as in prod

Gcra make(int64_t limit, int64_t period_ms, int64_t burst = 0) {
  return testing::created<Gcra>({limit, period_ms, burst});
}

TEST(Gcra, ColdKeyAdmitsExactlyBurstThenDenies) {
  Gcra g = make(10, 1000);  // T = 100 ms, tau = 1000 ms
  Gcra::State s;
  for (int i = 0; i < 10; ++i) {
    Decision d = g.check(s, kEpoch, 1);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.limit, 10);
    EXPECT_EQ(d.remaining, 9 - i);
    EXPECT_EQ(d.reset_at_ms, kEpoch + 100 * (i + 1));
    EXPECT_EQ(d.retry_after_ms, 0);
  }
  Decision d = g.check(s, kEpoch, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_at_ms, kEpoch + 1000);
  EXPECT_EQ(d.retry_after_ms, 100);
}

TEST(Gcra, DeniesBurstPlusOneAndDenialWritesNothing) {
  Gcra g = make(5, 500, 3);  // T = 100, tau = 300, reported limit = burst
  Gcra::State s;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(g.check(s, kEpoch, 1).allowed);
  const Decision d = testing::repeated_denial(g, s, kEpoch, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 3);
}

TEST(Gcra, EqualityAtAllowAtAdmits) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(g.check(s, kEpoch, 1).allowed);
  // tat = kEpoch + 1000; allow_at for the next unit = kEpoch + 100.
  EXPECT_FALSE(g.check(s, kEpoch + 99, 1).allowed);
  EXPECT_TRUE(g.check(s, kEpoch + 100, 1).allowed);
}

TEST(Gcra, PacesAtOneUnitPerEmissionInterval) {
  Gcra g = make(4, 1000, 1);  // T = 250, tau = 250: no burst beyond 1
  Gcra::State s;
  int admitted = 0;
  for (int64_t t = 0; t < 10'000; t += 10) {
    if (g.check(s, kEpoch + t, 1).allowed) ++admitted;
  }
  EXPECT_EQ(admitted, 40);
}

TEST(Gcra, BackwardClockOnlyMakesItStricter) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(g.check(s, kEpoch, 1).allowed);
  // Jump back one second: tat stays kEpoch + 1000, so allow_at is further
  // in the future relative to now.
  Decision d = g.check(s, kEpoch - 1000, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1100);
  EXPECT_EQ(d.reset_at_ms, kEpoch + 1000);
}

TEST(Gcra, CostAboveBurstNeverPassesButHasFiniteRetry) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  Decision d = g.check(s, kEpoch, 11);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 100);  // ceil(T*11 - tau)
  EXPECT_EQ(d.remaining, 10);
  EXPECT_EQ(s, Gcra::State{});  // a denied cold key stays cold
}

TEST(Gcra, FractionalCostAndFractionalInterval) {
  Gcra g = make(3, 1000);  // T = 333.33.., tau = 1000
  Gcra::State s;
  Decision d = g.check(s, kEpoch, 0.5);
  EXPECT_TRUE(d.allowed);
  // new_tat = now + 166.66..; remaining = floor((1000 - 166.66)/333.33) = 2
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_at_ms, kEpoch + 167);
}

TEST(Gcra, PeekDoesNotConsume) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  Decision p = g.peek(s, kEpoch);
  EXPECT_TRUE(p.allowed);
  EXPECT_EQ(p.remaining, 10);
  EXPECT_EQ(p.reset_at_ms, kEpoch);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(g.check(s, kEpoch, 1).allowed);
  Gcra::State before = s;
  p = g.peek(s, kEpoch);
  EXPECT_FALSE(p.allowed);
  EXPECT_EQ(p.remaining, 0);
  EXPECT_EQ(p.retry_after_ms, 100);
  EXPECT_EQ(s, before);
}

TEST(Gcra, ForecastReportsSpendableNextAndFull) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(g.check(s, kEpoch, 1).allowed);
  Forecast f = g.forecast(s, kEpoch, 3);
  EXPECT_EQ(f.spendable_now, 2);
  EXPECT_EQ(f.next_replenish_at_ms, kEpoch + 100);  // third unit in 100 ms
  EXPECT_EQ(f.full_at_ms, kEpoch + 800);
  Forecast now = g.forecast(s, kEpoch, 2);
  EXPECT_EQ(now.next_replenish_at_ms, kEpoch);
}

TEST(Gcra, ExpiryIsExactlyWhenStateBecomesCold) {
  Gcra g = make(10, 1000);
  Gcra::State s;
  EXPECT_EQ(g.expires_at_ms(s), INT64_MIN);
  ASSERT_TRUE(g.check(s, kEpoch, 3).allowed);
  int64_t exp = g.expires_at_ms(s);
  EXPECT_EQ(exp, kEpoch + 300);
  Gcra::State cold;
  Gcra::State warm = s;
  EXPECT_EQ(g.check(warm, exp, 7), g.check(cold, exp, 7));
}

TEST(Gcra, RejectsBadOptionsNamingTheField) {
  testing::expect_refused<Gcra>({0, 1000, 0}, "gcra.limit");
  EXPECT_FALSE(Gcra::create({10, 0, 0}).ok());
  EXPECT_FALSE(Gcra::create({10, -5, 0}).ok());
  EXPECT_FALSE(Gcra::create({10, 1000, -1}).ok());
  EXPECT_FALSE(Gcra::create({kMaxSafeInteger + 1, 1000, 0}).ok());
  EXPECT_TRUE(Gcra::create({kMaxSafeInteger, kMaxSafeInteger, 0}).ok());
}

}  // namespace
}  // namespace gcra_test
}  // namespace throttlekit
