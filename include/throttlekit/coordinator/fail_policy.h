// throttlekit/coordinator/fail_policy.h
//
// Provides `FailPolicy`: what a limiter over a remote store does when the
// store cannot answer (kUnavailable, kDeadlineExceeded). The caller chooses;
// the default passes the status through and decides nothing on its behalf.

#ifndef THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
#define THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

enum class FailPolicy {
  // Return the store's status to the caller (the default).
  kPropagate,
  // Admit while the store is out: availability over the limit.
  kOpen,
  // Deny while the store is out: the limit over availability.
  kClosed,
};

// True for the statuses a fail policy turns into a decision: the store is
// unreachable or too slow. Argument and precondition errors are never
// turned into decisions.
inline bool is_outage(const absl::Status& s) noexcept {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// The decision an outage becomes under kOpen (allowed) or kClosed (denied
// for `closed_retry_ms`), reported at `now_ms` with the limiter's `limit`
// and `remaining` 0. Not for kPropagate (there is no decision to make).
inline Decision outage_decision(FailPolicy policy, int64_t limit,
                                int64_t now_ms,
                                int64_t closed_retry_ms) noexcept {
  if (policy == FailPolicy::kOpen) return Decision{true, limit, 0, now_ms, 0};
  return Decision{false, limit, 0, now_ms + closed_retry_ms, closed_retry_ms};
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
