// throttlekit/observe/rate_limit_headers.h
//
// Provides `RateLimitHeaders`: the HTTP response headers a server sends for a
// `Decision` (docs/architecture.md, "Layers", 7, "HTTP header helpers"), in
// the separate fields of draft-ietf-httpapi-ratelimit-headers-06, the form
// most clients and gateways understand today, plus RFC 9110's Retry-After
// (`rate_limit_fields`, observe/rate_limit_fields.h, sends every draft's
// form):
//
//     RateLimit-Limit: 100
//     RateLimit-Remaining: 0
//     RateLimit-Reset: 12          (delta seconds until fully replenished)
//     RateLimit-Policy: 100;w=60   (limit; window in seconds)
//     Retry-After: 3               (only on a denial; delta seconds, >= 1)
//
// Seconds are rounded up, so a client that waits the advertised time never
// retries early. Thread-safety: a plain value; the function is pure.

#ifndef THROTTLEKIT_OBSERVE_RATE_LIMIT_HEADERS_H_
#define THROTTLEKIT_OBSERVE_RATE_LIMIT_HEADERS_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "throttlekit/core/decision.h"

namespace throttlekit {

struct RateLimitHeaders {
  std::string limit;        // RateLimit-Limit
  std::string remaining;    // RateLimit-Remaining
  std::string reset;        // RateLimit-Reset
  std::string policy;       // RateLimit-Policy
  std::string retry_after;  // Retry-After; empty when allowed

  // Calls `fn(name, value)` for each header to send, in a stable order.
  template <class Fn>
  void for_each(Fn&& fn) const {
    fn("RateLimit-Limit", limit);
    fn("RateLimit-Remaining", remaining);
    fn("RateLimit-Reset", reset);
    fn("RateLimit-Policy", policy);
    if (!retry_after.empty()) fn("Retry-After", retry_after);
  }
};

namespace detail {
// ceil(ms / 1000) for ms >= 0; 0 for negative ms.
constexpr int64_t ceil_seconds(int64_t ms) noexcept {
  return ms <= 0 ? 0 : (ms + 999) / 1000;
}
}  // namespace detail

// The headers for decision `d` made at `now_ms` under a policy whose window
// is `window_ms` (a strategy's `policy_window_ms()`).
inline RateLimitHeaders rate_limit_headers(const Decision& d, int64_t now_ms,
                                           int64_t window_ms) {
  RateLimitHeaders h;
  h.limit = std::to_string(d.limit);
  h.remaining = std::to_string(std::max<int64_t>(0, d.remaining));
  h.reset = std::to_string(detail::ceil_seconds(d.reset_at_ms - now_ms));
  h.policy =
      std::to_string(d.limit) + ";w=" +
      std::to_string(std::max<int64_t>(1, detail::ceil_seconds(window_ms)));
  if (!d.allowed) {
    h.retry_after = std::to_string(
        std::max<int64_t>(1, detail::ceil_seconds(d.retry_after_ms)));
  }
  return h;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_OBSERVE_RATE_LIMIT_HEADERS_H_
