#include "throttlekit/concurrency/aimd.h"

#include <gtest/gtest.h>

namespace throttlekit {
namespace aimd_test {
namespace {

TEST(Aimd, UtilizedSuccessAddsOne) {
  EXPECT_DOUBLE_EQ(aimd_next_estimate(20, false, true, 0.9, 1, 100), 21.0);
}

TEST(Aimd, UnderUtilizedSuccessLeavesEstimate) {
  EXPECT_DOUBLE_EQ(aimd_next_estimate(20, false, false, 0.9, 1, 100), 20.0);
}

TEST(Aimd, DropMultipliesByBackoffRatio) {
  EXPECT_DOUBLE_EQ(aimd_next_estimate(20, true, true, 0.9, 1, 100), 18.0);
  EXPECT_DOUBLE_EQ(aimd_next_estimate(20, true, false, 0.5, 1, 100), 10.0);
}

TEST(Aimd, ClampsToMinAndMaxLimit) {
  EXPECT_DOUBLE_EQ(aimd_next_estimate(100, false, true, 0.9, 1, 100), 100.0);
  EXPECT_DOUBLE_EQ(aimd_next_estimate(5, true, true, 0.5, 4, 100), 4.0);
}

}  // namespace
}  // namespace aimd_test
}  // namespace throttlekit
