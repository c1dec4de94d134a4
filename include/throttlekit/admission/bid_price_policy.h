// throttlekit/admission/bid_price_policy.h
//
// Provides `BidPricePolicy`, the optional joint-LP filter of unified
// admission: it admits a request iff
//
//     value >= bid_price(p, cost, hold) = p_R + p_C * cost [+ p_K * hold']
//
// with p the shadow prices of the window's budgets (fluid_lp.h). Marginal
// AND-composition admits whenever every axis has slack, blind to what a
// scarce cost or concurrency unit is worth; the bid prices refuse the
// requests whose value does not cover what they would take from better
// ones (tests/admission/joint_lp_regret_test.cc measures the gain, and the
// one mixture where there is none).
//
//     auto policy = throttlekit::BidPricePolicy::create(
//         {.classes = mixture,
//          .budgets = throttlekit::LpBudgets{.requests = 600, .cost = 1000}});
//     if (!policy.ok()) return fail(policy.status());
//     if (!(*policy)->admits(value, cost)) return reply_429_policy();
//     ... then the concurrency, rate and cost axes ...
//
// Contract
// - The caller (the unified admission engine) asks BEFORE any axis
//   debits: the rate and cost axes consume on success with no rollback, so
//   a filter placed after them would let a refused request drain the very
//   budget it exists to protect.
// - It only removes admits: `admits` is a predicate ANDed with the axes, so
//   no limit or safety property of the axes can break. (Over a stream the
//   admitted sets are not nested: the budget a refusal saves can admit a
//   later request the axes alone would have refused. That is the point.)
// - Input: a non-finite value or cost is refused (a NaN must not slip
//   through a comparison); a negative cost counts as 0 (a request cannot
//   earn budget back); a non-finite or negative hold counts as 0 (a bad
//   estimate fails open and a hog cannot buy a discount).
// - Duals come either from the options (`duals`, each finite and >= 0: a
//   NaN or negative price would silently admit or refuse everything) or
//   from `solve_fluid_lp(classes, budgets)`. The 3-axis form (a
//   concurrency budget, or a concurrency price) charges p_K per
//   concurrency-second of `hold_s`.
//
// Online refinement (opt-in, 2-axis form only). The first `sample_size`
// requests with a finite value and cost are priced with the prior duals
// and recorded as (cost, value). The call that completes the sample then,
// on its own thread and outside the lock:
//   1. solves the empirical mixture: one class per distinct (cost, value)
//      pair, its arrivals its count in the sample, against the
//      WINDOW-SCALED budget: each budget * s, s = sample_size /
//      expected_arrivals_per_window, what the sample's share of one window
//      may spend (equivalently: arrivals count / s per window against the
//      window's budgets; the duals are the same);
//   2. replays the sample in arrival order under the window-scaled budget
//      once with each dual (prior, learned): a request is served iff the
//      duals admit it and the budget has room for it (1 request and its
//      cost); revenue = the sum of served values;
//   3. adopts the learned duals only if their revenue is STRICTLY greater,
//      else keeps the prior; then freezes (no more recording, ever).
// So the policy is never worse than its prior on the observed sample and
// can still escape a catastrophically misspecified one. The guarantee is
// on the sample only: under non-stationary arrivals an adopted dual can do
// worse on the rest of the stream. The re-solve (2-axis, fluid_lp.h)
// costs O(m log m) expected in the m distinct pairs (sample_size <= 2048)
// and runs once, on the caller's thread; refinement and the 3-axis form
// together are refused at create.
//
// Thread-safety: every method may be called concurrently. Without
// refinement, and once frozen, `admits` reads one atomic flag (acquire),
// the immutable duals and bumps one relaxed counter: no lock, no
// allocation. While sampling it records under a mutex (the buffer is
// reserved at create: no allocation either); calls that arrive during the
// re-solve are priced with the prior and not recorded.

#ifndef THROTTLEKIT_ADMISSION_BID_PRICE_POLICY_H_
#define THROTTLEKIT_ADMISSION_BID_PRICE_POLICY_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/admission/fluid_lp.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

// Opt-in online dual refinement.
struct BidPriceRefinement {
  // Requests recorded before the re-solve; in [1, 2048].
  int64_t sample_size = 0;
  // Requests expected per budget window (the window of `budgets`); finite,
  // > 0, <= 1e15.
  double expected_arrivals_per_window = 0;
};

struct BidPricePolicyOptions {
  // Explicit duals (the escape hatch): each finite and >= 0. Exclusive with
  // `classes`.
  std::optional<Duals> duals;
  // The expected mixture per window, solved against `budgets` when `duals`
  // is unset (no classes: duals 0).
  std::vector<LpClass> classes;
  // The window's budgets: required to solve `classes` and to refine; unused
  // (and refused) with explicit duals and no refinement.
  std::optional<LpBudgets> budgets;
  std::optional<BidPriceRefinement> refinement;
};

namespace detail {

struct BidSample {
  double cost;
  double value;
};

// The greedy replay: serves, in order, every request `p` admits while the
// budget holds one more request and its cost; returns the served value.
inline double replay_revenue(std::span<const BidSample> sample, const Duals& p,
                             double requests, double cost_units) {
  double revenue = 0;
  for (const BidSample& s : sample) {
    if (!(s.value >= bid_price(p, s.cost))) continue;
    if (requests < 1 || cost_units < s.cost) continue;
    requests -= 1;
    cost_units -= s.cost;
    revenue += s.value;
  }
  return revenue;
}

}  // namespace detail

class BidPricePolicy {
 public:
  // The largest accepted `refinement.sample_size` (the sample buffer is
  // reserved at create and replayed under both duals).
  static constexpr int64_t kMaxSampleSize = 2048;

  struct Stats {
    // Calls to `admits`; admitted + policy_denied == asked.
    int64_t asked = 0;
    int64_t admitted = 0;
    int64_t policy_denied = 0;
    // The refinement ran (the sample is complete and the policy frozen).
    bool refined = false;
    // The learned duals replaced the prior.
    bool adopted = false;
    // Replayed revenue on the sample under each dual (0 until refined).
    double sample_revenue_prior = 0;
    double sample_revenue_learned = 0;
  };

  // Validates `options` (kInvalidArgument naming the field) and solves the
  // prior duals when they are not given.
  static absl::StatusOr<std::unique_ptr<BidPricePolicy>> create(
      BidPricePolicyOptions options) {
    if (options.duals && !options.classes.empty()) {
      return absl::InvalidArgumentError(
          "bid_price_policy: set either duals or classes, not both");
    }
    if (!options.duals && !options.budgets) {
      return absl::InvalidArgumentError(
          "bid_price_policy.budgets must be set to solve classes");
    }
    if (options.duals && options.budgets && !options.refinement) {
      return absl::InvalidArgumentError(
          "bid_price_policy.budgets is used only to solve classes or to "
          "refine; got budgets with explicit duals and no refinement");
    }
    Duals prior;
    if (options.duals) {
      const Duals& d = *options.duals;
      for (const auto& [name, v] :
           {std::pair{"rate", d.rate}, std::pair{"cost", d.cost},
            std::pair{"concurrency", d.concurrency}}) {
        if (!std::isfinite(v) || !(v >= 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("bid_price_policy.duals.", name,
                           " must be finite and >= 0; got ", v));
        }
      }
      prior = d;
    } else {
      absl::StatusOr<Duals> solved =
          solve_fluid_lp(options.classes, *options.budgets);
      if (!solved.ok()) return solved.status();
      prior = *solved;
    }
    if (options.refinement) {
      const BidPriceRefinement& r = *options.refinement;
      if (!options.budgets) {
        return absl::InvalidArgumentError(
            "bid_price_policy.budgets must be set to refine");
      }
      if (options.budgets->concurrency_seconds || prior.concurrency != 0) {
        return absl::InvalidArgumentError(
            "bid_price_policy.refinement is not supported with the 3-axis "
            "form (a concurrency budget or price); drop one of them");
      }
      for (const auto& [name, v] :
           {std::pair{"requests", options.budgets->requests},
            std::pair{"cost", options.budgets->cost}}) {
        if (!std::isfinite(v) || !(v >= 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("bid_price_policy.budgets.", name,
                           " must be finite and >= 0; got ", v));
        }
      }
      if (auto s = detail::check_int_option("bid_price_policy.refinement",
                                            "sample_size", r.sample_size, 1,
                                            kMaxSampleSize);
          !s.ok()) {
        return s;
      }
      if (auto s = detail::check_positive_option(
              "bid_price_policy.refinement", "expected_arrivals_per_window",
              r.expected_arrivals_per_window, 1e15);
          !s.ok()) {
        return s;
      }
    }
    return std::unique_ptr<BidPricePolicy>(
        new BidPricePolicy(prior, options.budgets, options.refinement));
  }

  BidPricePolicy(const BidPricePolicy&) = delete;
  BidPricePolicy& operator=(const BidPricePolicy&) = delete;

  // True iff the request clears its bid: value >= bid_price(duals(), cost,
  // hold_s). Refused: a non-finite value or cost. A negative cost counts as
  // 0; a non-finite or negative hold (seconds) as 0. While sampling, also
  // records the request (and the call completing the sample runs the
  // re-solve before it returns). Thread-safe; lock- and allocation-free
  // when there is no refinement or once frozen.
  [[nodiscard]] bool admits(double value, double cost, double hold_s = 0) {
    if (!std::isfinite(value) || !std::isfinite(cost)) {
      denied_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    cost = cost > 0 ? cost : 0.0;
    const Duals* p = &frozen_duals_;
    if (phase_.load(std::memory_order_acquire) != kFrozen) {
      p = &prior_;
      record(value, cost);
    }
    const bool admitted = value >= bid_price(*p, cost, hold_s);
    (admitted ? admitted_ : denied_).fetch_add(1, std::memory_order_relaxed);
    return admitted;
  }

  // The duals in force: the prior until the refinement freezes, then the
  // adopted ones. Thread-safe.
  Duals duals() const {
    return phase_.load(std::memory_order_acquire) == kFrozen ? frozen_duals_
                                                             : prior_;
  }

  // Counters (relaxed: a snapshot, exact once the callers are quiet) and
  // the refinement's outcome. Thread-safe.
  Stats stats() const {
    Stats s;
    s.admitted = admitted_.load(std::memory_order_relaxed);
    s.policy_denied = denied_.load(std::memory_order_relaxed);
    s.asked = s.admitted + s.policy_denied;
    if (phase_.load(std::memory_order_acquire) == kFrozen) {
      s.refined = refined_;
      s.adopted = adopted_;
      s.sample_revenue_prior = revenue_prior_;
      s.sample_revenue_learned = revenue_learned_;
    }
    return s;
  }

 private:
  // kSampling -> kSolving -> kFrozen, or kFrozen from the start.
  enum Phase : int { kSampling, kSolving, kFrozen };

  BidPricePolicy(const Duals& prior, const std::optional<LpBudgets>& budgets,
                 const std::optional<BidPriceRefinement>& refinement)
      : prior_(prior),
        budgets_(budgets.value_or(LpBudgets{})),
        refinement_(refinement.value_or(BidPriceRefinement{})),
        phase_(refinement ? kSampling : kFrozen),
        frozen_duals_(prior) {
    if (refinement) {
      sample_.reserve(static_cast<size_t>(refinement->sample_size));
    }
  }

  // Appends one request to the sample; the call that completes it refines.
  void record(double value, double cost) {
    std::vector<detail::BidSample> full;
    {
      MutexLock lock(mu_);
      if (phase_.load(std::memory_order_relaxed) != kSampling) return;
      sample_.push_back({cost, value});
      if (static_cast<int64_t>(sample_.size()) < refinement_.sample_size) {
        return;
      }
      phase_.store(kSolving, std::memory_order_relaxed);
      full.swap(sample_);
    }
    refine(full);
  }

  // Steps 1-3 of the refinement, then the release store that publishes
  // frozen_duals_ and the outcome to every acquiring reader.
  void refine(std::vector<detail::BidSample>& sample) {
    const double scale = static_cast<double>(sample.size()) /
                         refinement_.expected_arrivals_per_window;
    const double requests = budgets_.requests * scale;
    const double cost_units = budgets_.cost * scale;

    std::vector<detail::BidSample> sorted = sample;
    std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
      return std::tie(x.cost, x.value) < std::tie(y.cost, y.value);
    });
    std::vector<LpClass> mixture;
    for (const detail::BidSample& s : sorted) {
      if (!mixture.empty() && mixture.back().cost == s.cost &&
          mixture.back().value == s.value) {
        mixture.back().arrivals += 1;
      } else {
        mixture.push_back(
            {.arrivals = 1, .value = s.value, .cost = s.cost, .hold = 0});
      }
    }
    const absl::StatusOr<Duals> learned =
        solve_fluid_lp(mixture, {.requests = requests,
                                 .cost = cost_units,
                                 .concurrency_seconds = std::nullopt});

    revenue_prior_ =
        detail::replay_revenue(sample, prior_, requests, cost_units);
    revenue_learned_ =
        learned.ok()
            ? detail::replay_revenue(sample, *learned, requests, cost_units)
            : 0;
    adopted_ = learned.ok() && revenue_learned_ > revenue_prior_;
    frozen_duals_ = adopted_ ? *learned : prior_;
    refined_ = true;
    phase_.store(kFrozen, std::memory_order_release);
  }

  const Duals prior_;
  const LpBudgets budgets_;
  const BidPriceRefinement refinement_;

  // Written only before the release store of kFrozen (at construction, or
  // by the one refining thread), read only after an acquire load sees it:
  // plain fields, no lock on the hot path.
  std::atomic<int> phase_;
  Duals frozen_duals_;
  bool refined_ = false;
  bool adopted_ = false;
  double revenue_prior_ = 0;
  double revenue_learned_ = 0;

  // One counter per call (asked = admitted + denied): relaxed, they order
  // nothing.
  std::atomic<int64_t> admitted_{0};
  std::atomic<int64_t> denied_{0};

  Mutex mu_;
  std::vector<detail::BidSample> sample_ ABSL_GUARDED_BY(mu_);
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_BID_PRICE_POLICY_H_
