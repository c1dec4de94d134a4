// The enumerator (include/throttlekit/admission/fluid_lp_enumerator.h),
// the oracle the two solvers are held to, held itself to the test's own
// LP oracle (support/fluid_lp_oracle.h, which calls no solver): on
// tie-heavy random instances its duals are optimal (their dual value is
// the brute-force primal optimum), pass the KKT certificate, and admit a
// class at its bid bit-exactly, in both forms.

#include "throttlekit/admission/fluid_lp_enumerator.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <vector>

#include "support/fluid_lp_oracle.h"

namespace throttlekit {
namespace fluid_lp_enumerator_test {
namespace {

using namespace fluid_lp_oracle;  // NOLINT: the oracle is this test's own

constexpr Solver kEnumerator = &detail::solve_fluid_lp_enumerated;

// The header's example (fluid_lp.h): the cost budget binds alone.
TEST(FluidLpEnumerator, HeaderExampleCostBinds) {
  const std::vector<LpClass> classes = {{700, 1, 8}, {300, 9, 1}};
  absl::StatusOr<Duals> p =
      kEnumerator(classes, {.requests = 600, .cost = 1000});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rate, 0);
  EXPECT_DOUBLE_EQ(p->cost, 0.125);
  EXPECT_EQ(p->concurrency, 0);
}

TEST(FluidLpEnumerator, BadInputIsANamedStatus) {
  const std::vector<LpClass> classes = {{-1, 1, 1}};
  absl::StatusOr<Duals> p = kEnumerator(classes, {.requests = 1, .cost = 1});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("arrivals"), std::string::npos)
      << p.status();
}

RC_GTEST_PROP(FluidLpEnumeratorProperty, TwoAxisDualEqualsBruteForcePrimal,
              ()) {
  check_against_primal_oracle(gen_instance(false, 7), kEnumerator);
}

RC_GTEST_PROP(FluidLpEnumeratorProperty, ThreeAxisDualEqualsBruteForcePrimal,
              ()) {
  check_against_primal_oracle(gen_instance(true, 6), kEnumerator);
}

RC_GTEST_PROP(FluidLpEnumeratorProperty, KktCertificateHolds, ()) {
  check_kkt_certificate(gen_instance(*rc::gen::arbitrary<bool>(), 6),
                        kEnumerator);
}

}  // namespace
}  // namespace fluid_lp_enumerator_test
}  // namespace throttlekit
