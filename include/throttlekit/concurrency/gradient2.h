// throttlekit/concurrency/gradient2.h
//
// Provides the gradient2 control law as pure functions
// (docs/adaptive_concurrency.md, "gradient2"; Netflix concurrency-limits'
// Gradient2Limit and Envoy's gradient controller), so tests and simulators
// can drive it without a limiter:
//
//   gradient  = clamp(tolerance * rtt_noload / rtt, 0.5, 1.0)
//   new_limit = estimate * gradient + sqrt(estimate)
//   estimate' = (1 - smoothing) * estimate + smoothing * new_limit
//   estimate' = clamp(estimate', min_limit, max_limit)
//   estimate' = min(estimate', estimate)   if the sample may not grow it
//
// A gradient of 1.0 means no queue (latency within `tolerance` of the
// no-load latency); below 1.0 a queue is forming and the limit shrinks in
// proportion. The sqrt(estimate) headroom lets a small limit grow fast and a
// large one stay stable: it is the probe that keeps looking for capacity.

#ifndef THROTTLEKIT_CONCURRENCY_GRADIENT2_H_
#define THROTTLEKIT_CONCURRENCY_GRADIENT2_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace throttlekit {

inline constexpr double kGradient2MinGradient = 0.5;
inline constexpr double kGradient2MaxGradient = 1.0;
// The tolerance of the per-sample law
// (`AdaptiveConcurrencyOptions::per_sample_gradient2()`), not the options'
// default: that is 1.0, the Envoy shape's (adaptive_concurrency.h).
inline constexpr double kGradient2PerSampleTolerance = 1.5;
// The EMA weight of a new limit, in both the default and the per-sample law.
inline constexpr double kGradient2DefaultSmoothing = 0.2;

// clamp(tolerance * rtt_noload_ns / rtt_ns, 0.5, 1.0). A sample with
// rtt_ns <= 0 (a clock that did not move) shows no queue: 1.0.
// Thread-safe (pure).
[[nodiscard]] inline double gradient2_gradient(double tolerance,
                                               int64_t rtt_noload_ns,
                                               int64_t rtt_ns) noexcept {
  if (rtt_ns <= 0) return kGradient2MaxGradient;
  const double raw = tolerance * static_cast<double>(rtt_noload_ns) /
                     static_cast<double>(rtt_ns);
  return std::clamp(raw, kGradient2MinGradient, kGradient2MaxGradient);
}

// One gradient2 step from `estimate` (a real number in [min_limit,
// max_limit]) given the sample's `gradient`. With `may_grow` false (an
// under-utilized sample) the result is at most `estimate`.
// Thread-safe (pure).
[[nodiscard]] inline double gradient2_next_estimate(
    double estimate, double gradient, double smoothing, bool may_grow,
    double min_limit, double max_limit) noexcept {
  const double new_limit = estimate * gradient + std::sqrt(estimate);
  double next = (1 - smoothing) * estimate + smoothing * new_limit;
  next = std::clamp(next, min_limit, max_limit);
  if (!may_grow) next = std::min(next, estimate);
  return next;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_GRADIENT2_H_
