// throttlekit/admission/learned_reservation.h
//
// Provides `LearnedReservation`: how many cost units to reserve for work
// whose cost is known only afterwards (an LLM completion's tokens), learned
// online from the costs observed (docs/admission.md, "The cost axis").
//
// Reserving r for a request that turns out to cost c loses
//     l(r, c) = h * (r - c)+  +  p * (c - r)+
// (the pinball loss: h per unit reserved but unused, p per unit missing).
// Its expected value is least at the p / (h + p) quantile of the cost
// distribution (the critical fractile). The learner runs projected online
// gradient descent on it:
//     eta0 = step_scale, or max((max - min) / max(h, p), 1e-6) when 0
//     observe(c): t += 1;  g = (r > c) ? h : -p;
//                 r = clamp(r - eta0 / sqrt(t) * g, min, max)
//     reserve() = round(r)
// with regret at most 3/2 * D * G * sqrt(T) against the best fixed
// reservation in hindsight (D = max - min, G = max(h, p)).
//
// A reservation only gates admission (`reserve() <= remaining`); the meter
// (the token budget) debits what is actually used, so no reservation,
// however wrong, can breach the budget: a bad learner costs throughput or
// a refusal, never safety.
//
// Thread-safety: every method may be called concurrently (a spin lock
// held for a few arithmetic operations).

#ifndef THROTTLEKIT_ADMISSION_LEARNED_RESERVATION_H_
#define THROTTLEKIT_ADMISSION_LEARNED_RESERVATION_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/spin_lock.h"

namespace throttlekit {

struct LearnedReservationOptions {
  // The range of reservations, in units; 1 <= min <= max <= 2^53 - 1
  // (a request always reserves at least one unit).
  double min = 1;
  double max = 0;
  // Loss per unit reserved but unused (h) and per unit missing (p); finite
  // and > 0. The learner tracks the p / (h + p) quantile.
  double over_cost = 1;
  double under_cost = 9;
  // Where the reservation starts (0: `max`, the safe end); in [min, max].
  double initial = 0;
  // eta0 (0: max((max - min) / max(h, p), 1e-6)); finite and >= 0.
  double step_scale = 0;
};

// The pinball loss of reserving `r` for a request that cost `c`.
inline double pinball_loss(double r, double c, double over_cost,
                           double under_cost) noexcept {
  return r > c ? over_cost * (r - c) : under_cost * (c - r);
}

class LearnedReservation {
 public:
  // Validates `options`; kInvalidArgument names
  // "learned_reservation.<field>" and its bound.
  static absl::StatusOr<LearnedReservation> create(
      const LearnedReservationOptions& o) {
    const auto bad = [](const char* field, const char* bound, double got) {
      return absl::InvalidArgumentError(absl::StrCat(
          "learned_reservation.", field, " must be ", bound, "; got ", got));
    };
    const double top = static_cast<double>(kMaxSafeInteger);
    if (!(o.min >= 1 && o.min <= top)) {
      return bad("min", "in [1, 2^53 - 1]", o.min);
    }
    if (!(o.max >= o.min && o.max <= top)) {
      return bad("max", "in [min, 2^53 - 1]", o.max);
    }
    if (!(std::isfinite(o.over_cost) && o.over_cost > 0)) {
      return bad("over_cost", "finite and > 0", o.over_cost);
    }
    if (!(std::isfinite(o.under_cost) && o.under_cost > 0)) {
      return bad("under_cost", "finite and > 0", o.under_cost);
    }
    if (!(o.initial == 0 || (o.initial >= o.min && o.initial <= o.max))) {
      return bad("initial", "0 or in [min, max]", o.initial);
    }
    if (!(std::isfinite(o.step_scale) && o.step_scale >= 0)) {
      return bad("step_scale", "finite and >= 0", o.step_scale);
    }
    return LearnedReservation(o);
  }

  LearnedReservation(const LearnedReservation& other) noexcept
      : options_(other.options_), eta0_(other.eta0_) {
    SpinLockHolder hold(other.mu_);
    r_ = other.r_;
    t_ = other.t_;
  }
  LearnedReservation& operator=(const LearnedReservation&) = delete;

  // The units to reserve now: round(r), in [min, max].
  int64_t reserve() const noexcept {
    return static_cast<int64_t>(std::llround(estimate()));
  }

  // The unrounded estimate r.
  double estimate() const noexcept {
    SpinLockHolder hold(mu_);
    return r_;
  }

  // Feeds the cost `c` a finished request actually had. A non-finite or
  // negative `c` is ignored (returns false): it would move r by nonsense.
  bool observe(double c) noexcept {
    if (!std::isfinite(c) || c < 0) return false;
    SpinLockHolder hold(mu_);
    t_ += 1;
    const double g = r_ > c ? options_.over_cost : -options_.under_cost;
    r_ = std::clamp(r_ - eta0_ / std::sqrt(t_) * g, options_.min, options_.max);
    return true;
  }

  // Costs observed so far.
  int64_t observed() const noexcept {
    SpinLockHolder hold(mu_);
    return static_cast<int64_t>(t_);
  }

  const LearnedReservationOptions& options() const noexcept { return options_; }

 private:
  explicit LearnedReservation(const LearnedReservationOptions& o)
      : options_(o),
        eta0_(o.step_scale > 0
                  ? o.step_scale
                  : std::max(
                        (o.max - o.min) / std::max(o.over_cost, o.under_cost),
                        1e-6)),
        r_(o.initial == 0 ? o.max : o.initial) {}

  const LearnedReservationOptions options_;
  const double eta0_;
  mutable SpinLock mu_;
  double r_ ABSL_GUARDED_BY(mu_);
  double t_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_LEARNED_RESERVATION_H_
