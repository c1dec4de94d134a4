// The three forms of rate-limit fields (observe/rate_limit_fields.h), each
// checked by parsing what would be sent: the structured fields with an RFC
// 8941 item parser written here, the others as integers.

#include "throttlekit/observe/rate_limit_fields.h"

#include <map>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "support/sf_item.h"

namespace throttlekit {
namespace rate_limit_fields_test {
namespace {

using testing::Item;
using testing::parse_item;

constexpr int64_t kNow = 1'700'000'000'500;

int64_t integer(const RateLimitFields& f, std::string_view name) {
  const std::string* v = f.find(name);
  EXPECT_NE(v, nullptr) << name;
  int64_t x = -1;
  if (v != nullptr) {
    EXPECT_TRUE(absl::SimpleAtoi(*v, &x)) << name << ": " << *v;
  }
  return x;
}

RateLimitPolicyName name(std::string_view n) {
  return *RateLimitPolicyName::create(n);
}

TEST(RateLimitFields, StructuredFieldsParseAsRfc8941Items) {
  // 42 left, full in 11.5 s (sent as 12), a 60 s window.
  const Decision d{true, 100, 42, kNow + 11'500, 0};
  RateLimitFields f = rate_limit_fields(d, kNow, name("api"), 60'000,
                                        RateLimitStyle::kStructured);
  ASSERT_EQ(f.count, 2);
  std::optional<Item> policy = parse_item(*f.find("RateLimit-Policy"));
  ASSERT_TRUE(policy.has_value()) << *f.find("RateLimit-Policy");
  EXPECT_EQ(policy->name, "api");
  EXPECT_EQ(policy->params,
            (std::map<std::string, int64_t>{{"q", 100}, {"w", 60}}));
  std::optional<Item> limit = parse_item(*f.find("RateLimit"));
  ASSERT_TRUE(limit.has_value()) << *f.find("RateLimit");
  EXPECT_EQ(limit->name, "api");
  EXPECT_EQ(limit->params,
            (std::map<std::string, int64_t>{{"r", 42}, {"t", 12}}));
  EXPECT_EQ(f.find("Retry-After"), nullptr);
}

TEST(RateLimitFields, PolicyNamesAreEscapedOrRefused) {
  RateLimitFields f =
      rate_limit_fields({true, 5, 1, kNow, 0}, kNow, name("te\"n\\ant a"), 1000,
                        RateLimitStyle::kStructured);
  std::optional<Item> item = parse_item(*f.find("RateLimit"));
  ASSERT_TRUE(item.has_value()) << *f.find("RateLimit");
  EXPECT_EQ(item->name, "te\"n\\ant a");
  EXPECT_FALSE(RateLimitPolicyName::create("").ok());
  EXPECT_FALSE(RateLimitPolicyName::create("caf\xc3\xa9").ok());
  EXPECT_FALSE(RateLimitPolicyName::create("a\nb").ok());
  EXPECT_FALSE(RateLimitPolicyName::create(std::string(257, 'x')).ok());
}

TEST(RateLimitFields, Draft07Fields) {
  const Decision d{false, 10, 0, kNow + 5'000, 3'001};
  RateLimitFields f = rate_limit_fields(d, kNow, name("login"), 1'500,
                                        RateLimitStyle::kDraft07);
  EXPECT_EQ(integer(f, "RateLimit-Limit"), 10);
  EXPECT_EQ(integer(f, "RateLimit-Remaining"), 0);
  EXPECT_EQ(integer(f, "RateLimit-Reset"), 5);
  EXPECT_EQ(*f.find("RateLimit-Policy"), "10;w=2");
  EXPECT_EQ(integer(f, "Retry-After"), 4);  // 3.001 s, rounded up
}

TEST(RateLimitFields, LegacyFieldsResetAtEpochSeconds) {
  const Decision d{false, 10, -3, kNow + 2'000, 0};
  RateLimitFields f =
      rate_limit_fields(d, kNow, name("x"), 1'000, RateLimitStyle::kLegacy);
  EXPECT_EQ(integer(f, "X-RateLimit-Limit"), 10);
  EXPECT_EQ(integer(f, "X-RateLimit-Remaining"), 0);  // never negative
  EXPECT_EQ(integer(f, "X-RateLimit-Reset"), (kNow + 2'000 + 999) / 1000);
  EXPECT_EQ(integer(f, "Retry-After"), 1);  // at least 1
  EXPECT_EQ(f.find("RateLimit"), nullptr);
}

TEST(RateLimitFields, ParserRejectsWhatIsNotAnItem) {
  // The test's parser is strict, so the checks above can fail.
  EXPECT_FALSE(parse_item("api;r=1").has_value());
  EXPECT_FALSE(parse_item("\"api\";r=").has_value());
  EXPECT_FALSE(parse_item("\"api\";r=1;r=2").has_value());
  EXPECT_FALSE(parse_item("\"a\\pi\"").has_value());
  EXPECT_TRUE(parse_item("\"api\"").has_value());
}

}  // namespace
}  // namespace rate_limit_fields_test
}  // namespace throttlekit
