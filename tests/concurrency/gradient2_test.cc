#include "throttlekit/concurrency/gradient2.h"

#include <gtest/gtest.h>

#include <cmath>

namespace throttlekit {
namespace gradient2_test {
namespace {

TEST(Gradient2, GradientIsToleranceTimesNoloadOverRtt) {
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 2000), 0.75);
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 1800), 1500.0 / 1800.0);
}

TEST(Gradient2, GradientClampsAtHalfUnderHeavyQueueing) {
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 3000), 0.5);  // exactly 0.5
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 3001), 0.5);
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 1'000'000), 0.5);
}

TEST(Gradient2, GradientClampsAtOneWithinTolerance) {
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 1000), 1.0);  // raw 1.5
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 1000, 1500), 1.0);  // exactly 1
  EXPECT_LT(gradient2_gradient(1.5, 1000, 1501), 1.0);
}

TEST(Gradient2, ClockThatDidNotMoveShowsNoQueue) {
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(gradient2_gradient(1.5, 0, -5), 1.0);
}

TEST(Gradient2, StepIsEmaOfGradientTimesEstimatePlusSqrt) {
  // new_limit = 100 * 1 + 10 = 110; 0.8 * 100 + 0.2 * 110 = 102.
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(100, 1.0, 0.2, true, 1, 1000),
                   102.0);
  // new_limit = 100 * 0.5 + 10 = 60; 0.8 * 100 + 0.2 * 60 = 92.
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(100, 0.5, 0.2, true, 1, 1000), 92.0);
  // Smoothing 1 takes the new limit as is.
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(100, 0.75, 1.0, true, 1, 1000),
                   85.0);
}

TEST(Gradient2, SqrtHeadroomGrowsSmallLimitsFasterThanLargeOnes) {
  // 4 -> 0.8 * 4 + 0.2 * (4 + 2) = 4.4 (+10%).
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(4, 1.0, 0.2, true, 1, 1e6), 4.4);
  // 10000 -> 10000 + 0.2 * 100 = 10020 (+0.2%).
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(10000, 1.0, 0.2, true, 1, 1e6),
                   10020.0);
}

TEST(Gradient2, ClampsToMinAndMaxLimit) {
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(1000, 1.0, 0.2, true, 1, 1000),
                   1000.0);
  // 10 -> 0.8 * 10 + 0.2 * (5 + sqrt(10)) = 9.63..., clamped up to 10.
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(10, 0.5, 0.2, true, 10, 100), 10.0);
}

TEST(Gradient2, UnderUtilizedSampleCannotGrowButCanShrink) {
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(100, 1.0, 0.2, false, 1, 1000),
                   100.0);
  EXPECT_DOUBLE_EQ(gradient2_next_estimate(100, 0.5, 0.2, false, 1, 1000),
                   92.0);
}

TEST(Gradient2, SettlesWhereGradientBalancesHeadroom) {
  // The fixed point of e = e * g + sqrt(e) is e = 1 / (1 - g)^2; at g = 0.75
  // that is 16.
  double e = 100;
  for (int i = 0; i < 2000; ++i) {
    e = gradient2_next_estimate(e, 0.75, 0.2, true, 1, 1000);
  }
  EXPECT_NEAR(e, 16.0, 1e-9);
}

}  // namespace
}  // namespace gradient2_test
}  // namespace throttlekit
