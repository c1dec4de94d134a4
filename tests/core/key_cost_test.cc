#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "throttlekit/core/cost.h"
#include "throttlekit/core/key.h"

namespace throttlekit {
namespace key_cost_test {
namespace {

TEST(JoinKey, PrefixAndColon) {
  EXPECT_EQ(join_key("api", "user:42"), "api:user:42");
  EXPECT_EQ(join_key("", "user:42"), "user:42");
}

TEST(ValidateKey, RejectsEmptyAndOversizedKeys) {
  EXPECT_EQ(validate_key("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(validate_key("").message().find("empty"), std::string::npos);
  EXPECT_TRUE(validate_key(std::string(kMaxKeyBytes, 'k')).ok());
  absl::Status big = validate_key(std::string(kMaxKeyBytes + 1, 'k'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  // Arbitrary bytes are ordinary keys.
  EXPECT_TRUE(validate_key(std::string("a b{c}\"\n\xff\0", 10)).ok());
}

TEST(ValidateCost, AcceptsPositiveFiniteUpToMaxSafeInteger) {
  EXPECT_TRUE(validate_cost(1).ok());
  EXPECT_TRUE(validate_cost(0.5).ok());
  EXPECT_TRUE(validate_cost(static_cast<double>(kMaxSafeInteger)).ok());
}

TEST(ValidateCost, RejectsZeroNegativeNanInfAndHuge) {
  for (double bad :
       {0.0, -0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(),
        static_cast<double>(kMaxSafeInteger) + 2.0}) {
    absl::Status s = validate_cost(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("cost"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace key_cost_test
}  // namespace throttlekit
