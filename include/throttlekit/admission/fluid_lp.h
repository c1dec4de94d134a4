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
// The solver. D is convex and piecewise linear, and the orthant p >= 0
// contains no line, so D attains its minimum (it is >= 0) at a vertex of
// the arrangement of the bid hyperplanes {p : a_j.p = v_j} and the
// coordinate planes {p_k = 0}. The solver enumerates every such vertex:
// every pair (2-axis) or triple (3-axis, Cramer's rule) of those planes
// whose system is not singular, keeps the ones with p >= 0 (a coordinate
// within 1e-12 of the point's size below 0 counts as 0), evaluates D there
// and takes the minimiser. Classes with no arrivals are dropped, classes
// equal in (value, cost, hold) are merged, and only classes with value > 0
// contribute a plane (any other term is 0 for every p >= 0). With m
// distinct classes that is O(m^2) candidates times O(m) per evaluation,
// O(m^3) time, in the 2-axis form and O(m^4) in the 3-axis form; O(m)
// memory. An evaluation stops once its partial sum exceeds the best value
// so far (every term is >= 0), so most candidates cost O(1): on random
// continuous instances the measured growth is about n^2.3 to n^2.6 in the
// 2-axis form (1000 classes in about 80 ms) and n^2.7 to n^3.3 in the
// 3-axis form (100 classes in about 14 ms; bench/fluid_lp_benchmark.cc).
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
#include <cmath>
#include <cstddef>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
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
// error). O(m^3) (2-axis) or O(m^4) (3-axis) time in the m distinct
// classes. Pure; thread-safe.
[[nodiscard]] inline absl::StatusOr<Duals> solve_fluid_lp(
    std::span<const LpClass> classes, const LpBudgets& budgets) {
  if (auto s = detail::validate_fluid_lp(classes, budgets); !s.ok()) return s;
  const bool three_axis = budgets.concurrency_seconds.has_value();
  const int dims = three_axis ? 3 : 2;
  const std::array<double, 3> b = {
      budgets.requests, budgets.cost,
      three_axis ? *budgets.concurrency_seconds : 0.0};
  const std::vector<detail::LpRow> rows =
      detail::fluid_lp_rows(classes, three_axis);

  std::vector<detail::LpPlane> planes;
  planes.reserve(rows.size() + 3);
  for (int k = 0; k < dims; ++k) {
    detail::LpPlane axis{{0.0, 0.0, 0.0}, 0.0};
    axis.normal[k] = 1;
    planes.push_back(axis);
  }
  double scale = 0;
  double volume = 0;
  for (const detail::LpRow& r : rows) {
    scale += r.arrivals * std::abs(r.value);
    volume += r.arrivals;
    if (r.value > 0) planes.push_back({r.a, r.value});
  }
  auto tolerance = [&](double d_min) {
    return 1e-9 * std::max(d_min, 1e-3 * scale);
  };

  // Pass 1: the minimum.
  double d_min = detail::fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL);
  detail::for_each_fluid_lp_vertex(planes, dims, [&](const Duals& p) {
    const double d =
        detail::fluid_lp_dual_bounded(rows, b, p, d_min + tolerance(d_min));
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
    for (const detail::LpRow& r : rows) {
      if (detail::row_admitted(r, p)) k.admitted += r.arrivals;
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
  detail::for_each_fluid_lp_vertex(planes, dims, [&](const Duals& p) {
    if (detail::fluid_lp_dual_bounded(rows, b, p, bound) > bound) return;
    Key k = key_of(p);
    if (!best || better(k, *best)) best = k;
  });
  // Never empty: the minimiser is a vertex (the coordinate planes alone
  // give the origin).
  Duals p = best ? best->p : Duals{};

  // Snap: a class admitted within the tolerance is admitted exactly. The
  // bid is linear in p, so scaling p by value / bid (< 1 by at most the
  // 1e-9 tolerance) brings that class's bid to its value; a further 2^-48
  // absorbs the rounding, and a second pass catches what is left.
  for (int pass = 0; pass < 8; ++pass) {
    double factor = 1;
    for (const detail::LpRow& r : rows) {
      const double bid = detail::row_bid(r, p);
      if (detail::row_admitted(r, p) && !(r.value >= bid)) {
        factor = std::min(factor, r.value / bid);
      }
    }
    if (factor == 1) break;
    factor *= 1 - 0x1p-48;
    p = Duals{p.rate * factor, p.cost * factor, p.concurrency * factor};
  }
  return p;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_H_
