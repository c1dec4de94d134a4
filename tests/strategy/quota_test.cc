#include "throttlekit/strategy/quota.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/created.h"
#include "support/test_time.h"
#include "throttlekit/strategy/civil_time.h"

namespace throttlekit {
namespace quota_test {
namespace {

using std::chrono::sys_days;
using std::chrono::year;
using std::chrono::year_month_day;

using testing::kEpoch;  // 2023-11-14T22:13:20Z
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 86'400'000;

// Epoch ms of UTC midnight of y-m-d, by the standard library (the oracle).
int64_t utc(int y, unsigned m, unsigned d) {
  const sys_days days{
      year_month_day{year{y}, std::chrono::month{m}, std::chrono::day{d}}};
  return int64_t{days.time_since_epoch().count()} * kDay;
}

Quota make(Quota::Options o) { return testing::created<Quota>(o); }

Quota::Options daily(int64_t limit, int64_t offset_minutes = 0) {
  Quota::Options o;
  o.limit = limit;
  o.period = QuotaPeriod::kDay;
  o.offset_minutes = offset_minutes;
  return o;
}

Quota::Options monthly(int64_t limit, int64_t offset_minutes = 0) {
  Quota::Options o = daily(limit, offset_minutes);
  o.period = QuotaPeriod::kMonth;
  return o;
}

Quota::Options weekly(int64_t limit, int64_t starts_on,
                      int64_t offset_minutes = 0) {
  Quota::Options o = daily(limit, offset_minutes);
  o.period = QuotaPeriod::kWeek;
  o.week_starts_on = starts_on;
  return o;
}

Quota::Options fixed(int64_t limit, int64_t anchor_ms, int64_t period_ms) {
  Quota::Options o = daily(limit);
  o.period = QuotaPeriod::kFixed;
  o.anchor_ms = anchor_ms;
  o.period_ms = period_ms;
  return o;
}

TEST(CivilTime, MatchesStdChronoAcrossCenturies) {
  // Every day from 1600-01-01 to 2400-12-31, both directions.
  const int64_t first = utc(1600, 1, 1) / kDay;
  const int64_t last = utc(2400, 12, 31) / kDay;
  for (int64_t d = first; d <= last; ++d) {
    const year_month_day ymd{sys_days{std::chrono::days{static_cast<int>(d)}}};
    const detail::CivilDate want{static_cast<int>(ymd.year()),
                                 static_cast<unsigned>(ymd.month()),
                                 static_cast<unsigned>(ymd.day())};
    ASSERT_EQ(detail::civil_from_days(d), want) << d;
    ASSERT_EQ(detail::days_from_civil(want), d) << d;
    const std::chrono::weekday wd{sys_days{std::chrono::days{d}}};
    ASSERT_EQ(detail::weekday_from_days(d), int64_t{wd.c_encoding()}) << d;
  }
}

TEST(CivilTime, KnownDatesAndFloorDivision) {
  EXPECT_EQ(detail::days_from_civil({1970, 1, 1}), 0);
  EXPECT_EQ(detail::days_from_civil({1969, 12, 31}), -1);
  EXPECT_EQ(detail::days_from_civil({2000, 3, 1}), 11017);
  EXPECT_EQ(detail::civil_from_days(-1), (detail::CivilDate{1969, 12, 31}));
  EXPECT_EQ(detail::weekday_from_days(0), 4);   // Thursday
  EXPECT_EQ(detail::weekday_from_days(-1), 3);  // Wednesday
  EXPECT_EQ(detail::floor_div(-1, kDay), -1);
  EXPECT_EQ(detail::floor_div(-kDay, kDay), -1);
  EXPECT_EQ(detail::floor_mod(-1, 7), 6);
}

TEST(Quota, DayPeriodInUtc) {
  Quota q = make(daily(3));
  EXPECT_EQ(q.period_at(kEpoch),
            (QuotaWindow{utc(2023, 11, 14), utc(2023, 11, 15)}));
  // Half-open: midnight belongs to the new day.
  EXPECT_EQ(q.period_at(utc(2023, 11, 15)).start_ms, utc(2023, 11, 15));
  EXPECT_EQ(q.period_at(utc(2023, 11, 15) - 1).start_ms, utc(2023, 11, 14));
}

TEST(Quota, PositiveOffsetMovesMidnight) {
  Quota q = make(daily(3, 540));  // UTC+9: local 2023-11-15 07:13
  EXPECT_EQ(q.period_at(kEpoch), (QuotaWindow{utc(2023, 11, 15) - 9 * kHour,
                                              utc(2023, 11, 16) - 9 * kHour}));
}

TEST(Quota, NegativeOffsetCrossingMidnightAndMonthEnd) {
  // 2024-03-01T03:00Z is 2024-02-29T22:00 in UTC-5 (a leap day).
  const int64_t now = utc(2024, 3, 1) + 3 * kHour;
  EXPECT_EQ(
      make(daily(1, -300)).period_at(now),
      (QuotaWindow{utc(2024, 2, 29) + 5 * kHour, utc(2024, 3, 1) + 5 * kHour}));
  EXPECT_EQ(
      make(monthly(1, -300)).period_at(now),
      (QuotaWindow{utc(2024, 2, 1) + 5 * kHour, utc(2024, 3, 1) + 5 * kHour}));
  // In UTC the same instant is already March.
  EXPECT_EQ(make(monthly(1)).period_at(now).start_ms, utc(2024, 3, 1));
  // The extreme offsets.
  EXPECT_EQ(make(daily(1, 840)).period_at(utc(2024, 1, 1)).start_ms,
            utc(2024, 1, 1) - 14 * kHour);
  EXPECT_EQ(make(daily(1, -840)).period_at(utc(2024, 1, 1)).start_ms,
            utc(2023, 12, 31) + 14 * kHour);
}

TEST(Quota, MonthEndsAndLeapYears) {
  Quota q = make(monthly(5));
  EXPECT_EQ(q.period_at(utc(2023, 1, 31) + kDay - 1),
            (QuotaWindow{utc(2023, 1, 1), utc(2023, 2, 1)}));
  EXPECT_EQ(q.period_at(utc(2023, 2, 1)),
            (QuotaWindow{utc(2023, 2, 1), utc(2023, 3, 1)}));
  EXPECT_EQ(utc(2023, 3, 1) - utc(2023, 2, 1), 28 * kDay);
  // 2024 and 2000 are leap years, 2100 is not.
  const QuotaWindow feb2024 = q.period_at(utc(2024, 2, 29) + 5);
  EXPECT_EQ(feb2024, (QuotaWindow{utc(2024, 2, 1), utc(2024, 3, 1)}));
  EXPECT_EQ(feb2024.reset_ms - feb2024.start_ms, 29 * kDay);
  const QuotaWindow feb2000 = q.period_at(utc(2000, 2, 15));
  EXPECT_EQ(feb2000.reset_ms - feb2000.start_ms, 29 * kDay);
  const QuotaWindow feb2100 = q.period_at(utc(2100, 2, 28) + kDay - 1);
  EXPECT_EQ(feb2100, (QuotaWindow{utc(2100, 2, 1), utc(2100, 3, 1)}));
  EXPECT_EQ(feb2100.reset_ms - feb2100.start_ms, 28 * kDay);
  // December rolls into the next year.
  EXPECT_EQ(q.period_at(utc(2023, 12, 31) + 7),
            (QuotaWindow{utc(2023, 12, 1), utc(2024, 1, 1)}));
}

TEST(Quota, WeekStartsOnTheConfiguredDay) {
  // kEpoch is Tuesday 2023-11-14.
  EXPECT_EQ(make(weekly(1, 1)).period_at(kEpoch),
            (QuotaWindow{utc(2023, 11, 13), utc(2023, 11, 20)}));
  EXPECT_EQ(make(weekly(1, 0)).period_at(kEpoch),
            (QuotaWindow{utc(2023, 11, 12), utc(2023, 11, 19)}));
  EXPECT_EQ(make(weekly(1, 2)).period_at(kEpoch).start_ms, utc(2023, 11, 14));
  EXPECT_EQ(make(weekly(1, 3)).period_at(kEpoch).start_ms, utc(2023, 11, 8));
  EXPECT_EQ(make(weekly(1, 6)).period_at(kEpoch).start_ms, utc(2023, 11, 11));
  // Default is Monday.
  Quota::Options o;
  o.limit = 1;
  o.period = QuotaPeriod::kWeek;
  EXPECT_EQ(make(o).period_at(kEpoch).start_ms, utc(2023, 11, 13));
  // In UTC+14 it is already Wednesday 12:13, still the Monday week, which
  // started at Monday local midnight.
  EXPECT_EQ(make(weekly(1, 1, 840)).period_at(kEpoch).start_ms,
            utc(2023, 11, 13) - 14 * kHour);
  // In UTC-14 it is Tuesday 08:13 local.
  EXPECT_EQ(make(weekly(1, 3, -840)).period_at(kEpoch).start_ms,
            utc(2023, 11, 8) + 14 * kHour);
}

TEST(Quota, EpochsBefore1970AreSupported) {
  Quota day = make(daily(1));
  EXPECT_EQ(day.period_at(-1), (QuotaWindow{-kDay, 0}));
  EXPECT_EQ(day.period_at(-kDay), (QuotaWindow{-kDay, 0}));
  Quota month = make(monthly(1));
  EXPECT_EQ(month.period_at(utc(1900, 2, 28) + 1),
            (QuotaWindow{utc(1900, 2, 1), utc(1900, 3, 1)}));
  EXPECT_EQ(month.period_at(-1), (QuotaWindow{utc(1969, 12, 1), 0}));
  Quota week = make(weekly(1, 1));
  // 1969-12-31 was a Wednesday; its week started Monday 1969-12-29.
  EXPECT_EQ(week.period_at(-1).start_ms, utc(1969, 12, 29));
  Quota::State s;
  EXPECT_EQ(day.check(s, -5, 1), (Decision{true, 1, 0, 0, 0}));
  EXPECT_EQ(day.check(s, -4, 1), (Decision{false, 1, 0, 0, 4}));
}

TEST(Quota, FixedPeriodWithAnchorInThePastAndFuture) {
  const int64_t anchor = kEpoch + 123;  // in the future
  Quota q = make(fixed(2, anchor, kHour));
  EXPECT_EQ(q.period_at(kEpoch), (QuotaWindow{anchor - kHour, anchor}));
  EXPECT_EQ(q.period_at(anchor), (QuotaWindow{anchor, anchor + kHour}));
  EXPECT_EQ(q.period_at(anchor - 3 * kHour - 1).start_ms, anchor - 4 * kHour);
  EXPECT_EQ(q.period_at(anchor + 5 * kHour + 7).start_ms, anchor + 5 * kHour);
  EXPECT_EQ(q.policy_window_ms(), kHour);
  Quota::State s;
  EXPECT_EQ(q.check(s, kEpoch, 2), (Decision{true, 2, 0, anchor, 0}));
  EXPECT_EQ(q.check(s, kEpoch + 1, 1), (Decision{false, 2, 0, anchor, 122}));
  EXPECT_EQ(q.check(s, anchor, 1), (Decision{true, 2, 1, anchor + kHour, 0}));
}

TEST(Quota, CountsToLimitThenDeniesUntilReset) {
  Quota q = make(daily(3));
  const int64_t reset = utc(2023, 11, 15);
  Quota::State s;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(q.check(s, kEpoch + i, 1), (Decision{true, 3, 2 - i, reset, 0}));
  }
  EXPECT_EQ(s, (Quota::State{utc(2023, 11, 14), 3}));
  const Quota::State before = s;
  const Decision d = q.check(s, kEpoch, 1);
  EXPECT_EQ(d, (Decision{false, 3, 0, reset, reset - kEpoch}));
  EXPECT_EQ(q.check(s, kEpoch, 1), d);  // repeated denials agree
  EXPECT_EQ(s, before);
  EXPECT_EQ(q.check(s, reset - 1, 1), (Decision{false, 3, 0, reset, 1}));
  // The new period counts from 0.
  EXPECT_EQ(q.check(s, reset, 1), (Decision{true, 3, 2, reset + kDay, 0}));
}

TEST(Quota, FractionalCostAndEqualityAtLimit) {
  Quota q = make(daily(3));
  Quota::State s;
  EXPECT_EQ(q.check(s, kEpoch, 0.5).remaining, 2);  // floor(3 - 0.5)
  EXPECT_TRUE(q.check(s, kEpoch, 2.5).allowed);     // 0.5 + 2.5 == 3 admits
  EXPECT_EQ(s.count, 3.0);
  EXPECT_FALSE(q.check(s, kEpoch, 0.01).allowed);
}

TEST(Quota, CostAboveLimitNeverPassesButHasFiniteRetry) {
  Quota q = make(monthly(10));
  Quota::State s;
  const int64_t now = utc(2024, 2, 10);
  EXPECT_EQ(q.check(s, now, 11),
            (Decision{false, 10, 10, utc(2024, 3, 1), utc(2024, 3, 1) - now}));
  EXPECT_EQ(s, Quota::State{});  // a denied cold key stays cold
}

TEST(Quota, BackwardClockAcrossBoundaryKeepsTheNewerPeriod) {
  Quota q = make(daily(3));
  const int64_t midnight = utc(2023, 11, 15);
  Quota::State s;
  ASSERT_TRUE(q.check(s, midnight + 10, 2).allowed);
  // Back 20 ms, into the previous day: the newer period still counts.
  EXPECT_EQ(q.check(s, midnight - 10, 1),
            (Decision{true, 3, 0, midnight + kDay, 0}));
  EXPECT_EQ(s, (Quota::State{midnight, 3}));  // charged to the newer day
  EXPECT_EQ(q.check(s, midnight - 10, 1),
            (Decision{false, 3, 0, midnight + kDay, kDay + 10}));
  EXPECT_EQ(q.peek(s, midnight - 10),
            (Decision{false, 3, 0, midnight + kDay, kDay + 10}));
}

TEST(Quota, BackwardClockWithinPeriodCountsAsUsual) {
  Quota q = make(daily(2));
  Quota::State s;
  ASSERT_TRUE(q.check(s, kEpoch, 1).allowed);
  EXPECT_EQ(q.check(s, kEpoch - kHour, 1),
            (Decision{true, 2, 0, utc(2023, 11, 15), 0}));
}

TEST(Quota, PeekAndForecastWriteNothing) {
  Quota q = make(daily(4));
  const int64_t reset = utc(2023, 11, 15);
  Quota::State s;
  EXPECT_EQ(q.peek(s, kEpoch), (Decision{true, 4, 4, reset, 0}));
  EXPECT_EQ(q.forecast(s, kEpoch, 4), (Forecast{4, kEpoch, kEpoch}));
  ASSERT_TRUE(q.check(s, kEpoch, 3).allowed);
  const Quota::State before = s;
  EXPECT_EQ(q.peek(s, kEpoch), (Decision{true, 4, 1, reset, 0}));
  EXPECT_EQ(q.forecast(s, kEpoch, 1), (Forecast{1, kEpoch, reset}));
  EXPECT_EQ(q.forecast(s, kEpoch, 2), (Forecast{1, reset, reset}));
  EXPECT_EQ(q.forecast(s, kEpoch, 9), (Forecast{1, reset, reset}));
  EXPECT_EQ(s, before);
  // A stale period forecasts as cold.
  EXPECT_EQ(q.forecast(s, reset, 1), (Forecast{4, reset, reset}));
}

TEST(Quota, ExpiryIsTheStoredPeriodsReset) {
  Quota q = make(monthly(2, -300));
  Quota::State s;
  EXPECT_EQ(q.expires_at_ms(s), INT64_MIN);
  const int64_t now = utc(2024, 2, 29) + 12 * kHour;
  ASSERT_TRUE(q.check(s, now, 2).allowed);
  const int64_t exp = q.expires_at_ms(s);
  EXPECT_EQ(exp, utc(2024, 3, 1) + 5 * kHour);
  Quota::State warm = s;
  Quota::State cold;
  EXPECT_EQ(q.check(warm, exp, 2), q.check(cold, exp, 2));
  EXPECT_EQ(warm, cold);
  EXPECT_FALSE(q.peek(s, exp - 1).allowed);
}

TEST(Quota, PolicyWindow) {
  EXPECT_EQ(make(daily(1)).policy_window_ms(), kDay);
  EXPECT_EQ(make(weekly(1, 1)).policy_window_ms(), 7 * kDay);
  EXPECT_EQ(make(monthly(1)).policy_window_ms(), 31 * kDay);
}

TEST(Quota, RejectsBadOptionsNamingTheField) {
  const auto expect_bad = testing::expect_refused<Quota>;
  expect_bad(daily(0), "quota.limit must be in [1, 9007199254740991]");
  expect_bad(daily(kMaxSafeInteger + 1), "quota.limit");
  expect_bad(daily(1, 841), "quota.offset_minutes must be in [-840, 840]");
  expect_bad(daily(1, -841), "quota.offset_minutes");
  expect_bad(weekly(1, 7), "quota.week_starts_on must be in [0, 6]");
  expect_bad(weekly(1, -1), "quota.week_starts_on");
  expect_bad(fixed(1, 0, 0), "quota.period_ms must be in [1, ");
  expect_bad(fixed(1, kMaxSafeInteger + 1, 10), "quota.anchor_ms");
  Quota::Options bad_period = daily(1);
  bad_period.period = static_cast<QuotaPeriod>(9);
  expect_bad(bad_period, "quota.period must be in [0, 3]");
  EXPECT_TRUE(Quota::create(daily(1, 840)).ok());
  EXPECT_TRUE(Quota::create(daily(1, -840)).ok());
  EXPECT_TRUE(Quota::create(fixed(1, -kMaxSafeInteger, kMaxSafeInteger)).ok());
  // period_ms is ignored by calendar periods.
  EXPECT_TRUE(Quota::create(daily(1)).ok());
}

}  // namespace
}  // namespace quota_test
}  // namespace throttlekit
