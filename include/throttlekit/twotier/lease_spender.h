// throttlekit/twotier/lease_spender.h
//
// Provides `LeaseSpender`: the client-side spend of a granted lease (Tier 2;
// docs/semantics.md, "Leasing and the fleet"). A node leases a batch of
// credits from the store (`Coordinator::lease`) and spends them here without
// a round trip and without a lock:
//
//     window-coupled and now >= expires_at  -> needs refresh (the credits
//                                              of a rolled window are dead)
//     credits >= cost -> credits -= cost; {allowed, limit,
//                        remaining = floor(credits), reset_at = expires_at, 0}
//     otherwise       -> needs refresh
//
// A spender never invents a denial: only the store denies (the caller then
// leases and spends with `refill_and_spend`, returning the store's decision
// when the grant falls short).
//
// Design: the credits are one atomic word (a double's bits) updated by one
// compare-and-swap; the window's end is a second atomic word. A refill for a
// new window first zeroes the credits (the rolled window's leftover is
// forfeited), then publishes the new end (release), then adds the grant, so
// a spender that sees the new end can never spend the old window's credits.
// A spender that read the old end may take a credit of the new window; the
// CAS happens after the refill, which the store granted in the new window,
// so the admission belongs to the new window in real time.
//
// Thread-safety: `spend`, `credits`, `expires_at_ms` and `drain` are safe
// from any number of threads concurrently. `refill` is safe concurrently
// with them but calls to `refill` must not overlap each other (the engine
// has at most one lease in flight per key and node, and refills from it).

#ifndef THROTTLEKIT_TWOTIER_LEASE_SPENDER_H_
#define THROTTLEKIT_TWOTIER_LEASE_SPENDER_H_

#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>

#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class LeaseSpender {
 public:
  // `limit` is the limit decisions report (the leased budget's);
  // `window_coupled` makes credits die at their window's end.
  explicit LeaseSpender(int64_t limit, bool window_coupled = true) noexcept
      : limit_(limit), window_coupled_(window_coupled) {}

  LeaseSpender(const LeaseSpender&) = delete;
  LeaseSpender& operator=(const LeaseSpender&) = delete;

  // The spend rule on plain values (the one `spend` applies atomically, and
  // the leased limiter under its table lock): spends `cost` at `now_ms`
  // from `credits` of the window ending at `expires_at_ms` and returns
  // true, or returns false (leaving `credits` as it was) when the caller
  // must refresh.
  THROTTLEKIT_ALWAYS_INLINE static bool spend_rule(double& credits,
                                                   int64_t expires_at_ms,
                                                   bool window_coupled,
                                                   int64_t now_ms,
                                                   double cost) noexcept {
    if ((window_coupled && now_ms >= expires_at_ms) || !(credits >= cost)) {
      return false;
    }
    credits -= cost;
    return true;
  }

  // The refill rule on plain values: the credits after adding `grant` to
  // `credits` of the window ending at `expires_at_ms`. A window-coupled
  // grant for another window forfeits the old window's leftover.
  static double refill_rule(double credits, int64_t expires_at_ms,
                            bool window_coupled,
                            const LeaseGrant& grant) noexcept {
    const bool forfeit = window_coupled && grant.expires_at_ms != expires_at_ms;
    return (forfeit ? 0.0 : credits) + static_cast<double>(grant.granted);
  }

  // Spends `cost` (valid: finite, > 0) at `now_ms`: the allowed decision,
  // or nullopt when the caller must refresh (lease). Lock-free; allocates
  // nothing. Thread-safe.
  THROTTLEKIT_ALWAYS_INLINE std::optional<Decision> spend(
      int64_t now_ms, double cost) noexcept {
    const int64_t expires = expires_.load(std::memory_order_acquire);
    uint64_t seen = credits_.load(std::memory_order_relaxed);
    for (;;) {
      double left = std::bit_cast<double>(seen);
      if (!spend_rule(left, expires, window_coupled_, now_ms, cost)) {
        return std::nullopt;
      }
      if (credits_.compare_exchange_weak(seen, std::bit_cast<uint64_t>(left),
                                         std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
        return Decision{true, limit_, whole(left), expires, 0};
      }
    }
  }

  // Adds a grant (`refill_rule`). For a window other than the current one
  // (window-coupled) the leftover of the old window is forfeited first,
  // before the new end is published. Calls must not overlap each other;
  // safe concurrently with every other method.
  void refill(const LeaseGrant& grant) noexcept {
    publish_window(grant);
    add(static_cast<double>(grant.granted));
  }

  // `refill`, then a spend of `cost` at `now_ms` for the caller that leased
  // the grant, in one compare-and-swap: concurrent spenders cannot take the
  // grant between the deposit and this spend (with `refill` then `spend`
  // they can, leaving the caller with nothing while the window still had
  // credits). The allowed decision, or nullopt when the credits after the
  // deposit fall short of `cost` (the grant is still added). Same overlap
  // rule as `refill`.
  std::optional<Decision> refill_and_spend(const LeaseGrant& grant,
                                           int64_t now_ms,
                                           double cost) noexcept {
    publish_window(grant);
    uint64_t seen = credits_.load(std::memory_order_relaxed);
    for (;;) {
      double left =
          std::bit_cast<double>(seen) + static_cast<double>(grant.granted);
      const bool spent =
          spend_rule(left, grant.expires_at_ms, window_coupled_, now_ms, cost);
      if (credits_.compare_exchange_weak(seen, std::bit_cast<uint64_t>(left),
                                         std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
        if (!spent) return std::nullopt;
        return Decision{true, limit_, whole(left), grant.expires_at_ms, 0};
      }
    }
  }

  // Takes every credit left (for a give-back): the amount taken. Window-
  // coupled credits of a window that has ended at `now_ms` are dead and
  // count as 0 (they are still removed). Thread-safe.
  double drain(int64_t now_ms) noexcept {
    const int64_t expires = expires_.load(std::memory_order_acquire);
    const double left = std::bit_cast<double>(credits_.exchange(
        std::bit_cast<uint64_t>(0.0), std::memory_order_acq_rel));
    return window_coupled_ && now_ms >= expires ? 0.0 : left;
  }

  // The credits held now (dead ones included). Thread-safe.
  double credits() const noexcept {
    return std::bit_cast<double>(credits_.load(std::memory_order_acquire));
  }
  // The end of the window the credits belong to (INT64_MIN before any
  // refill). Thread-safe.
  int64_t expires_at_ms() const noexcept {
    return expires_.load(std::memory_order_acquire);
  }
  int64_t limit() const noexcept { return limit_; }
  bool window_coupled() const noexcept { return window_coupled_; }

 private:
  // floor(left) for the credits a spend leaves (left >= 0: credits >= cost
  // makes credits - cost >= 0 in IEEE arithmetic): below 2^63 the
  // truncation is the floor, one conversion where `floor_to_int` takes
  // three and a compare on the path every spend waits for.
  THROTTLEKIT_ALWAYS_INLINE static int64_t whole(double left) noexcept {
    if (left < 0x1p63) [[likely]] {
      return static_cast<int64_t>(left);
    }
    return detail::floor_to_int(left);
  }

  void add(double amount) noexcept {
    uint64_t seen = credits_.load(std::memory_order_relaxed);
    while (!credits_.compare_exchange_weak(
        seen, std::bit_cast<uint64_t>(std::bit_cast<double>(seen) + amount),
        std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
  }

  // For a window other than the current one: forfeits a window-coupled
  // leftover, then publishes the new end (release).
  void publish_window(const LeaseGrant& grant) noexcept {
    if (grant.expires_at_ms == expires_.load(std::memory_order_relaxed)) {
      return;
    }
    if (window_coupled_) {
      credits_.store(std::bit_cast<uint64_t>(0.0), std::memory_order_relaxed);
    }
    expires_.store(grant.expires_at_ms, std::memory_order_release);
  }

  const int64_t limit_;
  const bool window_coupled_;
  alignas(64) std::atomic<uint64_t> credits_{std::bit_cast<uint64_t>(0.0)};
  std::atomic<int64_t> expires_{std::numeric_limits<int64_t>::min()};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_LEASE_SPENDER_H_
