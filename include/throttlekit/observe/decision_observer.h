// throttlekit/observe/decision_observer.h
//
// Provides `DecisionObserver`, the tap every decision can be reported to
// (docs/admission.md, "Observability"): `UnifiedAdmission::admit` reports
// each admission, and `Observed<E>` (observe/observed_engine.h) reports each
// `check` of any rate engine. With no observer set the cost is one null
// test; with one, one virtual call per decision and two monotonic clock
// reads (the duration); nothing is allocated either way.
//
// An observer that throws is swallowed (`notify`): observation never
// changes a decision, never leaks a slot and never reaches the caller.
//
// Thread-safety: `on_decision` is called concurrently from every thread
// that decides; implementations must be thread-safe.

#ifndef THROTTLEKIT_OBSERVE_DECISION_OBSERVER_H_
#define THROTTLEKIT_OBSERVE_DECISION_OBSERVER_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/observe/names.h"

namespace throttlekit {

enum class DecisionKind { kCheck, kAdmit };

// One decision as observed. Views are valid only during the call.
struct DecisionEvent {
  DecisionKind kind = DecisionKind::kCheck;
  std::string_view engine;  // e.g. "rate_limiter", "unified_admission"
  std::string_view key;
  double cost = 1;
  Decision decision;
  // Admissions only: the first denying axis, and whether the bid-price
  // policy denied (then no axis is binding).
  std::optional<Axis> binding_axis;
  bool policy_denied = false;
  int64_t duration_ns = 0;  // from the call's entry to its decision
};

// The `denies_by_axis` lane of a denial ("rate", "concurrency", "cost",
// "policy"); nullopt for an admission. The one function behind the
// metric lane, the span's binding-axis attribute and the result's binding
// axis, so they never disagree.
constexpr std::optional<std::string_view> deny_lane(
    bool allowed, std::optional<Axis> binding_axis,
    bool policy_denied) noexcept {
  if (allowed) return std::nullopt;
  if (policy_denied) return names::kLanePolicy;
  if (binding_axis) return axis_name(*binding_axis);
  return std::nullopt;
}

// The span attribute `throttlekit.binding_axis`: set on a denial by an
// axis, absent otherwise (an admission or a policy denial).
constexpr std::optional<std::string_view> binding_axis_attribute(
    bool allowed, std::optional<Axis> binding_axis,
    bool policy_denied) noexcept {
  const std::optional<std::string_view> lane =
      deny_lane(allowed, binding_axis, policy_denied);
  if (!lane || *lane == names::kLanePolicy) return std::nullopt;
  return lane;
}

class DecisionObserver {
 public:
  virtual ~DecisionObserver() = default;
  // Called once per decision, after it is made. May throw (swallowed).
  virtual void on_decision(const DecisionEvent& event) = 0;
};

// Reports `event` to `observer` (if any), swallowing whatever it throws.
inline void notify(DecisionObserver* observer,
                   const DecisionEvent& event) noexcept {
  if (observer == nullptr) return;
  try {
    observer->on_decision(event);
  } catch (...) {
    // Observation must never change a decision or leak a slot.
  }
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_OBSERVE_DECISION_OBSERVER_H_
