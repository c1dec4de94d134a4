// throttlekit/core/decision.h
//
// Provides `Decision`, the value every admission path returns, `Forecast`
// (what a key can do, without consuming), and the decision
// combine algebra (docs/semantics.md, "Decision"; docs/core.md, "The
// combine algebra"). All fields are integers so that the in-memory, Redis (Lua)
// and Postgres paths can agree bit for bit.

#ifndef THROTTLEKIT_CORE_DECISION_H_
#define THROTTLEKIT_CORE_DECISION_H_

#include <algorithm>
#include <cstdint>
#include <ostream>

namespace throttlekit {

// 2^53 - 1: the largest integer a double (and a Lua number) holds exactly.
inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;

// The outcome of one admission check.
//
// - `allowed`: the request may proceed.
// - `limit`: the ceiling the strategy reports (its burst, capacity or limit).
// - `remaining`: whole units left after this call; never negative.
// - `reset_at_ms`: epoch ms at which the key is fully replenished.
// - `retry_after_ms`: 0 when allowed, otherwise ms until a retry can pass.
struct [[nodiscard]] Decision {
  bool allowed = false;
  int64_t limit = 0;
  int64_t remaining = 0;
  int64_t reset_at_ms = 0;
  int64_t retry_after_ms = 0;

  friend constexpr bool operator==(const Decision&, const Decision&) = default;
};

// The identity of `combine`: allowed, with every bound at 2^53 - 1 (not
// infinity, so it stays an exact integer in Lua).
inline constexpr Decision kAllowFull{true, kMaxSafeInteger, kMaxSafeInteger, 0,
                                     0};

// Combines two axis decisions into one: allowed is the AND, limit and
// remaining the minimum, reset_at and retry_after the maximum (never
// under-state the wait). Identity `kAllowFull`; associative, commutative and
// idempotent (tests/core/decision_property_test.cc).
[[nodiscard]] constexpr Decision combine(const Decision& a,
                                         const Decision& b) noexcept {
  return Decision{a.allowed && b.allowed, std::min(a.limit, b.limit),
                  std::min(a.remaining, b.remaining),
                  std::max(a.reset_at_ms, b.reset_at_ms),
                  std::max(a.retry_after_ms, b.retry_after_ms)};
}

inline std::ostream& operator<<(std::ostream& os, const Decision& d) {
  return os << "{allowed=" << d.allowed << " limit=" << d.limit
            << " remaining=" << d.remaining << " reset_at_ms=" << d.reset_at_ms
            << " retry_after_ms=" << d.retry_after_ms << "}";
}

// What a key can do, without consuming anything.
struct Forecast {
  // Whole units that could be admitted right now.
  int64_t spendable_now = 0;
  // The earliest epoch ms at which a request of the asked `cost` would be
  // admitted (equal to `now` when it would be admitted now). For a cost that
  // can never pass (above the ceiling) this is the strategy's finite retry
  // hint, as in its decisions.
  int64_t next_replenish_at_ms = 0;
  // The epoch ms at which the key is fully replenished.
  int64_t full_at_ms = 0;

  friend constexpr bool operator==(const Forecast&, const Forecast&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Forecast& f) {
  return os << "{spendable_now=" << f.spendable_now
            << " next_replenish_at_ms=" << f.next_replenish_at_ms
            << " full_at_ms=" << f.full_at_ms << "}";
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_DECISION_H_
