// The fluid-LP dual solver (include/throttlekit/admission/fluid_lp.h)
// against hand-solved duals, an independent KKT optimality certificate, a
// brute-force primal oracle (every basic solution of the primal LP, solved
// by Gaussian elimination: no code shared with the solver's dual vertex
// enumeration) and a grid oracle for the tie-break, on tie-heavy random
// instances.
#include "throttlekit/admission/fluid_lp.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "support/fluid_lp_oracle.h"

namespace throttlekit {
namespace fluid_lp_test {
namespace {

using namespace fluid_lp_oracle;  // NOLINT: the oracle is this test's own

Duals solve(const std::vector<LpClass>& classes, const LpBudgets& budgets) {
  absl::StatusOr<Duals> p = solve_fluid_lp(classes, budgets);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Duals{-1, -1, -1};
}

void expect_duals(const Duals& got, const Duals& want) {
  EXPECT_NEAR(got.rate, want.rate, 1e-9 * std::max(1.0, want.rate)) << got;
  EXPECT_NEAR(got.cost, want.cost, 1e-9 * std::max(1.0, want.cost)) << got;
  EXPECT_NEAR(got.concurrency, want.concurrency,
              1e-9 * std::max(1.0, want.concurrency))
      << got;
}

// Solves `classes` under `budgets`, expecting the duals `want` and the KKT
// certificate; returns the duals.
Duals expect_solution(const std::vector<LpClass>& classes,
                      const LpBudgets& budgets, const Duals& want) {
  const Duals p = solve(classes, budgets);
  expect_duals(p, want);
  expect_kkt_certificate(classes, budgets, p);
  return p;
}

// ---------------------------------------------------------------------------
// Hand-solved fixtures.

TEST(FluidLp, HeaderExampleCostBinds) {
  // Densities value/cost: 1/8 and 9. The cheap class fits whole (300
  // requests, 300 units); the rest of the cost budget, 700 units, buys
  // 87.5 of the expensive class; 387.5 requests < 600, so the rate axis
  // has slack: p_R = 0 and p_C = 1/8 (the expensive class is partly
  // served, so its density is the price). D = 1000/8 + 300 * (9 - 1/8)
  // = 2787.5 = 300 * 9 + 87.5.
  const std::vector<LpClass> classes = {{700, 1, 8}, {300, 9, 1}};
  const LpBudgets budgets{.requests = 600, .cost = 1000};
  const Duals p = expect_solution(classes, budgets, {0, 0.125, 0});
  EXPECT_DOUBLE_EQ(fluid_lp_dual_objective(classes, budgets, p), 2787.5);
}

TEST(FluidLp, RateBindsAlone) {
  // 20 arrivals, 12 requests: the 10 of value 10 and 2 of value 4. The
  // value-4 class is partial: p_R = 4. The cost budget is slack: p_C = 0.
  // D = 12 * 4 + 10 * (10 - 4) = 108 = 10 * 10 + 2 * 4.
  const std::vector<LpClass> classes = {{10, 10, 1}, {10, 4, 1}};
  const LpBudgets budgets{.requests = 12, .cost = 100};
  expect_solution(classes, budgets, {4, 0, 0});
}

TEST(FluidLp, BothBudgetsBind) {
  // x_A + x_B <= 12 and 4 x_A + x_B <= 30 meet at x_A = x_B = 6 (value
  // 90), better than the corners x_A = 7.5 (75) and x_B = 10, x_A = 2
  // (70). Both classes partial: p_R + 4 p_C = 10, p_R + p_C = 5, so
  // p_C = 5/3, p_R = 10/3, and D = 12 * 10/3 + 30 * 5/3 = 90.
  const std::vector<LpClass> classes = {{10, 10, 4}, {10, 5, 1}};
  const LpBudgets budgets{.requests = 12, .cost = 30};
  const Duals p = expect_solution(classes, budgets, {10.0 / 3, 5.0 / 3, 0});
  EXPECT_NEAR(fluid_lp_dual_objective(classes, budgets, p), 90, 1e-9);
}

TEST(FluidLp, TieHeavyDegenerateVertex) {
  // Four lines through one vertex, duplicates and worthless classes:
  // A (value 4, cost 2) twice, B (2, 1) and E (6, 3) all have density 2;
  // Z (0, 1) and N (-1, 0) are worth nothing. The rate budget (100) is
  // slack, the cost budget (20) is not (A, B, E want 20 + 10 + 3): every
  // dollar of cost buys 2 of value whatever the mix, so the primal optimum
  // is 40 and the dual p = (0, 2), where D = 20 * 2 = 40. It is the unique
  // minimiser: moving to (d, 2 - d/2) adds 100 d - 10 d (the duplicated A
  // stays at its bid, B and E fall below theirs). The classes at the bid,
  // A, B and E, are admitted exactly: the snap makes value >= bid bitwise.
  const std::vector<LpClass> classes = {{5, 4, 2}, {5, 4, 2},  {10, 2, 1},
                                        {1, 6, 3}, {10, 0, 1}, {3, -1, 0}};
  const LpBudgets budgets{.requests = 100, .cost = 20};
  const Duals p = expect_solution(classes, budgets, {0, 2, 0});
  for (const LpClass& k : {classes[0], classes[2], classes[3]}) {
    EXPECT_GE(k.value, bid_price(p, k.cost));
  }
  EXPECT_LT(classes[4].value, bid_price(p, classes[4].cost));
  EXPECT_LT(classes[5].value, bid_price(p, classes[5].cost));
}

TEST(FluidLp, TieBreakTakesTheMostSelectiveEndOfAnOptimalSegment) {
  // R = 1: D(p_R, 0) = p_R + (2 - p_R)+ + (1 - p_R)+ equals 2 for every
  // p_R in [1, 2], and any p_C > 0 adds 10 p_C - p_C. Both ends are
  // vertices: p_R = 1 admits both classes (value 1 at its bid), volume 2;
  // p_R = 2 admits only the value-2 class (at its bid), volume 1. The
  // most selective is p_R = 2: the worthless-at-the-margin class is turned
  // away instead of racing the valuable one for the one request.
  const std::vector<LpClass> classes = {{1, 2, 1}, {1, 1, 1}};
  const LpBudgets budgets{.requests = 1, .cost = 10};
  const Duals p = expect_solution(classes, budgets, {2, 0, 0});
  EXPECT_GE(2.0, bid_price(p, 1));
  EXPECT_LT(1.0, bid_price(p, 1));
}

TEST(FluidLp, TieBreakPrefersTheHigherBudgetValueAtEqualVolume) {
  // The rate budget equals the demand (4): D(p_R, 0) = 4 p_R + 2 (3 - p_R)
  // + 2 (1 - p_R) = 8 on [0, 1]. Both ends admit all 4 arrivals; p_R = 1
  // attributes 4 of the 8 to the budget, p_R = 0 none: the solver returns
  // p_R = 1 (requests worth less than 1 are refused).
  const std::vector<LpClass> classes = {{2, 3, 1}, {2, 1, 2}};
  const LpBudgets budgets{.requests = 4, .cost = 100};
  expect_solution(classes, budgets, {1, 0, 0});
}

TEST(FluidLp, TieBreakCountsVolumeBeforeBudgetValue) {
  // (arrivals, value, cost): free classes (2, 3, 0) and (3, 2, 0), then
  // (2, 4, 2), (2, 2, 1) (density 2) and (1, 3, 2) (density 1.5); R = 8,
  // C = 5. The primal: the 5 free requests (12), then the 5 cost units at
  // density 2 in the 3 requests left: 2 of (4, 2) and 1 of (2, 1): 22.
  // Two vertices reach D = 22:
  //   (0, 2): p.B = 10, surplus 3 * 2 + 2 * 3 = 12; bids 0 / 2 / 4 for
  //           cost 0 / 1 / 2: (1, 3, 2) is refused; volume 2+3+2+2 = 9;
  //   (1, 1): p.B = 13, surplus 2 * 2 + 3 * 1 + 2 * 1 = 9; bids 1 / 2 / 3:
  //           (1, 3, 2) is admitted at its bid; volume 10.
  // (1, 1) attributes more to the budgets, but (0, 2) lets fewer arrivals
  // through: the volume comes first.
  const std::vector<LpClass> classes = {
      {2, 3, 0}, {3, 2, 0}, {2, 4, 2}, {2, 2, 1}, {1, 3, 2}};
  const LpBudgets budgets{.requests = 8, .cost = 5};
  EXPECT_EQ(fluid_lp_dual_objective(classes, budgets, {1, 1, 0}), 22);
  const Duals p = expect_solution(classes, budgets, {0, 2, 0});
  EXPECT_LT(3.0, bid_price(p, 2));
}

TEST(FluidLp, NoClassesWorthlessClassesAndAmpleBudgetsGiveZeroDuals) {
  EXPECT_EQ(solve({}, {.requests = 10, .cost = 10}), Duals{});
  EXPECT_EQ(solve({}, {.requests = 0, .cost = 0}), Duals{});
  EXPECT_EQ(solve({}, {.requests = 1, .cost = 1, .concurrency_seconds = 1}),
            Duals{});
  // Values <= 0: nothing is worth serving, and nothing to price.
  EXPECT_EQ(solve({{5, 0, 1}, {5, -3, 2}}, {.requests = 1, .cost = 1}),
            Duals{});
  // No arrivals.
  EXPECT_EQ(solve({{0, 9, 1}}, {.requests = 0, .cost = 0}), Duals{});
  // Budgets above all demand (20 requests, 35 units).
  const std::vector<LpClass> classes = {{10, 5, 3}, {10, 1, 0.5}};
  EXPECT_EQ(solve(classes, {.requests = 21, .cost = 36}), Duals{});
  EXPECT_EQ(
      solve(classes, {.requests = 21, .cost = 36, .concurrency_seconds = 1e9}),
      Duals{});
}

TEST(FluidLp, ZeroRateBudgetPricesOutEveryClass) {
  // R = 0: D = (3 - p_R - p_C)+ + (2 - p_R - 2 p_C)+ + 10 p_C is 0 only
  // at p_C = 0, p_R >= 3; the vertex is (3, 0). The value-3 class sits at
  // its bid (the exhausted rate axis denies it), the other is priced out.
  const std::vector<LpClass> classes = {{1, 3, 1}, {1, 2, 2}};
  const LpBudgets budgets{.requests = 0, .cost = 10};
  const Duals p = expect_solution(classes, budgets, {3, 0, 0});
  EXPECT_LT(2.0, bid_price(p, 2));
}

TEST(FluidLp, ZeroCostBudgetServesOnlyFreeRequests) {
  // C = 0: only the free class (value 1, 5 arrivals) can be served, 2 of
  // it (R = 2), so p_R = 1; the costly class must be priced out:
  // p_R + p_C >= 3. The candidates: the origin (D = 8), (3, 0) (6),
  // (1, 0) (4), (0, 3) (5) and (1, 2) (2): p = (1, 2), D = 2 = 2 * 1.
  const std::vector<LpClass> classes = {{1, 3, 1}, {5, 1, 0}};
  const LpBudgets budgets{.requests = 2, .cost = 0};
  expect_solution(classes, budgets, {1, 2, 0});
}

TEST(FluidLp, AClassAtItsBidIsAdmittedBitExactly) {
  // C = 0 prices the one class out at p_C = 3.95 / 6.35, where it sits at
  // its bid; in doubles 0 + (3.95 / 6.35) * 6.35 rounds above 3.95, so
  // without the final scaling the policy would refuse it.
  const std::vector<LpClass> classes = {{1, 3.95, 6.35}};
  const LpBudgets budgets{.requests = 1, .cost = 0};
  ASSERT_GT(0 + (3.95 / 6.35) * 6.35, 3.95);
  const Duals p = solve(classes, budgets);
  expect_duals(p, {0, 3.95 / 6.35, 0});
  EXPECT_GE(3.95, bid_price(p, 6.35));
}

TEST(FluidLp, ThreeAxisConcurrencyBinds) {
  // Concurrency-seconds K = 10 (say a ceiling of 1 over a 10 s window).
  // Value per slot-second: A 10/2 = 5, B 6/0.5 = 12, so B is served whole
  // (5 s) and A gets the other 5 s: 2.5 requests. A is partial: p_K = 5,
  // p_R = p_C = 0. D = 10 * 5 + 10 * (6 - 0.5 * 5) = 85 = 60 + 25.
  const std::vector<LpClass> classes = {{10, 10, 1, 2}, {10, 6, 1, 0.5}};
  const LpBudgets budgets{
      .requests = 100, .cost = 100, .concurrency_seconds = 10};
  const Duals p = expect_solution(classes, budgets, {0, 0, 5});
  EXPECT_NEAR(fluid_lp_dual_objective(classes, budgets, p), 85, 1e-9);

  // Without concurrency_seconds the same classes are a 2-axis problem:
  // holds are ignored, nothing binds.
  EXPECT_EQ(solve(classes, {.requests = 100, .cost = 100}), Duals{});
}

TEST(FluidLp, ThreeAxisBadHoldsCountAsZero) {
  // B's hold NaN, infinite or negative: it holds nothing, so all 10 of B
  // fit and A keeps the 10 s: 5 requests, still partial: p_K = 5.
  // D = 10 * 5 + 10 * 6 = 110 = 60 + 50.
  for (double bad : {kNaN, kInf, -kInf, -3.0}) {
    const std::vector<LpClass> classes = {{10, 10, 1, 2}, {10, 6, 1, bad}};
    const LpBudgets budgets{
        .requests = 100, .cost = 100, .concurrency_seconds = 10};
    const Duals p = expect_solution(classes, budgets, {0, 0, 5});
    EXPECT_NEAR(fluid_lp_dual_objective(classes, budgets, p), 110, 1e-9);
    EXPECT_EQ(bid_price(p, 1, bad), 0);
  }
}

TEST(FluidLp, ThreeAxisAllBudgetsBind) {
  // Three classes, three budgets, all tight at the vertex where every
  // class is partial: x = (2, 3, 1) uses 6 requests, 2 + 6 + 4 = 12 units
  // and 2 * 1 + 3 * 0 + 1 * 4 = 6 slot-seconds. The duals solve
  //   p_R + 1 p_C + 1 p_K = 6
  //   p_R + 2 p_C + 0 p_K = 5
  //   p_R + 4 p_C + 4 p_K = 21
  // p_R = 1, p_C = 2, p_K = 3.
  const std::vector<LpClass> classes = {
      {5, 6, 1, 1}, {5, 5, 2, 0}, {5, 21, 4, 4}};
  const LpBudgets budgets{.requests = 6, .cost = 12, .concurrency_seconds = 6};
  expect_solution(classes, budgets, {1, 2, 3});
}

TEST(FluidLp, BadInputIsANamedStatus) {
  auto message = [](std::vector<LpClass> classes, LpBudgets budgets) {
    absl::StatusOr<Duals> p = solve_fluid_lp(classes, budgets);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  const LpBudgets ok{.requests = 1, .cost = 1};
  EXPECT_EQ(message({{1, 1, 1}, {-1, 1, 1}}, ok),
            "fluid_lp.classes[1].arrivals must be finite and >= 0; got -1");
  EXPECT_EQ(message({{kNaN, 1, 1}}, ok),
            "fluid_lp.classes[0].arrivals must be finite and >= 0; got nan");
  EXPECT_EQ(message({{kInf, 1, 1}}, ok),
            "fluid_lp.classes[0].arrivals must be finite and >= 0; got inf");
  EXPECT_EQ(message({{1, 1, 1}, {1, 1, 1}, {1, kNaN, 1}}, ok),
            "fluid_lp.classes[2].value must be finite; got nan");
  EXPECT_EQ(message({{1, -kInf, 1}}, ok),
            "fluid_lp.classes[0].value must be finite; got -inf");
  EXPECT_EQ(message({{1, 1, -0.5}}, ok),
            "fluid_lp.classes[0].cost must be finite and >= 0; got -0.5");
  EXPECT_EQ(message({{1, 1, kInf}}, ok),
            "fluid_lp.classes[0].cost must be finite and >= 0; got inf");
  EXPECT_EQ(message({}, {.requests = -1, .cost = 1}),
            "fluid_lp.budgets.requests must be finite and >= 0; got -1");
  EXPECT_EQ(message({}, {.requests = kInf, .cost = 1}),
            "fluid_lp.budgets.requests must be finite and >= 0; got inf");
  EXPECT_EQ(message({}, {.requests = 1, .cost = kNaN}),
            "fluid_lp.budgets.cost must be finite and >= 0; got nan");
  EXPECT_EQ(message({}, {.requests = 1, .cost = 1, .concurrency_seconds = -2}),
            "fluid_lp.budgets.concurrency_seconds must be finite and >= 0; "
            "got -2");
  // Holds are never an error, in either form.
  EXPECT_TRUE(
      solve_fluid_lp(std::vector<LpClass>{{1, 1, 1, kNaN}},
                     {.requests = 1, .cost = 1, .concurrency_seconds = 1})
          .ok());
}

TEST(FluidLp, BidPriceChargesOnlyUsableHolds) {
  const Duals p{1, 2, 3};
  EXPECT_EQ(bid_price(p, 4), 1 + 8);
  EXPECT_EQ(bid_price(p, 4, 0.5), 1 + 8 + 1.5);
  EXPECT_EQ(bid_price(p, 4, -1), 9);
  EXPECT_EQ(bid_price(p, 4, kNaN), 9);
  EXPECT_EQ(bid_price(p, 4, kInf), 9);
}

// ---------------------------------------------------------------------------
// Properties on tie-heavy random instances (fluid_lp_oracle.h).

RC_GTEST_PROP(FluidLpProperty, TwoAxisDualEqualsBruteForcePrimal, ()) {
  check_against_primal_oracle(gen_instance(false, 7));
}

RC_GTEST_PROP(FluidLpProperty, ThreeAxisDualEqualsBruteForcePrimal, ()) {
  check_against_primal_oracle(gen_instance(true, 6));
}

RC_GTEST_PROP(FluidLpProperty, KktCertificateHolds, ()) {
  check_kkt_certificate(gen_instance(*rc::gen::arbitrary<bool>(), 6));
}

// The grid oracle for the tie-break (2-axis). With integer values and
// costs in {0, 1, 2}, every vertex of the arrangement has coordinates that
// are multiples of 1/2 (the pairwise cost differences are 1 or 2) in
// [0, 4]^2, so a half-integer grid holds them all and D, bids and volumes
// are exact there. The oracle finds D's minimum over the grid, the grid
// points that are vertices (two independent active lines among the class
// lines of value > 0 and the axes), and among the optimal vertices the
// least admitted volume and then the largest p . B: the solver must match
// both.
RC_GTEST_PROP(FluidLpProperty, TieBreakMatchesTheGridOracle, ()) {
  const Instance in = gen_instance(false, 7);
  absl::StatusOr<Duals> solved = solve_fluid_lp(in.classes, in.budgets);
  RC_ASSERT(solved.ok());
  const Duals s = *solved;

  auto d_at = [&](double pr, double pc) {
    return dual_value(in.classes, in.budgets, {pr, pc, 0});
  };
  auto volume_at = [&](double pr, double pc) {
    double v = 0;
    for (const LpClass& k : in.classes) {
      if (k.value >= pr + pc * k.cost) v += k.arrivals;
    }
    return v;
  };
  auto is_vertex = [&](double pr, double pc) {
    std::vector<double> slopes;   // active line p_R + c p_C = v as its c
    bool axis_r = pr == 0;        // the line p_R = 0 (normal (1, 0))
    const bool axis_c = pc == 0;  // the line p_C = 0 (normal (0, 1))
    for (const LpClass& k : in.classes) {
      if (k.arrivals > 0 && k.value > 0 && k.value == pr + pc * k.cost) {
        slopes.push_back(k.cost);
      }
    }
    // Two independent normals among (1, c_i), (1, 0) [p_R = 0], (0, 1).
    if (axis_r && axis_c) return true;
    for (double c : slopes) {
      if (axis_c) return true;  // (1, c) and (0, 1) are independent
      if (axis_r && c != 0) return true;
      for (double c2 : slopes) {
        if (c2 != c) return true;
      }
    }
    return false;
  };

  double d_min = kInf;
  for (int i = 0; i <= 10; ++i) {
    for (int k = 0; k <= 10; ++k)
      d_min = std::min(d_min, d_at(i / 2.0, k / 2.0));
  }
  // The grid's minimum is the LP optimum (a cross-check of the oracles).
  const double best =
      brute_force_primal(in.classes, budget_vector(in.budgets)).value;
  RC_ASSERT(std::abs(d_min - best) <= 1e-9 * std::max(1.0, best));
  RC_ASSERT(d_at(s.rate, s.cost) <= d_min + 1e-9 * std::max(1.0, d_min));

  double least_volume = kInf;
  double most_value = -kInf;
  for (int i = 0; i <= 10; ++i) {
    for (int k = 0; k <= 10; ++k) {
      const double pr = i / 2.0, pc = k / 2.0;
      if (d_at(pr, pc) != d_min || !is_vertex(pr, pc)) continue;
      const double v = volume_at(pr, pc);
      const double value = pr * in.budgets.requests + pc * in.budgets.cost;
      if (v < least_volume || (v == least_volume && value > most_value)) {
        least_volume = v;
        most_value = value;
      }
    }
  }
  RC_ASSERT(volume_at(s.rate, s.cost) == least_volume);
  RC_ASSERT(std::abs(s.rate * in.budgets.requests + s.cost * in.budgets.cost -
                     most_value) <= 1e-9 * std::max(1.0, most_value));
}

// A lower-bound sampler: no p >= 0 does better than the solver's duals.
RC_GTEST_PROP(FluidLpProperty, NoSampledDualBeatsTheSolver, ()) {
  const Instance in = gen_instance(*rc::gen::arbitrary<bool>(), 7);
  absl::StatusOr<Duals> p = solve_fluid_lp(in.classes, in.budgets);
  RC_ASSERT(p.ok());
  const double d = dual_value(in.classes, in.budgets, *p);
  for (int i = 0; i < 50; ++i) {
    const Duals q{
        *rc::gen::inRange(0, 1000) / 200.0, *rc::gen::inRange(0, 1000) / 200.0,
        in.budgets.concurrency_seconds ? *rc::gen::inRange(0, 1000) / 200.0
                                       : 0.0};
    RC_ASSERT(dual_value(in.classes, in.budgets, q) >=
              d - 1e-9 * std::max(1.0, d));
  }
}

// Scaling values by 2^k scales the duals by 2^k exactly, and scaling
// arrivals and budgets together leaves them unchanged: the tolerances are
// relative, so the unit of value or of volume never changes the answer.
RC_GTEST_PROP(FluidLpProperty, DualsAreUnitFree, ()) {
  const Instance in = gen_instance(*rc::gen::arbitrary<bool>(), 6);
  const double f = std::ldexp(1.0, *rc::gen::inRange(-20, 21));
  absl::StatusOr<Duals> p = solve_fluid_lp(in.classes, in.budgets);
  RC_ASSERT(p.ok());

  Instance valued = in;
  for (LpClass& k : valued.classes) k.value *= f;
  absl::StatusOr<Duals> pv = solve_fluid_lp(valued.classes, valued.budgets);
  RC_ASSERT(pv.ok());
  RC_ASSERT(pv->rate == p->rate * f);
  RC_ASSERT(pv->cost == p->cost * f);
  RC_ASSERT(pv->concurrency == p->concurrency * f);

  Instance volumed = in;
  for (LpClass& k : volumed.classes) k.arrivals *= f;
  volumed.budgets.requests *= f;
  volumed.budgets.cost *= f;
  if (volumed.budgets.concurrency_seconds) {
    *volumed.budgets.concurrency_seconds *= f;
  }
  absl::StatusOr<Duals> pa = solve_fluid_lp(volumed.classes, volumed.budgets);
  RC_ASSERT(pa.ok());
  RC_ASSERT(*pa == *p);
}

// Continuous random instances (no engineered ties) against the primal
// oracle, with class counts beyond the tie-heavy ones.
RC_GTEST_PROP(FluidLpProperty, ContinuousInstancesMatchThePrimal, ()) {
  Instance in;
  const bool three_axis = *rc::gen::arbitrary<bool>();
  const int n = *rc::gen::inRange(1, three_axis ? 6 : 8);
  for (int j = 0; j < n; ++j) {
    in.classes.push_back({*rc::gen::inRange(1, 1000) / 10.0,
                          *rc::gen::inRange(-100, 1000) / 100.0,
                          *rc::gen::inRange(0, 1000) / 100.0,
                          *rc::gen::inRange(0, 1000) / 250.0});
  }
  in.budgets = {*rc::gen::inRange(0, 3000) / 10.0,
                *rc::gen::inRange(0, 30000) / 10.0, std::nullopt};
  if (three_axis) {
    in.budgets.concurrency_seconds = *rc::gen::inRange(0, 3000) / 10.0;
  }
  check_against_primal_oracle(in);
}

}  // namespace
}  // namespace fluid_lp_test
}  // namespace throttlekit
