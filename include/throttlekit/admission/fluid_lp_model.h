// throttlekit/admission/fluid_lp_model.h
//
// The fluid revenue-management LP's inputs and answer (`LpClass`,
// `LpBudgets`, `Duals`), the bid every solver and `BidPricePolicy`
// evaluate (`bid_price`), and what the solvers share: the input's
// validation, the merged rows a solver works on, and the dual objective
// D(p) over them (the model: fluid_lp.h).
//
// Thread-safety: pure functions; safe to call concurrently.

#ifndef THROTTLEKIT_ADMISSION_FLUID_LP_MODEL_H_
#define THROTTLEKIT_ADMISSION_FLUID_LP_MODEL_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace throttlekit {

// One class of requests, per budget window.
struct LpClass {
  // Expected arrivals per window; finite, >= 0.
  double arrivals = 0;
  // What serving one request is worth; finite (may be <= 0).
  double value = 0;
  // Cost-budget units one request spends; finite, >= 0.
  double cost = 0;
  // Seconds one request holds a concurrency slot (3-axis form only); a
  // non-finite or negative hold counts as 0.
  double hold = 0;
};

// The budgets of one window.
struct LpBudgets {
  // Requests per window (the rate axis); finite, >= 0.
  double requests = 0;
  // Cost units per window; finite, >= 0.
  double cost = 0;
  // Concurrency-seconds per window (ceiling * window seconds); finite,
  // >= 0. Set: the 3-axis form; unset: the 2-axis form.
  std::optional<double> concurrency_seconds;
};

// The shadow prices, in value units per request, per cost unit and per
// concurrency-second. Finite and >= 0 when they come from the solver.
struct Duals {
  double rate = 0;
  double cost = 0;
  double concurrency = 0;

  friend bool operator==(const Duals&, const Duals&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Duals& p) {
  return os << "{rate=" << p.rate << " cost=" << p.cost
            << " concurrency=" << p.concurrency << "}";
}

// The hold the model charges: `hold_s` when finite and >= 0, else 0.
[[nodiscard]] inline double effective_hold(double hold_s) noexcept {
  return std::isfinite(hold_s) && hold_s > 0 ? hold_s : 0.0;
}

// The bid a request must meet: p_R + p_C * cost + p_K * effective_hold.
// The policy and the solver evaluate exactly this expression, so a class
// the solver admits at a tie is admitted by the policy bit for bit.
[[nodiscard]] inline double bid_price(const Duals& p, double cost,
                                      double hold_s = 0) noexcept {
  return p.rate + p.cost * cost + p.concurrency * effective_hold(hold_s);
}

namespace detail {

// A merged class as the solver sees it: a = (1, c, h'), h' = 0 in the
// 2-axis form.
struct LpRow {
  double arrivals;
  double value;
  std::array<double, 3> a;
};

inline absl::Status check_lp_number(const std::string& field, double value,
                                    bool nonnegative) {
  if (!std::isfinite(value) || (nonnegative && !(value >= 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("fluid_lp.", field, " must be finite",
                     nonnegative ? " and >= 0" : "", "; got ", value));
  }
  return absl::OkStatus();
}

inline absl::Status validate_fluid_lp(std::span<const LpClass> classes,
                                      const LpBudgets& budgets) {
  for (size_t j = 0; j < classes.size(); ++j) {
    const LpClass& k = classes[j];
    const std::string at = absl::StrCat("classes[", j, "].");
    if (auto s =
            check_lp_number(absl::StrCat(at, "arrivals"), k.arrivals, true);
        !s.ok()) {
      return s;
    }
    if (auto s = check_lp_number(absl::StrCat(at, "value"), k.value, false);
        !s.ok()) {
      return s;
    }
    if (auto s = check_lp_number(absl::StrCat(at, "cost"), k.cost, true);
        !s.ok()) {
      return s;
    }
  }
  if (auto s = check_lp_number(std::string("budgets.requests"),
                               budgets.requests, true);
      !s.ok()) {
    return s;
  }
  if (auto s = check_lp_number("budgets.cost", budgets.cost, true); !s.ok()) {
    return s;
  }
  if (budgets.concurrency_seconds) {
    return check_lp_number("budgets.concurrency_seconds",
                           *budgets.concurrency_seconds, true);
  }
  return absl::OkStatus();
}

// Rows with arrivals > 0, equal (value, a) merged, sorted by
// arrivals * |value| descending so that a pruned evaluation crosses its
// bound early.
inline std::vector<LpRow> fluid_lp_rows(std::span<const LpClass> classes,
                                        bool three_axis) {
  std::vector<LpRow> rows;
  rows.reserve(classes.size());
  for (const LpClass& k : classes) {
    if (!(k.arrivals > 0)) continue;
    rows.push_back({k.arrivals,
                    k.value,
                    {1.0, k.cost, three_axis ? effective_hold(k.hold) : 0.0}});
  }
  auto key = [](const LpRow& r) { return std::tie(r.value, r.a[1], r.a[2]); };
  std::sort(rows.begin(), rows.end(),
            [&](const LpRow& x, const LpRow& y) { return key(x) < key(y); });
  std::vector<LpRow> merged;
  merged.reserve(rows.size());
  for (const LpRow& r : rows) {
    if (!merged.empty() && key(merged.back()) == key(r)) {
      merged.back().arrivals += r.arrivals;
    } else {
      merged.push_back(r);
    }
  }
  std::stable_sort(
      merged.begin(), merged.end(), [](const LpRow& x, const LpRow& y) {
        return x.arrivals * std::abs(x.value) > y.arrivals * std::abs(y.value);
      });
  return merged;
}

inline double row_bid(const LpRow& r, const Duals& p) {
  return bid_price(p, r.a[1], r.a[2]);
}

// D(p), or a value > `bound` as soon as the partial sum exceeds it (every
// term is >= 0).
inline double fluid_lp_dual_bounded(std::span<const LpRow> rows,
                                    const std::array<double, 3>& budgets,
                                    const Duals& p, double bound) {
  double d =
      p.rate * budgets[0] + p.cost * budgets[1] + p.concurrency * budgets[2];
  if (d > bound) return d;
  for (const LpRow& r : rows) {
    const double surplus = r.value - row_bid(r, p);
    if (surplus > 0) {
      d += r.arrivals * surplus;
      if (d > bound) return d;
    }
  }
  return d;
}

// The relative tolerance within which a class counts as at the bid.
inline bool row_admitted(const LpRow& r, const Duals& p) {
  const double bid = row_bid(r, p);
  return r.value >= bid - 1e-9 * std::max(std::abs(r.value), std::abs(bid));
}

// Whether `value` is at `bid` within 1e-9 (relative): a class whose plane
// passes through a point, for the solvers' candidate vertices.
inline bool at_bid(double value, double bid) {
  return std::abs(value - bid) <=
         1e-9 * std::max(std::abs(value), std::abs(bid));
}

// The budgets as the vector B (K = 0 in the 2-axis form).
inline std::array<double, 3> fluid_lp_budget_vector(const LpBudgets& budgets) {
  return {budgets.requests, budgets.cost,
          budgets.concurrency_seconds.value_or(0.0)};
}

}  // namespace detail
}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_MODEL_H_
