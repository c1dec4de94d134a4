// throttlekit/coordinator/federation_core.h
//
// Provides the coordinator's half of federation (docs/federation.md): the
// windowed-lease and reconcile steps over one key's federation state, as
// pure functions. The memory coordinator runs them under a shard lock; the
// Redis script (fed_lease.lua, fed_reconcile.lua) and the Postgres
// functions (federation.sql) transcribe them, and a conformance test holds
// all three equal step for step.
//
// The state of a key is its current window's remaining `budget` and the
// window's end `expires_at_ms` (the layout of the original: Redis hash
// `budget`, `expiresAt`, and one `rec_<window start>[:<token>]` marker per
// reconcile), so a federated fleet written in another language can share
// the keyspace.
//
// lease_windowed(want, now):
//   ws = floor(now / window) * window, end = ws + window; if the stored
//   window ends later (the store clock stepped back), the stored window is
//   the current one (never a second budget for an instant already spent);
//   a missing state or another stored end starts the window at `limit`,
//   dropping the markers; granted = min(want, budget); budget -= granted.
//   Written only when granted > 0. The grant carries the window's start and
//   end: credits belong to [ws, end) and die at `end` (window-coupled).
// reconcile(window_start, leftover, token, now):
//   0 unless `window_start` is the current window's start and the state
//   holds that window (leftover of any other window is forfeited); 0 if
//   the (window, token) pair was reconciled before (so a retry is applied
//   once); else budget = min(limit, budget + leftover), the marker set, and
//   the credits restored returned.
//
// Thread-safety: pure functions; the caller makes one step atomic.

#ifndef THROTTLEKIT_COORDINATOR_FEDERATION_CORE_H_
#define THROTTLEKIT_COORDINATOR_FEDERATION_CORE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "throttlekit/coordinator/lease.h"

namespace throttlekit {

// One key's federation state. `expires_at_ms == 0`: a cold key.
struct FederationState {
  int64_t budget = 0;
  int64_t expires_at_ms = 0;
  // The tokens reconciled in this window ("" for an untokened reconcile).
  std::vector<std::string> reconciled;

  friend bool operator==(const FederationState&,
                         const FederationState&) = default;
};

// The current window's start at `now`, given the stored state.
inline int64_t federation_window_start(const FederationState& s,
                                       const LeaseBudget& budget,
                                       int64_t now_ms) noexcept {
  const int64_t ws = budget.window_start(now_ms);
  const int64_t stored = s.expires_at_ms - budget.window_ms();
  return s.expires_at_ms != 0 && stored > ws ? stored : ws;
}

// One lease_windowed step; `want` in [1, 2^53-1]. Returns the grant and
// updates `s` (changed only when the grant is positive).
inline LeaseGrant federation_lease(FederationState& s,
                                   const LeaseBudget& budget, int64_t want,
                                   int64_t now_ms) {
  const int64_t ws = federation_window_start(s, budget, now_ms);
  const int64_t end = ws + budget.window_ms();
  int64_t left = s.expires_at_ms == end ? s.budget : budget.limit();
  const int64_t granted = std::min(want, left);
  left -= granted;
  if (granted > 0) {
    if (s.expires_at_ms != end) s.reconciled.clear();
    s.budget = left;
    s.expires_at_ms = end;
  }
  return LeaseGrant{granted, left, ws, end, now_ms};
}

// One reconcile step; `leftover` in [0, 2^53-1]. Returns the credits
// restored and updates `s` (changed only when the reconcile applies).
inline int64_t federation_reconcile(FederationState& s,
                                    const LeaseBudget& budget,
                                    int64_t window_start_ms, int64_t leftover,
                                    std::string_view token, int64_t now_ms) {
  const int64_t ws = federation_window_start(s, budget, now_ms);
  if (window_start_ms != ws || s.expires_at_ms != ws + budget.window_ms()) {
    return 0;
  }
  for (const std::string& t : s.reconciled) {
    if (t == token) return 0;
  }
  s.reconciled.emplace_back(token);
  const int64_t before = s.budget;
  s.budget = std::min(budget.limit(), before + leftover);
  return s.budget - before;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_FEDERATION_CORE_H_
