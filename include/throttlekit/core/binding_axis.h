// throttlekit/core/binding_axis.h
//
// Provides `Axis` and `binding_axis()`: which admission axis decided a
// combined outcome (docs/core.md, "The combine algebra"). Unified admission
// (planned, docs/architecture.md) evaluates concurrency, then rate, then
// cost; the first denial in that order binds.

#ifndef THROTTLEKIT_CORE_BINDING_AXIS_H_
#define THROTTLEKIT_CORE_BINDING_AXIS_H_

#include <optional>
#include <string_view>

#include "throttlekit/core/decision.h"

namespace throttlekit {

enum class Axis { kConcurrency, kRate, kCost };

// The stable name used in metrics and span attributes.
constexpr std::string_view axis_name(Axis axis) noexcept {
  switch (axis) {
    case Axis::kConcurrency:
      return "concurrency";
    case Axis::kRate:
      return "rate";
    case Axis::kCost:
      return "cost";
  }
  return "unknown";
}

// The per-axis decisions of one admit(); an axis that was not evaluated (a
// short-circuit after an earlier denial) is empty.
struct AxisDecisions {
  std::optional<Decision> concurrency;
  std::optional<Decision> rate;
  std::optional<Decision> cost;
};

// Returns the first denied axis in evaluation order (concurrency, rate,
// cost), or nullopt when no evaluated axis denied.
[[nodiscard]] constexpr std::optional<Axis> binding_axis(
    const AxisDecisions& d) noexcept {
  if (d.concurrency && !d.concurrency->allowed) return Axis::kConcurrency;
  if (d.rate && !d.rate->allowed) return Axis::kRate;
  if (d.cost && !d.cost->allowed) return Axis::kCost;
  return std::nullopt;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_BINDING_AXIS_H_
