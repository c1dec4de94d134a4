#include "throttlekit/strategy/sliding_window.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/created.h"
#include "support/repeated_denial.h"
#include "support/test_time.h"

namespace throttlekit {
namespace sliding_window_test {
namespace {

using testing::kEpoch;  // a multiple of 100 and 1000

SlidingWindow make(int64_t limit, int64_t window_ms, int64_t buckets = 10) {
  return testing::created<SlidingWindow>({limit, window_ms, buckets});
}

// limit 10 per 1000 ms in 10 ticks of 100 ms; kEpoch starts tick c0.
SlidingWindow tenths() { return make(10, 1000); }

TEST(SlidingWindow, ColdKeyAdmitsLimitInOneTick) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  // reset_at = ceil((c + 1) * w + window_ms) = kEpoch + 100 + 1000.
  EXPECT_EQ(sw.peek(s, kEpoch + 50),
            (Decision{true, 10, 10, kEpoch + 1100, 0}));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(sw.check(s, kEpoch + 50, 1),
              (Decision{true, 10, 9 - i, kEpoch + 1100, 0}))
        << i;
  }
  // Denied; tick c0 - 10 is empty, so retry = ceil((c + 1) * w - now) = 50.
  EXPECT_EQ(sw.check(s, kEpoch + 50, 1),
            (Decision{false, 10, 0, kEpoch + 1100, 50}));
  EXPECT_EQ(sw.policy_window_ms(), 1000);
  EXPECT_EQ(sw.tick_ms(), 100);
}

TEST(SlidingWindow, StateStartsEmptyAndTheFirstAllowSizesTheRing) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  EXPECT_EQ(s.slots.capacity(), 0u);
  EXPECT_FALSE(sw.check(s, kEpoch, 11).allowed);  // a denial on a cold key
  EXPECT_EQ(s.slots.capacity(), 0u);              // allocated nothing
  EXPECT_EQ(s, SlidingWindow::State{});
  ASSERT_TRUE(sw.check(s, kEpoch, 1).allowed);
  EXPECT_EQ(s.slots.size(), 11u);  // S + 1
}

TEST(SlidingWindow, OldestTickFadesLinearlyAndEqualityAdmits) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 10).allowed);  // tick c0 holds 10
  // kEpoch + 1000 starts tick c0 + 10: c0 is the oldest at weight 1.
  // D = 1 <= 10 * 1, retry = ceil(1 * 100 / 10) = 10.
  EXPECT_EQ(sw.check(s, kEpoch + 1000, 1),
            (Decision{false, 10, 0, kEpoch + 2100, 10}));
  // At +1005: weight 0.95, estimate 9.5; D = 0.5, retry = ceil(5) = 5.
  EXPECT_EQ(sw.check(s, kEpoch + 1005, 1),
            (Decision{false, 10, 0, kEpoch + 2100, 5}));
  // At +1010: weight 0.9, estimate 9, projected exactly 10: admitted.
  EXPECT_EQ(sw.check(s, kEpoch + 1010, 1),
            (Decision{true, 10, 0, kEpoch + 2100, 0}));
  // At +1100 tick c0 has left the window; tick c0 + 10 holds 1.
  EXPECT_EQ(sw.peek(s, kEpoch + 1100),
            (Decision{true, 10, 9, kEpoch + 2200, 0}));
}

TEST(SlidingWindow, RetryWaitsForTheNextTickWhenFadingCannotSuffice) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch, 4).allowed);        // tick c0
  ASSERT_TRUE(sw.check(s, kEpoch + 500, 6).allowed);  // tick c0 + 5
  // At +1010: full = 6, oldest 4 at weight 0.9, estimate 9.6.
  // cost 2: D = 1.6 <= 3.6, retry = ceil(1.6 * 100 / 4) = 40.
  Decision d = sw.check(s, kEpoch + 1010, 2);
  EXPECT_EQ(d, (Decision{false, 10, 0, kEpoch + 2100, 40}));
  // cost 5: D = 4.6 > 3.6, retry = ceil((c + 1) * w - now) = 90.
  d = sw.check(s, kEpoch + 1010, 5);
  EXPECT_EQ(d, (Decision{false, 10, 0, kEpoch + 2100, 90}));
}

TEST(SlidingWindow, FractionsAreComparedUnfloored) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch, 9.5).allowed);
  // estimate 9.5: 9.5 + 0.6 > 10 although floor(9.5) + 0.6 would fit.
  EXPECT_EQ(sw.check(s, kEpoch, 0.6),
            (Decision{false, 10, 0, kEpoch + 1100, 100}));
  EXPECT_EQ(sw.check(s, kEpoch, 0.5),
            (Decision{true, 10, 0, kEpoch + 1100, 0}));
  SlidingWindow::State t;
  EXPECT_EQ(sw.check(t, kEpoch, 0.3).remaining, 9);  // floor(9.7)
}

TEST(SlidingWindow, FractionalTickMatchesTheReferenceStream) {
  // window 15 ms in 10 ticks: w = 1.5 and kEpoch is half a ms into its tick.
  // Expected values from an independent IEEE-double evaluation of
  // docs/semantics.md in the written order.
  SlidingWindow sw = make(7, 15, 10);
  SlidingWindow::State s;
  struct Step {
    int64_t dt;
    double cost;
    Decision want;
  };
  const Step steps[] = {
      {0, 2.5, {true, 7, 4, kEpoch + 16, 0}},
      {1, 1, {true, 7, 3, kEpoch + 18, 0}},
      {4, 3.2, {true, 7, 0, kEpoch + 21, 0}},
      {14, 1, {false, 7, 0, kEpoch + 30, 1}},
      {15, 0.3, {true, 7, 0, kEpoch + 31, 0}},
      {16, 1, {true, 7, 1, kEpoch + 33, 0}},
      {17, 2, {true, 7, 0, kEpoch + 33, 0}},
      {20, 5, {false, 7, 2, kEpoch + 36, 1}},
      {22, 0.7, {true, 7, 3, kEpoch + 39, 0}},
  };
  for (const Step& step : steps) {
    EXPECT_EQ(sw.check(s, kEpoch + step.dt, step.cost), step.want) << step.dt;
  }
}

TEST(SlidingWindow, SingleBucketIsTheTwoCounterEstimate) {
  SlidingWindow sw = make(10, 1000, 1);
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 999, 10).allowed);
  // Next window: the previous one counts at (1000 - elapsed) / 1000.
  EXPECT_FALSE(sw.check(s, kEpoch + 1000, 1).allowed);
  EXPECT_EQ(sw.peek(s, kEpoch + 1250).remaining, 2);  // floor(10 - 7.5)
  EXPECT_TRUE(sw.check(s, kEpoch + 1250, 2.5).allowed);
  EXPECT_FALSE(sw.check(s, kEpoch + 1250, 0.01).allowed);
}

TEST(SlidingWindow, BoundaryBurstIsBoundedByLimitPlusOneTick) {
  // The approximation's price: with all of `limit` at the end of one tick,
  // the estimate under-counts it as it fades, so a window-length span can
  // admit nearly 2 x limit (and never more than limit + f * X).
  SlidingWindow sw = make(10, 1000, 1);
  SlidingWindow::State s;
  int admitted = 0;
  for (int64_t t = kEpoch + 999; t < kEpoch + 1999; ++t) {
    // Bounded, so a broken estimate fails instead of hanging.
    for (int n = 0; n < 25 && sw.check(s, t, 1).allowed; ++n) ++admitted;
  }
  EXPECT_EQ(admitted, 19);  // in the span [kEpoch + 999, kEpoch + 1999)
  EXPECT_LE(admitted, 10 + 999.0 / 1000 * 10);
}

TEST(SlidingWindow, DenialWritesNothingAndRepeats) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 10, 8).allowed);
  EXPECT_EQ(testing::repeated_denial(sw, s, kEpoch + 20, 3),
            (Decision{false, 10, 2, kEpoch + 1100, 80}));
}

TEST(SlidingWindow, BackwardClockCountsIntoTheLatestTick) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 6).allowed);  // tick c0
  // One tick back: a stale now, decided at the start of tick c0 and counted
  // into it (1.x read tick c0 as 0 here).
  EXPECT_EQ(sw.check(s, kEpoch - 50, 4),
            (Decision{true, 10, 0, kEpoch + 1100, 0}));
  EXPECT_EQ(s, sw.state_from_slots(std::vector<SlidingWindow::Slot>{
                   {(kEpoch + 50) / 100, 10}}));
  EXPECT_EQ(sw.check(s, kEpoch - 50, 1),
            (Decision{false, 10, 0, kEpoch + 1100, 150}));
  EXPECT_EQ(sw.peek(s, kEpoch + 50),
            (Decision{false, 10, 0, kEpoch + 1100, 50}));
}

TEST(SlidingWindow, BackwardClockNeverOverwritesALaterTick) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 10).allowed);  // tick c0
  // S + 1 = 11 ticks back lands in tick c0's slot: counted into tick c0
  // (full), never replacing it as 1.x did.
  EXPECT_FALSE(sw.check(s, kEpoch + 50 - 1100, 1).allowed);
  EXPECT_EQ(sw.peek(s, kEpoch + 50).remaining, 0);
}

TEST(SlidingWindow, StaleNowRetryCountsTheLagToTheLatestTick) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch - 950, 5).allowed);  // tick c0 - 10
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 5).allowed);   // tick c0 (weight 0.5)
  // From tick c0 - 1: decided at tick c0's start (weight 1, estimate 10);
  // the oldest tick fades enough 100 / 5 = 20 ms after that start, which is
  // 50 ms after the caller's now: retry 70.
  EXPECT_EQ(sw.check(s, kEpoch - 50, 1),
            (Decision{false, 10, 0, kEpoch + 1100, 70}));
}

TEST(SlidingWindow, CostAboveLimitNeverPassesButHasFiniteRetry) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  // D = 1, no oldest: retry = ceil((c + 1) * w - now) = 50.
  EXPECT_EQ(sw.check(s, kEpoch + 50, 11),
            (Decision{false, 10, 10, kEpoch + 1100, 50}));
  EXPECT_FALSE(sw.check(s, kEpoch + 10'000, 11).allowed);
  EXPECT_EQ(s, SlidingWindow::State{});
  EXPECT_EQ(sw.forecast(s, kEpoch + 50, 11).next_replenish_at_ms, kEpoch + 100);
  Decision big = sw.check(s, kEpoch + 50, static_cast<double>(kMaxSafeInteger));
  EXPECT_FALSE(big.allowed);
  EXPECT_EQ(big.retry_after_ms, 50);
}

TEST(SlidingWindow, PeekDoesNotConsume) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch, 9.5).allowed);
  const SlidingWindow::State before = s;
  // estimate 9.5: cost 1 is denied, remaining floor(0.5) = 0.
  EXPECT_EQ(sw.peek(s, kEpoch), (Decision{false, 10, 0, kEpoch + 1100, 100}));
  EXPECT_EQ(s, before);
}

TEST(SlidingWindow, ForecastReportsSpendableNextAndFull) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  EXPECT_EQ(sw.forecast(s, kEpoch + 50, 10),
            (Forecast{10, kEpoch + 50, kEpoch + 50}));
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 10).allowed);
  const SlidingWindow::State before = s;
  // The estimate fades from kEpoch + 1000: 10 * (100 - e) / 100 + cost <= 10.
  EXPECT_EQ(sw.forecast(s, kEpoch + 50, 1),
            (Forecast{0, kEpoch + 1010, kEpoch + 1100}));
  EXPECT_EQ(sw.forecast(s, kEpoch + 50, 5).next_replenish_at_ms, kEpoch + 1050);
  EXPECT_EQ(sw.forecast(s, kEpoch + 50, 10).next_replenish_at_ms,
            kEpoch + 1100);
  EXPECT_EQ(sw.forecast(s, kEpoch + 1100, 10),
            (Forecast{10, kEpoch + 1100, kEpoch + 1100}));
  EXPECT_EQ(s, before);
}

TEST(SlidingWindow, ExpiredStateDecidesLikeCold) {
  SlidingWindow sw = tenths();
  SlidingWindow::State s;
  EXPECT_EQ(sw.expires_at_ms(s), std::numeric_limits<int64_t>::min());
  ASSERT_TRUE(sw.check(s, kEpoch + 50, 3).allowed);
  ASSERT_TRUE(sw.check(s, kEpoch + 420, 4).allowed);  // tick c0 + 4
  const int64_t exp = sw.expires_at_ms(s);
  EXPECT_EQ(exp, kEpoch + 1500);  // ceil((c0 + 4 + 11) * 100)
  for (int64_t at : {exp, exp + 1, exp + 99'999}) {
    SlidingWindow::State warm = s;
    SlidingWindow::State cold;
    for (double cost : {2.0, 0.5, 11.0, 7.5, 1.0}) {
      EXPECT_EQ(sw.peek(warm, at), sw.peek(cold, at));
      EXPECT_EQ(sw.check(warm, at, cost), sw.check(cold, at, cost));
    }
  }
  // One ms earlier tick c0 + 4 still counts at weight 0.01.
  EXPECT_EQ(sw.peek(s, exp - 1).remaining, 9);
}

TEST(SlidingWindow, ExpiryWithAFractionalTickIsNeverEarly) {
  SlidingWindow sw = make(7, 15, 10);  // w = 1.5
  SlidingWindow::State s;
  ASSERT_TRUE(sw.check(s, kEpoch + 1, 2).allowed);
  const int64_t exp = sw.expires_at_ms(s);
  SlidingWindow::State cold;
  for (int64_t at = exp; at < exp + 5; ++at) {
    EXPECT_EQ(sw.peek(s, at), sw.peek(cold, at)) << at - exp;
  }
  EXPECT_NE(sw.peek(s, exp - 1), sw.peek(cold, exp - 1));
}

TEST(SlidingWindow, RejectsBadOptionsNamingTheField) {
  const auto expect_bad = testing::expect_refused<SlidingWindow>;
  expect_bad({0, 1000, 10}, "sliding_window.limit");
  expect_bad({10, 0, 10}, "sliding_window.window_ms");
  expect_bad({10, 1000, 0}, "sliding_window.buckets");
  expect_bad({10, 1'000'000, 100'001}, "100000");
  expect_bad({10, 5, 10}, "sliding_window.buckets");
  expect_bad({kMaxSafeInteger + 1, 1000, 10}, "sliding_window.limit");
  SlidingWindow::Options defaults{10, 1000};
  EXPECT_EQ(defaults.buckets, 10);
  EXPECT_TRUE(SlidingWindow::create(defaults).ok());
  EXPECT_TRUE(SlidingWindow::create({10, 100'000, 100'000}).ok());
  EXPECT_TRUE(SlidingWindow::create({10, 5, 5}).ok());
}

}  // namespace
}  // namespace sliding_window_test
}  // namespace throttlekit
