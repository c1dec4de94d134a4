// throttlekit/core/option_check.h
//
// Provides the helpers strategy factories use to reject bad configuration
// once, at construction, with a message naming the field and its bound
// (docs/architecture.md, "Cross-cutting rules", Errors).

#ifndef THROTTLEKIT_CORE_OPTION_CHECK_H_
#define THROTTLEKIT_CORE_OPTION_CHECK_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::detail {

// OK iff lo <= value <= hi; otherwise kInvalidArgument
// "<what>.<field> must be in [lo, hi]; got value".
inline absl::Status check_int_option(const char* what, const char* field,
                                     int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".", field, " must be in [", lo, ", ", hi, "]; got ", value));
  }
  return absl::OkStatus();
}

// One integer option: `field`, holding `value`, must be in [lo, hi] (by
// default a count: [1, 2^53-1]).
struct IntOption {
  const char* field;
  int64_t value;
  int64_t lo = 1;
  int64_t hi = kMaxSafeInteger;
};

// OK iff every option is in its range; otherwise the first that is not,
// reported as `check_int_option` reports it.
inline absl::Status check_int_options(
    const char* what, std::initializer_list<IntOption> options) {
  for (const IntOption& o : options) {
    if (absl::Status s = check_int_option(what, o.field, o.value, o.lo, o.hi);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// OK iff value is finite and lo < value <= hi (lo exclusive: rates and
// capacities must be positive).
inline absl::Status check_positive_option(const char* what, const char* field,
                                          double value, double hi) {
  if (!std::isfinite(value) || !(value > 0) || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".", field, " must be finite, > 0 and <= ", hi, "; got ", value));
  }
  return absl::OkStatus();
}

// OK iff 0 < value <= 10 minutes: the one range every timeout option of a
// networked coordinator accepts.
inline absl::Status check_timeout_option(const char* what, const char* field,
                                         absl::Duration value) {
  if (value <= absl::ZeroDuration() || value > absl::Minutes(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".", field, " must be in (0, 10 min]; got ",
                     absl::FormatDuration(value)));
  }
  return absl::OkStatus();
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_CORE_OPTION_CHECK_H_
