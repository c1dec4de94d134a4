#include "throttlekit/core/decision.h"

#include <gtest/gtest.h>

#include "throttlekit/core/binding_axis.h"

namespace throttlekit {
namespace decision_test {
namespace {

TEST(Decision, AllowFullIsExactMaxSafeInteger) {
  EXPECT_EQ(kMaxSafeInteger, 9007199254740991);
  EXPECT_TRUE(kAllowFull.allowed);
  EXPECT_EQ(kAllowFull.limit, kMaxSafeInteger);
  EXPECT_EQ(kAllowFull.remaining, kMaxSafeInteger);
  EXPECT_EQ(kAllowFull.reset_at_ms, 0);
  EXPECT_EQ(kAllowFull.retry_after_ms, 0);
  // Exact in a double, so Lua holds it bit for bit.
  EXPECT_EQ(static_cast<int64_t>(static_cast<double>(kMaxSafeInteger)),
            kMaxSafeInteger);
}

TEST(Decision, CombineTakesAndMinMinMaxMax) {
  Decision a{true, 10, 7, 1000, 0};
  Decision b{false, 5, 9, 900, 30};
  Decision c = combine(a, b);
  EXPECT_EQ(c, (Decision{false, 5, 7, 1000, 30}));
}

TEST(Decision, CombineWithAllowFullIsIdentity) {
  Decision a{false, 3, 0, 123, 45};
  EXPECT_EQ(combine(a, kAllowFull), a);
  EXPECT_EQ(combine(kAllowFull, a), a);
}

TEST(BindingAxis, FirstDenialInEvaluationOrderBinds) {
  Decision allow{true, 1, 1, 0, 0};
  Decision deny{false, 1, 0, 10, 10};
  EXPECT_EQ(binding_axis({allow, deny, deny}), Axis::kRate);
  EXPECT_EQ(binding_axis({deny, deny, deny}), Axis::kConcurrency);
  EXPECT_EQ(binding_axis({allow, allow, deny}), Axis::kCost);
  EXPECT_EQ(binding_axis({allow, allow, allow}), std::nullopt);
  // A short-circuited (unevaluated) axis never binds.
  EXPECT_EQ(binding_axis({deny, std::nullopt, std::nullopt}),
            Axis::kConcurrency);
  EXPECT_EQ(axis_name(Axis::kCost), "cost");
}

}  // namespace
}  // namespace decision_test
}  // namespace throttlekit
