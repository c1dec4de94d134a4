// throttlekit/strategy/internal/earliest.h
//
// Provides `detail::earliest_ms`: the search strategies use to make a
// forecast exact when their closed-form retry hint may be off by rounding
// (token bucket, sliding window). Gallops forward from a guess, then bisects
// on whole milliseconds.

#ifndef THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_
#define THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_

#include <algorithm>
#include <cstdint>

#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit::detail {

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

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STRATEGY_INTERNAL_EARLIEST_H_
