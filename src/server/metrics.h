// src/server/metrics.h
//
// Provides `PolicyMetrics`: what one policy decided, fed as a
// `DecisionObserver` (include/throttlekit/observe/decision_observer.h) by
// the library's `UnifiedAdmission` and by the server's RPC handlers, and
// read by the Prometheus exposition (`prometheus_text`) and
// Monitor.GetSnapshot (docs/server.md, "Metrics").
//
// The decision path costs a few relaxed atomic increments and one short
// critical section, allocating nothing (keys up to 64 bytes): latencies go
// into a log-linear histogram (8 buckets per power of two of nanoseconds,
// so a quantile is within 1/8 of an octave, about 9%); every key goes into
// a Space-Saving sketch of the heaviest keys requested, and a denied one
// into another of the heaviest denied (observe/top_keys.h: a mutex held
// for a scan of kTopCapacity hashes). A denial is also copied into a small
// ring of recent denials (a spin lock held for one fixed-size copy; keys
// longer than 120 bytes are cut), which Monitor.Watch follows by sequence
// number; then the policies' `DenialSignal` (denial_signal.h) is told, one
// relaxed load while nobody watches.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_METRICS_H_
#define THROTTLEKIT_SRC_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "denial_signal.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/observe/top_keys.h"

namespace throttlekit::server {

class PolicyMetrics final : public DecisionObserver {
 public:
  // `signal` is told of every denial once it is in the ring (null: nobody
  // can watch these metrics).
  PolicyMetrics() = default;
  explicit PolicyMetrics(std::shared_ptr<DenialSignal> signal)
      : signal_(std::move(signal)) {}

  // Lanes of `denies_by_axis`, in this order.
  static constexpr std::array<std::string_view, 4> kLanes = {
      "rate", "concurrency", "cost", "policy"};

  void on_decision(const DecisionEvent& e) override;

  struct Latency {
    double avg_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
    int64_t n = 0;
  };
  struct Snapshot {
    int64_t allowed = 0;
    int64_t denied = 0;
    std::array<int64_t, 4> denied_by_lane = {};
    int64_t limit = 0;  // the ceiling last observed; 0 before any
    Latency latency;
  };
  Snapshot snapshot() const;

  struct Denial {
    int64_t at_ms = 0;
    std::string key;
    std::string axis;  // the lane, empty for a limiter's denial
    int64_t limit = 0, remaining = 0, retry_after_ms = 0;
  };
  // The most recent denials (at most kRecent), oldest first.
  std::vector<Denial> recent_denials() const;
  static constexpr int kRecent = 32;

  // Denials are numbered from 0 in the order they were recorded.
  // Appends to `out` the denials numbered `from` and later that the ring
  // still holds (the kRecent most recent), oldest first, and adds to
  // `*lost` how many of those numbers were already overwritten. Returns the
  // number the next denial will get (pass it as the next `from`).
  int64_t denials_since(int64_t from, std::vector<Denial>& out,
                        int64_t* lost) const;

  // The heaviest keys requested and denied (Space-Saving over
  // kTopCapacity keys: `count` is an upper bound, `count - error` a lower
  // bound on a key's true number), at most `n`, heaviest first.
  std::vector<KeyCount> top_requested(size_t n) const {
    return requested_->top(n);
  }
  std::vector<KeyCount> top_denied(size_t n) const {
    return denied_keys_->top(n);
  }
  static constexpr int64_t kTopCapacity = 64;

 private:
  static constexpr int kSubBuckets = 8;
  static constexpr int kBuckets = 64 * kSubBuckets;
  static int bucket(int64_t ns);
  static double bucket_upper_ns(int index);

  std::atomic<int64_t> allowed_{0};
  std::atomic<int64_t> denied_{0};
  std::array<std::atomic<int64_t>, 4> lanes_{};
  std::atomic<int64_t> limit_{0};
  std::atomic<int64_t> sum_ns_{0};
  std::atomic<int64_t> max_ns_{0};
  std::array<std::atomic<int64_t>, kBuckets> buckets_{};

  struct Slot {
    int64_t at_ms = 0;
    char key[120] = {};
    uint8_t key_len = 0;
    int8_t lane = -1;
    int64_t limit = 0, remaining = 0, retry_after_ms = 0;
  };
  static std::unique_ptr<TopKeys> make_top();
  const std::unique_ptr<TopKeys> requested_ = make_top();
  const std::unique_ptr<TopKeys> denied_keys_ = make_top();

  const std::shared_ptr<DenialSignal> signal_;

  mutable SpinLock ring_mu_;
  std::array<Slot, kRecent> ring_ ABSL_GUARDED_BY(ring_mu_);
  int64_t ring_next_ ABSL_GUARDED_BY(ring_mu_) = 0;
};

// Escapes a Prometheus label value (backslash, quote, newline).
std::string prometheus_label(std::string_view value);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_METRICS_H_
