// throttlekit/coordinator/lease.h
//
// Provides the lease vocabulary of the `Coordinator` (docs/architecture.md,
// "The Coordinator", leases): `LeaseBudget`, the fixed-window budget a key
// leases from, and `LeaseGrant`, what one lease call returns.
//
// A lease takes up to `want` credits from the key's *current* window of a
// fixed-window budget (`limit` credits per `window_ms`, epoch-aligned windows
// `[start, start + window_ms)` read on the store's own clock). The grant
// carries the window's boundary, `expires_at_ms = start + window_ms`, so a
// window-coupled client discards the credits at `now >= expires_at_ms`
// (docs/semantics.md, "Leasing and the fleet"). Credits given back return
// only to the window they came from; leftover from a rolled window is
// forfeited.
//
// On Redis a lease key has the fixed-window layout (hash `s`, `c`), so strict
// fixed-window checks and leases can share one key.

#ifndef THROTTLEKIT_COORDINATOR_LEASE_H_
#define THROTTLEKIT_COORDINATOR_LEASE_H_

#include <cstdint>
#include <ostream>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

// A fixed-window budget that leases draw from. Immutable after `create`.
class LeaseBudget {
 public:
  struct Options {
    // Credits per window; 1 .. 2^53-1.
    int64_t limit = 0;
    // The window in ms; 1 .. 2^53-1.
    int64_t window_ms = 0;
  };

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<LeaseBudget> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "lease_budget",
            {{"limit", options.limit}, {"window_ms", options.window_ms}});
        !s.ok()) {
      return s;
    }
    return LeaseBudget(options);
  }

  int64_t limit() const noexcept { return options_.limit; }
  int64_t window_ms() const noexcept { return options_.window_ms; }
  const Options& options() const noexcept { return options_; }

  // floor(now / window_ms) * window_ms, with floor division (exact for every
  // int64 `now`).
  int64_t window_start(int64_t now_ms) const noexcept {
    const int64_t w = options_.window_ms;
    int64_t q = now_ms / w;
    if (now_ms % w != 0 && now_ms < 0) --q;
    return q * w;
  }

 private:
  explicit LeaseBudget(const Options& o) : options_(o) {}
  Options options_;
};

// The result of one lease call.
struct LeaseGrant {
  // Credits granted, 0 .. want (0 when the window is spent).
  int64_t granted = 0;
  // Credits the window still holds after this grant.
  int64_t window_remaining = 0;
  // The granting window's start and end (epoch ms, store clock). The credits
  // belong to `[window_start_ms, expires_at_ms)`.
  int64_t window_start_ms = 0;
  int64_t expires_at_ms = 0;
  // The store's clock when it granted.
  int64_t now_ms = 0;

  friend bool operator==(const LeaseGrant&, const LeaseGrant&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const LeaseGrant& g) {
  return os << "{granted=" << g.granted
            << " window_remaining=" << g.window_remaining
            << " window_start_ms=" << g.window_start_ms
            << " expires_at_ms=" << g.expires_at_ms << " now_ms=" << g.now_ms
            << "}";
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_LEASE_H_
