#include "throttlekit/observe/rate_limit_headers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace throttlekit {
namespace rate_limit_headers_test {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

TEST(RateLimitHeaders, AllowedDecisionHasNoRetryAfter) {
  RateLimitHeaders h =
      rate_limit_headers({true, 100, 42, kNow + 12'001, 0}, kNow, 60'000);
  EXPECT_EQ(h.limit, "100");
  EXPECT_EQ(h.remaining, "42");
  EXPECT_EQ(h.reset, "13");  // 12.001 s rounds up
  EXPECT_EQ(h.policy, "100;w=60");
  EXPECT_TRUE(h.retry_after.empty());
  std::vector<std::string> names;
  h.for_each(
      [&](const char* name, const std::string&) { names.push_back(name); });
  EXPECT_EQ(names.size(), 4u);
}

TEST(RateLimitHeaders, DenialCarriesRetryAfterRoundedUpAtLeastOne) {
  RateLimitHeaders h =
      rate_limit_headers({false, 10, 0, kNow + 500, 1}, kNow, 1500);
  EXPECT_EQ(h.retry_after, "1");  // 1 ms still says 1 second
  EXPECT_EQ(h.reset, "1");
  EXPECT_EQ(h.policy, "10;w=2");
  RateLimitHeaders h2 =
      rate_limit_headers({false, 10, 0, kNow + 5000, 3001}, kNow, 1000);
  EXPECT_EQ(h2.retry_after, "4");
}

TEST(RateLimitHeaders, ResetInThePastIsZero) {
  RateLimitHeaders h = rate_limit_headers({true, 5, 5, kNow - 10, 0}, kNow, 0);
  EXPECT_EQ(h.reset, "0");
  EXPECT_EQ(h.policy, "5;w=1");
}

}  // namespace
}  // namespace rate_limit_headers_test
}  // namespace throttlekit
