// The four forms of rate-limit fields (observe/rate_limit_fields.h), each
// checked by parsing what would be sent (the structured fields with an RFC
// 8941 item parser, draft 07's with a dictionary parser written here, the
// others as integers) and against the examples of the draft naming it.

#include "throttlekit/observe/rate_limit_fields.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

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

TEST(RateLimitFields, Draft06Fields) {
  const Decision d{false, 10, 0, kNow + 5'000, 3'001};
  RateLimitFields f = rate_limit_fields(d, kNow, name("login"), 1'500,
                                        RateLimitStyle::kDraft06);
  EXPECT_EQ(integer(f, "RateLimit-Limit"), 10);
  EXPECT_EQ(integer(f, "RateLimit-Remaining"), 0);
  EXPECT_EQ(integer(f, "RateLimit-Reset"), 5);
  EXPECT_EQ(*f.find("RateLimit-Policy"), "10;w=2");
  EXPECT_EQ(integer(f, "Retry-After"), 4);  // 3.001 s, rounded up
  EXPECT_EQ(f.find("RateLimit"), nullptr);
}

// Draft 07's `RateLimit`: an RFC 8941 dictionary whose members are
// `key=integer`, separated by a comma and optional spaces; nullopt for
// anything else (a bare key, a repeated key, a non-integer value).
std::optional<std::map<std::string, int64_t>> parse_dictionary(
    std::string_view s) {
  std::map<std::string, int64_t> out;
  while (true) {
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    const std::string key(s.substr(0, eq));
    for (const char c : key) {
      if (!(c >= 'a' && c <= 'z') && c != '_' && c != '-') return std::nullopt;
    }
    s.remove_prefix(eq + 1);
    const size_t end = s.find(',');
    const std::string_view value = s.substr(0, end);
    int64_t x = 0;
    if (value.empty() || value.size() > 15 ||
        value.find_first_not_of("0123456789") != std::string_view::npos ||
        !absl::SimpleAtoi(std::string(value), &x) ||
        !out.emplace(key, x).second) {
      return std::nullopt;
    }
    if (end == std::string_view::npos) return out;
    s.remove_prefix(end + 1);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  }
}

TEST(RateLimitFields, Draft07FieldsAreOneDictionaryBesideThePolicy) {
  const Decision d{false, 10, 0, kNow + 5'000, 3'001};
  RateLimitFields f = rate_limit_fields(d, kNow, name("login"), 1'500,
                                        RateLimitStyle::kDraft07);
  const std::optional<std::map<std::string, int64_t>> dict =
      parse_dictionary(*f.find("RateLimit"));
  ASSERT_TRUE(dict.has_value()) << *f.find("RateLimit");
  EXPECT_EQ(*dict, (std::map<std::string, int64_t>{
                       {"limit", 10}, {"remaining", 0}, {"reset", 5}}));
  EXPECT_EQ(*f.find("RateLimit-Policy"), "10;w=2");
  EXPECT_EQ(integer(f, "Retry-After"), 4);
  // None of draft 06's separate fields.
  EXPECT_EQ(f.find("RateLimit-Limit"), nullptr);
  EXPECT_EQ(f.find("RateLimit-Remaining"), nullptr);
  EXPECT_EQ(f.find("RateLimit-Reset"), nullptr);
}

// The response examples of each draft: 10 requests per second, 1 left,
// full again in 7 s (draft 06 and 07); a policy "default" of 100 per
// minute with 50 left, full in 30 s (the structured drafts).
TEST(RateLimitFields, EachStyleSendsItsDraftsExample) {
  const Decision small{true, 10, 1, kNow + 7'000, 0};
  const auto sent = [&](const Decision& d, int64_t window_ms,
                        std::string_view policy, RateLimitStyle style) {
    std::vector<std::string> lines;
    rate_limit_fields(d, kNow, name(policy), window_ms, style)
        .for_each([&](std::string_view k, std::string_view v) {
          lines.push_back(std::string(k) + ": " + std::string(v));
        });
    return lines;
  };
  EXPECT_EQ(sent(small, 1'000, "x", RateLimitStyle::kDraft06),
            (std::vector<std::string>{
                "RateLimit-Limit: 10", "RateLimit-Remaining: 1",
                "RateLimit-Reset: 7", "RateLimit-Policy: 10;w=1"}));
  EXPECT_EQ(
      sent(small, 1'000, "x", RateLimitStyle::kDraft07),
      (std::vector<std::string>{"RateLimit: limit=10, remaining=1, reset=7",
                                "RateLimit-Policy: 10;w=1"}));
  const Decision big{true, 100, 50, kNow + 30'000, 0};
  EXPECT_EQ(
      sent(big, 60'000, "default", RateLimitStyle::kStructured),
      (std::vector<std::string>{"RateLimit-Policy: \"default\";q=100;w=60",
                                "RateLimit: \"default\";r=50;t=30"}));
}

TEST(RateLimitFields, StyleNamesAreTheDrafts) {
  EXPECT_EQ(rate_limit_style_from_name("structured"),
            RateLimitStyle::kStructured);
  EXPECT_EQ(rate_limit_style_from_name("draft07"), RateLimitStyle::kDraft07);
  EXPECT_EQ(rate_limit_style_from_name("draft06"), RateLimitStyle::kDraft06);
  EXPECT_EQ(rate_limit_style_from_name("legacy"), RateLimitStyle::kLegacy);
  EXPECT_EQ(rate_limit_style_from_name("draft7"), std::nullopt);
  EXPECT_EQ(rate_limit_style_from_name(""), std::nullopt);
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

TEST(RateLimitFields, ParsersRejectWhatIsNotTheirForm) {
  // The test's parsers are strict, so the checks above can fail.
  EXPECT_FALSE(parse_dictionary("limit").has_value());
  EXPECT_FALSE(parse_dictionary("limit=1, limit=2").has_value());
  EXPECT_FALSE(parse_dictionary("limit=1.5").has_value());
  EXPECT_FALSE(parse_dictionary("Limit=1").has_value());
  EXPECT_TRUE(parse_dictionary("limit=1,remaining=2").has_value());
  EXPECT_FALSE(parse_item("api;r=1").has_value());
  EXPECT_FALSE(parse_item("\"api\";r=").has_value());
  EXPECT_FALSE(parse_item("\"api\";r=1;r=2").has_value());
  EXPECT_FALSE(parse_item("\"a\\pi\"").has_value());
  EXPECT_TRUE(parse_item("\"api\"").has_value());
}

}  // namespace
}  // namespace rate_limit_fields_test
}  // namespace throttlekit
