// tests/support/fluid_lp_oracle.h
//
// The fluid-LP solvers' tests' own machinery
// (tests/admission/fluid_lp*_test.cc): an independent LP oracle that calls no
// solver (every basic solution of the primal, solved by Gaussian elimination;
// the dual objective written out again; a KKT certificate), the random
// instances the properties draw (tie-heavy small integers, and degenerate
// shapes across magnitudes), and the checks of a solver against the oracle
// (`check_against_primal_oracle`, `check_kkt_certificate`) and against the
// enumerator.

#ifndef THROTTLEKIT_TESTS_SUPPORT_FLUID_LP_ORACLE_H_
#define THROTTLEKIT_TESTS_SUPPORT_FLUID_LP_ORACLE_H_

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/admission/fluid_lp.h"

namespace throttlekit::fluid_lp_oracle {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// The test's own LP machinery: nothing below calls the solver.

// The usage vector a_j = (1, c_j, h'_j) of one class, h' = 0 in the 2-axis
// form.
inline std::vector<double> usage(const LpClass& k, int dims) {
  std::vector<double> a = {1.0, k.cost};
  if (dims == 3) {
    a.push_back(std::isfinite(k.hold) && k.hold > 0 ? k.hold : 0.0);
  }
  return a;
}

inline std::vector<double> budget_vector(const LpBudgets& b) {
  std::vector<double> v = {b.requests, b.cost};
  if (b.concurrency_seconds) v.push_back(*b.concurrency_seconds);
  return v;
}

// Solves m x = rhs (n x n, row-major) by Gaussian elimination with partial
// pivoting; nullopt when singular.
inline std::optional<std::vector<double>> gauss(
    std::vector<std::vector<double>> m, std::vector<double> rhs) {
  const size_t n = rhs.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    }
    if (std::abs(m[pivot][col]) < 1e-12) return std::nullopt;
    std::swap(m[pivot], m[col]);
    std::swap(rhs[pivot], rhs[col]);
    for (size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (size_t c = col; c < n; ++c) m[r][c] -= f * m[col][c];
      rhs[r] -= f * rhs[col];
    }
  }
  for (size_t i = 0; i < n; ++i) rhs[i] /= m[i][i];
  return rhs;
}

struct Primal {
  double value = -kInf;
  std::vector<double> x;
};

// max sum v_j x_j  s.t.  sum_j a_j x_j <= budgets, 0 <= x_j <= lambda_j,
// by enumerating every basic solution: a set F of variables strictly inside
// their box, as many tight budget rows T, every other variable at 0 or at
// lambda. Exponential; for n <= 8.
inline Primal brute_force_primal(std::span<const LpClass> classes,
                                 const std::vector<double>& budgets) {
  const int n = static_cast<int>(classes.size());
  const int dims = static_cast<int>(budgets.size());
  std::vector<std::vector<double>> a;
  for (const LpClass& k : classes) a.push_back(usage(k, dims));
  Primal best;
  for (unsigned free = 0; free < (1u << n); ++free) {
    const int nf = __builtin_popcount(free);
    if (nf > dims) continue;
    std::vector<int> fv;
    for (int j = 0; j < n; ++j) {
      if (free & (1u << j)) fv.push_back(j);
    }
    for (unsigned tight = 0; tight < (1u << dims); ++tight) {
      if (__builtin_popcount(tight) != nf) continue;
      std::vector<int> tr;
      for (int k = 0; k < dims; ++k) {
        if (tight & (1u << k)) tr.push_back(k);
      }
      for (unsigned upper = 0; upper < (1u << n); ++upper) {
        if (upper & free) continue;
        std::vector<double> x(n, 0.0);
        for (int j = 0; j < n; ++j) {
          if (upper & (1u << j)) x[j] = classes[j].arrivals;
        }
        if (nf > 0) {
          std::vector<std::vector<double>> m(nf, std::vector<double>(nf));
          std::vector<double> rhs(nf);
          for (int r = 0; r < nf; ++r) {
            rhs[r] = budgets[tr[r]];
            for (int j = 0; j < n; ++j) {
              if (!(free & (1u << j))) rhs[r] -= a[j][tr[r]] * x[j];
            }
            for (int c = 0; c < nf; ++c) m[r][c] = a[fv[c]][tr[r]];
          }
          std::optional<std::vector<double>> xf = gauss(m, rhs);
          if (!xf) continue;
          for (int c = 0; c < nf; ++c) x[fv[c]] = (*xf)[c];
        }
        bool feasible = true;
        for (int j = 0; j < n && feasible; ++j) {
          const double tol = 1e-9 * std::max(1.0, classes[j].arrivals);
          feasible = x[j] >= -tol && x[j] <= classes[j].arrivals + tol;
        }
        for (int k = 0; k < dims && feasible; ++k) {
          double used = 0;
          for (int j = 0; j < n; ++j) used += a[j][k] * x[j];
          feasible = used <= budgets[k] + 1e-9 * std::max(1.0, budgets[k]);
        }
        if (!feasible) continue;
        double value = 0;
        for (int j = 0; j < n; ++j) value += classes[j].value * x[j];
        if (value > best.value) best = {value, x};
      }
    }
  }
  return best;
}

// D(p), written out again rather than taken from the header.
inline double dual_value(std::span<const LpClass> classes,
                         const LpBudgets& budgets, const Duals& p) {
  const std::vector<double> b = budget_vector(budgets);
  const int dims = static_cast<int>(b.size());
  const std::vector<double> price = {p.rate, p.cost, p.concurrency};
  double d = 0;
  for (int k = 0; k < dims; ++k) d += price[k] * b[k];
  for (const LpClass& k : classes) {
    const std::vector<double> a = usage(k, dims);
    double bid = 0;
    for (int i = 0; i < dims; ++i) bid += price[i] * a[i];
    d += k.arrivals * std::max(0.0, k.value - bid);
  }
  return d;
}

// The KKT certificate of `p` for (classes, budgets): builds a primal x with
// x_j = lambda_j for classes strictly above their bid, 0 strictly below,
// and the classes at their bid splitting the residual budgets (the best
// basic solution of that residual LP), then checks p >= 0, primal
// feasibility, complementary slackness (every priced budget is used up)
// and primal value == D(p) within 1e-9 relative.
inline void expect_kkt_certificate(const std::vector<LpClass>& classes,
                                   const LpBudgets& budgets, const Duals& p) {
  ASSERT_TRUE(std::isfinite(p.rate) && std::isfinite(p.cost) &&
              std::isfinite(p.concurrency));
  ASSERT_GE(p.rate, 0);
  ASSERT_GE(p.cost, 0);
  ASSERT_GE(p.concurrency, 0);
  const std::vector<double> b = budget_vector(budgets);
  const int dims = static_cast<int>(b.size());
  if (dims == 2) {
    ASSERT_EQ(p.concurrency, 0);
  }
  const std::vector<double> price = {p.rate, p.cost, p.concurrency};

  std::vector<double> x(classes.size(), 0.0);
  std::vector<double> residual = b;
  std::vector<LpClass> ties;
  std::vector<size_t> tie_index;
  for (size_t j = 0; j < classes.size(); ++j) {
    const std::vector<double> a = usage(classes[j], dims);
    double bid = 0;
    for (int i = 0; i < dims; ++i) bid += price[i] * a[i];
    const double surplus = classes[j].value - bid;
    const double tol = 1e-8 * std::max({1.0, std::abs(classes[j].value), bid});
    if (surplus > tol) {
      x[j] = classes[j].arrivals;
      for (int i = 0; i < dims; ++i) residual[i] -= a[i] * x[j];
    } else if (surplus >= -tol) {
      ties.push_back(classes[j]);
      tie_index.push_back(j);
    }
  }
  for (int i = 0; i < dims; ++i) {
    ASSERT_GE(residual[i], -1e-9 * std::max(1.0, b[i]))
        << "the classes above their bid alone overspend budget " << i;
    residual[i] = std::max(residual[i], 0.0);
  }
  if (!ties.empty()) {
    const Primal split = brute_force_primal(ties, residual);
    ASSERT_GT(split.value, -kInf);
    for (size_t t = 0; t < ties.size(); ++t) x[tie_index[t]] = split.x[t];
  }

  double primal = 0;
  std::vector<double> used(dims, 0.0);
  for (size_t j = 0; j < classes.size(); ++j) {
    // The box within the tolerance the oracle's own basic solutions are
    // feasible by (brute_force_primal): a tie split by Gaussian elimination
    // on residual budgets carries their rounding (run BX: 4.5 + 7.3e-12
    // for a volume of 4.5 beside budgets of 232.2 and 1313.143).
    const double box_tol = 1e-9 * std::max(1.0, classes[j].arrivals);
    EXPECT_GE(x[j], -box_tol);
    EXPECT_LE(x[j], classes[j].arrivals + box_tol);
    primal += classes[j].value * x[j];
    const std::vector<double> a = usage(classes[j], dims);
    for (int i = 0; i < dims; ++i) used[i] += a[i] * x[j];
  }
  for (int i = 0; i < dims; ++i) {
    const double tol = 1e-9 * std::max(1.0, b[i]);
    EXPECT_LE(used[i], b[i] + tol) << "budget " << i;
    if (price[i] > 0) {
      EXPECT_GE(used[i], b[i] - tol) << "budget " << i << " is priced at "
                                     << price[i] << " but not used up";
    }
  }
  const double d = dual_value(classes, budgets, p);
  EXPECT_NEAR(primal, d, 1e-9 * std::max(1.0, std::abs(d)))
      << "duals " << p << " are not optimal";
}

// ---------------------------------------------------------------------------
// Properties on tie-heavy random instances: values and costs from tiny
// integer sets, so equal values, equal costs, equal densities, duplicate and
// parallel lines and many lines through one vertex are the norm.

struct Instance {
  std::vector<LpClass> classes;
  LpBudgets budgets;
};

inline Instance gen_instance(bool three_axis, int max_classes) {
  Instance in;
  const int n = *rc::gen::inRange(0, max_classes + 1);
  for (int j = 0; j < n; ++j) {
    LpClass k;
    k.arrivals = *rc::gen::element(0.0, 1.0, 1.0, 2.0, 3.0);
    k.value = *rc::gen::element(-1.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0);
    k.cost = *rc::gen::element(0.0, 1.0, 1.0, 2.0);
    k.hold = *rc::gen::element(0.0, 0.5, 1.0, 2.0, kNaN, -1.0);
    in.classes.push_back(k);
  }
  in.budgets.requests = *rc::gen::inRange(0, 9);
  in.budgets.cost = *rc::gen::inRange(0, 13);
  if (three_axis) in.budgets.concurrency_seconds = *rc::gen::inRange(0, 7);
  return in;
}

// A solver of solve_fluid_lp's signature: the public solver, or the
// enumerator.
using Solver = absl::StatusOr<Duals> (*)(std::span<const LpClass>,
                                         const LpBudgets&);

inline void check_against_primal_oracle(const Instance& in,
                                        Solver solver = &solve_fluid_lp) {
  absl::StatusOr<Duals> p = solver(in.classes, in.budgets);
  RC_ASSERT(p.ok());
  const double d = dual_value(in.classes, in.budgets, *p);
  const double best =
      brute_force_primal(in.classes, budget_vector(in.budgets)).value;
  const double tol = 1e-9 * std::max(1.0, std::abs(best));
  // Weak duality holds for any p >= 0 (a check on both sides); equality
  // proves the solver's duals optimal.
  RC_ASSERT(d >= best - tol);
  RC_ASSERT(d <= best + tol);
  // A class at its bid (within 1e-9) is admitted bit-exactly by the
  // policy's expression.
  const bool three_axis = in.budgets.concurrency_seconds.has_value();
  for (const LpClass& k : in.classes) {
    const double hold = three_axis ? k.hold : 0.0;
    const double bid = bid_price(*p, k.cost, hold);
    if (k.value >= bid - 1e-9 * std::max(std::abs(k.value), bid)) {
      RC_ASSERT(k.value >= bid);
    }
  }
  // The header's D agrees with the test's.
  RC_ASSERT(std::abs(fluid_lp_dual_objective(in.classes, in.budgets, *p) - d) <=
            tol);
}

// The property form of the KKT certificate: `solver` answers `in`, and
// its duals pass `expect_kkt_certificate` (a failure there fails the case).
inline void check_kkt_certificate(const Instance& in,
                                  Solver solver = &solve_fluid_lp) {
  absl::StatusOr<Duals> p = solver(in.classes, in.budgets);
  RC_ASSERT(p.ok());
  expect_kkt_certificate(in.classes, in.budgets, *p);
  RC_ASSERT(!::testing::Test::HasFailure());
}

// Degenerate instances (tests/admission/fluid_lp_2axis_test.cc says which
// shapes).
// Draws one of the degenerate shapes above with up to `max_classes`.
inline Instance gen_degenerate_instance(int max_classes,
                                        bool magnitudes = true) {
  Instance in;
  const int shape = *rc::gen::element(0, 1, 2, 3, 4, magnitudes ? 5 : 0, 6);
  const int n = *rc::gen::inRange(0, max_classes + 1);
  const int base = std::max(1, n / 3);
  const double density = *rc::gen::element(0.5, 1.0, 2.0, 3.0);
  for (int j = 0; j < n; ++j) {
    LpClass k;
    switch (shape) {
      case 0:  // tie-heavy
        k.arrivals = *rc::gen::element(0.0, 1.0, 1.0, 2.0, 3.0);
        k.value = *rc::gen::element(-1.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0);
        k.cost = *rc::gen::element(0.0, 1.0, 1.0, 2.0);
        break;
      case 1:  // continuous
        k.arrivals = *rc::gen::inRange(1, 1000) / 10.0;
        k.value = *rc::gen::inRange(-100, 1000) / 100.0;
        k.cost = *rc::gen::inRange(0, 1000) / 100.0;
        break;
      case 2: {  // duplicates of a few classes
        const int of = *rc::gen::inRange(0, base);
        k.arrivals = *rc::gen::inRange(1, 4);
        k.value = 1 + of % 3;
        k.cost = of % 2;
        break;
      }
      case 3:  // parallel planes: few costs, many values
        k.arrivals = *rc::gen::inRange(1, 5);
        k.value = *rc::gen::inRange(-2, 12) / 2.0;
        k.cost = *rc::gen::element(1.0, 3.0);
        break;
      case 4:  // value proportional to cost: one point on every plane
        k.arrivals = *rc::gen::inRange(1, 5);
        k.cost = *rc::gen::inRange(0, 9);
        k.value = density * k.cost;
        break;
      case 5:  // volumes and values of mixed magnitudes (costs: see below)
        k.arrivals =
            *rc::gen::element(1e-6, 1.0, 1e6) * *rc::gen::inRange(1, 4);
        k.value = *rc::gen::element(1e-6, 1.0, 1e6) * *rc::gen::inRange(-1, 4);
        k.cost = *rc::gen::inRange(0, 3);
        break;
      default:  // costs and values from wide continuous ranges
        k.arrivals = *rc::gen::inRange(1, 100000) / 1000.0;
        k.value = *rc::gen::inRange(-1000, 100000) / 977.0;
        k.cost = *rc::gen::inRange(0, 100000) / 313.0;
        break;
    }
    in.classes.push_back(k);
  }
  double requests = 0;
  double cost = 0;
  for (const LpClass& k : in.classes) {
    requests += k.arrivals;
    cost += k.arrivals * k.cost;
  }
  // Zero, a share of the demand (tie-prone eighths), exactly the demand,
  // or above it.
  auto budget = [](double demand) {
    switch (*rc::gen::inRange(0, 5)) {
      case 0:
        return 0.0;
      case 1:
        return demand;
      case 2:
        return demand * 2 + 1;
      default:
        return demand * *rc::gen::inRange(1, 8) / 8;
    }
  };
  in.budgets.requests = budget(requests);
  in.budgets.cost = budget(cost);

  // Magnitudes: values and volumes each scaled, by a power of two or by a
  // factor that is not one. Not the cost unit: the enumerator clamps a
  // coordinate within 1e-12 of |p_R| + |p_C| below 0 to 0, which compares
  // prices in two units, so with costs scaled by 2^30 it takes points that
  // are not vertices (a pair of bid lines meeting at p_C < 0, moved to
  // p_C = 0), which no other solver reproduces.
  auto factor = [&] {
    return magnitudes
               ? *rc::gen::element(1.0, 0x1p-30, 0x1p30, 1e-12, 1e12, 3e-7, 7e5)
               : 1.0;
  };
  const double fv = factor();
  const double fa = factor();
  for (LpClass& k : in.classes) {
    k.value *= fv;
    k.arrivals *= fa;
  }
  in.budgets.requests *= fa;
  in.budgets.cost *= fa;
  return in;
}

// The new solver's duals against the enumerator's: bit-equal, or every
// class's bid within 1e-9 (relative) of the enumerator's and the same
// classes admitted by `bid_price` (the rounding of the same vertex reached
// through other planes, or the 1e-9 tolerance of the tie rules, can differ
// in the last bits). Returns whether they are bit-equal.
inline bool same_choice(const Instance& in, const Duals& got,
                        const Duals& want) {
  if (got == want) return true;
  const bool three_axis = in.budgets.concurrency_seconds.has_value();
  for (const LpClass& k : in.classes) {
    const double hold = three_axis ? k.hold : 0.0;
    const double g = bid_price(got, k.cost, hold);
    const double w = bid_price(want, k.cost, hold);
    RC_ASSERT(std::abs(g - w) <=
              1e-9 * std::max({std::abs(g), std::abs(w), std::abs(k.value)}));
    RC_ASSERT((k.value >= g) == (k.value >= w));
  }
  return false;
}

// Either form: the 2-axis solver or the 3-axis descent, as `in` has a
// concurrency budget or not.
inline void check_against_enumerator(const Instance& in) {
  absl::StatusOr<Duals> want =
      detail::solve_fluid_lp_enumerated(in.classes, in.budgets);
  RC_ASSERT(want.ok());
  // The fast path itself, not only through its fallback.
  const bool three_axis = in.budgets.concurrency_seconds.has_value();
  const std::vector<detail::LpRow> rows =
      detail::fluid_lp_rows(in.classes, three_axis);
  const std::array<double, 3> b = detail::fluid_lp_budget_vector(in.budgets);
  const std::optional<Duals> fast = three_axis
                                        ? detail::solve_fluid_lp_3axis(rows, b)
                                        : detail::solve_fluid_lp_2axis(rows, b);
  absl::StatusOr<Duals> got = solve_fluid_lp(in.classes, in.budgets);
  RC_ASSERT(got.ok());
  if (!fast) {
    RC_ASSERT(*got == *want);
    RC_TAG("fallback to the enumerator");
    return;
  }
  RC_ASSERT(*got == *fast);
  RC_TAG(same_choice(in, *got, *want) ? "bit-equal"
                                      : "within 1e-9, same admitted set");
  // The same minimum, within the solver's own tolerance.
  double scale = 0;
  for (const LpClass& k : in.classes) scale += k.arrivals * std::abs(k.value);
  const double d = dual_value(in.classes, in.budgets, *got);
  const double d_want = dual_value(in.classes, in.budgets, *want);
  RC_ASSERT(std::abs(d - d_want) <=
            2e-9 * std::max(std::abs(d_want), 1e-3 * scale));
}

// The solver's dual value is the enumerator's within the tolerance (and
// its prices non-negative): what stays well-defined on mixed magnitudes,
// where vertices optimal only by the tolerance's width can price classes
// differently (the 2-axis property below says how).
inline void check_optimal_within_tolerance(const Instance& in) {
  absl::StatusOr<Duals> want =
      detail::solve_fluid_lp_enumerated(in.classes, in.budgets);
  absl::StatusOr<Duals> got = solve_fluid_lp(in.classes, in.budgets);
  RC_ASSERT(want.ok() && got.ok());
  RC_ASSERT(got->rate >= 0 && got->cost >= 0 && got->concurrency >= 0);
  double scale = 0;
  for (const LpClass& k : in.classes) scale += k.arrivals * std::abs(k.value);
  const double d = dual_value(in.classes, in.budgets, *got);
  const double d_want = dual_value(in.classes, in.budgets, *want);
  RC_ASSERT(d <= d_want + 2e-9 * std::max(std::abs(d_want), 1e-3 * scale));
}

// Whether the enumerator's choice does not hang on the tolerance's width:
// no vertex of the arrangement has D between 1e-2 of the tolerance above
// the least D and the tolerance, so the tie rules see the same vertices
// for any width in between. Ties stay below 1e-2 of it: D's rounding is
// about n 2^-53 S, under 5e-3 of the tolerance's floor of 1e-12 S at 40
// classes.
inline bool choice_is_stable_in_the_tolerance(const Instance& in) {
  const bool three_axis = in.budgets.concurrency_seconds.has_value();
  const int dims = three_axis ? 3 : 2;
  const std::vector<detail::LpRow> rows =
      detail::fluid_lp_rows(in.classes, three_axis);
  const std::array<double, 3> b = detail::fluid_lp_budget_vector(in.budgets);
  std::vector<double> ds = {
      detail::fluid_lp_dual_bounded(rows, b, Duals{}, kInf)};
  detail::for_each_fluid_lp_vertex(
      detail::fluid_lp_planes(rows, dims), dims, [&](const Duals& p) {
        ds.push_back(detail::fluid_lp_dual_bounded(rows, b, p, kInf));
      });
  const double d_min = *std::min_element(ds.begin(), ds.end());
  const double tol =
      detail::fluid_lp_tolerance(detail::fluid_lp_scale(rows), d_min);
  return std::all_of(ds.begin(), ds.end(), [&](double d) {
    return d > d_min + tol || d <= d_min + 1e-2 * tol;
  });
}

// The degenerate shapes above
// with holds drawn alike (tie-heavy small integers, continuous, or half the
// cost: then every plane of a "value proportional to cost" instance passes
// through one line) and a concurrency budget of zero, a share of the
// demand (eighths), exactly the demand, or above it.
inline Instance gen_degenerate_3axis_instance(int max_classes,
                                              bool magnitudes) {
  Instance in = gen_degenerate_instance(max_classes, magnitudes);
  const int shape = *rc::gen::inRange(0, 3);
  double demand = 0;
  for (LpClass& k : in.classes) {
    switch (shape) {
      case 0:
        k.hold = *rc::gen::element(0.0, 1.0, 1.0, 2.0);
        break;
      case 1:
        k.hold = *rc::gen::inRange(0, 1000) / 250.0;
        break;
      default:
        k.hold = k.cost / 2;
        break;
    }
    demand += k.arrivals * k.hold;
  }
  switch (*rc::gen::inRange(0, 5)) {
    case 0:
      in.budgets.concurrency_seconds = 0.0;
      break;
    case 1:
      in.budgets.concurrency_seconds = demand;
      break;
    case 2:
      in.budgets.concurrency_seconds = demand * 2 + 1;
      break;
    default:
      in.budgets.concurrency_seconds = demand * *rc::gen::inRange(1, 8) / 8;
      break;
  }
  return in;
}

}  // namespace throttlekit::fluid_lp_oracle

#endif  // THROTTLEKIT_TESTS_SUPPORT_FLUID_LP_ORACLE_H_
