// detail::floor_to_int / ceil_to_int must equal std::floor / std::ceil
// converted to int64, for every double (they replace libm calls on the hot
// path, so any difference would break bit-identity with Redis and Postgres).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "throttlekit/strategy/strategy.h"

namespace throttlekit {
namespace rounding_property_test {
namespace {

int64_t reference_floor(double v) { return detail::to_int(std::floor(v)); }
int64_t reference_ceil(double v) { return detail::to_int(std::ceil(v)); }

// Bitwise equality (so -0.0 != 0.0), except that any two NaNs are equal:
// libm quiets a signaling NaN (sets its quiet bit), the helpers return a
// NaN as they got it; no NaN reaches them from a validated input, and none
// is ever stored.
bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(Rounding, EdgeCasesMatchLibm) {
  const double inf = std::numeric_limits<double>::infinity();
  const double cases[] = {0.0,
                          -0.0,
                          0.5,
                          -0.5,
                          -0.25,
                          0.25,
                          1.0,
                          -1.0,
                          1.5,
                          -1.5,
                          1e-300,
                          -1e-300,
                          4503599627370495.5,
                          -4503599627370495.5,
                          9007199254740991.0,
                          9007199254740993.0,
                          1.7e12 + 0.25,
                          -1.7e12 - 0.25,
                          9.2233720368547748e18,
                          -9.2233720368547758e18,
                          1e300,
                          -1e300,
                          inf,
                          -inf,
                          std::nan("")};
  for (double v : cases) {
    EXPECT_EQ(detail::floor_to_int(v), reference_floor(v)) << v;
    EXPECT_EQ(detail::ceil_to_int(v), reference_ceil(v)) << v;
    EXPECT_TRUE(same_bits(detail::floor_d(v), std::floor(v))) << v;
    EXPECT_TRUE(same_bits(detail::ceil_d(v), std::ceil(v))) << v;
  }
}

RC_GTEST_PROP(Rounding, AnyBitPatternMatchesLibm, (uint64_t bits)) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  RC_ASSERT(detail::floor_to_int(v) == reference_floor(v));
  RC_ASSERT(detail::ceil_to_int(v) == reference_ceil(v));
  RC_ASSERT(same_bits(detail::floor_d(v), std::floor(v)));
  RC_ASSERT(same_bits(detail::ceil_d(v), std::ceil(v)));
}

RC_GTEST_PROP(Rounding, EpochScaleValuesMatchLibm, ()) {
  const double v =
      *rc::gen::inRange<int64_t>(-4'000'000'000'000, 4'000'000'000'000) +
      *rc::gen::inRange(0, 1'000'000) / 1e6;
  RC_ASSERT(detail::floor_to_int(v) == reference_floor(v));
  RC_ASSERT(detail::ceil_to_int(v) == reference_ceil(v));
  RC_ASSERT(same_bits(detail::floor_d(v), std::floor(v)));
  RC_ASSERT(same_bits(detail::ceil_d(v), std::ceil(v)));
  RC_ASSERT(same_bits(detail::floor_d(-v), std::floor(-v)));
  RC_ASSERT(same_bits(detail::ceil_d(-v), std::ceil(-v)));
}

}  // namespace
}  // namespace rounding_property_test
}  // namespace throttlekit
