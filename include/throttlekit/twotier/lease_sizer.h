// throttlekit/twotier/lease_sizer.h
//
// Provides `LeaseSizer`: an online learner of the lease batch
// (docs/twotier.md, "Lease sizing"). With window coupling the batch no longer
// affects safety, only efficiency: for a node serving demand D per window,
//
//     f_D(b) = order_cost * D / b  +  strand_penalty * b / 2
//              (round trips)          (credits stranded at the boundary)
//
// is minimised at the economic order quantity
// b* = sqrt(2 * order_cost * D / strand_penalty). D is unknown, skewed and
// drifting, so the sizer learns b online: projected AdaGrad on x = ln b
// (the optimum spans orders of magnitude), fed each window's served demand.
// It has O(sqrt(T)) regret against the best fixed batch in hindsight and
// follows a drifting optimum (tests/twotier/lease_sizer_test.cc). Safety
// never depends on it: window coupling caps admissions at the limit for
// any batch sequence.
//
// Thread-safety: not thread-safe; one sizer per key, driven by whoever
// holds that key's lease lock.

#ifndef THROTTLEKIT_TWOTIER_LEASE_SIZER_H_
#define THROTTLEKIT_TWOTIER_LEASE_SIZER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

class LeaseSizer {
 public:
  struct Options {
    // Cost of one lease round trip, in the same unit as `strand_penalty`
    // per stranded credit; both finite and > 0.
    double order_cost = 1;
    double strand_penalty = 0.01;
    // The batch is kept in [min_batch, max_batch]; 1 <= min <= max <= 2^53-1.
    int64_t min_batch = 1;
    int64_t max_batch = int64_t{1} << 20;
    // The first batch, clamped to the range.
    int64_t initial_batch = 16;
    // AdaGrad step size in log space; finite, > 0, <= 10.
    double learning_rate = 1.0;
  };

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<LeaseSizer> create(const Options& o) {
    for (const auto& [name, v] :
         {std::pair{"order_cost", o.order_cost},
          std::pair{"strand_penalty", o.strand_penalty}}) {
      if (auto s = detail::check_positive_option("lease_sizer", name, v, 1e300);
          !s.ok()) {
        return s;
      }
    }
    if (auto s = detail::check_positive_option("lease_sizer", "learning_rate",
                                               o.learning_rate, 10);
        !s.ok()) {
      return s;
    }
    if (auto s = detail::check_int_options(
            "lease_sizer", {{"min_batch", o.min_batch},
                            {"max_batch", o.max_batch, o.min_batch}});
        !s.ok()) {
      return s;
    }
    return LeaseSizer(o);
  }

  // b* = sqrt(2 * order_cost * demand / strand_penalty).
  static double eoq(double order_cost, double demand, double strand_penalty) {
    return std::sqrt(2 * order_cost * demand / strand_penalty);
  }

  // f_demand(batch): the window's coordination plus stranding cost.
  double cost(double batch, double demand) const {
    return options_.order_cost * demand / batch +
           options_.strand_penalty * batch / 2;
  }

  // The batch to lease next, in [min_batch, max_batch].
  int64_t batch() const {
    return std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::exp(x_))),
                               options_.min_batch, options_.max_batch);
  }

  // Feeds one window's served demand (finite, >= 0; anything else is
  // ignored) and takes one AdaGrad step on ln b.
  void observe(double demand) {
    if (!(demand >= 0) || !std::isfinite(demand)) return;
    const double b = std::exp(x_);
    // d/dx [c * D * e^-x + h * e^x / 2]
    const double g =
        -options_.order_cost * demand / b + options_.strand_penalty * b / 2;
    sum_sq_ += g * g;
    if (sum_sq_ > 0) x_ -= options_.learning_rate * g / std::sqrt(sum_sq_);
    x_ = std::clamp(x_, lo_, hi_);
  }

  const Options& options() const { return options_; }

 private:
  explicit LeaseSizer(const Options& o)
      : options_(o),
        lo_(std::log(static_cast<double>(o.min_batch))),
        hi_(std::log(static_cast<double>(o.max_batch))),
        x_(std::clamp(std::log(static_cast<double>(
                          std::max<int64_t>(1, o.initial_batch))),
                      lo_, hi_)) {}

  Options options_;
  double lo_;
  double hi_;
  double x_;
  double sum_sq_ = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_LEASE_SIZER_H_
