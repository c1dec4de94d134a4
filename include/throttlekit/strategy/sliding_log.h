// throttlekit/strategy/sliding_log.h
//
// Provides `SlidingLog`, the exact sliding-window log (SEMANTICS.md,
// "Sliding window log (exact)"): the only strategy that never admits more
// than `limit` units in any window of `window_ms`, at the price of state that
// grows with the number of distinct admission instants inside one window.
//
// A request of `cost` is charged `units = ceil(cost)`. The state is the
// multiset of timestamps of admitted units, kept as ascending runs
// `(timestamp, count)` so that a cost-1000 request stores one run, not 1000
// copies. With `survivors` = units whose timestamp `ts > now - window_ms` and
// `count` = their number:
//
//     allow iff count + units <= limit
//       -> prune the expired runs, add `units` at `now`
//          remaining = max(0, limit - count - units)
//          reset_at  = ceil(oldest + window_ms)  (oldest after the append)
//     deny (no write):
//          remaining = max(0, limit - count)
//          reset_at  = ceil(oldest + window_ms)  (oldest = now when empty)
//          retry     = window_ms                                 if count == 0
//                      max(1, ceil(kth_oldest + window_ms - now)) otherwise,
//                      k = clamp(count + units - limit, 1, count)
//
// Choices where SEMANTICS.md is silent (docs, pinned by sliding_log_test.cc):
// - Clock moving backwards: units stamped later than `now` are survivors
//   (only `ts <= now - window_ms` is expired), so a backward jump makes the
//   log stricter, never looser. A unit admitted at a `now` earlier than the
//   newest run is inserted at its sorted position, exactly as a Redis sorted
//   set scored by `now` orders it; `kth_oldest` is by timestamp.
// - Expired runs are dropped only by an allowed call (a denial writes
//   nothing). Once dropped they stay dropped even if the clock later moves
//   back by more than a window.
// - A cost above `limit` can never pass; its denial carries the finite hint
//   `window_ms` on an empty log, else the wait until the whole log expires.

#ifndef THROTTLEKIT_STRATEGY_SLIDING_LOG_H_
#define THROTTLEKIT_STRATEGY_SLIDING_LOG_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class SlidingLog {
 public:
  struct Options {
    // Units admitted per window; 1 .. 2^53-1.
    int64_t limit = 0;
    // The window in ms; 1 .. 2^53-1.
    int64_t window_ms = 0;
  };

  // `count` units admitted at epoch ms `at_ms`.
  struct Run {
    int64_t at_ms = 0;
    int64_t count = 0;
    friend bool operator==(const Run&, const Run&) = default;
  };

  // The admitted units as runs with strictly ascending `at_ms` and
  // `count >= 1`. Default-constructed (cold) it is empty and allocates
  // nothing. After any allowed call the runs hold at most `limit` units.
  struct State {
    std::vector<Run> runs;
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "sliding_log";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<SlidingLog> create(const Options& options) {
    if (auto s = detail::check_int_option("sliding_log", "limit", options.limit,
                                          1, kMaxSafeInteger);
        !s.ok()) {
      return s;
    }
    if (auto s = detail::check_int_option(
            "sliding_log", "window_ms", options.window_ms, 1, kMaxSafeInteger);
        !s.ok()) {
      return s;
    }
    return SlidingLog(options);
  }

  const Options& options() const noexcept { return options_; }
  int64_t policy_window_ms() const noexcept { return options_.window_ms; }

  // See strategy.h. `cost` must be valid (`validate_cost`); it is charged
  // `ceil(cost)` units. Writes `state` only when allowed; an allowed call
  // may allocate (a new run). Not thread-safe on one `state`.
  Decision check(State& state, int64_t now_ms, double cost) const {
    const double now = static_cast<double>(now_ms);
    const size_t first = first_survivor(state, now);
    const int64_t count = count_from(state, first);
    const int64_t units = detail::ceil_to_int(cost);
    if (units > options_.limit - count)
      return deny(state, first, count, units, now);
    state.runs.erase(state.runs.begin(),
                     state.runs.begin() + static_cast<std::ptrdiff_t>(first));
    add_units(state, now_ms, units);
    return Decision{true, options_.limit,
                    std::max<int64_t>(0, options_.limit - count - units),
                    reset_at(static_cast<double>(state.runs.front().at_ms)), 0};
  }

  // See strategy.h: the decision for one unit, consuming nothing; on allow
  // `remaining` is the current capacity `limit - count`.
  Decision peek(const State& state, int64_t now_ms) const {
    const double now = static_cast<double>(now_ms);
    const size_t first = first_survivor(state, now);
    const int64_t count = count_from(state, first);
    if (count + 1 > options_.limit) return deny(state, first, count, 1, now);
    return Decision{true, options_.limit, options_.limit - count,
                    reset_at(oldest_or(state, first, now)), 0};
  }

  // See strategy.h. `next_replenish_at_ms` is exact: the instant the
  // k-th oldest unit expires (or `now + window_ms` for a cost above `limit`
  // on an empty log). `full_at_ms` is when the newest unit expires (`now`
  // when empty): the instant the whole log is replenished.
  Forecast forecast(const State& state, int64_t now_ms, double cost) const {
    const double now = static_cast<double>(now_ms);
    const size_t first = first_survivor(state, now);
    const int64_t count = count_from(state, first);
    const int64_t units = detail::ceil_to_int(cost);
    const int64_t next =
        units <= options_.limit - count
            ? now_ms
            : now_ms + retry_after(state, first, count, units, now);
    const int64_t full =
        first == state.runs.size()
            ? now_ms
            : reset_at(static_cast<double>(state.runs.back().at_ms));
    return Forecast{std::max<int64_t>(0, options_.limit - count), next, full};
  }

  // The newest unit's expiry: at `now >= newest + window_ms` every unit is
  // pruned, so the log is exactly cold. `INT64_MIN` for an empty log.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (state.runs.empty()) return std::numeric_limits<int64_t>::min();
    return reset_at(static_cast<double>(state.runs.back().at_ms));
  }

  // The timestamp of the k-th oldest unit surviving at `now_ms` (1-based,
  // counting each run's units; `k` is clamped to [1, surviving units]).
  // `now_ms` when nothing survives. Exposed for tests and for the lock-free
  // ring that compares itself against this log.
  int64_t kth_oldest_ms(const State& state, int64_t now_ms, int64_t k) const {
    const size_t first = first_survivor(state, static_cast<double>(now_ms));
    const int64_t count = count_from(state, first);
    if (count == 0) return now_ms;
    return kth_from(state, first, std::clamp<int64_t>(k, 1, count));
  }

  // Units that survive at `now_ms` (timestamps `> now_ms - window_ms`).
  int64_t surviving_units(const State& state, int64_t now_ms) const {
    const double now = static_cast<double>(now_ms);
    return count_from(state, first_survivor(state, now));
  }

 private:
  explicit SlidingLog(const Options& o)
      : options_(o), window_(static_cast<double>(o.window_ms)) {}

  // Index of the first run with `at > now - window_ms` (runs ascend, so
  // everything before it is expired).
  size_t first_survivor(const State& state, double now) const {
    const double cutoff = now - window_;
    const auto it = std::upper_bound(state.runs.begin(), state.runs.end(),
                                     cutoff, [](double c, const Run& r) {
                                       return c < static_cast<double>(r.at_ms);
                                     });
    return static_cast<size_t>(it - state.runs.begin());
  }

  // The k-th oldest unit from run `first` on; 1 <= k <= count_from(first).
  static int64_t kth_from(const State& state, size_t first, int64_t k) {
    for (size_t i = first; i < state.runs.size(); ++i) {
      if (k <= state.runs[i].count) return state.runs[i].at_ms;
      k -= state.runs[i].count;
    }
    return state.runs.back().at_ms;  // unreachable for a valid k
  }

  static int64_t count_from(const State& state, size_t first) {
    int64_t n = 0;
    for (size_t i = first; i < state.runs.size(); ++i) n += state.runs[i].count;
    return n;
  }

  static double oldest_or(const State& state, size_t first, double now) {
    return first == state.runs.size()
               ? now
               : static_cast<double>(state.runs[first].at_ms);
  }

  // ceil(oldest + window_ms)
  int64_t reset_at(double oldest) const noexcept {
    return detail::ceil_to_int(oldest + window_);
  }

  int64_t retry_after(const State& state, size_t first, int64_t count,
                      int64_t units, double now) const {
    if (count == 0) return options_.window_ms;
    const int64_t k =
        std::clamp<int64_t>(count + units - options_.limit, 1, count);
    const double kth = static_cast<double>(kth_from(state, first, k));
    return std::max<int64_t>(1, detail::ceil_to_int(kth + window_ - now));
  }

  Decision deny(const State& state, size_t first, int64_t count, int64_t units,
                double now) const {
    return Decision{false, options_.limit,
                    std::max<int64_t>(0, options_.limit - count),
                    reset_at(oldest_or(state, first, now)),
                    retry_after(state, first, count, units, now)};
  }

  // Adds `units` at `now_ms`, keeping runs strictly ascending.
  static void add_units(State& state, int64_t now_ms, int64_t units) {
    auto& runs = state.runs;
    if (runs.empty() || runs.back().at_ms < now_ms) {
      runs.push_back(Run{now_ms, units});
      return;
    }
    // Clock behind the newest run: insert (or merge) at the sorted position.
    const auto it =
        std::lower_bound(runs.begin(), runs.end(), now_ms,
                         [](const Run& r, int64_t t) { return r.at_ms < t; });
    if (it != runs.end() && it->at_ms == now_ms) {
      it->count += units;
    } else {
      runs.insert(it, Run{now_ms, units});
    }
  }

  Options options_;
  double window_;
};

static_assert(Strategy<SlidingLog>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_SLIDING_LOG_H_
