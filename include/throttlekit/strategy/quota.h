// throttlekit/strategy/quota.h
//
// Provides `Quota`: fixed-window counting over calendar periods
// (docs/semantics.md, "Quota"): "1000 calls per day", "50 exports per
// month", counted in a fixed UTC offset so that a Lua script can reproduce
// every boundary.
//
// A period is `[start, reset)` in epoch ms, computed from `now` in local time
// `local = now + offset_minutes * 60000` (no DST):
//
//     day   : local midnight to the next local midnight
//     week  : the local midnight of the last `week_starts_on` day (0 = Sunday,
//             default 1 = Monday) to 7 days later
//     month : local midnight of the 1st to the 1st of the next month
//     fixed : start = anchor_ms + floor((now - anchor_ms) / period_ms)
//                     * period_ms, reset = start + period_ms
//
// Civil dates use Howard Hinnant's days_from_civil / civil_from_days with
// floor division (civil_time.h), so epochs before 1970 and anchors in the
// future work. Within a period it counts like the fixed window: state
// `{start, count}`;
//
//     allow iff count + cost <= limit -> count += cost,
//                                        remaining = max(0, floor(limit -
//                                        count))
//     deny (no write): remaining = max(0, floor(limit - count)),
//                      retry = ceil(reset - now)
//     reset_at = reset of the period counted in
//
// Choices where docs/semantics.md is silent (docs, pinned by quota_test.cc):
// - A stored `start` older than the current period counts as 0. A stored
//   `start` *newer* than the current period (the clock went back across a
//   boundary) keeps counting in the stored period: the clock never rolls a
//   quota back, so at most `limit` is charged to any period; the decision
//   reports that period's reset, and the retry is measured from `now`.
// - A cost above `limit` never passes; its denial carries the finite hint
//   `ceil(reset - now)` (the wait until the period resets).
// - `now_ms` (and `anchor_ms`) must lie within +-(2^53 - 1) ms; dates before
//   1970 are supported.

#ifndef THROTTLEKIT_STRATEGY_QUOTA_H_
#define THROTTLEKIT_STRATEGY_QUOTA_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

// The calendar unit a `Quota` counts in.
enum class QuotaPeriod { kDay = 0, kWeek = 1, kMonth = 2, kFixed = 3 };

// One quota period, half-open: `start_ms <= now < reset_ms`.
struct QuotaWindow {
  int64_t start_ms = 0;
  int64_t reset_ms = 0;
  friend constexpr bool operator==(const QuotaWindow&,
                                   const QuotaWindow&) = default;
};

class Quota {
 public:
  struct Options {
    // Units per period; 1 .. 2^53-1.
    int64_t limit = 0;
    QuotaPeriod period = QuotaPeriod::kDay;
    // kWeek: the first day of the week, 0 = Sunday .. 6 = Saturday.
    int64_t week_starts_on = 1;
    // The fixed UTC offset of the calendar, in minutes; -840 .. 840.
    int64_t offset_minutes = 0;
    // kFixed: an instant on a period boundary, epoch ms; may lie in the
    // future. -(2^53-1) .. 2^53-1.
    int64_t anchor_ms = 0;
    // kFixed: the period in ms; 1 .. 2^53-1. Ignored by calendar periods.
    int64_t period_ms = 0;
  };

  // The period counted in and the units charged to it. Cold: no period.
  struct State {
    int64_t start_ms = std::numeric_limits<int64_t>::min();
    double count = 0;
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "quota";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<Quota> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "quota", {{"limit", options.limit},
                      {"period", static_cast<int64_t>(options.period), 0, 3},
                      {"week_starts_on", options.week_starts_on, 0, 6},
                      {"offset_minutes", options.offset_minutes, -840, 840}});
        !s.ok()) {
      return s;
    }
    if (options.period == QuotaPeriod::kFixed) {
      if (auto s = detail::check_int_options(
              "quota", {{"period_ms", options.period_ms},
                        {"anchor_ms", options.anchor_ms, -kMaxSafeInteger}});
          !s.ok()) {
        return s;
      }
    }
    return Quota(options);
  }

  const Options& options() const noexcept { return options_; }

  // The period length for the `RateLimit-Policy` header: a day, a week,
  // the longest month (31 days), or `period_ms`.
  int64_t policy_window_ms() const noexcept {
    switch (options_.period) {
      case QuotaPeriod::kDay:
        return detail::kMsPerDay;
      case QuotaPeriod::kWeek:
        return 7 * detail::kMsPerDay;
      case QuotaPeriod::kMonth:
        return 31 * detail::kMsPerDay;
      case QuotaPeriod::kFixed:
        break;
    }
    return options_.period_ms;
  }

  // The period `[start, reset)` that contains `now_ms`
  // (|now_ms| <= 2^53-1). Pure; thread-safe.
  QuotaWindow period_at(int64_t now_ms) const noexcept {
    if (options_.period == QuotaPeriod::kFixed) {
      const int64_t start =
          options_.anchor_ms +
          detail::floor_div(now_ms - options_.anchor_ms, options_.period_ms) *
              options_.period_ms;
      return QuotaWindow{start, start + options_.period_ms};
    }
    const int64_t local_ms = now_ms + offset_ms_;
    const int64_t today = detail::floor_div(local_ms, detail::kMsPerDay);
    int64_t first_day = today;
    int64_t next_day = today + 1;
    if (options_.period == QuotaPeriod::kWeek) {
      first_day = today - detail::floor_mod(detail::weekday_from_days(today) -
                                                options_.week_starts_on,
                                            7);
      next_day = first_day + 7;
    } else if (options_.period == QuotaPeriod::kMonth) {
      const detail::CivilDate date = detail::civil_from_days(today);
      first_day = detail::days_from_civil({date.year, date.month, 1});
      next_day = date.month == 12
                     ? detail::days_from_civil({date.year + 1, 1, 1})
                     : detail::days_from_civil({date.year, date.month + 1, 1});
    }
    return QuotaWindow{first_day * detail::kMsPerDay - offset_ms_,
                       next_day * detail::kMsPerDay - offset_ms_};
  }

  // See strategy.h. `cost` must be valid (`validate_cost`). Writes `state`
  // only when allowed. Not thread-safe on one `state`.
  Decision check(State& state, int64_t now_ms, double cost) const noexcept {
    const Counted c = counted(state, now_ms);
    if (c.count + cost <= limit_) {
      state = State{c.window.start_ms, c.count + cost};
      return Decision{true, options_.limit, remaining(state.count),
                      c.window.reset_ms, 0};
    }
    return deny(c, now_ms);
  }

  // See strategy.h: the cost-1 decision, consuming nothing; on allow
  // `remaining` is the current capacity.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const Counted c = counted(state, now_ms);
    if (c.count + 1 <= limit_) {
      return Decision{true, options_.limit, remaining(c.count),
                      c.window.reset_ms, 0};
    }
    return deny(c, now_ms);
  }

  // See strategy.h. A request that does not fit now first fits at the
  // reset (for a cost above `limit`, that is the finite hint). Full at
  // `now` when nothing is charged, else at the reset.
  Forecast forecast(const State& state, int64_t now_ms,
                    double cost) const noexcept {
    const Counted c = counted(state, now_ms);
    const int64_t next = c.count + cost <= limit_
                             ? now_ms
                             : now_ms + retry_after(c.window, now_ms);
    return Forecast{remaining(c.count), next,
                    c.count > 0 ? c.window.reset_ms : now_ms};
  }

  // The reset of the stored period: from then on the stored start is older
  // than the current period and counts as 0, exactly cold. INT64_MIN cold.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (state.start_ms == std::numeric_limits<int64_t>::min()) {
      return state.start_ms;
    }
    return period_at(state.start_ms).reset_ms;
  }

 private:
  explicit Quota(const Options& o)
      : options_(o),
        limit_(static_cast<double>(o.limit)),
        offset_ms_(o.offset_minutes * 60'000) {}

  // The period a call at `now` counts in and the units already in it.
  struct Counted {
    QuotaWindow window;
    double count;
  };

  Counted counted(const State& state, int64_t now_ms) const noexcept {
    const QuotaWindow current = period_at(now_ms);
    if (state.start_ms == current.start_ms) return {current, state.count};
    if (state.start_ms > current.start_ms) {
      // The clock went back across a boundary: the newer period holds.
      return {period_at(state.start_ms), state.count};
    }
    return {current, 0};
  }

  // max(0, floor(limit - count))
  int64_t remaining(double count) const noexcept {
    return std::max<int64_t>(0, detail::floor_to_int(limit_ - count));
  }

  // ceil(reset - now)
  static int64_t retry_after(const QuotaWindow& w, int64_t now_ms) noexcept {
    return detail::ceil_to_int(static_cast<double>(w.reset_ms) -
                               static_cast<double>(now_ms));
  }

  Decision deny(const Counted& c, int64_t now_ms) const noexcept {
    return Decision{false, options_.limit, remaining(c.count),
                    c.window.reset_ms, retry_after(c.window, now_ms)};
  }

  Options options_;
  double limit_;
  int64_t offset_ms_;
};

static_assert(Strategy<Quota>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_QUOTA_H_
