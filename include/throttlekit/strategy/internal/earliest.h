// throttlekit/strategy/internal/earliest.h
//
// Provides `detail::earliest_ms` and `detail::first_ms`: the searches
// strategies use to make a forecast (and the token bucket's `reset_at`) exact
// when their closed-form hint may be off by rounding (token bucket, sliding
// window). They gallop from a guess, then bisect on whole milliseconds.

#ifndef THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_
#define THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_

#include <algorithm>
#include <cstdint>

#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit::detail {

// The search's last step: an integer ms t in (lo, hi] with passes(t) and
// !passes(t - 1), given !passes(lo) and passes(hi) (both integers).
template <class Pred>
int64_t bisect(double lo, double hi, const Pred& passes) {
  while (hi - lo > 1) {
    const double mid = floor_d(lo + (hi - lo) / 2);
    if (passes(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return to_int(hi);
}

// An integer ms t > now with passes(t) and !passes(t - 1), given passes(now)
// is false; where passes is monotone in t this is the earliest such t.
// `guess` is an estimate of it. Gives up (returns the guess) past 2^53 - 1,
// where doubles stop being exact integers.
template <class Pred>
int64_t earliest_ms(double now, double guess, const Pred& passes) {
  constexpr double kSearchLimit = static_cast<double>(kMaxSafeInteger);
  double lo = now;  // passes(lo) is false
  double hi = std::max(guess, now + 1);
  double step = 1;
  while (!passes(hi)) {
    if (hi >= kSearchLimit) return to_int(guess);
    lo = hi;
    hi += step;
    step *= 2;
  }
  return bisect(lo, hi, passes);
}

// The least integer ms t > lo with passes(t), given passes(lo) is false and
// passes is monotone in t (lo an integer below 2^53 - 1). `guess` estimates
// it: gallops forward from max(guess, lo + 1) until passes, back from there
// until it fails, then bisects, so a guess off by a ms costs two probes.
// Gives up (returns the last probe, >= 2^53 - 1) when nothing below
// 2^53 - 1 passes. The token bucket's Lua and PL/pgSQL scripts run the same
// probes (src/redis/lua/token_bucket.lua, src/postgres/token_bucket.sql).
template <class Pred>
int64_t first_ms(double lo, double guess, const Pred& passes) {
  constexpr double kSearchLimit = static_cast<double>(kMaxSafeInteger);
  double hi = std::max(guess, lo + 1);
  double step = 1;
  while (!passes(hi)) {
    if (hi >= kSearchLimit) return to_int(hi);
    lo = hi;
    hi += step;
    step *= 2;
  }
  step = 1;
  while (hi - lo > 1) {
    const double probe = std::max(lo + 1, hi - step);
    if (!passes(probe)) {
      lo = probe;
      break;
    }
    hi = probe;
    step *= 2;
  }
  return bisect(lo, hi, passes);
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_
