// throttlekit/admission/fluid_lp_enumerator.h
//
// Provides `detail::solve_fluid_lp_enumerated`, the enumerator: the oracle
// of both solvers (fluid_lp_2axis.h, fluid_lp_3axis.h) and their fallback.
// It takes every vertex: every pair (2-axis) or triple (3-axis, Cramer's
// rule) of the arrangement's planes (the model: fluid_lp.h) whose system
// is not singular, keeps the ones with p >= 0 (a coordinate within 1e-12
// of the point's size below 0 counts as 0), evaluates D there and takes
// the minimiser.
// With m distinct classes that is O(m^2) candidates times O(m) per
// evaluation, O(m^3) time, in the 2-axis form and O(m^4) in the 3-axis
// form; O(m) memory. An evaluation stops once its partial sum exceeds the
// best value so far (every term is >= 0), so most candidates cost O(1):
// measured growth about n^2.3 to n^2.6 (2-axis, 1000 classes in about
// 80 ms) and n^2.7 to n^3.3 (3-axis, 100 classes in about 14 ms). The
// 3-axis solver (`detail::solve_fluid_lp_3axis`, fluid_lp_3axis.h) walks
// the arrangement's vertices instead: a descent to a minimiser, then the
// vertices within the tolerance around it, whose planes give the
// enumerator's own candidates there.
//
// Also what the solvers take from it to answer exactly as it does: the
// planes of the arrangement in its order, the vertices of a set of planes
// by its arithmetic, and the choice among candidate vertices by the tie
// rules of fluid_lp.h ("Ties").
//
// Thread-safety: pure functions; safe to call concurrently.

#ifndef THROTTLEKIT_ADMISSION_FLUID_LP_ENUMERATOR_H_
#define THROTTLEKIT_ADMISSION_FLUID_LP_ENUMERATOR_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/admission/fluid_lp_model.h"

namespace throttlekit::detail {

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

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_ENUMERATOR_H_
