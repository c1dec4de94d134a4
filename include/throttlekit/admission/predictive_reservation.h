// throttlekit/admission/predictive_reservation.h
//
// Provides `PredictiveReservation`: a reservation that uses a per-request
// prediction of the cost (e.g. a prompt's `max_tokens` or a model's length
// estimate) when it has proved good, and the `LearnedReservation` when it
// has not (docs/admission.md, "The cost axis"). Two experts:
//
//     follow: the prediction, clamped to [min, max]
//     robust: the learned reservation's estimate
//
// weighted by Hedge on their cumulative pinball losses:
//     w_e = exp(-eta * (L_e - min(L))) / sum   (eta = 0.01 by default)
//     reserve(pred) = round(clamp(w_f * pred' + w_r * robust, min, max))
// `observe(pred, actual)` charges each expert the loss of what it would have
// reserved and feeds `actual` to the robust learner. A missing prediction
// (NaN) is answered by the robust expert alone and charges neither.
//
// Like every reservation, it only gates admission; the meter keeps the
// budget safe whatever it reserves.
//
// Thread-safety: every method may be called concurrently.

#ifndef THROTTLEKIT_ADMISSION_PREDICTIVE_RESERVATION_H_
#define THROTTLEKIT_ADMISSION_PREDICTIVE_RESERVATION_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/admission/learned_reservation.h"
#include "throttlekit/core/spin_lock.h"

namespace throttlekit {

struct PredictiveReservationOptions {
  // The robust expert (and the range and losses both experts are judged
  // by).
  LearnedReservationOptions learned;
  // Hedge's learning rate; finite and > 0.
  double eta = 0.01;
};

class PredictiveReservation {
 public:
  // Validates `options`; kInvalidArgument names the field.
  static absl::StatusOr<PredictiveReservation> create(
      const PredictiveReservationOptions& o) {
    if (!(std::isfinite(o.eta) && o.eta > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "predictive_reservation.eta must be finite and > 0; got ", o.eta));
    }
    absl::StatusOr<LearnedReservation> robust =
        LearnedReservation::create(o.learned);
    if (!robust.ok()) return robust.status();
    return PredictiveReservation(o, *robust);
  }

  PredictiveReservation(const PredictiveReservation& other) noexcept
      : options_(other.options_), robust_(other.robust_) {
    SpinLockHolder hold(other.mu_);
    loss_follow_ = other.loss_follow_;
    loss_robust_ = other.loss_robust_;
  }
  PredictiveReservation& operator=(const PredictiveReservation&) = delete;

  // The units to reserve for a request predicted to cost `prediction`
  // (NaN: no prediction).
  int64_t reserve(double prediction) const noexcept {
    const double robust = robust_.estimate();
    if (std::isnan(prediction)) {
      return static_cast<int64_t>(std::llround(robust));
    }
    const double w = follow_weight();
    const double mixed = w * clamp(prediction) + (1 - w) * robust;
    return static_cast<int64_t>(std::llround(clamp(mixed)));
  }

  // The weight of the follow-the-prediction expert, in [0, 1].
  double follow_weight() const noexcept {
    SpinLockHolder hold(mu_);
    // softmax(-eta * L), shifted by the smaller loss so exp never
    // underflows both weights to 0.
    const double low = std::min(loss_follow_, loss_robust_);
    const double f = std::exp(-options_.eta * (loss_follow_ - low));
    const double r = std::exp(-options_.eta * (loss_robust_ - low));
    return f / (f + r);
  }

  // Feeds a finished request: its prediction (NaN: none) and the cost it
  // actually had. A non-finite or negative `actual` is ignored (false).
  bool observe(double prediction, double actual) noexcept {
    if (!std::isfinite(actual) || actual < 0) return false;
    const double robust = robust_.estimate();
    if (!std::isnan(prediction)) {
      const LearnedReservationOptions& l = options_.learned;
      const double lf =
          pinball_loss(clamp(prediction), actual, l.over_cost, l.under_cost);
      const double lr = pinball_loss(robust, actual, l.over_cost, l.under_cost);
      SpinLockHolder hold(mu_);
      loss_follow_ += lf;
      loss_robust_ += lr;
    }
    return robust_.observe(actual);
  }

  const LearnedReservation& robust() const noexcept { return robust_; }

 private:
  PredictiveReservation(const PredictiveReservationOptions& o,
                        const LearnedReservation& robust)
      : options_(o), robust_(robust) {}

  double clamp(double v) const noexcept {
    return std::clamp(v, options_.learned.min, options_.learned.max);
  }

  const PredictiveReservationOptions options_;
  LearnedReservation robust_;
  mutable SpinLock mu_;
  double loss_follow_ ABSL_GUARDED_BY(mu_) = 0;
  double loss_robust_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_PREDICTIVE_RESERVATION_H_
