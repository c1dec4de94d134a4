// src/server/metrics.cc: per-policy decision metrics (metrics.h).

#include "metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::server {

// Bucket of `ns`: 8 linear sub-buckets per power of two (values below 8
// get one bucket each).
int PolicyMetrics::bucket(int64_t ns) {
  if (ns < kSubBuckets) return static_cast<int>(std::max<int64_t>(0, ns));
  const int octave = 63 - std::countl_zero(static_cast<uint64_t>(ns));
  const int sub = static_cast<int>((ns >> (octave - 3)) & (kSubBuckets - 1));
  return std::min(kBuckets - 1, (octave - 2) * kSubBuckets + sub);
}

// The largest ns that falls into bucket `index`.
double PolicyMetrics::bucket_upper_ns(int index) {
  if (index < kSubBuckets) return index;
  const int octave = index / kSubBuckets + 2;
  const int sub = index % kSubBuckets;
  return std::ldexp(static_cast<double>(kSubBuckets + sub + 1), octave - 3) - 1;
}

void PolicyMetrics::on_decision(const DecisionEvent& e) {
  (e.decision.allowed ? allowed_ : denied_)
      .fetch_add(1, std::memory_order_relaxed);
  limit_.store(e.decision.limit, std::memory_order_relaxed);
  const int64_t ns = std::max<int64_t>(0, e.duration_ns);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  int64_t seen = max_ns_.load(std::memory_order_relaxed);
  while (ns > seen &&
         !max_ns_.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
  }
  buckets_[bucket(ns)].fetch_add(1, std::memory_order_relaxed);
  requested_->add(e.key);
  if (e.decision.allowed) return;
  denied_keys_->add(e.key);
  int lane = -1;
  if (std::optional<std::string_view> l =
          deny_lane(false, e.binding_axis, e.policy_denied)) {
    for (int i = 0; i < 4; ++i) {
      if (kLanes[i] == *l) lane = i;
    }
  }
  if (lane >= 0) lanes_[lane].fetch_add(1, std::memory_order_relaxed);
  const int64_t at_ms = SystemClock{}.now_ms();
  {
    SpinLockHolder hold(ring_mu_);
    Slot& s = ring_[ring_next_++ % kRecent];
    s.at_ms = at_ms;
    s.key_len = static_cast<uint8_t>(std::min(e.key.size(), sizeof s.key));
    std::memcpy(s.key, e.key.data(), s.key_len);
    s.lane = static_cast<int8_t>(lane);
    s.limit = e.decision.limit;
    s.remaining = e.decision.remaining;
    s.retry_after_ms = e.decision.retry_after_ms;
  }
  // After the ring write, so a watcher woken here finds the denial.
  if (signal_ != nullptr) signal_->denied();
}

PolicyMetrics::Snapshot PolicyMetrics::snapshot() const {
  Snapshot s;
  s.allowed = allowed_.load(std::memory_order_relaxed);
  s.denied = denied_.load(std::memory_order_relaxed);
  for (int i = 0; i < 4; ++i) {
    s.denied_by_lane[i] = lanes_[i].load(std::memory_order_relaxed);
  }
  s.limit = limit_.load(std::memory_order_relaxed);
  std::array<int64_t, kBuckets> counts;
  int64_t n = 0;
  for (int i = 0; i < kBuckets; ++i) {
    counts[i] = buckets_[i].load(std::memory_order_relaxed);
    n += counts[i];
  }
  s.latency.n = n;
  if (n == 0) return s;
  const auto quantile = [&](double q) {
    const int64_t rank = static_cast<int64_t>(std::ceil(q * n));
    int64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= std::max<int64_t>(1, rank)) return bucket_upper_ns(i);
    }
    return bucket_upper_ns(kBuckets - 1);
  };
  s.latency.avg_ms =
      static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / n / 1e6;
  s.latency.p50_ms = quantile(0.50) / 1e6;
  s.latency.p99_ms = quantile(0.99) / 1e6;
  s.latency.max_ms =
      static_cast<double>(max_ns_.load(std::memory_order_relaxed)) / 1e6;
  return s;
}

std::unique_ptr<TopKeys> PolicyMetrics::make_top() {
  return *TopKeys::create({.capacity = kTopCapacity});
}

std::vector<PolicyMetrics::Denial> PolicyMetrics::recent_denials() const {
  std::vector<Denial> out;
  int64_t lost = 0;
  denials_since(0, out, &lost);
  return out;
}

int64_t PolicyMetrics::denials_since(int64_t from, std::vector<Denial>& out,
                                     int64_t* lost) const {
  // Copied under the spin lock, strings built after it.
  std::array<Slot, kRecent> copy;
  int64_t first = 0;
  int64_t next = 0;
  {
    SpinLockHolder hold(ring_mu_);
    next = ring_next_;
    first = std::max({int64_t{0}, from, next - kRecent});
    for (int64_t i = first; i < next; ++i) {
      copy[i - first] = ring_[i % kRecent];
    }
  }
  if (lost != nullptr && first > from) *lost += first - from;
  for (int64_t i = first; i < next; ++i) {
    const Slot& s = copy[i - first];
    out.push_back({s.at_ms, std::string(s.key, s.key_len),
                   s.lane < 0 ? "" : std::string(kLanes[s.lane]), s.limit,
                   s.remaining, s.retry_after_ms});
  }
  return next;
}

std::string prometheus_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace throttlekit::server
