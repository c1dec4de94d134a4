// throttlekit/strategy/token_bucket.h
//
// Provides `TokenBucket`, the classic token bucket (docs/semantics.md,
// "Token bucket"): a bucket of `capacity` tokens refilled continuously at
// `refill_per_sec`. It allows bursts up to `capacity` and a sustained rate of
// `refill_per_sec`. Its state is two doubles, the tokens left and the instant
// they were counted.
//
// With `rate = refill_per_sec / 1000` (tokens per ms), for a request of
// `cost` at `now`:
//
//     t       = max(now, last)       (the latest instant the state has seen)
//     elapsed = max(0, now - last)
//     tokens  = min(capacity, tokens + elapsed * rate)
//     allow iff tokens >= cost:  new = tokens - cost;  state = {new, t}
//         remaining = max(0, floor(new))
//         reset_at  = full_at(state after the call)
//     deny (state untouched):
//         remaining = max(0, floor(tokens))
//         reset_at  = full_at(state)
//         retry     = (t - now) + ceil((cost - tokens) / rate)
//
// `reset_at` (and `forecast`'s `full_at_ms`) is the first whole ms T >= t
// at which the state the call leaves is full: at which
// `min(capacity, tokens + max(0, T - last) * rate) >= capacity`, the very
// test a check of `capacity` at T makes, so a client that waits until
// `reset_at` can spend the whole bucket, and not one ms earlier. The closed
// form `g = t + ceil((capacity - x) / rate)` (x the tokens at t) is only the
// search's guess: it rounds a quotient, while a later check sums a rounded
// product onto the stored tokens, so `g` can be a ms early or late (capacity
// 1 at 1/7 token/s: after a check of 1 at E, a peek at E + 16 gives
// g = E + 7000, where 0.9999999999999999 tokens are held). When g >= 2^53 - 1
// it is the answer (whole ms are no longer exact there). Redis and Postgres
// run the same search (docs/semantics.md, "Token bucket").
//
// The reported limit is `capacity`; the policy window is
// `max(1, ceil(capacity / rate))`, the time to refill an empty bucket.
//
// Choices where docs/semantics.md is silent (docs/strategies.md; each pinned
// by a test in tests/strategy/token_bucket_test.cc):
// - `capacity` is an integer (1 .. 2^53-1) so the reported limit is exact;
//   `refill_per_sec` is a double (finite, > 0, <= 2^53-1); costs may be
//   fractional.
// - A `now` behind `last` (a backward clock step, or, under threads, a
//   caller that read the clock before another committed a later one) is
//   stale: it refills nothing and the call is decided at `t = last`, which an
//   allowed call keeps. A stale `now` never refills an interval twice:
//   stricter, never looser. Under a forward clock `t = now` and every value
//   equals ThrottleKit 1.x, which stored the earlier `now` instead
//   (docs/semantics.md, "A stale now").
// - A cost above `capacity` never passes; its denial carries the finite hint
//   `ceil((cost - tokens) / rate)`: the wait an unbounded bucket would need.
// - Arithmetic that leaves the int64 range saturates (`detail::to_int`).

#ifndef THROTTLEKIT_STRATEGY_TOKEN_BUCKET_H_
#define THROTTLEKIT_STRATEGY_TOKEN_BUCKET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/internal/earliest.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class TokenBucket {
 public:
  struct Options {
    // Tokens a full bucket holds (the burst); 1 .. 2^53-1.
    int64_t capacity = 0;
    // Tokens added per second; finite, > 0 and <= 2^53-1.
    double refill_per_sec = 0;
  };

  // The tokens left at the instant `last` (epoch ms, an integer held in a
  // double). Cold is `last = -infinity`: the refill term is then +infinity,
  // which `min(capacity, ...)` turns into a full bucket at `now` with no
  // branch.
  struct State {
    double tokens = 0;
    double last = -std::numeric_limits<double>::infinity();
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "token_bucket";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<TokenBucket> create(const Options& options) {
    if (auto s = detail::check_int_option("token_bucket", "capacity",
                                          options.capacity, 1, kMaxSafeInteger);
        !s.ok()) {
      return s;
    }
    if (auto s = detail::check_positive_option(
            "token_bucket", "refill_per_sec", options.refill_per_sec,
            static_cast<double>(kMaxSafeInteger));
        !s.ok()) {
      return s;
    }
    return TokenBucket(options);
  }

  const Options& options() const noexcept { return options_; }
  // The refill rate in tokens per ms.
  double rate_per_ms() const noexcept { return rate_; }
  // max(1, ceil(capacity / rate)): the time to refill an empty bucket.
  int64_t policy_window_ms() const noexcept { return window_ms_; }

  // See strategy.h. Writes `state` only when allowed. Thread-safety: const;
  // the caller serialises access to `state`.
  THROTTLEKIT_ALWAYS_INLINE Decision check(State& state, int64_t now_ms,
                                           double cost) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double t = std::max(now, state.last);
    const double tokens = refilled(state, now);
    if (tokens >= cost) {
      const double left = tokens - cost;
      state = State{left, t};
      return Decision{true, options_.capacity, floor_units(left),
                      first_full_ms(state, t, left), 0};
    }
    return Decision{false, options_.capacity, floor_units(tokens),
                    first_full_ms(state, t, tokens),
                    retry(tokens, t, now, cost)};
  }

  // See strategy.h: the cost-1 decision; `remaining` and `reset_at_ms`
  // describe the bucket as it is now. Thread-safety: const.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double t = std::max(now, state.last);
    const double tokens = refilled(state, now);
    const bool allowed = tokens >= 1.0;
    return Decision{allowed, options_.capacity, floor_units(tokens),
                    first_full_ms(state, t, tokens),
                    allowed ? 0 : retry(tokens, t, now, 1.0)};
  }

  // See strategy.h. `spendable_now = max(0, floor(tokens))`;
  // `next_replenish_at_ms` is the earliest integer ms at which `check` with
  // `cost` would allow (found by search over the exact admission predicate,
  // so floating rounding cannot make it off by one); for a cost above
  // `capacity` it is `now + retry` with the retry hint of `check`.
  // `full_at_ms` is the `reset_at_ms` of `peek`: the first ms at which a
  // check of `capacity` allows. Thread-safety: const.
  Forecast forecast(const State& state, int64_t now_ms,
                    double cost) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double t = std::max(now, state.last);
    const double tokens = refilled(state, now);
    const int64_t full_at = first_full_ms(state, t, tokens);
    if (tokens >= cost) return Forecast{floor_units(tokens), now_ms, full_at};
    const double hint = t + detail::ceil_d((cost - tokens) / rate_);
    if (cost > static_cast<double>(options_.capacity)) {
      return Forecast{floor_units(tokens), detail::to_int(hint), full_at};
    }
    // Refill starts at t = max(now, last); the bucket holds `cost` after about
    // (cost - state.tokens) / rate more ms. Search around that guess.
    const double guess = t + detail::ceil_d((cost - state.tokens) / rate_);
    const auto passes = [&](double at) { return refilled(state, at) >= cost; };
    return Forecast{floor_units(tokens),
                    detail::earliest_ms(now, guess, passes), full_at};
  }

  // The first integer ms from which the refill term saturates at `capacity`
  // exactly as a cold key's does: at any `now >= expires_at_ms(state)`, every
  // decision and write equals the cold state's. It is the bucket's full
  // instant searched from `last` (the `reset_at` of the call that wrote the
  // state), so no rounding can make an expired bucket differ from a cold one
  // (tokens are monotone in `now`, so it stays full after). INT64_MIN for
  // the cold state. Thread-safety: const.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (std::isinf(state.last)) return std::numeric_limits<int64_t>::min();
    return first_full_ms(state, state.last, refilled(state, state.last));
  }

 private:
  // Instants beyond this are not searched (they exceed exact doubles).
  static constexpr double kSearchLimit = 9007199254740991.0;

  explicit TokenBucket(const Options& o)
      : options_(o),
        rate_(o.refill_per_sec / 1000.0),
        inv_rate_(1.0 / rate_),
        cap_(static_cast<double>(o.capacity)),
        window_ms_(std::max<int64_t>(
            1, detail::to_int(
                   detail::ceil_d(static_cast<double>(o.capacity) / rate_)))) {}

  // min(capacity, tokens + max(0, now - last) * rate)
  double refilled(const State& s, double now) const noexcept {
    const double elapsed = std::max(0.0, now - s.last);
    return std::min(cap_, s.tokens + elapsed * rate_);
  }

  // reset_at: the first integer ms T >= t at which `s` (the state as the
  // call leaves it, `last <= t`) is full, refilled(s, T) >= capacity.
  // `tokens` = refilled(s, t). The guess t + ceil((capacity - tokens) / rate)
  // is the answer when it reaches 2^53 - 1 (saturating through to_int);
  // otherwise detail::first_ms searches from a guess for the least passing
  // ms, which is unique (refilled is monotone in T), so any guess gives the
  // same answer. Below 2^52 the guess multiplies by 1/rate (about 4 cycles
  // where the division costs 13 or more; off by a ms at most, which costs
  // the search one probe); Lua and PL/pgSQL divide, and reach the same ms.
  THROTTLEKIT_ALWAYS_INLINE int64_t
  first_full_ms(const State& s, double t, double tokens) const noexcept {
    const double cap = cap_;
    if (tokens < cap && s.last == t && s.tokens == tokens) [[likely]] {
      // The state a check leaves (counted at t): the probe at t + d is
      // tokens + d * rate (t + d - t is exactly d for integers below
      // 2^53, and min(cap, x) >= cap iff x >= cap), and the guess's ceiling
      // needs no range check below 2^51. The two probes run side by side.
      const double q = (cap - tokens) * inv_rate_;
      if (q < 0x1p51 && t < 0x1p51) [[likely]] {
        double d = static_cast<double>(static_cast<int64_t>(q));
        d += d < q ? 1.0 : 0.0;  // ceil(q) >= 1: q > 0
        const bool full_at_d = tokens + d * rate_ >= cap;
        const bool full_before = tokens + (d - 1) * rate_ >= cap;
        if (full_at_d && !full_before) [[likely]] {
          return static_cast<int64_t>(t + d);
        }
      }
    }
    double guess = t + detail::ceil_d((cap - tokens) * inv_rate_);
    if (!(guess < kSearchLimit / 2)) [[unlikely]] {
      guess = t + detail::ceil_d((cap - tokens) / rate_);
      if (!(guess < kSearchLimit)) return detail::to_int(guess);
    }
    if (tokens >= cap) return detail::to_int(t);
    return detail::first_ms(t, guess,
                            [&](double at) { return refilled(s, at) >= cap; });
  }

  // (t - now) + ceil((cost - tokens) / rate): the wait from the caller's
  // `now` (the first term is 0 unless `now` is stale).
  int64_t retry(double tokens, double t, double now,
                double cost) const noexcept {
    return detail::to_int((t - now) + detail::ceil_d((cost - tokens) / rate_));
  }

  static int64_t floor_units(double v) noexcept {
    return std::max<int64_t>(0, detail::floor_to_int(v));
  }

  Options options_;
  double rate_;
  double inv_rate_;  // 1 / rate_: guesses only, never a decided value
  double cap_;       // options_.capacity as a double (exact: <= 2^53 - 1)
  int64_t window_ms_;
};

static_assert(Strategy<TokenBucket>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_TOKEN_BUCKET_H_
