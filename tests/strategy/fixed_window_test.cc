#include "throttlekit/strategy/fixed_window.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "support/created.h"
#include "support/repeated_denial.h"
#include "support/test_time.h"

namespace throttlekit {
namespace fixed_window_test {
namespace {

using testing::kEpoch;  // a multiple of 1000

FixedWindow make(int64_t limit, int64_t window_ms) {
  return testing::created<FixedWindow>({limit, window_ms});
}

TEST(FixedWindow, CountsWithinTheEpochAlignedWindow) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  const int64_t now = kEpoch + 250;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(f.check(s, now, 1), (Decision{true, 5, 4 - i, kEpoch + 1000, 0}))
        << i;
  }
  EXPECT_EQ(s, (FixedWindow::State{static_cast<double>(kEpoch), 5}));
  // retry = ceil(reset_at - now) = 750.
  EXPECT_EQ(f.check(s, now, 1), (Decision{false, 5, 0, kEpoch + 1000, 750}));
  EXPECT_EQ(f.policy_window_ms(), 1000);
}

TEST(FixedWindow, WindowIsHalfOpen) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  ASSERT_TRUE(f.check(s, kEpoch, 5).allowed);  // the first ms of the window
  EXPECT_EQ(f.check(s, kEpoch + 999, 1),
            (Decision{false, 5, 0, kEpoch + 1000, 1}));
  // reset_at belongs to the next window.
  EXPECT_EQ(f.check(s, kEpoch + 1000, 1),
            (Decision{true, 5, 4, kEpoch + 2000, 0}));
}

TEST(FixedWindow, WindowsAlignToTheEpochNotToTheFirstRequest) {
  FixedWindow f = make(3, 7);
  FixedWindow::State s;
  const int64_t now = kEpoch + 100;
  const int64_t start = now - now % 7;  // an integer oracle for the floor
  Decision d = f.check(s, now, 1);
  EXPECT_EQ(d, (Decision{true, 3, 2, start + 7, 0}));
  EXPECT_EQ(s.start, static_cast<double>(start));
  EXPECT_EQ(f.expires_at_ms(s), start + 7);
}

TEST(FixedWindow, EqualityAdmitsAndFractionsAreComparedUnfloored) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  // remaining floors: 5 - 4.5 = 0.5 -> 0.
  EXPECT_EQ(f.check(s, kEpoch, 4.5), (Decision{true, 5, 0, kEpoch + 1000, 0}));
  EXPECT_FALSE(f.check(s, kEpoch, 0.6).allowed);  // 5.1 > 5
  EXPECT_EQ(f.check(s, kEpoch, 0.6).remaining, 0);
  EXPECT_TRUE(f.check(s, kEpoch, 0.5).allowed);  // 5 <= 5
  EXPECT_FALSE(f.check(s, kEpoch, 0.001).allowed);
}

TEST(FixedWindow, FractionalCostFloorsRemaining) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  EXPECT_EQ(f.check(s, kEpoch, 0.3).remaining, 4);  // floor(4.7)
  EXPECT_EQ(f.peek(s, kEpoch).remaining, 4);
}

TEST(FixedWindow, DenialWritesNothingAndRepeats) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  ASSERT_TRUE(f.check(s, kEpoch + 1, 4).allowed);
  EXPECT_EQ(testing::repeated_denial(f, s, kEpoch + 2, 2),
            (Decision{false, 5, 1, kEpoch + 1000, 998}));
  // A denied call on a cold key leaves it cold.
  FixedWindow::State cold;
  EXPECT_FALSE(testing::repeated_denial(f, cold, kEpoch, 6).allowed);
}

TEST(FixedWindow, BackwardClockWithinTheWindowKeepsTheCount) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  ASSERT_TRUE(f.check(s, kEpoch + 900, 5).allowed);
  EXPECT_EQ(f.check(s, kEpoch + 100, 1),
            (Decision{false, 5, 0, kEpoch + 1000, 900}));
}

TEST(FixedWindow, BackwardClockIntoAnEarlierWindowCountsIntoTheStoredOne) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  ASSERT_TRUE(f.check(s, kEpoch + 500, 4).allowed);
  // 510 ms back is the previous window: a stale now, counted into the
  // stored, newer window (1.x read 0 there and overwrote it).
  EXPECT_EQ(f.check(s, kEpoch - 10, 1),
            (Decision{true, 5, 0, kEpoch + 1000, 0}));
  EXPECT_EQ(s, (FixedWindow::State{static_cast<double>(kEpoch), 5}));
  // That window is full; the retry is measured from the caller's now.
  EXPECT_EQ(f.check(s, kEpoch - 10, 1),
            (Decision{false, 5, 0, kEpoch + 1000, 1010}));
  EXPECT_EQ(f.check(s, kEpoch + 500, 1),
            (Decision{false, 5, 0, kEpoch + 1000, 500}));
  EXPECT_EQ(s, (FixedWindow::State{static_cast<double>(kEpoch), 5}));
}

TEST(FixedWindow, CostAboveLimitNeverPassesButHasFiniteRetry) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  EXPECT_EQ(f.check(s, kEpoch + 250, 6),
            (Decision{false, 5, 5, kEpoch + 1000, 750}));
  EXPECT_FALSE(f.check(s, kEpoch + 1000, 6).allowed);
  EXPECT_EQ(s, FixedWindow::State{});
  EXPECT_EQ(f.forecast(s, kEpoch + 250, 6).next_replenish_at_ms, kEpoch + 1000);
}

TEST(FixedWindow, BoundaryBurstIsTwiceTheLimit) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  int admitted = 0;
  for (int i = 0; i < 6; ++i) admitted += f.check(s, kEpoch + 999, 1).allowed;
  for (int i = 0; i < 6; ++i) admitted += f.check(s, kEpoch + 1000, 1).allowed;
  EXPECT_EQ(admitted, 10);  // 2 x limit within 2 ms: the known price
}

TEST(FixedWindow, PeekDoesNotConsume) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  EXPECT_EQ(f.peek(s, kEpoch + 1), (Decision{true, 5, 5, kEpoch + 1000, 0}));
  ASSERT_TRUE(f.check(s, kEpoch + 1, 4.5).allowed);
  const FixedWindow::State before = s;
  // 4.5 + 1 > 5: a cost-1 peek is denied; remaining = floor(0.5) = 0.
  EXPECT_EQ(f.peek(s, kEpoch + 1), (Decision{false, 5, 0, kEpoch + 1000, 999}));
  EXPECT_EQ(s, before);
}

TEST(FixedWindow, ForecastReportsSpendableNextAndFull) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  EXPECT_EQ(f.forecast(s, kEpoch + 1, 5),
            (Forecast{5, kEpoch + 1, kEpoch + 1}));
  ASSERT_TRUE(f.check(s, kEpoch + 1, 3).allowed);
  const FixedWindow::State before = s;
  EXPECT_EQ(f.forecast(s, kEpoch + 1, 2),
            (Forecast{2, kEpoch + 1, kEpoch + 1000}));
  EXPECT_EQ(f.forecast(s, kEpoch + 1, 3),
            (Forecast{2, kEpoch + 1000, kEpoch + 1000}));
  // In the next window the old count is gone: full now.
  EXPECT_EQ(f.forecast(s, kEpoch + 1000, 5),
            (Forecast{5, kEpoch + 1000, kEpoch + 1000}));
  EXPECT_EQ(s, before);
}

TEST(FixedWindow, ExpiredStateDecidesLikeCold) {
  FixedWindow f = make(5, 1000);
  FixedWindow::State s;
  EXPECT_EQ(f.expires_at_ms(s), std::numeric_limits<int64_t>::min());
  ASSERT_TRUE(f.check(s, kEpoch + 10, 4).allowed);
  const int64_t exp = f.expires_at_ms(s);
  EXPECT_EQ(exp, kEpoch + 1000);
  for (int64_t at : {exp, exp + 1, exp + 5000}) {
    FixedWindow::State warm = s;
    FixedWindow::State cold;
    for (double cost : {2.0, 0.5, 6.0, 3.0}) {
      EXPECT_EQ(f.peek(warm, at), f.peek(cold, at));
      EXPECT_EQ(f.check(warm, at, cost), f.check(cold, at, cost));
    }
  }
  // One ms earlier the state still counts.
  EXPECT_EQ(f.peek(s, exp - 1).remaining, 1);
}

TEST(FixedWindow, RejectsBadOptionsNamingTheField) {
  testing::expect_refused<FixedWindow>({0, 1000}, "fixed_window.limit");
  testing::expect_refused<FixedWindow>({5, 0}, "fixed_window.window_ms");
  EXPECT_FALSE(FixedWindow::create({-1, 1000}).ok());
  EXPECT_FALSE(FixedWindow::create({5, -1000}).ok());
  EXPECT_FALSE(FixedWindow::create({kMaxSafeInteger + 1, 1000}).ok());
  EXPECT_FALSE(FixedWindow::create({5, kMaxSafeInteger + 1}).ok());
  EXPECT_TRUE(FixedWindow::create({kMaxSafeInteger, kMaxSafeInteger}).ok());
}

}  // namespace
}  // namespace fixed_window_test
}  // namespace throttlekit
