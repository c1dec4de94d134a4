// The 3-axis solver (include/throttlekit/admission/fluid_lp_3axis.h)
// against the enumerator, on the degenerate shapes of the 2-axis test with
// holds drawn alike (tie-heavy small integers, continuous, or half the
// cost: then every plane of a "value proportional to cost" instance passes
// through one line) and a concurrency budget of zero, a share of the
// demand (eighths), exactly the demand, or above it.
#include "throttlekit/admission/fluid_lp_3axis.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <random>
#include <vector>

#include "support/fluid_lp_oracle.h"

namespace throttlekit {
namespace fluid_lp_3axis_test {
namespace {

using namespace fluid_lp_oracle;  // NOLINT: the oracle is this test's own

// Values and volumes of one magnitude (scaled as a whole by the factors
// above): the enumerator's choice. With magnitudes 10^12 apart inside one
// instance the two can pick different vertices within the tolerance (the
// property below); the file comment of fluid_lp.h says why.
RC_GTEST_PROP(FluidLpProperty, ThreeAxisSolverMatchesTheEnumerator, ()) {
  check_against_enumerator(gen_degenerate_3axis_instance(14, false));
}

RC_GTEST_PROP(FluidLpProperty, ThreeAxisSolverIsOptimalOnMixedMagnitudes, ()) {
  check_optimal_within_tolerance(gen_degenerate_3axis_instance(14, true));
}

// The KKT certificate of the 3-axis solver is `KktCertificateHolds` above
// (small integer instances, either form). On the degenerate shapes here
// some vertices carry prices of 1e-15 where 0 is meant (Cramer's rounding,
// the enumerator's as much as the solver's, which returns the same bits),
// and the certificate's absolute tolerances read those as a priced budget
// left unused.

// The benchmark's shape at sizes the properties do not draw: the descent
// itself answers (no fallback), equal to the enumerator.
TEST(FluidLp, ThreeAxisSolverMatchesTheEnumeratorOnLargeInstances) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (int n : {20, 60}) {
    std::vector<LpClass> classes;
    double requests = 0;
    double cost = 0;
    double hold = 0;
    for (int j = 0; j < n; ++j) {
      LpClass k{.arrivals = 1 + 99 * u(rng),
                .value = 10 * u(rng),
                .cost = 1 + 9 * u(rng),
                .hold = 2 * u(rng)};
      requests += k.arrivals;
      cost += k.arrivals * k.cost;
      hold += k.arrivals * k.hold;
      classes.push_back(k);
    }
    const LpBudgets budgets{.requests = 0.5 * requests,
                            .cost = 0.3 * cost,
                            .concurrency_seconds = 0.3 * hold};
    const std::optional<Duals> fast =
        detail::solve_fluid_lp_3axis(detail::fluid_lp_rows(classes, true),
                                     detail::fluid_lp_budget_vector(budgets));
    ASSERT_TRUE(fast.has_value()) << n;
    EXPECT_EQ(*fast, *detail::solve_fluid_lp_enumerated(classes, budgets)) << n;
  }
}

}  // namespace
}  // namespace fluid_lp_3axis_test
}  // namespace throttlekit
