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
// The enumerator (`detail::solve_fluid_lp_enumerated`, the oracle of both
// solvers and their fallback) takes every vertex: every pair (2-axis) or triple
// (3-axis, Cramer's rule) of those planes whose system is not singular,
// keeps the ones with p >= 0 (a coordinate within 1e-12 of the point's
// size below 0 counts as 0), evaluates D there and takes the minimiser.
// With m distinct classes that is O(m^2) candidates times O(m) per
// evaluation, O(m^3) time, in the 2-axis form and O(m^4) in the 3-axis
// form; O(m) memory. An evaluation stops once its partial sum exceeds the
// best value so far (every term is >= 0), so most candidates cost O(1):
// measured growth about n^2.3 to n^2.6 (2-axis, 1000 classes in about
// 80 ms) and n^2.7 to n^3.3 (3-axis, 100 classes in about 14 ms). The
// 3-axis solver (`detail::solve_fluid_lp_3axis`, its comment below) walks
// the arrangement's vertices instead: a descent to a minimiser, then the
// vertices within the tolerance around it, whose planes give the
// enumerator's own candidates there.
//
// The 2-axis solver finds the optimal face F = {p >= 0 : D(p) = D_min}
// and gives the enumerator's tie rules only the vertices on it:
//   1. A point p0 of F. For fixed p_C = t, D(., t) is convex piecewise
//      linear in p_R with breakpoints v_j - c_j t and is least at a
//      weighted quantile of them: the rate budget filled greedily by
//      surplus v_j - c_j t (expected O(n) by selection). The outer
//      h(t) = min_{p_R} D(p_R, t) is convex (a partial minimum of a convex
//      function) with right derivative C - (the least cost of an optimal
//      fill), monotone in t: a search on its sign finds the least
//      minimiser, alternating the meeting point of h's tangents at the
//      bracket's ends (exact once they lie on the pieces next to it) with
//      bisection over the doubles (at most 128 probes; about 35 at 1000
//      classes).
//   2. F itself. A primal optimum x is read off p0 (classes above their
//      bid at lambda_j, below at 0, at their bid filling what is left of
//      the priced budgets), and D(p0) == sum v_j x_j certifies both (weak
//      duality). By complementary slackness with x, F is the polygon
//      {p >= 0 : a_j.p <= v_j where x_j > 0, a_j.p >= v_j where
//      x_j < lambda_j, p_k = 0 where budget k is left unused}: the region
//      between a concave and a convex envelope of lines (O(n log n)).
//   3. Its corners. No bid line crosses the interior of F (D would kink
//      there), so the vertices of the arrangement on F are F's corners:
//      the envelopes' breakpoints where they do not cross, and their
//      crossings. At each corner the planes through it (classes at their
//      bid within 1e-9) give the enumerator's own vertices there, from
//      the same plane pairs in the same order.
//   4. The tolerance. The tie rules below count as optimal every vertex
//      within the 1e-9 tolerance of the minimum, and off F D can grow
//      slowly enough (a budget within 1e-9 of a demand) for a vertex next
//      to F to be within it: from each candidate the solver walks along
//      every plane through it to the next vertex on either side (O(n)
//      each), keeps those within the tolerance with the enumerator's
//      vertices at each (as in step 3), and walks on from them. For the
//      walk a coordinate plane passes through a vertex only where its
//      coordinate is 0, as in the 3-axis solver.
//   The enumerator's tie rules then choose among these candidates exactly
//   as they do among all vertices.
// Time O(n log n) expected plus O(n) per candidate vertex: at most 128
// probes of O(n) each, the envelopes' sorts, and a handful of
// candidates unless F is a polygon with many corners (a budget that
// exactly matches a demand, such as a zero budget) or many planes meet at
// one corner (values proportional to costs: k planes cost O(k^2)
// arithmetic, of which the 8 lexicographically smallest vertices are
// kept). O(n) memory. Where the certificate of step 2 fails, the minimum
// of step 3 is not reached, or the walk of step 4 passes 256 vertices
// (numerically pathological input), the solver falls back to the
// enumerator.
//
// Against the enumerator (tests/admission/fluid_lp_test.cc): the result
// was the enumerator's bit for bit (the fallback answering in under 0.1%)
// on 800,000 random degenerate instances of one magnitude (ties,
// duplicates, parallel and concurrent planes, zero and exact budgets) and
// on 800,000 with values and volumes 10^12 apart inside one instance and
// instances scaled by 2^+-30 and 10^+-12. The contract tested is that
// every bid is within 1e-9 (relative) of the enumerator's and `bid_price`
// admits the same classes, on one magnitude always and on mixed
// magnitudes where the choice does not hang on the tolerance's width (no
// vertex has D between 1e-2 of the tolerance and the tolerance above the
// minimum); elsewhere, that D is within the tolerance of the
// enumerator's. There the tolerance, relative to the largest terms, can
// exceed the whole term of a small class and count as optimal vertices
// whose bids differ by 10^6, and the walk of step 4 reaches those joined
// to F by edges within the tolerance, which need not be all of them.
//
// A known limit of the tolerance rule, shared by both solvers: a
// coordinate within 1e-12 of |p_R| + |p_C| below 0 counts as 0, which
// compares prices in two units. With costs in units 2^30 apart from
// values, a pair of bid lines meeting at a small negative p_C becomes a
// point on p_C = 0 that is not a vertex. The enumerator can take it (it
// is optimal and can be more selective than every vertex); the 2-axis
// solver never generates it, so there the two can differ.
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
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// One plane of the arrangement: normal . p = rhs.
struct LpPlane {
  std::array<double, 3> normal;
  double rhs;
};

// Calls visit(p) for every vertex candidate p >= 0 of the arrangement in
// `dims` dimensions, in a fixed order.
template <class Visit>
void for_each_fluid_lp_vertex(std::span<const LpPlane> planes, int dims,
                              Visit&& visit) {
  auto accept = [&](std::array<double, 3> x) {
    const double size = std::abs(x[0]) + std::abs(x[1]) + std::abs(x[2]);
    for (double& c : x) {
      if (!std::isfinite(c) || c < -1e-12 * size) return;
      c = c > 0 ? c : 0.0;  // also turns -0 into +0
    }
    visit(Duals{x[0], x[1], x[2]});
  };
  auto norm = [](const std::array<double, 3>& v) {
    return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  };
  const size_t n = planes.size();
  if (dims == 2) {
    for (size_t i = 0; i < n; ++i) {
      const LpPlane& u = planes[i];
      for (size_t j = i + 1; j < n; ++j) {
        const LpPlane& w = planes[j];
        const double det =
            u.normal[0] * w.normal[1] - u.normal[1] * w.normal[0];
        if (std::abs(det) <= 1e-12 * norm(u.normal) * norm(w.normal)) continue;
        accept({(u.rhs * w.normal[1] - w.rhs * u.normal[1]) / det,
                (u.normal[0] * w.rhs - w.normal[0] * u.rhs) / det, 0.0});
      }
    }
    return;
  }
  auto cross = [](const std::array<double, 3>& x,
                  const std::array<double, 3>& y) {
    return std::array<double, 3>{x[1] * y[2] - x[2] * y[1],
                                 x[2] * y[0] - x[0] * y[2],
                                 x[0] * y[1] - x[1] * y[0]};
  };
  for (size_t i = 0; i < n; ++i) {
    const LpPlane& u = planes[i];
    for (size_t j = i + 1; j < n; ++j) {
      const LpPlane& v = planes[j];
      const std::array<double, 3> uv = cross(u.normal, v.normal);
      for (size_t k = j + 1; k < n; ++k) {
        const LpPlane& w = planes[k];
        // Cramer's rule in vector form: with N = [u; v; w] and
        // det = u . (v x w), p = (r_u (v x w) + r_v (w x u) + r_w (u x v))
        // / det.
        const std::array<double, 3> vw = cross(v.normal, w.normal);
        const double det =
            u.normal[0] * vw[0] + u.normal[1] * vw[1] + u.normal[2] * vw[2];
        if (std::abs(det) <=
            1e-12 * norm(u.normal) * norm(v.normal) * norm(w.normal)) {
          continue;
        }
        const std::array<double, 3> wu = cross(w.normal, u.normal);
        std::array<double, 3> x;
        for (int c = 0; c < 3; ++c) {
          x[c] = (u.rhs * vw[c] + v.rhs * wu[c] + w.rhs * uv[c]) / det;
        }
        accept(x);
      }
    }
  }
}

// Appends to `out` the enumerator's vertices from the pairs (`dims` 2) or
// triples (3) of planes[indices] (indices increasing): the same planes in
// the same order and the same arithmetic as the whole enumeration, so a
// solver's candidates are bit for bit the enumerator's. `sub` is scratch.
inline void fluid_lp_vertices_of(std::span<const LpPlane> planes,
                                 std::span<const size_t> indices, int dims,
                                 std::vector<LpPlane>& sub,
                                 std::vector<Duals>& out) {
  sub.clear();
  for (size_t k : indices) sub.push_back(planes[k]);
  for_each_fluid_lp_vertex(sub, dims,
                           [&](const Duals& p) { out.push_back(p); });
}

// The planes of the arrangement in `dims` dimensions, in the order every
// solver visits them: the coordinate planes p_k = 0, then one plane
// a_j . p = v_j per row of value > 0, in row order.
inline std::vector<LpPlane> fluid_lp_planes(std::span<const LpRow> rows,
                                            int dims) {
  std::vector<LpPlane> planes;
  planes.reserve(rows.size() + 3);
  for (int k = 0; k < dims; ++k) {
    LpPlane axis{{0.0, 0.0, 0.0}, 0.0};
    axis.normal[k] = 1;
    planes.push_back(axis);
  }
  for (const LpRow& r : rows) {
    if (r.value > 0) planes.push_back({r.a, r.value});
  }
  return planes;
}

// S = sum_j lambda_j |v_j|, the scale of D.
inline double fluid_lp_scale(std::span<const LpRow> rows) {
  double scale = 0;
  for (const LpRow& r : rows) scale += r.arrivals * std::abs(r.value);
  return scale;
}

// The tolerance within which a D counts as the minimum `d_min`: 1e-9
// relative, and never below 1e-12 of the scale S.
inline double fluid_lp_tolerance(double scale, double d_min) {
  return 1e-9 * std::max(d_min, 1e-3 * scale);
}

// The choice among candidate vertices: `p` the most selective one within
// the tolerance of the least D, `d_min`, then scaled down (the file
// comment's tie rules and snap).
struct VertexChoice {
  std::optional<Duals> p;  // unset: no candidate within the tolerance
  double d_min;
};

// The tie rules of the file comment over a set of candidate vertices:
// `for_each_candidate(visit)` calls visit(p) for every candidate p >= 0 and
// is called twice (the minimum, then the most selective vertex within the
// tolerance), then the final scale-down. O(n) per candidate; the origin's
// D is the starting minimum whether or not it is a candidate.
template <class ForEachCandidate>
VertexChoice most_selective_vertex(std::span<const LpRow> rows,
                                   const std::array<double, 3>& b,
                                   ForEachCandidate&& for_each_candidate) {
  const double scale = fluid_lp_scale(rows);
  double volume = 0;
  for (const LpRow& r : rows) volume += r.arrivals;
  auto tolerance = [&](double d_min) {
    return fluid_lp_tolerance(scale, d_min);
  };

  // Pass 1: the minimum.
  double d_min = fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL);
  for_each_candidate([&](const Duals& p) {
    const double d =
        fluid_lp_dual_bounded(rows, b, p, d_min + tolerance(d_min));
    d_min = std::min(d_min, d);
  });

  // Pass 2: the most selective vertex within the tolerance.
  const double bound = d_min + tolerance(d_min);
  struct Key {
    double admitted;
    double budget_value;
    double total;
    Duals p;
  };
  auto key_of = [&](const Duals& p) {
    Key k{0, p.rate * b[0] + p.cost * b[1] + p.concurrency * b[2],
          p.rate + p.cost + p.concurrency, p};
    for (const LpRow& r : rows) {
      if (row_admitted(r, p)) k.admitted += r.arrivals;
    }
    return k;
  };
  auto better = [&](const Key& x, const Key& y) {
    const double vol_tol = 1e-9 * volume;
    if (x.admitted < y.admitted - vol_tol) return true;
    if (x.admitted > y.admitted + vol_tol) return false;
    const double value_tol =
        1e-9 * std::max(std::abs(x.budget_value), std::abs(y.budget_value));
    if (x.budget_value > y.budget_value + value_tol) return true;
    if (x.budget_value < y.budget_value - value_tol) return false;
    const double total_tol = 1e-9 * std::max(x.total, y.total);
    if (x.total < y.total - total_tol) return true;
    if (x.total > y.total + total_tol) return false;
    return std::tie(x.p.rate, x.p.cost, x.p.concurrency) <
           std::tie(y.p.rate, y.p.cost, y.p.concurrency);
  };
  std::optional<Key> best;
  for_each_candidate([&](const Duals& p) {
    if (fluid_lp_dual_bounded(rows, b, p, bound) > bound) return;
    Key k = key_of(p);
    if (!best || better(k, *best)) best = k;
  });
  if (!best) return {std::nullopt, d_min};
  Duals p = best->p;

  // Snap: a class admitted within the tolerance is admitted exactly. The
  // bid is linear in p, so scaling p by value / bid (< 1 by at most the
  // 1e-9 tolerance) brings that class's bid to its value; a further 2^-48
  // absorbs the rounding, and a second pass catches what is left.
  for (int pass = 0; pass < 8; ++pass) {
    double factor = 1;
    for (const LpRow& r : rows) {
      const double bid = row_bid(r, p);
      if (row_admitted(r, p) && !(r.value >= bid)) {
        factor = std::min(factor, r.value / bid);
      }
    }
    if (factor == 1) break;
    factor *= 1 - 0x1p-48;
    p = Duals{p.rate * factor, p.cost * factor, p.concurrency * factor};
  }
  return {p, d_min};
}

// The budgets as the vector B (K = 0 in the 2-axis form).
inline std::array<double, 3> fluid_lp_budget_vector(const LpBudgets& budgets) {
  return {budgets.requests, budgets.cost,
          budgets.concurrency_seconds.value_or(0.0)};
}

// The reference solver: every vertex of the arrangement is a candidate
// (the file comment's "the enumerator"). Kept as the oracle of
// `solve_fluid_lp` and as the fallback of both its solvers. Same contract and
// statuses as `solve_fluid_lp`; O(m^3) (2-axis) or O(m^4) (3-axis) time in the
// m distinct classes. Pure; thread-safe.
[[nodiscard]] inline absl::StatusOr<Duals> solve_fluid_lp_enumerated(
    std::span<const LpClass> classes, const LpBudgets& budgets) {
  if (auto s = validate_fluid_lp(classes, budgets); !s.ok()) return s;
  const bool three_axis = budgets.concurrency_seconds.has_value();
  const int dims = three_axis ? 3 : 2;
  const std::vector<LpRow> rows = fluid_lp_rows(classes, three_axis);
  const std::vector<LpPlane> planes = fluid_lp_planes(rows, dims);
  // Never empty: the minimiser is a vertex (the coordinate planes alone
  // give the origin).
  return most_selective_vertex(rows, fluid_lp_budget_vector(budgets),
                               [&](auto&& visit) {
                                 for_each_fluid_lp_vertex(planes, dims, visit);
                               })
      .p.value_or(Duals{});
}

// ---------------------------------------------------------------------------
// The 2-axis solver. Coordinates: t = p_C, y = p_R; the plane of a class
// is the line y = v - c t.

struct LpLine {
  double v;
  double c;
};

// A class of value > 0 with its surplus w = v - c t at one probe t.
struct LpSurplus {
  double surplus;
  double cost;
  double arrivals;
};

// The rate budget filled greedily at p_C = t, the classes of surplus > 0
// in the order (surplus descending, cost ascending): `marginal` is set when
// they ask for more than `requests`, and then `p_rate` is the surplus of
// the class that crosses the budget (the least minimiser of D(., t) over
// p_R >= 0: a weighted quantile); `cost_used` is the cost of the fill, the
// least cost among the fills optimal at t (the order's cost key), so
// `budgets.cost - cost_used` is the right derivative of min_{p_R} D(p_R, t)
// in t. Expected O(n): a weighted selection by halving, not a sort.
// `value` is min_{p_R} D(p_R, t) less t * C: R p_R + the surplus above
// p_R.
struct RateFill {
  bool marginal = false;
  double p_rate = 0;
  double cost_used = 0;
  double value = 0;
};

inline RateFill fill_rate_budget(std::span<const LpRow> rows, double requests,
                                 double t, std::vector<LpSurplus>& items) {
  items.clear();
  for (const LpRow& r : rows) {
    if (!(r.value > 0)) continue;
    const double w = r.value - r.a[1] * t;
    if (w > 0) items.push_back({w, r.a[1], r.arrivals});
  }
  auto first = [](const LpSurplus& x, const LpSurplus& y) {
    return x.surplus > y.surplus || (x.surplus == y.surplus && x.cost < y.cost);
  };
  size_t lo = 0;
  size_t hi = items.size();
  double volume = 0;
  double cost = 0;
  double worth = 0;  // sum of arrivals * surplus over [0, lo)
  // Invariant: [0, lo) fits within `requests` (volume, cost), and the
  // class that crosses the budget, if any, is in [lo, hi).
  while (hi - lo > 16) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(items.begin() + lo, items.begin() + mid,
                     items.begin() + hi, first);
    double v = 0;
    double c = 0;
    double w = 0;
    for (size_t i = lo; i < mid; ++i) {
      v += items[i].arrivals;
      c += items[i].cost * items[i].arrivals;
      w += items[i].surplus * items[i].arrivals;
    }
    if (volume + v > requests) {
      hi = mid;
    } else {
      volume += v;
      cost += c;
      worth += w;
      lo = mid;
    }
  }
  std::sort(items.begin() + lo, items.begin() + hi, first);
  for (size_t i = lo; i < hi; ++i) {
    const LpSurplus& k = items[i];
    if (volume + k.arrivals > requests) {
      return {true, k.surplus, cost + k.cost * (requests - volume),
              requests * k.surplus + worth - k.surplus * volume};
    }
    volume += k.arrivals;
    cost += k.cost * k.arrivals;
    worth += k.surplus * k.arrivals;
  }
  return {false, 0.0, cost, worth};
}

// A point of the optimal face: p_C is the least minimiser of the convex
// h(t) = min_{p_R >= 0} D(p_R, t), p_R the least minimiser of D(., p_C).
// The search keeps lo < t* <= hi by the sign of h's right derivative and
// alternates two probes: where the tangents of h at lo and hi meet (h is
// piecewise linear, so once lo and hi lie on the pieces next to t* this is
// t*, and the next double above it settles the sign), and the midpoint of
// the doubles t / u in (lo, hi] (u a power of two above every v / c, so
// that scaling the values by 2^k scales every probe exactly), which bounds
// the search to twice 64 probes of `fill_rate_budget`. It stops when the
// doubles are adjacent or h at hi lies on lo's tangent (the kink is at hi).
inline Duals locate_fluid_lp_optimum(std::span<const LpRow> rows,
                                     const std::array<double, 3>& b) {
  std::vector<LpSurplus> items;
  items.reserve(rows.size());
  struct Probe {
    double t;
    double h;
    double slope;  // h's right derivative
  };
  auto probe = [&](double t) {
    const RateFill f = fill_rate_budget(rows, b[0], t, items);
    return Probe{t, t * b[1] + f.value, b[1] - f.cost_used};
  };
  Probe lo = probe(0);
  double t = 0;
  if (lo.slope < 0) {
    double t_max = 0;
    for (const LpRow& r : rows) {
      if (r.value > 0 && r.a[1] > 0) t_max = std::max(t_max, r.value / r.a[1]);
    }
    // t_max > 0: a fill that costs more than C >= 0 holds a class with
    // v > 0 and c > 0. From u on, every such class has surplus <= 0. An
    // overflowing v / c leaves p0 wrong, which the certificate catches.
    if (!(t_max < 0x1p1000)) t_max = 0x1p1000;
    const double u = std::ldexp(1.0, std::ilogb(t_max) + 2);
    Probe hi = probe(u);
    auto bits = [&](double x) { return std::bit_cast<uint64_t>(x / u); };
    for (int step = 0; bits(hi.t) - bits(lo.t) > 1 && step < 128; ++step) {
      if (hi.h <= lo.h + lo.slope * (hi.t - lo.t) +
                      0x1p-40 * (std::abs(hi.h) + std::abs(lo.h))) {
        break;
      }
      const uint64_t mid = bits(lo.t) + (bits(hi.t) - bits(lo.t)) / 2;
      double at = u * std::bit_cast<double>(mid);
      const bool tangent = step % 2 == 0;
      if (tangent) {
        const double meet = (hi.h - lo.h + lo.slope * lo.t - hi.slope * hi.t) /
                            (lo.slope - hi.slope);
        if (meet > lo.t && meet < hi.t) at = meet;
      }
      const Probe p = probe(at);
      if (p.slope >= 0) {
        hi = p;
      } else {
        lo = p;
        if (tangent) {
          const Probe q = probe(std::nextafter(at, HUGE_VAL));
          (q.slope >= 0 ? hi : lo) = q;
        }
      }
    }
    t = hi.t;
  }
  const RateFill fill = fill_rate_budget(rows, b[0], t, items);
  return Duals{fill.marginal ? fill.p_rate : 0.0, t, 0.0};
}

inline bool at_bid(double value, double bid) {
  return std::abs(value - bid) <=
         1e-9 * std::max(std::abs(value), std::abs(bid));
}

// The optimal face F = {p >= 0 : D(p) = D_min} as complementary slackness
// with one primal optimum x: p is optimal iff x_j > 0 implies
// v_j >= a_j . p (an `upper` line: y <= v - c t), x_j < lambda_j implies
// v_j <= a_j . p (a `lower` line), and a budget left unused has price 0.
// `primal` is the value of x and `feasible` whether x keeps within the
// budgets (within 1e-9): the certificate that p0 is optimal is
// D(p0) == primal.
struct FluidLpFace {
  std::vector<LpLine> upper;
  std::vector<LpLine> lower;
  bool cost_price_zero = false;
  double primal = 0;
  bool feasible = false;
};

// F from a point p0 of it: x = lambda above the bid, 0 below, and the
// classes at their bid (within 1e-9) fill what the others leave of the
// priced budgets: for a given volume, the cheapest-first and the
// dearest-first fills bound the cost, and their blend hits the cost budget
// (the set of (volume, cost) a box of classes can use is convex).
inline FluidLpFace fluid_lp_face(std::span<const LpRow> rows,
                                 const std::array<double, 3>& b,
                                 const Duals& p0) {
  std::vector<double> x(rows.size(), 0.0);
  std::vector<size_t> ties;
  double used_r = 0;
  double used_c = 0;
  for (size_t j = 0; j < rows.size(); ++j) {
    const LpRow& r = rows[j];
    if (!(r.value > 0)) continue;
    const double bid = row_bid(r, p0);
    if (at_bid(r.value, bid)) {
      ties.push_back(j);
    } else if (r.value > bid) {
      x[j] = r.arrivals;
      used_r += r.arrivals;
      used_c += r.a[1] * r.arrivals;
    }
  }
  const double room_r = std::max(0.0, b[0] - used_r);
  const double room_c = std::max(0.0, b[1] - used_c);
  std::sort(ties.begin(), ties.end(), [&](size_t i, size_t j) {
    return std::tie(rows[i].a[1], i) < std::tie(rows[j].a[1], j);
  });
  // Fills `ties` in order (reversed: dearest first) until the volume
  // reaches `volume_cap` or the cost reaches `cost_cap`.
  auto fill = [&](bool dearest, double volume_cap, double cost_cap) {
    std::vector<double> f(ties.size(), 0.0);
    double v = 0;
    double c = 0;
    for (size_t i = 0; i < ties.size(); ++i) {
      const size_t k = dearest ? ties.size() - 1 - i : i;
      const LpRow& r = rows[ties[k]];
      double take = std::min(r.arrivals, volume_cap - v);
      if (r.a[1] > 0) take = std::min(take, (cost_cap - c) / r.a[1]);
      if (!(take > 0)) break;
      f[k] = take;
      v += take;
      c += take * r.a[1];
    }
    return std::pair{f, c};
  };
  std::vector<double> tie_x(ties.size(), 0.0);
  if (p0.rate > 0) {
    auto [cheap, cheap_cost] = fill(false, room_r, HUGE_VAL);
    tie_x = cheap;
    if (p0.cost > 0) {
      auto [dear, dear_cost] = fill(true, room_r, HUGE_VAL);
      const double theta =
          dear_cost > cheap_cost
              ? std::clamp((room_c - cheap_cost) / (dear_cost - cheap_cost),
                           0.0, 1.0)
              : 0.0;
      for (size_t i = 0; i < ties.size(); ++i) {
        tie_x[i] = cheap[i] + theta * (dear[i] - cheap[i]);
      }
    }
  } else if (p0.cost > 0) {
    tie_x = fill(true, room_r, room_c).first;
  }
  for (size_t i = 0; i < ties.size(); ++i) {
    x[ties[i]] = tie_x[i];
    used_r += tie_x[i];
    used_c += tie_x[i] * rows[ties[i]].a[1];
  }

  FluidLpFace face;
  face.feasible = used_r <= b[0] + 1e-9 * std::max(b[0], used_r) &&
                  used_c <= b[1] + 1e-9 * std::max(b[1], used_c);
  face.lower.push_back({0.0, 0.0});  // p_R >= 0
  for (size_t j = 0; j < rows.size(); ++j) {
    const LpRow& r = rows[j];
    if (!(r.value > 0)) continue;  // v <= a . p for every p >= 0
    face.primal += r.value * x[j];
    if (x[j] > 1e-9 * r.arrivals) face.upper.push_back({r.value, r.a[1]});
    if (x[j] < r.arrivals * (1 - 1e-9)) face.lower.push_back({r.value, r.a[1]});
  }
  if (p0.rate == 0 && used_r < b[0] * (1 - 1e-9)) {
    face.upper.push_back({0.0, 0.0});  // the rate budget is slack: p_R = 0
  }
  face.cost_price_zero = p0.cost == 0 && used_c < b[1] * (1 - 1e-9);
  return face;
}

// One piece of an envelope: `line` from t = `from` to the next piece.
struct EnvelopePiece {
  LpLine line;
  double from;
};

// min_j (v_j - c_j t) over t >= 0 (max_j when `maximum`), as pieces in
// increasing t; empty for no lines. O(n log n).
inline std::vector<EnvelopePiece> envelope(std::vector<LpLine> lines,
                                           bool maximum) {
  // max_j (v_j - c_j t) = -min_j (-v_j - (-c_j) t).
  if (maximum) {
    for (LpLine& l : lines) l = {-l.v, -l.c};
  }
  std::sort(lines.begin(), lines.end(), [](const LpLine& x, const LpLine& y) {
    return std::tie(x.c, x.v) < std::tie(y.c, y.v);
  });
  auto meet = [](const LpLine& x, const LpLine& y) {
    return (y.v - x.v) / (y.c - x.c);
  };
  // The minimum takes the lines in increasing c as t increases.
  std::vector<LpLine> hull;
  for (const LpLine& l : lines) {
    if (!hull.empty() && hull.back().c == l.c) continue;  // never lower
    while (hull.size() >= 2 && meet(hull[hull.size() - 2], l) <=
                                   meet(hull[hull.size() - 2], hull.back())) {
      hull.pop_back();
    }
    hull.push_back(l);
  }
  std::vector<EnvelopePiece> pieces;
  for (size_t i = 0; i < hull.size(); ++i) {
    const double from = i == 0 ? -HUGE_VAL : meet(hull[i - 1], hull[i]);
    const LpLine line = maximum ? LpLine{-hull[i].v, -hull[i].c} : hull[i];
    if (from <= 0 && !pieces.empty()) pieces.clear();
    pieces.push_back({line, std::max(from, 0.0)});
  }
  return pieces;
}

inline const LpLine& piece_at(const std::vector<EnvelopePiece>& pieces,
                              double t) {
  auto it = std::upper_bound(
      pieces.begin(), pieces.end(), t,
      [](double t, const EnvelopePiece& p) { return t < p.from; });
  return std::prev(it)->line;
}

// Points (p_R, p_C) that include every corner of the face: its
// corners are breakpoints of the envelopes U = min(upper) and
// G = max(lower) where G <= U (within 1e-9), and the points where U and G
// cross; and `p0`. A superset: each point only costs a scan.
inline std::vector<Duals> fluid_lp_face_points(const FluidLpFace& face,
                                               const Duals& p0) {
  const std::vector<EnvelopePiece> u = envelope(face.upper, false);
  const std::vector<EnvelopePiece> g = envelope(face.lower, true);
  std::vector<double> ts = {0.0};
  if (!face.cost_price_zero) {
    for (const auto* pieces : {&u, &g}) {
      for (const EnvelopePiece& p : *pieces) {
        if (p.from > 0) ts.push_back(p.from);
      }
    }
  }
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());

  std::vector<Duals> points = {p0};
  auto value = [](const LpLine& l, double t) { return l.v - l.c * t; };
  // G(t) <= U(t) within 1e-9 of the terms' size (v and c t cancel at
  // p_R = 0).
  auto feasible = [&](double t) {
    if (u.empty()) return true;
    const LpLine& top = piece_at(u, t);
    const LpLine& bottom = piece_at(g, t);
    const double size = std::max({std::abs(top.v), std::abs(top.c * t),
                                  std::abs(bottom.v), std::abs(bottom.c * t)});
    return value(top, t) - value(bottom, t) >= -1e-9 * size;
  };
  auto add = [&](double t) {
    points.push_back({value(piece_at(g, t), t), t, 0.0});
    if (!u.empty()) points.push_back({value(piece_at(u, t), t), t, 0.0});
  };
  // Where U and G cross after `t`, if they do.
  auto crossing = [&](double t) -> std::optional<double> {
    if (u.empty()) return std::nullopt;
    const LpLine& top = piece_at(u, t);
    const LpLine& bottom = piece_at(g, t);
    if (top.c == bottom.c) return std::nullopt;
    const double at = (top.v - bottom.v) / (top.c - bottom.c);
    if (!(at > t)) return std::nullopt;
    return at;
  };
  bool was_feasible = false;
  for (size_t i = 0; i < ts.size(); ++i) {
    const bool is_feasible = feasible(ts[i]);
    if (is_feasible) add(ts[i]);
    if (i > 0 && is_feasible != was_feasible) {
      if (std::optional<double> at = crossing(ts[i - 1]); at && *at < ts[i]) {
        add(*at);
      }
    }
    was_feasible = is_feasible;
  }
  if (!face.cost_price_zero) {
    if (std::optional<double> at = crossing(ts.back())) add(*at);
  }
  for (Duals& p : points) p.rate = std::max(p.rate, 0.0);
  return points;
}

// The 2-axis solver (steps 1 to 4 of the file comment), or nullopt when
// its certificate fails or its walk passes 256 vertices (the caller then
// runs the enumerator). `rows` from `fluid_lp_rows(classes, false)`.
inline std::optional<Duals> solve_fluid_lp_2axis(
    std::span<const LpRow> rows, const std::array<double, 3>& b) {
  const std::vector<LpPlane> planes = fluid_lp_planes(rows, 2);
  const Duals p0 = locate_fluid_lp_optimum(rows, b);
  const FluidLpFace face = fluid_lp_face(rows, b, p0);
  const double d0 = fluid_lp_dual_bounded(rows, b, p0, HUGE_VAL);
  const double tol = fluid_lp_tolerance(fluid_lp_scale(rows), d0);
  if (!face.feasible || !(std::abs(d0 - face.primal) <= tol)) {
    return std::nullopt;
  }
  const std::vector<Duals> points = fluid_lp_face_points(face, p0);

  // The planes through q, as indices into `planes` in increasing order:
  // classes at their bid within 1e-9, and the coordinate planes where q's
  // coordinate is 0, or (`near`, for the enumerator's candidates) within
  // 1e-9 of its scale among those classes. The walk uses the exact zeros,
  // as the 3-axis solver's does: with values of mixed magnitudes a
  // coordinate can be small against one class and still be what prices
  // out another.
  auto planes_through = [&](const Duals& q, bool near) {
    std::vector<size_t> at;
    double size = 0;
    double t_size = 0;
    for (size_t k = 2; k < planes.size(); ++k) {
      const LpPlane& plane = planes[k];
      if (at_bid(plane.rhs, q.rate + q.cost * plane.normal[1])) {
        at.push_back(k);
        size = std::max(size, plane.rhs);
        if (plane.normal[1] > 0) {
          t_size = std::max(t_size, plane.rhs / plane.normal[1]);
        }
      }
    }
    std::vector<size_t> axes;
    if (q.rate == 0 || (near && q.rate <= 1e-9 * size)) axes.push_back(0);
    if (q.cost == 0 || (near && q.cost <= 1e-9 * t_size)) axes.push_back(1);
    at.insert(at.begin(), axes.begin(), axes.end());
    return at;
  };
  std::vector<LpPlane> sub;
  auto vertices_of = [&](const std::vector<size_t>& indices,
                         std::vector<Duals>& out) {
    fluid_lp_vertices_of(planes, indices, 2, sub, out);
  };
  auto lex = [](const Duals& x, const Duals& y) {
    return std::tie(x.rate, x.cost) < std::tie(y.rate, y.cost);
  };

  // The enumerator's vertices at q, into `local`: those of the planes
  // through it (`near`), or the 8 lexicographically smallest when more
  // than 12 planes pass through it.
  std::vector<Duals> local;
  auto vertices_at = [&](const Duals& q) {
    const std::vector<size_t> at = planes_through(q, true);
    local.clear();
    vertices_of(at, local);
    if (at.size() > 12) {
      const size_t keep = std::min<size_t>(8, local.size());
      std::partial_sort(local.begin(), local.begin() + keep, local.end(), lex);
      local.resize(keep);
    }
  };
  std::vector<Duals> candidates;
  for (const Duals& q : points) {
    vertices_at(q);
    candidates.insert(candidates.end(), local.begin(), local.end());
  }
  std::sort(candidates.begin(), candidates.end(), lex);
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());

  // The tie rules count every vertex within the tolerance of the minimum
  // as optimal, and D can grow slowly enough off F (a budget within 1e-9
  // of a demand) for a vertex next to F to be within it. So walk the
  // arrangement's edges from F's vertices to each next vertex along every
  // plane through them, keep those within the tolerance with the
  // enumerator's vertices at each, and keep walking from them (at most
  // 256, else the enumerator decides).
  const double scale = fluid_lp_scale(rows);
  double d_min = fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL);
  for (const Duals& p : candidates) {
    d_min = std::min(d_min, fluid_lp_dual_bounded(rows, b, p, HUGE_VAL));
  }
  const double bound = d_min + fluid_lp_tolerance(scale, d_min);
  // Whether p is within the tolerance and new (then it joins candidates).
  auto add = [&](const Duals& p) {
    if (fluid_lp_dual_bounded(rows, b, p, bound) > bound) return false;
    if (std::find(candidates.begin(), candidates.end(), p) !=
        candidates.end()) {
      return false;
    }
    candidates.push_back(p);
    return true;
  };
  std::vector<Duals> reached;
  for (size_t next = 0; next < candidates.size(); ++next) {
    if (candidates.size() > 256) return std::nullopt;
    const Duals q = candidates[next];
    const std::vector<size_t> at = planes_through(q, false);
    for (size_t k : at) {
      const LpPlane& along = planes[k];
      const double dir[2] = {along.normal[1], -along.normal[0]};
      // The nearest plane crossing the line on either side of q.
      double s_hi = HUGE_VAL;
      double s_lo = -HUGE_VAL;
      size_t hi = 0;
      size_t lo = 0;
      for (size_t m = 0; m < planes.size(); ++m) {
        if (std::binary_search(at.begin(), at.end(), m)) continue;
        const LpPlane& w = planes[m];
        const double rate = w.normal[0] * dir[0] + w.normal[1] * dir[1];
        if (rate == 0) continue;
        const double s =
            (w.rhs - w.normal[0] * q.rate - w.normal[1] * q.cost) / rate;
        if (s > 0 && s < s_hi) {
          s_hi = s;
          hi = m;
        } else if (s < 0 && s > s_lo) {
          s_lo = s;
          lo = m;
        }
      }
      for (auto [s, m] : {std::pair{s_hi, hi}, std::pair{s_lo, lo}}) {
        if (!std::isfinite(s)) continue;
        reached.clear();
        vertices_of({std::min(k, m), std::max(k, m)}, reached);
        for (const Duals& p : reached) {
          if (!add(p)) continue;
          vertices_at(p);
          for (const Duals& r : local) add(r);
        }
      }
    }
  }

  const VertexChoice choice = most_selective_vertex(rows, b, [&](auto&& visit) {
    for (const Duals& p : candidates) visit(p);
  });
  if (!(choice.d_min <= d0 + tol)) return std::nullopt;
  return choice.p;
}

// ---------------------------------------------------------------------------
// The 3-axis solver. The arrangement of the planes p_k = 0 and
// a_j . p = v_j in p >= 0; D is linear on each of its cells.
//
//   1. Descent. From the origin (the vertex of the three coordinate
//      planes), repeatedly take the edge out of the current vertex along
//      which D falls fastest per unit of length (an edge: the line of two
//      planes through the vertex, either way, staying in p >= 0) to the
//      next vertex on it. D is linear along the edge up to that vertex, so
//      every step lowers D strictly and no vertex repeats; at a vertex no
//      edge lowers, D is least over every cell around it (each cell there
//      is a cone spanned by edges), hence least everywhere (D is convex).
//      The simplex method in the dual, with the steepest edge.
//   2. The optimal face and its neighbourhood, as in the 2-axis solver's
//      step 4: from that vertex, walk every edge to its next vertex and
//      keep walking from those within the tolerance of the least D seen.
//      The optimal face is a polyhedron whose vertices are connected by
//      its edges, so the walk reaches all of them.
//   3. At each vertex reached, the planes through it (classes at their bid
//      within 1e-9, coordinates within 1e-9 of their scale) give the
//      enumerator's own vertices there, from the same plane triples in the
//      same order, and the enumerator's tie rules choose among them.
// Time O(n) per edge looked at: steps times the edges at a vertex (3 pairs
// of planes, both ways, at a simple vertex) for the descent, and the same
// per vertex walked. The steps are not bounded by a polynomial (as the
// simplex method's are not); on random instances they grow about linearly
// with n, so the whole measured about 15 n^2 ns (docs/admission.md), where
// the enumerator takes O(n^4). Falls back (nullopt: the caller runs the
// enumerator) when more than 24 planes meet at one vertex (values
// proportional to a mix of costs and holds), when the descent runs past
// 8 n + 64 steps or the walk past 256 vertices, or when a falling edge
// never meets another plane (neither happens in exact arithmetic).
//
// Against the enumerator (tests/admission/fluid_lp_test.cc): bit-equal on
// 240,000 random degenerate instances of one magnitude (ties, duplicates,
// parallel planes, planes through one line, zero and exact budgets, whole
// instances scaled by 2^+-30 and 10^+-12). With values 10^12 apart inside
// one instance, the tolerance (relative to the largest) spans vertices
// that price the smallest classes differently, and the walk, which goes on
// only from vertices within 64 tolerances of the minimum, can miss the one
// the tie rules would pick: the answer is then another vertex within the
// tolerance (D within it of the enumerator's), not the enumerator's.
inline std::optional<Duals> solve_fluid_lp_3axis(
    std::span<const LpRow> rows, const std::array<double, 3>& b) {
  const std::vector<LpPlane> planes = fluid_lp_planes(rows, 3);
  // The rows that contribute a plane, aligned with planes[3 + i].
  std::vector<const LpRow*> priced;
  for (const LpRow& r : rows) {
    if (r.value > 0) priced.push_back(&r);
  }
  constexpr size_t kMostPlanesAtAVertex = 24;
  // The walk goes on from vertices this many tolerances above the least D,
  // so that vertices within the tolerance that no edge inside it joins
  // (a thin region when budgets nearly match demands) are still reached.
  constexpr double kReach = 64;
  using Vec = std::array<double, 3>;
  auto dot = [](const Vec& x, const Vec& y) {
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
  };
  auto norm = [&](const Vec& x) { return std::sqrt(dot(x, x)); };
  auto point = [](const Duals& q) {
    return Vec{q.rate, q.cost, q.concurrency};
  };

  // The planes through q, as indices into `planes` in increasing order:
  // classes at their bid within 1e-9, and the coordinate planes where q's
  // coordinate is 0, or (`near`, for the enumerator's candidates, as the
  // 2-axis solver takes them) within 1e-9 of its scale among those classes.
  // The walk uses the exact zeros: with values of mixed magnitudes a
  // coordinate can be small against one class and still be what prices
  // out another.
  auto planes_through = [&](const Duals& q, bool near) {
    std::vector<size_t> at;
    Vec size = {0, 0, 0};
    const Vec x = point(q);
    for (size_t k = 3; k < planes.size(); ++k) {
      const LpPlane& plane = planes[k];
      if (at_bid(plane.rhs, dot(plane.normal, x))) {
        at.push_back(k);
        for (int c = 0; c < 3; ++c) {
          if (plane.normal[c] > 0) {
            size[c] = std::max(size[c], plane.rhs / plane.normal[c]);
          }
        }
      }
    }
    std::vector<size_t> axes;
    for (int c = 0; c < 3; ++c) {
      if (x[c] == 0 || (near && x[c] <= 1e-9 * size[c])) axes.push_back(c);
    }
    at.insert(at.begin(), axes.begin(), axes.end());
    return at;
  };
  std::vector<LpPlane> sub;
  auto vertices_of = [&](const std::vector<size_t>& indices,
                         std::vector<Duals>& out) {
    fluid_lp_vertices_of(planes, indices, 3, sub, out);
  };

  // The edges out of q: the line of each pair of planes through it, each
  // way that stays in p >= 0 (a coordinate plane through q the line does
  // not lie in must be left upwards).
  struct Edge {
    size_t first;
    size_t second;
    Vec dir;
  };
  auto edges_of = [&](const std::vector<size_t>& at, std::vector<Edge>& out) {
    out.clear();
    for (size_t i = 0; i < at.size(); ++i) {
      const Vec& u = planes[at[i]].normal;
      for (size_t j = i + 1; j < at.size(); ++j) {
        const Vec& w = planes[at[j]].normal;
        const Vec d = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                       u[0] * w[1] - u[1] * w[0]};
        const double len = norm(d);
        if (!(len > 1e-12 * norm(u) * norm(w))) continue;  // parallel
        for (double sign : {1.0, -1.0}) {
          const Vec dir = {sign * d[0] / len, sign * d[1] / len,
                           sign * d[2] / len};
          bool inside = true;
          for (size_t k : at) {
            if (k < 3 && dir[k] < -1e-12) inside = false;
          }
          if (inside) out.push_back({at[i], at[j], dir});
        }
      }
    }
  };
  // D's slope along `dir` from q (`at`: the planes through q), and the
  // sum of its terms' magnitudes (the scale a slope counts as 0 against).
  struct Slope {
    double g;
    double size;
  };
  auto slope = [&](const Duals& q, const std::vector<size_t>& at,
                   const Vec& dir) {
    Slope s{dot(b, dir), std::abs(dot(b, dir))};
    const Vec x = point(q);
    for (size_t i = 0; i < priced.size(); ++i) {
      const LpPlane& plane = planes[3 + i];
      const double rate = dot(plane.normal, dir);
      s.size += priced[i]->arrivals * std::abs(rate);
      if (std::binary_search(at.begin(), at.end(), 3 + i)) {
        if (rate < 0) s.g -= priced[i]->arrivals * rate;
      } else if (plane.rhs > dot(plane.normal, x)) {
        s.g -= priced[i]->arrivals * rate;
      }
    }
    return s;
  };
  // The next vertex from q along the edge: the nearest plane the line
  // meets beyond q, and the enumerator's vertex of the edge's two planes
  // and that one.
  auto next_along = [&](const Duals& q, const std::vector<size_t>& at,
                        const Edge& e) -> std::optional<Duals> {
    const Vec x = point(q);
    double best = HUGE_VAL;
    size_t hit = 0;
    for (size_t m = 0; m < planes.size(); ++m) {
      if (std::binary_search(at.begin(), at.end(), m)) continue;
      const LpPlane& w = planes[m];
      const double rate = dot(w.normal, e.dir);
      if (rate == 0) continue;
      const double s = (w.rhs - dot(w.normal, x)) / rate;
      if (s > 0 && s < best) {
        best = s;
        hit = m;
      }
    }
    if (!std::isfinite(best)) return std::nullopt;
    std::vector<size_t> three = {e.first, e.second, hit};
    std::sort(three.begin(), three.end());
    std::vector<Duals> out;
    vertices_of(three, out);
    if (out.empty()) return std::nullopt;
    return out.front();
  };

  // 1. Descent from the origin.
  Duals q{};
  std::vector<Edge> edges;
  const size_t most_steps = 8 * planes.size() + 64;
  for (size_t step = 0;; ++step) {
    if (step > most_steps) return std::nullopt;
    const std::vector<size_t> at = planes_through(q, false);
    if (at.size() > kMostPlanesAtAVertex) return std::nullopt;
    edges_of(at, edges);
    const Edge* down = nullptr;
    double steepest = 0;
    for (const Edge& e : edges) {
      const Slope d = slope(q, at, e.dir);
      if (d.g < -1e-12 * d.size && d.g < steepest) {
        steepest = d.g;
        down = &e;
      }
    }
    if (down == nullptr) break;
    const std::optional<Duals> next = next_along(q, at, *down);
    if (!next) return std::nullopt;
    q = *next;
  }

  // 2. The optimal face and the vertices next to it within the tolerance.
  const double scale = fluid_lp_scale(rows);
  const double d0 = fluid_lp_dual_bounded(rows, b, q, HUGE_VAL);
  double d_min =
      std::min(d0, fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL));
  std::vector<Duals> walked = {q};
  for (size_t next = 0; next < walked.size(); ++next) {
    if (walked.size() > 256) return std::nullopt;
    const Duals from = walked[next];
    const std::vector<size_t> at = planes_through(from, false);
    if (at.size() > kMostPlanesAtAVertex) return std::nullopt;
    edges_of(at, edges);
    for (const Edge& e : edges) {
      const std::optional<Duals> to = next_along(from, at, e);
      if (!to) continue;
      const double d = fluid_lp_dual_bounded(rows, b, *to, HUGE_VAL);
      d_min = std::min(d_min, d);
      if (d > d_min + kReach * fluid_lp_tolerance(scale, d_min)) continue;
      if (std::none_of(walked.begin(), walked.end(),
                       [&](const Duals& w) { return w == *to; })) {
        walked.push_back(*to);
      }
    }
  }

  // 3. The enumerator's vertices at every vertex walked.
  std::vector<Duals> candidates;
  for (const Duals& w : walked) {
    const std::vector<size_t> near = planes_through(w, true);
    if (near.size() > kMostPlanesAtAVertex) return std::nullopt;
    vertices_of(near, candidates);
  }
  const double tol = fluid_lp_tolerance(scale, d0);
  const VertexChoice choice = most_selective_vertex(rows, b, [&](auto&& visit) {
    for (const Duals& p : candidates) visit(p);
  });
  if (!(choice.d_min <= d0 + tol)) return std::nullopt;
  return choice.p;
}

}  // namespace detail

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
