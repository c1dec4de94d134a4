#include "throttlekit/core/water_filling.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace throttlekit {
namespace water_filling_test {
namespace {

std::vector<int64_t> fill(int64_t capacity,
                          const std::vector<WaterClaim>& claims) {
  absl::StatusOr<std::vector<int64_t>> a = water_fill(capacity, claims);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : std::vector<int64_t>{};
}

TEST(WaterFilling, HandCheckedSplits) {
  // Enough for everyone: every demand.
  EXPECT_EQ(fill(100, {{1, 10}, {2, 20}}), (std::vector<int64_t>{10, 20}));
  // Equal weights, equal big demands: equal halves.
  EXPECT_EQ(fill(60, {{1, 100}, {1, 100}}), (std::vector<int64_t>{30, 30}));
  // Weights 2 : 1.
  EXPECT_EQ(fill(60, {{2, 100}, {1, 100}}), (std::vector<int64_t>{40, 20}));
  // The small claim is met; the rest goes to the big one.
  EXPECT_EQ(fill(60, {{2, 100}, {1, 10}}), (std::vector<int64_t>{50, 10}));
  // Three tenants, one satisfied below the level (then 95 over weight 4:
  // 23.75 and 71.25, the spare unit to the larger fraction).
  EXPECT_EQ(fill(100, {{1, 5}, {1, 1000}, {3, 1000}}),
            (std::vector<int64_t>{5, 24, 71}));
  // Units left over by the floors go to the largest fractions, ties to the
  // lower index: 10 over three equal claims is 4, 3, 3.
  EXPECT_EQ(fill(10, {{1, 9}, {1, 9}, {1, 9}}),
            (std::vector<int64_t>{4, 3, 3}));
  // Nothing to split, nothing claimed, no claimants.
  EXPECT_EQ(fill(0, {{1, 5}, {1, 5}}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(fill(7, {{1, 0}, {1, 0}}), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(fill(7, {}).empty());
}

TEST(WaterFilling, BadInputIsAStatus) {
  auto message = [](int64_t capacity, std::vector<WaterClaim> claims) {
    return std::string(water_fill(capacity, claims).status().message());
  };
  EXPECT_NE(message(-1, {{1, 1}}).find("capacity"), std::string::npos);
  EXPECT_NE(message(int64_t{1} << 54, {{1, 1}}).find("capacity"),
            std::string::npos);
  EXPECT_NE(message(5, {{1, 1}, {0, 1}}).find("claims[1].weight"),
            std::string::npos);
  EXPECT_NE(message(5, {{-1, 1}}).find("weight"), std::string::npos);
  EXPECT_NE(message(5, {{std::nan(""), 1}}).find("weight"), std::string::npos);
  EXPECT_NE(
      message(5, {{std::numeric_limits<double>::infinity(), 1}}).find("weight"),
      std::string::npos);
  EXPECT_NE(message(5, {{1, -3}}).find("claims[0].demand"), std::string::npos);
}

// A slow reference: the continuous water level by bisection.
double reference_level(int64_t capacity, const std::vector<WaterClaim>& c) {
  double lo = 0, hi = 0;
  for (const WaterClaim& x : c) {
    hi = std::max(hi, static_cast<double>(x.demand) / x.weight);
  }
  for (int it = 0; it < 200; ++it) {
    const double mid = (lo + hi) / 2;
    double given = 0;
    for (const WaterClaim& x : c) {
      given += std::min(static_cast<double>(x.demand), mid * x.weight);
    }
    (given < static_cast<double>(capacity) ? lo : hi) = mid;
  }
  return hi;
}

rc::Gen<std::vector<WaterClaim>> claims_gen() {
  return rc::gen::container<std::vector<WaterClaim>>(rc::gen::build<WaterClaim>(
      rc::gen::set(&WaterClaim::weight,
                   rc::gen::map(rc::gen::inRange(1, 1000),
                                [](int w) { return w / 10.0; })),
      rc::gen::set(&WaterClaim::demand,
                   rc::gen::map(rc::gen::inRange(0, 5000),
                                [](int d) { return int64_t{d}; }))));
}

// Work-conserving, feasible, and max-min fair up to one unit (an
// unsatisfied claimant is never more than a unit behind anyone, per
// weight), that bound relaxed by the relative `slack`. Returns the total
// demand.
int64_t assert_guarantees(int64_t capacity, const std::vector<WaterClaim>& c,
                          const std::vector<int64_t>& a, long double slack) {
  RC_ASSERT(a.size() == c.size());
  int64_t demand = 0;
  for (const WaterClaim& x : c) demand += x.demand;
  RC_ASSERT(std::accumulate(a.begin(), a.end(), int64_t{0}) ==
            std::min(capacity, demand));
  for (size_t i = 0; i < c.size(); ++i) {
    RC_ASSERT(a[i] >= 0);
    RC_ASSERT(a[i] <= c[i].demand);
  }
  for (size_t i = 0; i < c.size(); ++i) {
    if (a[i] == c[i].demand) continue;
    for (size_t j = 0; j < c.size(); ++j) {
      RC_ASSERT(static_cast<long double>(a[j] - 1) * c[i].weight <
                static_cast<long double>(a[i] + 1) * c[j].weight * (1 + slack));
    }
  }
  return demand;
}

// The properties of the file comment, on thousands of random instances.
RC_GTEST_PROP(WaterFillingProperty, WorkConservingFeasibleAndFair, ()) {
  const std::vector<WaterClaim> c = *claims_gen();
  const int64_t capacity = *rc::gen::inRange<int64_t>(0, 40'000);
  const std::vector<int64_t> a = *water_fill(capacity, c);
  const int64_t demand = assert_guarantees(capacity, c, a, 0);
  // Within one unit of the continuous answer.
  if (demand > capacity) {
    const double level = reference_level(capacity, c);
    for (size_t i = 0; i < c.size(); ++i) {
      const double exact =
          std::min(static_cast<double>(c[i].demand), level * c[i].weight);
      RC_ASSERT(std::abs(static_cast<double>(a[i]) - exact) < 1 + 1e-6);
    }
  }
}

RC_GTEST_PROP(WaterFillingProperty, MoreCapacityTakesNothingAway, ()) {
  const std::vector<WaterClaim> c = *claims_gen();
  const int64_t capacity = *rc::gen::inRange<int64_t>(0, 20'000);
  const int64_t more = capacity + *rc::gen::inRange<int64_t>(0, 20'000);
  const std::vector<int64_t> a = *water_fill(capacity, c);
  const std::vector<int64_t> b = *water_fill(more, c);
  // Monotone up to the rounding unit.
  for (size_t i = 0; i < c.size(); ++i) RC_ASSERT(b[i] >= a[i] - 1);
}

RC_GTEST_PROP(WaterFillingProperty, ScalingEveryWeightChangesNothing, ()) {
  std::vector<WaterClaim> c = *claims_gen();
  const int64_t capacity = *rc::gen::inRange<int64_t>(0, 40'000);
  const std::vector<int64_t> a = *water_fill(capacity, c);
  for (WaterClaim& x : c) x.weight *= 4;  // exact in binary
  RC_ASSERT(*water_fill(capacity, c) == a);
}

// Weights up to 1e18 apart once cancelled in a running difference of sums:
// the unsatisfied weight came out 0, the level infinite, and the split
// handed out more than the capacity (or looped for ~2^40 passes).
TEST(WaterFilling, WeightsFarApartNeitherCancelNorOverflow) {
  // The tiny-weight claim gets (almost) nothing; the capacity is not paid
  // twice.
  EXPECT_EQ(fill(1'000'000, {{3, 1}, {1e9, 999'999}, {1e-9, 1'000'000}}),
            (std::vector<int64_t>{1, 999'999, 0}));
  // One unit to the heavy claim, the rest to the light one (this call did
  // not return before the fix).
  const int64_t cap = int64_t{1} << 40;
  EXPECT_EQ(fill(cap, {{1e9, 1}, {1e-7, int64_t{1} << 50}}),
            (std::vector<int64_t>{1, cap - 1}));
  // The smallest positive weight beside the largest.
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(fill(10, {{tiny, 100}, {1e9, 100}}), (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(fill(10, {{tiny, 100}, {tiny, 100}}), (std::vector<int64_t>{5, 5}));
}

// Weights drawn log-uniformly over 21 decades, demands and capacity up to
// 2^40: the same guarantees, with the fairness bound relaxed by a relative
// 1e-9 for the rounding of a level that spans those magnitudes.
RC_GTEST_PROP(WaterFillingProperty, ExtremeWeightsKeepEveryGuarantee, ()) {
  const std::vector<WaterClaim> c =
      *rc::gen::container<std::vector<WaterClaim>>(rc::gen::build<WaterClaim>(
          rc::gen::set(
              &WaterClaim::weight,
              rc::gen::map(rc::gen::inRange(-1200, 900),
                           [](int e) { return std::pow(10.0, e / 100.0); })),
          rc::gen::set(&WaterClaim::demand,
                       rc::gen::map(rc::gen::inRange(0, 40 * 8), [](int b) {
                         return static_cast<int64_t>(std::ldexp(1.0, b / 8));
                       }))));
  const int64_t capacity = *rc::gen::map(
      rc::gen::inRange(0, 41 * 8),
      [](int b) { return static_cast<int64_t>(std::ldexp(1.0, b / 8)) - 1; });
  assert_guarantees(capacity, c, *water_fill(capacity, c), 1e-9L);
}

TEST(WaterFilling, LargeCapacitiesStayExact) {
  const int64_t big = (int64_t{1} << 53) - 1;
  const std::vector<int64_t> a =
      fill(big, {{1, big}, {1, big}, {2, int64_t{1} << 40}});
  EXPECT_EQ(a[0] + a[1] + a[2], big);
  EXPECT_EQ(a[2], int64_t{1} << 40);
  EXPECT_LE(std::abs(a[0] - a[1]), 1);
}

}  // namespace
}  // namespace water_filling_test
}  // namespace throttlekit
