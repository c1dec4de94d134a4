// throttlekit/strategy/civil_time.h
//
// Provides the proleptic-Gregorian civil-date arithmetic that `Quota` uses to
// find calendar periods (docs/semantics.md, "Quota"): days since 1970-01-01
// from a civil date and back, and the weekday of a day. It follows the math
// Howard Hinnant published for `days_from_civil` / `civil_from_days`: shift the
// year to start on March 1 so the leap day is the last day of the year, split
// the timeline into 400-year eras of 146097 days, and use floor division
// throughout so dates before 1970 (negative day numbers) work unchanged. All
// integer arithmetic, exact for every day number a `now_ms` within
// +-(2^53 - 1) ms can reach, and reproducible in Lua with `math.floor`.

#ifndef THROTTLEKIT_STRATEGY_CIVIL_TIME_H_
#define THROTTLEKIT_STRATEGY_CIVIL_TIME_H_

#include <cstdint>

namespace throttlekit::detail {

inline constexpr int64_t kMsPerDay = 86'400'000;

// floor(a / b) for b > 0.
constexpr int64_t floor_div(int64_t a, int64_t b) noexcept {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// a - b * floor(a / b) for b > 0: always in [0, b).
constexpr int64_t floor_mod(int64_t a, int64_t b) noexcept {
  return a - b * floor_div(a, b);
}

// A proleptic-Gregorian date: month 1..12, day 1..31.
struct CivilDate {
  int64_t year = 1970;
  int64_t month = 1;
  int64_t day = 1;
  friend constexpr bool operator==(const CivilDate&,
                                   const CivilDate&) = default;
};

// Days from 1970-01-01 to `date` (negative before it). `date` must be valid.
constexpr int64_t days_from_civil(const CivilDate& date) noexcept {
  // Years counted from March: Jan and Feb belong to the previous year.
  const int64_t y = date.month <= 2 ? date.year - 1 : date.year;
  const int64_t era = floor_div(y, 400);
  const int64_t year_of_era = y - era * 400;               // [0, 399]
  const int64_t month_from_march = (date.month + 9) % 12;  // Mar = 0
  const int64_t day_of_year =                              // [0, 365]
      (153 * month_from_march + 2) / 5 + (date.day - 1);
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 -
                             year_of_era / 100 + day_of_year;  // [0, 146096]
  // 719468 = days from 0000-03-01 to 1970-01-01.
  return era * 146097 + day_of_era - 719468;
}

// The civil date of day `days` since 1970-01-01.
constexpr CivilDate civil_from_days(int64_t days) noexcept {
  const int64_t z = days + 719468;  // days since 0000-03-01
  const int64_t era = floor_div(z, 146097);
  const int64_t day_of_era = z - era * 146097;  // [0, 146096]
  // Remove the leap days (every 4th year, not every 100th, every 400th) to
  // find the year of the era.
  const int64_t year_of_era = (day_of_era - day_of_era / 1460 +
                               day_of_era / 36524 - day_of_era / 146096) /
                              365;  // [0, 399]
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_from_march = (5 * day_of_year + 2) / 153;  // [0, 11]
  const int64_t day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  const int64_t month =
      month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  return CivilDate{year, month, day};
}

// Weekday of day `days` since 1970-01-01: 0 = Sunday .. 6 = Saturday
// (1970-01-01 was a Thursday).
constexpr int64_t weekday_from_days(int64_t days) noexcept {
  return floor_mod(days + 4, 7);
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STRATEGY_CIVIL_TIME_H_
