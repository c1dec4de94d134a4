// throttlekit/admission/fluid_lp.h
//
// Provides `solve_fluid_lp`: the shadow prices (duals) of the fluid
// revenue-management LP over a budget window, which `BidPricePolicy`
// (bid_price_policy.h) turns into an admission filter, plus `bid_price`, the
// one formula both use, and `fluid_lp_dual_objective` (the dual objective,
// for certificates and tests).
//
//     // Per window: 700 requests worth 1 costing 8 units, 300 worth 9
//     // costing 1; budgets of 600 requests and 1000 units.
//     std::vector<LpClass> classes = {{700, 1, 8}, {300, 9, 1}};
//     absl::StatusOr<Duals> p =
//         solve_fluid_lp(classes, {.requests = 600, .cost = 1000});
//     // p->rate == 0, p->cost == 0.125: a request is worth admitting iff
//     // value >= bid_price(*p, cost) = 0.125 * cost.
//
// The model. Classes j = 1..n of requests arrive per window: lambda_j
// requests (`arrivals`), each worth v_j (`value`, any finite number),
// spending c_j >= 0 units of the cost budget and, in the 3-axis form,
// holding a concurrency slot for h_j seconds (`hold`). The window's budgets
// are R requests (the rate axis), C cost units and, in the 3-axis form,
// K concurrency-seconds (ceiling * window seconds, by Little's law).
// Writing a_j = (1, c_j[, h'_j]) and B = (R, C[, K]):
//
//     primal:  maximise  sum_j v_j x_j
//              s.t.      sum_j a_j x_j <= B,  0 <= x_j <= lambda_j
//     dual:    minimise  D(p) = p . B + sum_j lambda_j * max(0, v_j - a_j.p)
//              over      p = (p_R, p_C[, p_K]) >= 0
//
// and at an optimum the two are equal. h'_j = h_j when finite and >= 0,
// else 0: a bad hold estimate fails open (it never makes a request look
// dearer than it is) and a negative hold cannot buy a discount. The 2-axis
// form (no `concurrency_seconds`) ignores holds and returns p_K = 0.
//
// The minimum. D is convex and piecewise linear, and the orthant p >= 0
// contains no line, so D attains its minimum (it is >= 0) at a vertex of
// the arrangement of the bid hyperplanes {p : a_j.p = v_j} and the
// coordinate planes {p_k = 0}. Classes with no arrivals are dropped,
// classes equal in (value, cost, hold) are merged, and only classes with
// value > 0 contribute a plane (any other term is 0 for every p >= 0).
//
// The solvers. The 2-axis form is solved by `detail::solve_fluid_lp_2axis`
// (fluid_lp_2axis.h: the optimal face and its corners), the 3-axis form by
// `detail::solve_fluid_lp_3axis` (fluid_lp_3axis.h: a descent over the
// arrangement's vertices); both answer the vertex the enumerator
// (`detail::solve_fluid_lp_enumerated`, fluid_lp_enumerator.h: every vertex
// a candidate, O(m^3) and O(m^4) time) would answer, and fall back to it
// where their comments say. The inputs, `bid_price` and D(p) are in
// fluid_lp_model.h.
//
// Ties. Every vertex with D within tol = 1e-9 * max(D_min, 1e-3 * S) of
// the minimum D_min is optimal (S = sum_j lambda_j |v_j|, so the rule does
// not depend on the unit of value). Among them the solver returns the MOST
// SELECTIVE, the revenue-management convention, ordered by, in turn:
//   1. the smallest admitted volume sum{lambda_j : v_j >= a_j.p} (within
//      1e-9 relative): the fewest arrivals the policy would let through;
//   2. the largest p . B: the most of the window's value attributed to the
//      scarce budgets and the least left as surplus to the requests (at
//      equal D, the highest bids the budgets support);
//   3. the smallest p_R + p_C + p_K (on an axis whose budget is 0 a price
//      beyond what excludes its classes buys nothing);
//   4. the lexicographically smallest (p_R, p_C, p_K).
// A class exactly at its bid is admitted: its value equals the opportunity
// cost of what it spends, and the fluid optimum may serve it partly. So
// the chosen duals are finally scaled down by the least factor (within the
// 1e-9 tolerance, so nothing else changes) that makes every class admitted
// within the tolerance admitted bit-exactly by `bid_price`, the expression
// the policy evaluates.
//
// Degenerate inputs: no classes, only classes of value <= 0, or budgets
// above all demand give duals 0 (the policy then admits every request of
// value >= 0). A zero budget prices out every class that needs the axis,
// except classes exactly at the returned bid, which the exhausted axis
// itself then denies. Duplicate classes merge; parallel planes never meet
// and are skipped as singular.
//
// Thread-safety: pure functions; safe to call concurrently.

#ifndef THROTTLEKIT_ADMISSION_FLUID_LP_H_
#define THROTTLEKIT_ADMISSION_FLUID_LP_H_

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/admission/fluid_lp_2axis.h"
#include "throttlekit/admission/fluid_lp_3axis.h"
#include "throttlekit/admission/fluid_lp_enumerator.h"
#include "throttlekit/admission/fluid_lp_model.h"

namespace throttlekit {

// D(p) for `classes` and `budgets` (validated by the caller): in the 2-axis
// form holds and p.concurrency are ignored. Not validated; O(n).
[[nodiscard]] inline double fluid_lp_dual_objective(
    std::span<const LpClass> classes, const LpBudgets& budgets, Duals p) {
  const bool three_axis = budgets.concurrency_seconds.has_value();
  if (!three_axis) p.concurrency = 0;
  double d = p.rate * budgets.requests + p.cost * budgets.cost +
             (three_axis ? p.concurrency * *budgets.concurrency_seconds : 0.0);
  for (const LpClass& k : classes) {
    const double bid =
        bid_price(p, k.cost, three_axis ? effective_hold(k.hold) : 0.0);
    d += k.arrivals * std::max(0.0, k.value - bid);
  }
  return d;
}

// The most selective minimiser of the dual (see the file comment):
// kInvalidArgument "fluid_lp.<field> must be finite[ and >= 0]; got X",
// naming the class index, when an arrival volume, cost or budget is
// negative or non-finite or a value is non-finite (holds are never an
// error). 2-axis: O(n log n + V n) time; 3-axis: a descent over the
// arrangement's vertices, O(n) per edge looked at (see the file comment);
// either falls back to the enumerator where its comment says. Pure;
// thread-safe.
[[nodiscard]] inline absl::StatusOr<Duals> solve_fluid_lp(
    std::span<const LpClass> classes, const LpBudgets& budgets) {
  if (auto s = detail::validate_fluid_lp(classes, budgets); !s.ok()) return s;
  if (budgets.concurrency_seconds) {
    std::optional<Duals> p =
        detail::solve_fluid_lp_3axis(detail::fluid_lp_rows(classes, true),
                                     detail::fluid_lp_budget_vector(budgets));
    if (p) return *p;
    return detail::solve_fluid_lp_enumerated(classes, budgets);
  }
  std::optional<Duals> p =
      detail::solve_fluid_lp_2axis(detail::fluid_lp_rows(classes, false),
                                   detail::fluid_lp_budget_vector(budgets));
  if (p) return *p;
  return detail::solve_fluid_lp_enumerated(classes, budgets);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_H_
