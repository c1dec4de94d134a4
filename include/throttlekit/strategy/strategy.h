// throttlekit/strategy/strategy.h
//
// Provides the `Strategy` concept every rate strategy models, and
// `Forecast`. A strategy is a pure transition (docs/architecture.md, layer
// 2): no I/O, no clock reads, no locks. The arithmetic is fixed by
// docs/semantics.md so that memory, Redis and Postgres produce identical
// decisions.
//
// The contract, for a strategy `S`:
//
// - `S::Options` is a plain struct; `S::create(options)` validates it once and
//   returns `absl::StatusOr<S>` whose error names the field and its bound.
// - `S::State` default-constructs to the *cold* state (a key never seen, or
//   expired) and that construction allocates nothing, so a denied call on a
//   cold key allocates nothing.
// - `check(state, now_ms, cost)` returns the decision for a request of
//   `cost` units at `now_ms`. It writes `state` only when it allows: a denied
//   call never changes state. `cost` must already be valid (`validate_cost`).
// - `peek(state, now_ms)` is the decision for a cost-1 request without
//   consuming: `remaining` and `reset_at_ms` describe current capacity.
// - `forecast(state, now_ms, cost)` returns a `Forecast`; it writes nothing.
// - `expires_at_ms(state)`: from this instant on, the state is equivalent to
//   the cold state for every future decision (at a `now` not behind it), so
//   a store may drop it. Conservative: never earlier than exact.
// - Decision fields come from floor/ceil of doubles: use
//   `detail::floor_to_int` / `detail::ceil_to_int` (exact, and no libm call).
// - `policy_window_ms()`: the window reported in the `RateLimit-Policy`
//   header (the period, window, or time to refill fully).
// - `kName`: the strategy's stable name (metrics, Redis script names).
//
// Strategy objects are immutable after `create` and safe to share across
// threads; states are plain values guarded by whoever holds them.

#ifndef THROTTLEKIT_STRATEGY_STRATEGY_H_
#define THROTTLEKIT_STRATEGY_STRATEGY_H_

#include <cmath>
#include <concepts>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"

namespace throttlekit {

template <class S>
concept Strategy = requires(const S& s, typename S::State& state,
                            const typename S::State& cstate,
                            const typename S::Options& options, int64_t now_ms,
                            double cost) {
  typename S::Options;
  typename S::State;
  requires std::default_initializable<typename S::State>;
  { S::create(options) } -> std::same_as<absl::StatusOr<S>>;
  { s.check(state, now_ms, cost) } -> std::same_as<Decision>;
  { s.peek(cstate, now_ms) } -> std::same_as<Decision>;
  { s.forecast(cstate, now_ms, cost) } -> std::same_as<Forecast>;
  { s.expires_at_ms(cstate) } -> std::same_as<int64_t>;
  { s.policy_window_ms() } -> std::same_as<int64_t>;
  { s.options() } -> std::same_as<const typename S::Options&>;
  { S::kName } -> std::convertible_to<std::string_view>;
};

namespace detail {

// Converts a double that is already integral (a floor/ceil result, or an
// exact integer) to int64, saturating outside the int64 range and mapping
// NaN to 0 so no conversion is undefined behaviour.
THROTTLEKIT_ALWAYS_INLINE constexpr int64_t to_int(double v) noexcept {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547748e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// `std::floor(v)`, bit for bit (the sign of a zero included; a NaN is
// returned as given, where libm would quiet a signaling one), without a
// libm call: x86-64's baseline ISA has no rounding instruction, so
// std::floor is a function call on the hot path.
THROTTLEKIT_ALWAYS_INLINE constexpr double floor_d(double v) noexcept {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547748e18)) {
    return v;  // NaN, infinite, or so large it is already integral
  }
  const int64_t i = static_cast<int64_t>(v);
  const int64_t f = static_cast<double>(i) > v ? i - 1 : i;
  return f == 0 ? (v < 0 || (v == 0 && std::signbit(v)) ? -0.0 : 0.0)
                : static_cast<double>(f);
}

// `std::ceil(v)`, bit for bit, without a libm call.
THROTTLEKIT_ALWAYS_INLINE constexpr double ceil_d(double v) noexcept {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547748e18)) {
    return v;
  }
  const int64_t i = static_cast<int64_t>(v);
  const int64_t c = static_cast<double>(i) < v ? i + 1 : i;
  return c == 0 ? (std::signbit(v) ? -0.0 : 0.0) : static_cast<double>(c);
}

// `to_int(std::floor(v))`, exactly, without a libm call (x86-64's baseline
// has no rounding instruction, so std::floor is a function call on the hot
// path). Exact for every double: truncation toward zero gives the integer
// part, and a negative non-integer steps down by one.
THROTTLEKIT_ALWAYS_INLINE constexpr int64_t floor_to_int(double v) noexcept {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547748e18)) {
    return to_int(v);  // NaN or out of int64 range (already integral)
  }
  const int64_t i = static_cast<int64_t>(v);
  return static_cast<double>(i) > v ? i - 1 : i;
}

// `to_int(std::ceil(v))`, exactly, without a libm call.
THROTTLEKIT_ALWAYS_INLINE constexpr int64_t ceil_to_int(double v) noexcept {
  if (!(v > -9.2233720368547758e18 && v < 9.2233720368547748e18)) {
    return to_int(v);
  }
  const int64_t i = static_cast<int64_t>(v);
  return static_cast<double>(i) < v ? i + 1 : i;
}

}  // namespace detail
}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_STRATEGY_H_
