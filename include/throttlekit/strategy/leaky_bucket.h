// throttlekit/strategy/leaky_bucket.h
//
// Provides `LeakyBucket`, a shaper rather than a strategy
// (docs/semantics.md, "Leaky bucket"): instead of allowing or denying, it tells
// the caller how long to wait so that requests leave at a steady
// `rate_per_sec`, and rejects only when the wait would exceed `max_queue_ms`.
//
// With `T = 1000 / rate_per_sec` ms per unit and the state the next
// departure time (a double; cold = -infinity):
//
//     dep   = max(state or now, now)
//     delay = dep - now
//     reject iff delay > max_queue_ms  (no write)
//         delay_ms = ceil(delay - max_queue_ms)   (wait before retrying)
//     accept: state = dep + T * cost,  delay_ms = ceil(delay)
//
// An accepted request departs at `now + delay`; consecutive departures are
// spaced by `T * cost` of the earlier one. Equality (`delay ==
// max_queue_ms`) accepts. A clock that goes back only lengthens the delay.
// Any positive cost is accepted on an idle bucket (the queue bound is on the
// wait, not on the size).
//
// It does not model `Strategy`: there is no limit/remaining/reset decision,
// only `Reservation`. Immutable after `create`; safe to share across
// threads; states are plain values guarded by whoever holds them.

#ifndef THROTTLEKIT_STRATEGY_LEAKY_BUCKET_H_
#define THROTTLEKIT_STRATEGY_LEAKY_BUCKET_H_

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

// The answer of a shaper: proceed after `delay_ms`, or rejected (retry after
// `delay_ms`).
struct [[nodiscard]] Reservation {
  // The request joined the queue and may proceed after `delay_ms`.
  bool accepted = false;
  // accepted: ms to wait before proceeding (0 when the bucket is idle).
  // rejected: ms until the queue is short enough for this request.
  int64_t delay_ms = 0;

  friend constexpr bool operator==(const Reservation&,
                                   const Reservation&) = default;
};

class LeakyBucket {
 public:
  struct Options {
    // Units leaving per second; finite, > 0 and <= 2^53-1.
    double rate_per_sec = 0;
    // The longest wait a request may be given, ms; 0 .. 2^53-1.
    int64_t max_queue_ms = 0;
  };

  // The next departure time in epoch ms; -infinity when cold.
  struct State {
    double next_departure = -std::numeric_limits<double>::infinity();
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "leaky_bucket";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<LeakyBucket> create(const Options& options) {
    if (auto s = detail::check_positive_option(
            "leaky_bucket", "rate_per_sec", options.rate_per_sec,
            static_cast<double>(kMaxSafeInteger));
        !s.ok()) {
      return s;
    }
    if (auto s =
            detail::check_int_option("leaky_bucket", "max_queue_ms",
                                     options.max_queue_ms, 0, kMaxSafeInteger);
        !s.ok()) {
      return s;
    }
    return LeakyBucket(options);
  }

  const Options& options() const noexcept { return options_; }
  // T = 1000 / rate_per_sec, ms per unit.
  double interval_ms() const noexcept { return t_; }

  // Reserves a departure for `cost` units at `now_ms`. `cost` must be valid
  // (`validate_cost`). Writes `state` only when accepted. Not thread-safe on
  // one `state`.
  Reservation reserve(State& state, int64_t now_ms,
                      double cost) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double dep = std::max(state.next_departure, now);
    const double delay = dep - now;
    if (delay > max_queue_) {
      return Reservation{false, detail::ceil_to_int(delay - max_queue_)};
    }
    state.next_departure = dep + t_ * cost;
    return Reservation{true, detail::ceil_to_int(delay)};
  }

  // What `reserve` would answer at `now_ms` for any cost (the answer does
  // not depend on the cost, only the next state does), writing nothing.
  Reservation peek(const State& state, int64_t now_ms) const noexcept {
    State copy = state;
    return reserve(copy, now_ms, 1);
  }

  // The current wait (ceil(delay), 0 when idle): a caller arriving now
  // would be given this delay if accepted.
  int64_t queue_delay_ms(const State& state, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    return detail::ceil_to_int(std::max(state.next_departure, now) - now);
  }

  // ceil(next_departure): from then on `max(state, now) == now`, exactly
  // cold. INT64_MIN when cold.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (std::isinf(state.next_departure) && state.next_departure < 0) {
      return std::numeric_limits<int64_t>::min();
    }
    return detail::ceil_to_int(state.next_departure);
  }

 private:
  explicit LeakyBucket(const Options& o)
      : options_(o),
        t_(1000.0 / o.rate_per_sec),
        max_queue_(static_cast<double>(o.max_queue_ms)) {}

  Options options_;
  double t_;
  double max_queue_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_LEAKY_BUCKET_H_
