// throttlekit/core/cost.h
//
// Provides cost validation (docs/semantics.md, "Decision"): a cost is
// finite, > 0 and <= 2^53 - 1. Anything else is an argument error, never a
// decision.

#ifndef THROTTLEKIT_CORE_COST_H_
#define THROTTLEKIT_CORE_COST_H_

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

namespace detail {

// Builds the error for a cost that failed the fast check (kept out of line
// so the check inlines into hot paths).
[[gnu::cold, gnu::noinline]] inline absl::Status invalid_cost(double cost) {
  if (std::isnan(cost)) {
    return absl::InvalidArgumentError("cost must be a number; got NaN");
  }
  if (!std::isfinite(cost)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost must be finite; got ", cost));
  }
  if (!(cost > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost must be > 0; got ", cost));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "cost must be <= 2^53-1 (", kMaxSafeInteger, "); got ", cost));
}

}  // namespace detail

// True iff `cost` is finite, > 0 and <= 2^53 - 1 (NaN fails `> 0`).
constexpr bool is_valid_cost(double cost) noexcept {
  return cost > 0 && cost <= static_cast<double>(kMaxSafeInteger);
}

// OK, or kInvalidArgument naming the bad cost (NaN, infinite, <= 0, or above
// 2^53 - 1).
inline absl::Status validate_cost(double cost) {
  if (is_valid_cost(cost)) [[likely]] {
    return absl::OkStatus();
  }
  return detail::invalid_cost(cost);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_COST_H_
