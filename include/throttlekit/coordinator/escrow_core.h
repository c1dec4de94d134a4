// throttlekit/coordinator/escrow_core.h
//
// Provides the regional escrow's steps (federation's second level, L2:
// docs/federation.md) as pure functions over one key's escrow state, so the
// memory coordinator runs them under a shard lock and the Redis script
// (escrow.lua) is held equal to them by a conformance test.
//
// A region's processes share one balance per key of credits their
// federated limiters leased from the global coordinator for one window
// (`[window_start_ms, expires_at_ms)`, the coordinator's window), so a
// process that runs dry takes from its region before it crosses to the
// global coordinator. Layout of the original: Redis hash
// `tk:l2:<region>:<key>` with `balance`, `expiresAt`, `source` (the
// granting window's start).
//
// take(want, now): min(want, balance) of a live balance (now < expires_at);
//   0 for a missing or dead one.
// refill(granted, window_start, expires_at, now): a grant for a window
//   already over (now >= expires_at) or older than the live balance's is
//   dropped; a grant for a newer window replaces the balance (the old
//   window's credits died with it); a grant for the same window adds.
//   Returns the balance after.
// release(window_start, now): takes the whole balance of that window and
//   clears the state (the first releaser wins: the next gets 0); 0 for any
//   other window or a dead balance.
//
// Thread-safety: pure functions; the caller makes one step atomic.

#ifndef THROTTLEKIT_COORDINATOR_ESCROW_CORE_H_
#define THROTTLEKIT_COORDINATOR_ESCROW_CORE_H_

#include <algorithm>
#include <cstdint>

#include "throttlekit/coordinator/lease.h"

namespace throttlekit {

// One key's regional balance. `expires_at_ms == 0`: none.
struct EscrowState {
  int64_t balance = 0;
  int64_t window_start_ms = 0;
  int64_t expires_at_ms = 0;

  friend bool operator==(const EscrowState&, const EscrowState&) = default;
};

// Credits taken from an escrow, with the window they belong to.
inline LeaseGrant escrow_take(EscrowState& s, int64_t want, int64_t now_ms) {
  if (s.expires_at_ms == 0 || now_ms >= s.expires_at_ms) {
    return LeaseGrant{0, 0, s.window_start_ms, s.expires_at_ms, now_ms};
  }
  const int64_t granted = std::min(want, s.balance);
  s.balance -= granted;
  return LeaseGrant{granted, s.balance, s.window_start_ms, s.expires_at_ms,
                    now_ms};
}

// Returns the balance after the refill (0 when the grant was dropped and
// nothing live is held).
inline int64_t escrow_refill(EscrowState& s, int64_t granted,
                             int64_t window_start_ms, int64_t expires_at_ms,
                             int64_t now_ms) {
  const bool live = s.expires_at_ms != 0 && now_ms < s.expires_at_ms;
  if (now_ms >= expires_at_ms || (live && expires_at_ms < s.expires_at_ms)) {
    return live ? s.balance : 0;
  }
  if (s.expires_at_ms != expires_at_ms ||
      s.window_start_ms != window_start_ms) {
    s = EscrowState{granted, window_start_ms, expires_at_ms};
  } else {
    s.balance += granted;
  }
  return s.balance;
}

// Returns the credits released (the state is then cold).
inline int64_t escrow_release(EscrowState& s, int64_t window_start_ms,
                              int64_t now_ms) {
  if (s.expires_at_ms == 0 || now_ms >= s.expires_at_ms ||
      s.window_start_ms != window_start_ms) {
    return 0;
  }
  const int64_t out = s.balance;
  s = EscrowState{};
  return out;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_ESCROW_CORE_H_
