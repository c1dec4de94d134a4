// throttlekit/twotier/internal/lease_entry.h
//
// Provides `detail::LeaseEntry`, a key's lease coordination inside a
// `LeasedLimiter` (twotier/leased_limiter.h): the one lease in flight per
// key on a node and the requests waiting for it (`detail::LeaseWaiter`),
// the key's sizer and the accounting of its current window. The key's
// credits live in the limiter's credit table, not here.
//
// Thread-safety: every field but `spent` is guarded by `lease_mu` (clang's
// thread-safety analysis checks each access); `spent` is atomics.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_LEASE_ENTRY_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_LEASE_ENTRY_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/twotier/internal/spent_mark.h"
#include "throttlekit/twotier/lease_sizer.h"
#include "throttlekit/twotier/leased_limiter_options.h"
#include "throttlekit/twotier/predictive_lease_sizer.h"

namespace throttlekit::detail {

// A request waiting for its key's lease in flight.
struct LeaseWaiter {
  int64_t now_ms;
  double cost;
  DecisionCompletion done;
};

// A key's lease coordination (its credits live in the limiter's table): the
// lease in flight and its waiters, and the sizer. Every field but `spent`
// is guarded by `lease_mu`.
struct LeaseEntry {
  // The sizer `options` asks for (none for kFixed).
  explicit LeaseEntry(const LeasedLimiterOptions& options) {
    if (options.sizing == LeaseSizing::kEoq) {
      eoq.emplace(*LeaseSizer::create(options.sizer));
    } else if (options.sizing == LeaseSizing::kPredictive) {
      predictive.emplace(*PredictiveLeaseSizer::create(options.sizer));
      predictive_batch = options.batch;
    }
  }

  int64_t next_batch(int64_t fixed) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease_mu) {
    if (eoq) return eoq->batch();
    if (predictive) return predictive_batch;
    return fixed;
  }

  // Feeds the window accounting with a grant deposited on top of
  // `held_before` credits: when the grant opens a new window, the sizer
  // learns what the previous one served (granted in it less what was left,
  // forfeited or carried) and a predictive sizer its next batch.
  void account_grant(const LeaseGrant& grant, double held_before,
                     const LeasedLimiterOptions& options, std::string_view key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease_mu) {
    if (grant.expires_at_ms != window_end_ms) {
      if (window_end_ms != std::numeric_limits<int64_t>::min()) {
        const double served =
            std::max(0.0, static_cast<double>(window_granted) - held_before);
        if (eoq) eoq->observe(served);
        if (predictive) predictive->observe(served);
      }
      if (predictive) {
        predictive_batch = predictive->batch(
            options.demand_forecast(key, grant.window_start_ms));
      }
      window_end_ms = grant.expires_at_ms;
      window_granted = 0;
    }
    window_granted += grant.granted;
  }

  Mutex lease_mu;
  // A lease of this key is in flight (at most one per key on this node);
  // its grant serves `waiters`, in order.
  bool in_flight ABSL_GUARDED_BY(lease_mu) = false;
  std::vector<LeaseWaiter> waiters ABSL_GUARDED_BY(lease_mu);
  // The window being accounted for the sizer: its end and the credits
  // granted in it.
  int64_t window_end_ms ABSL_GUARDED_BY(lease_mu) =
      std::numeric_limits<int64_t>::min();
  int64_t window_granted ABSL_GUARDED_BY(lease_mu) = 0;
  std::optional<LeaseSizer> eoq ABSL_GUARDED_BY(lease_mu);
  std::optional<PredictiveLeaseSizer> predictive ABSL_GUARDED_BY(lease_mu);
  int64_t predictive_batch ABSL_GUARDED_BY(lease_mu) = 0;
  // Dropped from the map (idle or evicted): a caller holding it starts
  // over on the key's current entry.
  bool retired ABSL_GUARDED_BY(lease_mu) = false;
  // The store said the key's window is spent: gated without the lease
  // lock (atomics); marked and cleared under it. Lost with the entry
  // (eviction, idle return): the next shortfall then just asks.
  detail::SpentMark spent;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_LEASE_ENTRY_H_
