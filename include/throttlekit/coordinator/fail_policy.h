// throttlekit/coordinator/fail_policy.h
//
// Provides `FailPolicy`: what a limiter over a remote store does when the
// store cannot answer (kUnavailable, kDeadlineExceeded). The caller chooses;
// the default passes the status through and decides nothing on its behalf.

#ifndef THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
#define THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_

#include <cstdint>

#include "absl/status/status.h"

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

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
