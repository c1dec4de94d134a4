// throttlekit/observe/rate_limit_fields.h
//
// Provides `rate_limit_fields`: the HTTP response fields that tell a client
// about a `Decision`, in the forms clients meet today, each named by the
// draft of draft-ietf-httpapi-ratelimit-headers that defines it, chosen per
// server (`RateLimitStyle`):
//
//   kStructured  the current draft (08 onwards): two RFC 8941 structured
//                fields naming the policy,
//                  RateLimit-Policy: "api";q=100;w=60
//                  RateLimit: "api";r=42;t=12
//   kDraft07     draft 07: one RFC 8941 dictionary for the current limit
//                beside an unnamed policy,
//                  RateLimit: limit=100, remaining=42, reset=12
//                  RateLimit-Policy: 100;w=60
//   kDraft06     draft 06 (and 03 to 05 without the policy): one field per
//                number,
//                  RateLimit-Limit: 100
//                  RateLimit-Remaining: 42
//                  RateLimit-Reset: 12
//                  RateLimit-Policy: 100;w=60
//   kLegacy      the X- fields most public APIs still send,
//                  X-RateLimit-Limit: 100
//                  X-RateLimit-Remaining: 42
//                  X-RateLimit-Reset: 1700000012   (epoch seconds)
//
// and in every style `Retry-After: <seconds>` on a denial (RFC 9110).
// `q` / `limit` / Limit is the decision's limit, `r` / `remaining` /
// Remaining its remaining (never negative), `t` / `reset` / Reset the
// seconds until it is fully replenished, `w` the
// policy's window in seconds. Seconds are rounded up (a client that waits
// what it was told never retries early); Retry-After is at least 1.
//
//     absl::StatusOr<RateLimitPolicyName> name =
//     RateLimitPolicyName::create("api"); RateLimitFields f =
//     rate_limit_fields(d, now_ms, *name, 60'000,
//                                           RateLimitStyle::kStructured);
//     f.for_each([&](std::string_view k, std::string_view v) { set(k, v); });
//
// Thread-safety: plain values; the functions are pure.

#ifndef THROTTLEKIT_OBSERVE_RATE_LIMIT_FIELDS_H_
#define THROTTLEKIT_OBSERVE_RATE_LIMIT_FIELDS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/observe/rate_limit_headers.h"

namespace throttlekit {

enum class RateLimitStyle { kStructured, kDraft07, kDraft06, kLegacy };

// The style a configuration names: "structured", "draft07", "draft06" or
// "legacy"; nullopt for any other text.
inline std::optional<RateLimitStyle> rate_limit_style_from_name(
    std::string_view name) {
  if (name == "structured") return RateLimitStyle::kStructured;
  if (name == "draft07") return RateLimitStyle::kDraft07;
  if (name == "draft06") return RateLimitStyle::kDraft06;
  if (name == "legacy") return RateLimitStyle::kLegacy;
  return std::nullopt;
}

// A policy name as an RFC 8941 sf-string: printable ASCII (0x20-0x7E),
// 1 .. 256 bytes; `"` and `\` are escaped when sent.
class RateLimitPolicyName {
 public:
  static absl::StatusOr<RateLimitPolicyName> create(std::string_view name) {
    if (name.empty() || name.size() > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("rate_limit_fields: a policy name must be 1 .. 256 "
                       "bytes; got ",
                       name.size()));
    }
    std::string quoted = "\"";
    for (const char c : name) {
      if (c < 0x20 || c > 0x7E) {
        return absl::InvalidArgumentError(
            "rate_limit_fields: a policy name must be printable ASCII (an "
            "RFC 8941 string)");
      }
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    quoted += '"';
    return RateLimitPolicyName(std::move(quoted));
  }

  // The name as sent: quoted and escaped.
  const std::string& quoted() const noexcept { return quoted_; }

 private:
  explicit RateLimitPolicyName(std::string quoted)
      : quoted_(std::move(quoted)) {}
  std::string quoted_;
};

// Up to five fields, in the order they are sent.
struct RateLimitFields {
  std::array<std::pair<std::string_view, std::string>, 5> fields;
  int count = 0;

  template <class Fn>
  void for_each(Fn&& fn) const {
    for (int i = 0; i < count; ++i) fn(fields[i].first, fields[i].second);
  }
  // The value of field `name` (exact case), or nullptr.
  const std::string* find(std::string_view name) const {
    for (int i = 0; i < count; ++i) {
      if (fields[i].first == name) return &fields[i].second;
    }
    return nullptr;
  }
  void add(std::string_view name, std::string value) {
    fields[count++] = {name, std::move(value)};
  }
};

// The fields of decision `d`, made at `now_ms` (epoch ms) under the policy
// `name` whose window is `window_ms`, in `style`.
inline RateLimitFields rate_limit_fields(const Decision& d, int64_t now_ms,
                                         const RateLimitPolicyName& name,
                                         int64_t window_ms,
                                         RateLimitStyle style) {
  const int64_t remaining = std::max<int64_t>(0, d.remaining);
  const int64_t reset_s = detail::ceil_seconds(d.reset_at_ms - now_ms);
  const int64_t window_s =
      std::max<int64_t>(1, detail::ceil_seconds(window_ms));
  RateLimitFields f;
  switch (style) {
    case RateLimitStyle::kStructured:
      f.add("RateLimit-Policy",
            absl::StrCat(name.quoted(), ";q=", d.limit, ";w=", window_s));
      f.add("RateLimit",
            absl::StrCat(name.quoted(), ";r=", remaining, ";t=", reset_s));
      break;
    case RateLimitStyle::kDraft07:
      f.add("RateLimit", absl::StrCat("limit=", d.limit, ", remaining=",
                                      remaining, ", reset=", reset_s));
      f.add("RateLimit-Policy", absl::StrCat(d.limit, ";w=", window_s));
      break;
    case RateLimitStyle::kDraft06:
      f.add("RateLimit-Limit", absl::StrCat(d.limit));
      f.add("RateLimit-Remaining", absl::StrCat(remaining));
      f.add("RateLimit-Reset", absl::StrCat(reset_s));
      f.add("RateLimit-Policy", absl::StrCat(d.limit, ";w=", window_s));
      break;
    case RateLimitStyle::kLegacy:
      f.add("X-RateLimit-Limit", absl::StrCat(d.limit));
      f.add("X-RateLimit-Remaining", absl::StrCat(remaining));
      // Epoch seconds at which it is full again, rounded up.
      f.add("X-RateLimit-Reset",
            absl::StrCat(detail::ceil_seconds(
                std::max<int64_t>(d.reset_at_ms, now_ms))));
      break;
  }
  if (!d.allowed) {
    f.add("Retry-After", absl::StrCat(std::max<int64_t>(
                             1, detail::ceil_seconds(d.retry_after_ms))));
  }
  return f;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_OBSERVE_RATE_LIMIT_FIELDS_H_
