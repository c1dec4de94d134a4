// throttlekit/admission/admission.h
//
// Provides `Admission` (`BasicAdmission<NC>` for another slot clock): what
// one `UnifiedAdmission::admit` returns (admission/unified_admission.h,
// docs/admission.md): the combined decision, each evaluated axis's
// decision, the binding axis, and when admitted with a concurrency axis
// the slot, released exactly once. An `admit_reserved` admission also
// streams usage into its cost axis (`debit`).
//
// Thread-safety: used by one thread at a time (like a unique_ptr); the
// engines it refers to are shared and must outlive it.

#ifndef THROTTLEKIT_ADMISSION_ADMISSION_H_
#define THROTTLEKIT_ADMISSION_ADMISSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/observe/decision_observer.h"

namespace throttlekit {

template <class Rate, class Cost, EpochClock C, NanoClock NC>
class BasicUnifiedAdmission;

// The outcome of one `admit`: the combined decision, each evaluated axis's
// decision, the binding axis, and (when admitted with a concurrency axis)
// the slot. Move-only; the slot is released exactly once, by `release` or
// on destruction (as kIgnored).
template <NanoClock NC>
class [[nodiscard]] BasicAdmission {
 public:
  using Permit = typename BasicAdaptiveConcurrency<NC>::Permit;

  // User-provided (not `= default`), so that value-initialization (as
  // StatusOr's in-place construction does) does not zero the whole object
  // first: the axes stay uninitialized until evaluated.
  BasicAdmission() noexcept {}
  BasicAdmission(BasicAdmission&&) noexcept = default;
  BasicAdmission& operator=(BasicAdmission&&) noexcept = default;
  BasicAdmission(const BasicAdmission&) = delete;
  BasicAdmission& operator=(const BasicAdmission&) = delete;
  ~BasicAdmission() = default;  // the permit releases itself (kIgnored)

  // True iff every evaluated axis (and the policy) admitted.
  bool allowed() const noexcept { return decision_.allowed; }
  explicit operator bool() const noexcept { return decision_.allowed; }

  // The combined decision (`combine` over the evaluated axes).
  const Decision& decision() const noexcept { return decision_; }

  // The first denying axis in evaluation order; nullopt on an admission
  // and on a policy denial.
  std::optional<Axis> binding_axis() const noexcept {
    return binding_ < 0 ? std::nullopt
                        : std::optional<Axis>(static_cast<Axis>(binding_));
  }

  // True iff the bid-price policy denied (no axis was asked).
  bool policy_denied() const noexcept { return policy_denied_; }

  // The decision of one axis; nullopt if it was absent or not evaluated
  // (a short-circuit after an earlier denial).
  std::optional<Decision> axis(Axis a) const noexcept {
    const int i = static_cast<int>(a);
    return (evaluated_ >> i & 1) ? std::optional<Decision>(axes_[i].d)
                                 : std::nullopt;
  }
  AxisDecisions axes() const noexcept {
    return AxisDecisions{axis(Axis::kConcurrency), axis(Axis::kRate),
                         axis(Axis::kCost)};
  }

  // The `denies_by_axis` lane of a denial ("rate", "concurrency", "cost",
  // "policy"); nullopt when admitted (observe/decision_observer.h).
  std::optional<std::string_view> deny_lane() const noexcept {
    return throttlekit::deny_lane(allowed(), binding_axis(), policy_denied_);
  }

  // True iff this admission still holds a concurrency slot.
  bool holds_slot() const noexcept { return static_cast<bool>(permit_); }

  // Streams actual usage into the cost axis's meter, for an admission made
  // by `admit_reserved` (kFailedPrecondition otherwise, and after a
  // denial): `units` are debited by the cost engine's `check(key, units)`
  // on its own clock. A denied debit is the meter saying the window's
  // budget is spent: stop the stream (later debits are refused the same
  // way). Returns the meter's decision. Not thread-safe with itself (one
  // stream, one thread at a time).
  absl::StatusOr<Decision> debit(double units) {
    if (meter_ == nullptr) {
      return absl::FailedPreconditionError(
          "admission.debit: only an allowed admit_reserved admission meters");
    }
    absl::StatusOr<Decision> d =
        meter_->debit(meter_->engine, meter_->key, units);
    if (d.ok()) debited_ += d->allowed ? units : 0;
    return d;
  }

  // Units debited so far through `debit` (allowed debits only).
  double debited() const noexcept { return debited_; }

  // Releases the slot with `outcome` (kSuccess feeds the request's latency
  // to the adaptive law; kDropped signals overload; kIgnored frees the
  // slot only). Idempotent: a no-op without a slot, after a release, and
  // on every denial (the slot was released when the denial was made).
  void release(PermitOutcome outcome = PermitOutcome::kSuccess) noexcept {
    permit_.release(fixed_ceiling_ ? PermitOutcome::kIgnored : outcome);
  }

 private:
  template <class, class, EpochClock, NanoClock>
  friend class BasicUnifiedAdmission;

  void set_axis(Axis a, const Decision& d) noexcept {
    const int i = static_cast<int>(a);
    axes_[i].d = d;
    evaluated_ |= static_cast<uint8_t>(1u << i);
    if (!d.allowed && binding_ < 0) binding_ = static_cast<int8_t>(i);
  }

  // An axis's decision, left uninitialized until the axis is evaluated
  // (`evaluated_`): zeroing all three on every admission measurably costs
  // the refused-slot path (docs/admission.md, "Benchmark").
  struct AxisSlot {
    AxisSlot() noexcept {}
    union {
      Decision d;
    };
  };
  static_assert(std::is_trivially_copyable_v<Decision>);

  // The cost axis of an `admit_reserved` admission: its engine, type-erased,
  // and the key (owned: the stream outlives the caller's view).
  struct Meter {
    void* engine;
    absl::StatusOr<Decision> (*debit)(void* engine, std::string_view key,
                                      double units);
    std::string key;
  };

  Permit permit_;
  Decision decision_ = kAllowFull;
  AxisSlot axes_[3];
  std::unique_ptr<Meter> meter_;  // null unless admit_reserved admitted
  double debited_ = 0;
  uint8_t evaluated_ = 0;  // bit i: axis i was evaluated
  int8_t binding_ = -1;    // the binding Axis, or -1
  bool policy_denied_ = false;
  bool fixed_ceiling_ = false;  // the slot is a fixed ceiling's: no samples
};

// The common case: slots on the monotonic clock.
using Admission = BasicAdmission<MonotonicClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_ADMISSION_H_
