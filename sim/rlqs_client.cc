// sim/rlqs_client.cc: an Envoy of the rlqs fleet (see the header).

#include "sim/rlqs_client.h"

#include <algorithm>
#include <cstdint>

namespace throttlekit::sim::rlqs_internal {

void Bucket::refill(int64_t now_us) {
  if (now_us > at_us) {
    tokens = std::min<double>(
        static_cast<double>(max_tokens),
        tokens + static_cast<double>(now_us - at_us) * rate_per_us);
    at_us = now_us;
  }
}

void Bucket::expire(int64_t now_us) {
  if (kind != Kind::kNone && now_us >= expires_us) kind = Kind::kNone;
}

void Bucket::apply(const server::QuotaAssignment& a, int64_t now_us) {
  if (!created) return;  // an action for a bucket it does not have
  expire(now_us);
  if (a.deny_all()) {
    kind = Kind::kDenyAll;
  } else {
    // Envoy compares max_tokens, tokens_per_fill and fill_interval's
    // nanos: equal here exactly when the tokens are.
    const bool same = kind == Kind::kTokenBucket && max_tokens == a.tokens;
    if (!same) {
      auto fresh = static_cast<double>(a.tokens);  // a first one: full
      if (kind == Kind::kTokenBucket) {
        refill(now_us);  // a changed one keeps the fill ratio
        fresh = max_tokens == 0
                    ? 0
                    : static_cast<double>(a.tokens) *
                          (tokens / static_cast<double>(max_tokens));
      }
      max_tokens = a.tokens;
      tokens = fresh;
      rate_per_us = static_cast<double>(a.tokens) /
                    (static_cast<double>(a.fill_interval_s) * 1e6);
      at_us = now_us;
    }
    kind = Kind::kTokenBucket;
  }
  expires_us = now_us + a.ttl_s * 1'000'000;
}

void Bucket::erase() {
  if (!created) return;
  Bucket fresh;
  fresh.per_sec = per_sec;
  fresh.arrivals = arrivals;
  fresh.on = on;
  *this = fresh;
}

Answer Bucket::request(int64_t now_us, bool allow_without_assignment) {
  Answer answer;
  answer.first = !created;
  if (answer.first) {
    created = true;
    last_report_us = now_us;
  }
  expire(now_us);
  if (kind == Kind::kTokenBucket) {
    refill(now_us);
    if (tokens >= 1) {
      tokens -= 1;
      answer.allowed = true;
    }
  } else if (kind == Kind::kNone) {
    answer.allowed = allow_without_assignment;  // DENY_ALL by A4
  }
  ++(answer.allowed ? allowed : denied);
  return answer;
}

Usage Bucket::take_usage(int b, int64_t now_us) {
  const Usage u{b, allowed, denied,
                (now_us - last_report_us) / 1'000'000 * 1000};
  allowed = denied = 0;
  last_report_us = now_us;
  return u;
}

Report Client::report(int64_t now_us) {
  Report report;
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket& k = buckets[b];
    if (k.created) report.push_back(k.take_usage(static_cast<int>(b), now_us));
  }
  return report;
}

void Client::act(const Response& response, int64_t now_us) {
  for (const auto& [b, a] : response) {
    Bucket& k = buckets[static_cast<size_t>(b)];
    if (a.has_value()) {
      k.apply(*a, now_us);
    } else {
      k.erase();
    }
  }
}

}  // namespace throttlekit::sim::rlqs_internal
