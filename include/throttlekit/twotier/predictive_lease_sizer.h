// throttlekit/twotier/predictive_lease_sizer.h
//
// Provides `PredictiveLeaseSizer`: lease sizing that uses a demand forecast
// when it is good and falls back to the no-regret learner when it is not
// (docs/twotier.md, "Lease sizing"). Two experts propose a batch for each
// window:
//
//   follow the prediction  b_p = EOQ(predicted demand), clamped to the range
//   robust                 b_r = LeaseSizer's batch (projected AdaGrad)
//
// and a Hedge meta-learner mixes them in log space,
// ln b = p * ln b_p + (1 - p) * ln b_r. After the window its served demand
// D is revealed; each expert's loss is its log cost ratio to the best
// batch, min(1, ln(f_D(b_i) / f_D(b*)) / ln 1000) with b* the EOQ for D
// clamped to the range (a log scale tells "10x off" from "100x off" where a
// clipped ratio would call both 1), and the weights are exp(-eta_t * cumulative
// loss) with the anytime rate eta_t = sqrt(8 ln 2 / t). The window cost
// f_D(e^x) is convex in x, so the mixture costs at most the weighted mean of
// the experts: accurate predictions approach the clairvoyant EOQ, useless ones
// cost at most the robust learner plus Hedge's O(sqrt(T)) regret between the
// two (tests/twotier/predictive_lease_sizer_test.cc). Safety never depends on
// it (window coupling caps admissions for any batch).
//
// Use: `b = sizer.batch(predicted)` at the first lease of a window, then
// `sizer.observe(served)` when the window is over.
//
// Thread-safety: not thread-safe; one sizer per key, driven by whoever
// holds that key's lease lock.

#ifndef THROTTLEKIT_TWOTIER_PREDICTIVE_LEASE_SIZER_H_
#define THROTTLEKIT_TWOTIER_PREDICTIVE_LEASE_SIZER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "throttlekit/twotier/lease_sizer.h"

namespace throttlekit {

class PredictiveLeaseSizer {
 public:
  // The robust learner's options; they also fix the range and the costs.
  using Options = LeaseSizer::Options;

  // Validates `options` (as LeaseSizer); the error names the field.
  static absl::StatusOr<PredictiveLeaseSizer> create(const Options& options) {
    absl::StatusOr<LeaseSizer> robust = LeaseSizer::create(options);
    if (!robust.ok()) return robust.status();
    return PredictiveLeaseSizer(*std::move(robust));
  }

  // The batch for the coming window given its predicted demand. A
  // prediction that is not finite and >= 0 counts as none: the robust
  // learner's batch, and the window teaches the meta-learner nothing.
  int64_t batch(double predicted_demand) {
    const double lo = std::log(static_cast<double>(options().min_batch));
    const double hi = std::log(static_cast<double>(options().max_batch));
    x_robust_ = std::log(static_cast<double>(robust_.batch()));
    has_prediction_ = predicted_demand >= 0 && std::isfinite(predicted_demand);
    if (!has_prediction_) return robust_.batch();
    const double eoq = LeaseSizer::eoq(options().order_cost, predicted_demand,
                                       options().strand_penalty);
    x_predicted_ = std::clamp(std::log(std::max(eoq, 1.0)), lo, hi);
    const double p = prediction_weight();
    const double x = p * x_predicted_ + (1 - p) * x_robust_;
    return std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::exp(x))),
                               options().min_batch, options().max_batch);
  }

  // Feeds the window's served demand (finite, >= 0; anything else is
  // ignored): updates the meta-learner on the last proposals and takes the
  // robust learner's step.
  void observe(double demand) {
    if (!(demand >= 0) || !std::isfinite(demand)) return;
    if (has_prediction_) {
      const double best =
          std::clamp(LeaseSizer::eoq(options().order_cost, demand,
                                     options().strand_penalty),
                     static_cast<double>(options().min_batch),
                     static_cast<double>(options().max_batch));
      const double floor = robust_.cost(best, demand);
      auto loss = [&](double x) {
        return std::min(
            1.0,
            std::log(robust_.cost(std::exp(x), demand) / floor) / kLossScale);
      };
      loss_predicted_ += loss(x_predicted_);
      loss_robust_ += loss(x_robust_);
      ++rounds_;
      has_prediction_ = false;
    }
    robust_.observe(demand);
  }

  // The meta-learner's weight on the prediction, in (0, 1); 0.5 before
  // any round.
  double prediction_weight() const {
    if (rounds_ == 0) return 0.5;
    const double eta = std::sqrt(8 * std::log(2.0) / rounds_);
    // p = 1 / (1 + exp(-eta * (L_robust - L_predicted))), computed stably.
    const double z = eta * (loss_robust_ - loss_predicted_);
    return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
  }

  const LeaseSizer& robust() const { return robust_; }
  const Options& options() const { return robust_.options(); }

 private:
  explicit PredictiveLeaseSizer(LeaseSizer robust)
      : robust_(std::move(robust)) {}

  // A loss of 1 is a window costing 1000x its optimum (or worse).
  static constexpr double kLossScale = 6.907755278982137;  // ln 1000

  LeaseSizer robust_;
  double x_predicted_ = 0;
  double x_robust_ = 0;
  bool has_prediction_ = false;
  double loss_predicted_ = 0;
  double loss_robust_ = 0;
  int64_t rounds_ = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_PREDICTIVE_LEASE_SIZER_H_
