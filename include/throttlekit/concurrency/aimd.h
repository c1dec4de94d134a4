// throttlekit/concurrency/aimd.h
//
// Provides the AIMD control law as a pure function
// (docs/adaptive_concurrency.md, "AIMD": the opt-in additive-increase /
// multiplicative-decrease law, TCP Reno's shape):
//
//   on a drop or timeout:            estimate' = estimate * backoff_ratio
//   on a success while utilized:     estimate' = estimate + 1
//   otherwise:                       estimate' = estimate
//   estimate' = clamp(estimate', min_limit, max_limit)
//
// "Utilized" means 2 * inflight >= limit: a success seen while the limiter
// was less than half full says nothing about whether more would fit.
// AIMD ignores latency; it reacts only to drops the caller reports.

#ifndef THROTTLEKIT_CONCURRENCY_AIMD_H_
#define THROTTLEKIT_CONCURRENCY_AIMD_H_

#include <algorithm>

namespace throttlekit {

inline constexpr double kAimdDefaultBackoffRatio = 0.9;

// One AIMD step from `estimate` (a real number in [min_limit, max_limit]).
// `dropped`: the request was dropped or timed out; `utilized`: it was
// admitted with 2 * inflight >= limit. Thread-safe (pure).
[[nodiscard]] inline double aimd_next_estimate(double estimate, bool dropped,
                                               bool utilized,
                                               double backoff_ratio,
                                               double min_limit,
                                               double max_limit) noexcept {
  double next = estimate;
  if (dropped) {
    next = estimate * backoff_ratio;
  } else if (utilized) {
    next = estimate + 1;
  }
  return std::clamp(next, min_limit, max_limit);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_AIMD_H_
