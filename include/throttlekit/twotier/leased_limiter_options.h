// throttlekit/twotier/leased_limiter_options.h
//
// Provides `LeasedLimiterOptions`, the configuration of a `LeasedLimiter`
// (twotier/leased_limiter.h, docs/twotier.md "Leased mode"), `LeaseSizing`,
// and `resolve`, which validates a configuration (errors name the field
// and its bound) and resolves its sizer's options against it.
//
// Thread-safety: plain values; `resolve` is a pure function.

#ifndef THROTTLEKIT_TWOTIER_LEASED_LIMITER_OPTIONS_H_
#define THROTTLEKIT_TWOTIER_LEASED_LIMITER_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/twotier/lease_sizer.h"

namespace throttlekit {

// How a leased limiter picks the batch of each lease.
enum class LeaseSizing {
  kFixed,       // always `batch`
  kEoq,         // LeaseSizer per key, learning the EOQ online
  kPredictive,  // PredictiveLeaseSizer per key, given `demand_forecast`
};

struct LeasedLimiterOptions {
  // Names the keyspace: store keys are `prefix:key`.
  std::string prefix;
  // The global budget: `limit` credits per `window_ms` (1 .. 2^53-1 each).
  int64_t limit = 0;
  int64_t window_ms = 0;
  // Credits per lease; 1 .. limit.
  int64_t batch = 100;
  // Credits die at their window's end (the `<= limit` bound).
  bool window_coupled = true;
  // Background refill once a key holds <= low_water credits; 0 (off) ..
  // batch - 1.
  int64_t low_water = 0;
  // Give back a key's credits after this long unspent; 0 (off) or
  // 1 .. 2^53-1.
  int64_t return_idle_after_ms = 0;
  // How the batch is chosen (`batch` is the first one under a learner).
  LeaseSizing sizing = LeaseSizing::kFixed;
  // The learner's options (kEoq, kPredictive); `max_batch` is capped at
  // `limit`.
  LeaseSizer::Options sizer = {};
  // kPredictive: the demand expected for `key` in the window starting at
  // `window_start_ms` (NaN or negative: no forecast). Called under the
  // key's lease lock, once per window; must be thread-safe.
  std::function<double(std::string_view key, int64_t window_start_ms)>
      demand_forecast;
  // Run refills and idle returns on a thread the limiter owns; false leaves
  // them to `run_maintenance()`.
  bool background_worker = true;
  // Keys held per node; 16 .. 2^32.
  int64_t max_keys = int64_t{1} << 16;
  // What an outage becomes (fail_policy.h).
  FailPolicy fail_policy = FailPolicy::kPropagate;
  // A lease asks only for what the key's pace will spend before its
  // window ends (window-coupled credits left at the end are stranded): its
  // pace in the window, or at the window's first lease what it spent in the
  // window before. Off by default (federation turns it on).
  bool size_to_window_end = false;
  // Once the store says a key's window is spent, shortfalls are denied
  // without a round trip, but one per `spent_recheck_ms` leases again (a
  // normal lease, bounded by the store) to see credits given back to the
  // window since. Unset: `window_ms / 8` (at least 1), so at most 8 extra
  // round trips per spent window, key and node; 0: never (deny until the
  // window ends); else 1 .. 2^53-1.
  std::optional<int64_t> spent_recheck_ms;
};

// Validates `options` and resolves its sizer's options in place (the first
// batch is `batch`, `max_batch` capped at `limit`); returns the budget it
// names. Errors name the field and its bound.
inline absl::StatusOr<LeaseBudget> resolve(LeasedLimiterOptions& options) {
  absl::StatusOr<LeaseBudget> budget =
      LeaseBudget::create({options.limit, options.window_ms});
  if (!budget.ok()) return budget.status();
  if (options.batch < 1 || options.batch > options.limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leased_limiter.batch must be in [1, limit = ", options.limit,
        "]; got ", options.batch));
  }
  if (options.max_keys < 16 || options.max_keys > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leased_limiter.max_keys must be in [16, 2^32]; got ",
                     options.max_keys));
  }
  if (absl::Status s = options.fail_policy.validate("leased_limiter");
      !s.ok()) {
    return s;
  }
  if (options.low_water < 0 || options.low_water >= options.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("leased_limiter.low_water must be in [0, batch - 1 = ",
                     options.batch - 1, "]; got ", options.low_water));
  }
  if (options.return_idle_after_ms < 0 ||
      options.return_idle_after_ms > kMaxSafeInteger) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leased_limiter.return_idle_after_ms must be 0 (off) or in "
        "[1, 2^53-1]; got ",
        options.return_idle_after_ms));
  }
  if (options.spent_recheck_ms.has_value() &&
      (*options.spent_recheck_ms < 0 ||
       *options.spent_recheck_ms > kMaxSafeInteger)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leased_limiter.spent_recheck_ms must be 0 (never) or in "
                     "[1, 2^53-1]; got ",
                     *options.spent_recheck_ms));
  }
  if (options.sizing != LeaseSizing::kFixed) {
    if (options.sizing != LeaseSizing::kEoq &&
        options.sizing != LeaseSizing::kPredictive) {
      return absl::InvalidArgumentError(
          "leased_limiter.sizing is not a LeaseSizing");
    }
    options.sizer.initial_batch = options.batch;
    options.sizer.max_batch = std::min(options.sizer.max_batch, options.limit);
    options.sizer.min_batch =
        std::min(options.sizer.min_batch, options.sizer.max_batch);
    if (absl::StatusOr<LeaseSizer> s = LeaseSizer::create(options.sizer);
        !s.ok()) {
      return s.status();
    }
    if (options.sizing == LeaseSizing::kPredictive &&
        !options.demand_forecast) {
      return absl::InvalidArgumentError(
          "leased_limiter.demand_forecast is required with "
          "LeaseSizing::kPredictive");
    }
  }
  return budget;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_LEASED_LIMITER_OPTIONS_H_
