// tests/support/strategy_bounds.h
//
// Provides `StrategyBounds<S>`: for each rate strategy, options sized for a
// given limit and window, and `check(load)`, which asserts the strategy's
// documented bound (docs/strategies.md) on a real-clock load
// (`real_clock_load.h`) counted per window:
//
// - GCRA, token bucket: at most burst + rate * D in any span D, by call
//   interval (20 spans' worth of the window), and in the whole run.
// - Fixed window, quota (fixed period), token budget (cost 1): at most
//   `limit` in each window named by a decision's reset_at.
// - Sliding window: at most `limit` in any S consecutive ticks (ticks named
//   by reset_at).
// - Sliding log: at most `limit` in any window (t - window_ms, t], by call
//   interval.
//
// Each `check` also returns a line of figures for the test log.

#ifndef THROTTLEKIT_TESTS_SUPPORT_STRATEGY_BOUNDS_H_
#define THROTTLEKIT_TESTS_SUPPORT_STRATEGY_BOUNDS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "support/real_clock_load.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit::testing {

// The most admissions whose reset_at lies in one [r, r + span_ms].
inline int64_t max_in_reset_span(const Load& load, int64_t span_ms) {
  std::map<int64_t, int64_t> per;
  for (const Admission& a : load.admitted) ++per[a.reset_at_ms];
  int64_t best = 0, sum = 0;
  auto lo = per.begin();
  for (auto hi = per.begin(); hi != per.end(); ++hi) {
    sum += hi->second;
    while (lo->first < hi->first - span_ms) sum -= (lo++)->second;
    best = std::max(best, sum);
  }
  return best;
}

// A window-counted bound: every window named by reset_at admits <= limit.
inline std::string check_per_window(const Load& load, int64_t limit) {
  const WindowCount w = max_per_window(load);
  EXPECT_LE(w.max, limit) << "window ending at " << w.worst_reset_at_ms;
  return absl::StrCat("windows ", w.windows, ", worst window ", w.max,
                      " (limit ", limit, ")");
}

// A rate bound: burst + rate_per_ms * D in any span D (by call interval)
// and over the whole run.
inline std::string check_rate(const Load& load, double burst,
                              double rate_per_ms, int64_t span_ms) {
  const int64_t worst = max_in_span(load, span_ms);
  const double span_bound = burst + rate_per_ms * static_cast<double>(span_ms);
  EXPECT_LE(static_cast<double>(worst), span_bound) << "span " << span_ms;
  const double total_bound =
      burst + rate_per_ms * static_cast<double>(load.end_ms - load.start_ms);
  const auto total = static_cast<double>(load.admitted.size());
  EXPECT_LE(total, total_bound);
  return absl::StrCat("worst ", span_ms, " ms span ", worst, " (bound ",
                      span_bound, "), total ", total, " (bound ", total_bound,
                      ", ratio ", total / total_bound, ")");
}

// The strategies counted per window (fixed window, quota, token budget),
// whose bound a stale `now` reviving an ended window would break.
using WindowedRateStrategies =
    ::testing::Types<FixedWindow, Quota, TokenBudget>;

// Every rate strategy, for typed tests.
using AllRateStrategies =
    ::testing::Types<Gcra, TokenBucket, FixedWindow, SlidingWindow, SlidingLog,
                     Quota, TokenBudget>;

template <class S>
struct StrategyBounds;

// GCRA and the token bucket: a burst of `limit`, then `limit` per window.
struct RateBounds {
  static std::string check(const Load& load, int64_t limit, int64_t window_ms) {
    return check_rate(load, static_cast<double>(limit),
                      static_cast<double>(limit) / window_ms, 2 * window_ms);
  }
};

template <>
struct StrategyBounds<Gcra> : RateBounds {
  static Gcra::Options options(int64_t limit, int64_t window_ms) {
    return {limit, window_ms, limit};
  }
};

template <>
struct StrategyBounds<TokenBucket> : RateBounds {
  static TokenBucket::Options options(int64_t limit, int64_t window_ms) {
    return {limit, 1000.0 * static_cast<double>(limit) / window_ms};
  }
};

template <>
struct StrategyBounds<FixedWindow> {
  static FixedWindow::Options options(int64_t limit, int64_t window_ms) {
    return {limit, window_ms};
  }
  static std::string check(const Load& load, int64_t limit, int64_t) {
    return check_per_window(load, limit);
  }
};

template <>
struct StrategyBounds<Quota> {
  static Quota::Options options(int64_t limit, int64_t window_ms) {
    Quota::Options o;
    o.limit = limit;
    o.period = QuotaPeriod::kFixed;
    o.period_ms = window_ms;
    return o;
  }
  static std::string check(const Load& load, int64_t limit, int64_t) {
    return check_per_window(load, limit);
  }
};

template <>
struct StrategyBounds<TokenBudget> {
  static TokenBudget::Options options(int64_t limit, int64_t window_ms) {
    return {limit, window_ms};
  }
  static std::string check(const Load& load, int64_t limit, int64_t) {
    return check_per_window(load, limit);  // cost 1: largest debit 1
  }
};

// Five ticks a window (window_ms must be a multiple of 5, so a tick is a
// whole number of ms and reset_at names it exactly).
template <>
struct StrategyBounds<SlidingWindow> {
  static constexpr int64_t kBuckets = 5;
  static SlidingWindow::Options options(int64_t limit, int64_t window_ms) {
    EXPECT_EQ(window_ms % kBuckets, 0);
    return {limit, window_ms, kBuckets};
  }
  static std::string check(const Load& load, int64_t limit, int64_t window_ms) {
    const int64_t tick = window_ms / kBuckets;
    const int64_t worst = max_in_reset_span(load, (kBuckets - 1) * tick);
    EXPECT_LE(worst, limit);
    return absl::StrCat("ticks ", max_per_window(load).windows, ", worst ",
                        kBuckets, " consecutive ticks ", worst, " (limit ",
                        limit, ")");
  }
};

template <>
struct StrategyBounds<SlidingLog> {
  static SlidingLog::Options options(int64_t limit, int64_t window_ms) {
    return {limit, window_ms};
  }
  static std::string check(const Load& load, int64_t limit, int64_t window_ms) {
    const int64_t worst = max_in_span(load, window_ms - 1);
    EXPECT_LE(worst, limit);
    return absl::StrCat("worst window of ", window_ms, " ms ", worst,
                        " (limit ", limit, "), total ", load.admitted.size());
  }
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_STRATEGY_BOUNDS_H_
