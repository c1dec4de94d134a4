// throttlekit/coordinator/fail_policy.h
//
// Provides `FailPolicy`: what a limiter over a remote store does when the
// store cannot answer (kUnavailable, kDeadlineExceeded), as one value that
// every engine takes, validates and applies the same way:
//
//     .fail_policy = FailPolicy::kOpen                   // admit on outage
//     .fail_policy = {FailPolicy::kClosed, 250}          // deny, retry 250 ms
//
// The caller chooses; the default (kPropagate) passes the status through and
// decides nothing on its behalf. Only outages become decisions: argument
// and precondition errors are always returned as they are.
//
// Thread-safety: an immutable value.

#ifndef THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
#define THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

// True for the statuses a fail policy turns into a decision: the store is
// unreachable or too slow.
inline bool is_outage(const absl::Status& s) noexcept {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

class FailPolicy {
 public:
  enum Mode {
    // Return the store's status to the caller (the default).
    kPropagate,
    // Admit while the store is out: availability over the limit.
    kOpen,
    // Deny while the store is out, with retry `closed_retry_ms`: the limit
    // over availability.
    kClosed,
  };

  // `closed_retry_ms` is the retry hint of a kClosed denial; 1 .. 2^53-1
  // (checked by `validate`).
  constexpr FailPolicy(Mode mode = kPropagate,  // NOLINT: implicit by design
                       int64_t closed_retry_ms = 1000) noexcept
      : mode_(mode), closed_retry_ms_(closed_retry_ms) {}

  constexpr Mode mode() const noexcept { return mode_; }
  constexpr int64_t closed_retry_ms() const noexcept {
    return closed_retry_ms_;
  }

  // OK, or kInvalidArgument naming `owner` (the options' name, e.g.
  // "strict_rate_limiter") and the field at fault.
  absl::Status validate(std::string_view owner) const {
    const absl::string_view o(owner.data(), owner.size());
    if (mode_ != kPropagate && mode_ != kOpen && mode_ != kClosed) {
      return absl::InvalidArgumentError(absl::StrCat(
          o, ".fail_policy.mode is not a FailPolicy::Mode; got ", mode_));
    }
    if (closed_retry_ms_ < 1 || closed_retry_ms_ > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat(o,
                       ".fail_policy.closed_retry_ms must be in [1, "
                       "2^53-1]; got ",
                       closed_retry_ms_));
    }
    return absl::OkStatus();
  }

  // What a limiter reporting `limit` answers when its backend failed with
  // `error` at `now_ms`: the outage decision under kOpen
  // (`{true, limit, 0, now, 0}`) or kClosed (`{false, limit, 0,
  // now + closed_retry_ms, closed_retry_ms}`), or `error` itself under
  // kPropagate and for every status that is not an outage. An OK result
  // therefore means an outage was decided (engines count those).
  absl::StatusOr<Decision> on_error(const absl::Status& error, int64_t limit,
                                    int64_t now_ms) const {
    if (mode_ == kPropagate || !is_outage(error)) return error;
    if (mode_ == kOpen) return Decision{true, limit, 0, now_ms, 0};
    return Decision{false, limit, 0, now_ms + closed_retry_ms_,
                    closed_retry_ms_};
  }

  friend constexpr bool operator==(const FailPolicy&,
                                   const FailPolicy&) = default;

 private:
  Mode mode_;
  int64_t closed_retry_ms_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_FAIL_POLICY_H_
