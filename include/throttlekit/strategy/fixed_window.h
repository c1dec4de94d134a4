// throttlekit/strategy/fixed_window.h
//
// Provides `FixedWindow`, the fixed-window counter (docs/semantics.md,
// "Fixed window"): at most `limit` units per epoch-aligned window of
// `window_ms`. Its state is the window start and the units counted in it.
//
// For a request of `cost` at `now`:
//
//     start    = floor(now / window_ms) * window_ms
//     start    = max(start, state.start)    (a stale `now`: the newer window)
//     reset_at = start + window_ms          (windows are [start, reset_at))
//     count    = (state.start == start) ? state.count : 0
//     allow iff count + cost <= limit:  state = {start, count + cost}
//         remaining = max(0, floor(limit - (count + cost)))
//     deny (state untouched):
//         remaining = max(0, floor(limit - count))
//         retry     = ceil(reset_at - now)
//
// The reported limit is `limit`; the policy window is `window_ms`. Up to
// 2 x limit can pass across one window boundary: the known price of this
// strategy.
//
// Choices where docs/semantics.md is silent (docs/strategies.md; pinned by
// tests/strategy/fixed_window_test.cc):
// - A `now` in a window older than the stored one (a backward clock step,
//   or, under threads, a caller that read the clock before another committed
//   a later window) is stale: the call counts into the stored, newer window,
//   as `Quota` does, and its retry is measured from the caller's `now`. No
//   window ever admits more than `limit`: stricter, never looser.
//   ThrottleKit 1.x read the count as 0 there and overwrote the newer
//   window (docs/semantics.md, "A stale now"); forward-clock decisions are
//   unchanged.
// - A cost above `limit` never passes; its denial carries the finite hint
//   `ceil(reset_at - now)` (the next window, where it still cannot pass).
// - `reset_at_ms` is `start + window_ms` in every decision, even for a key
//   that has counted nothing; `Forecast::full_at_ms` is `now` when the count
//   is 0 and `reset_at` otherwise.

#ifndef THROTTLEKIT_STRATEGY_FIXED_WINDOW_H_
#define THROTTLEKIT_STRATEGY_FIXED_WINDOW_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class FixedWindow {
 public:
  struct Options {
    // Units per window; 1 .. 2^53-1.
    int64_t limit = 0;
    // The window length in ms; 1 .. 2^53-1.
    int64_t window_ms = 0;
  };

  // The start (epoch ms, an integer held in a double) of the window `count`
  // belongs to. Cold is `start = -infinity`, which no window start equals, so
  // the count reads 0 with no special case.
  struct State {
    double start = -std::numeric_limits<double>::infinity();
    double count = 0;
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "fixed_window";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<FixedWindow> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "fixed_window",
            {{"limit", options.limit}, {"window_ms", options.window_ms}});
        !s.ok()) {
      return s;
    }
    return FixedWindow(options);
  }

  const Options& options() const noexcept { return options_; }
  int64_t policy_window_ms() const noexcept { return options_.window_ms; }

  // See strategy.h. Writes `state` only when allowed. Thread-safety: const;
  // the caller serialises access to `state`.
  Decision check(State& state, int64_t now_ms, double cost) const noexcept {
    const Window win = window(state, now_ms);
    const double projected = win.count + cost;
    if (projected <= limit_) {
      state = State{win.start, projected};
      return Decision{true, options_.limit, remaining(projected),
                      detail::to_int(win.reset_at), 0};
    }
    return Decision{false, options_.limit, remaining(win.count),
                    detail::to_int(win.reset_at), retry(win, now_ms)};
  }

  // See strategy.h: the cost-1 decision; `remaining` is what the window has
  // left now. Thread-safety: const.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const Window win = window(state, now_ms);
    const bool allowed = win.count + 1.0 <= limit_;
    return Decision{allowed, options_.limit, remaining(win.count),
                    detail::to_int(win.reset_at),
                    allowed ? 0 : retry(win, now_ms)};
  }

  // See strategy.h. `next_replenish_at_ms` is `now` if `cost` fits the
  // current window, else `reset_at` (exact: a new window starts at 0; for a
  // cost above `limit` this equals `now + retry`, the hint of `check`).
  // `full_at_ms` is `now` when the window's count is 0, else `reset_at`.
  // Thread-safety: const.
  Forecast forecast(const State& state, int64_t now_ms,
                    double cost) const noexcept {
    const Window win = window(state, now_ms);
    const int64_t reset_at = detail::to_int(win.reset_at);
    return Forecast{remaining(win.count),
                    win.count + cost <= limit_ ? now_ms : reset_at,
                    win.count == 0 ? now_ms : reset_at};
  }

  // `start + window_ms`: from then on the current start differs from the
  // stored one, so the count reads 0 exactly as for a cold key. INT64_MIN for
  // the cold state. Thread-safety: const.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (std::isinf(state.start)) return std::numeric_limits<int64_t>::min();
    return detail::to_int(state.start + window_);
  }

 private:
  struct Window {
    double start;
    double reset_at;
    double count;  // the stored count if it belongs to this window, else 0
  };

  explicit FixedWindow(const Options& o)
      : options_(o),
        limit_(static_cast<double>(o.limit)),
        window_(static_cast<double>(o.window_ms)) {}

  Window window(const State& s, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double start =
        std::max(detail::floor_d(now / window_) * window_, s.start);
    return Window{start, start + window_, s.start == start ? s.count : 0.0};
  }

  // max(0, floor(limit - count))
  int64_t remaining(double count) const noexcept {
    return std::max<int64_t>(0, detail::floor_to_int(limit_ - count));
  }

  // ceil(reset_at - now)
  static int64_t retry(const Window& win, int64_t now_ms) noexcept {
    return detail::to_int(
        detail::ceil_d(win.reset_at - static_cast<double>(now_ms)));
  }

  Options options_;
  double limit_;
  double window_;
};

static_assert(Strategy<FixedWindow>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_FIXED_WINDOW_H_
