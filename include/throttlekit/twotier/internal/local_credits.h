// throttlekit/twotier/internal/local_credits.h
//
// Provides `detail::LocalCredits`: the state a leased limiter keeps per key
// in its `MemoryStore` (the credits leased for the key and the window they
// belong to), written as a strategy so the store's compact sharded table
// serves the hot path: one hash, one probe and one spend under the shard's
// spin lock, as for GCRA.
//
// `check` is `LeaseSpender::spend_rule`: an allowed decision spends, a
// "denial" means only "refresh" (lease) and is never shown to a caller.
// The limiter refills through `MemoryStore::update` with
// `LeaseSpender::refill_rule`. A state is reclaimable (expired) once it
// holds nothing: no credits at all, or window-coupled credits one window
// past their window's end (kept that long so the limiter's lease sizer
// can read what a window left over when the next window's first lease
// comes). A spent window's mark is not kept here but with the key's lease
// coordination (`detail::SpentMark`, spent_mark.h).
//
// Thread-safety: immutable; states are guarded by the store.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_LOCAL_CREDITS_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_LOCAL_CREDITS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/twotier/lease_spender.h"

namespace throttlekit::detail {

class LocalCredits {
 public:
  struct Options {
    int64_t limit = 1;  // the leased budget's limit, for decisions
    bool window_coupled = true;
    int64_t window_ms = 1;  // the leased budget's window
  };
  struct State {
    double credits = 0;
    // The end of the window the credits belong to.
    int64_t expires_at_ms = std::numeric_limits<int64_t>::min();
    // The `now` of the last spend or refill (for idle returns).
    int64_t last_used_ms = 0;
    // A low-water refill is queued and not yet run.
    bool refill_queued = false;
  };
  static constexpr std::string_view kName = "local_credits";

  static absl::StatusOr<LocalCredits> create(const Options& options) {
    return LocalCredits(options);
  }

  THROTTLEKIT_ALWAYS_INLINE Decision check(State& s, int64_t now_ms,
                                           double cost) const noexcept {
    if (!LeaseSpender::spend_rule(s.credits, s.expires_at_ms,
                                  options_.window_coupled, now_ms, cost))
        [[unlikely]] {
      return Decision{false, options_.limit, 0, s.expires_at_ms, 1};
    }
    s.last_used_ms = now_ms;
    return Decision{true, options_.limit, floor_to_int(s.credits),
                    s.expires_at_ms, 0};
  }

  Decision peek(const State& s, int64_t now_ms) const noexcept {
    State copy = s;
    return check(copy, now_ms, 1);
  }

  Forecast forecast(const State& s, int64_t now_ms, double) const noexcept {
    const bool live = live_credits(s, now_ms) > 0;
    return Forecast{live ? floor_to_int(s.credits) : 0, now_ms, now_ms};
  }

  // Reclaimable once it holds nothing, or (window-coupled) one window
  // after its credits died.
  int64_t expires_at_ms(const State& s) const noexcept {
    if (!(s.credits > 0)) return std::numeric_limits<int64_t>::min();
    if (!options_.window_coupled ||
        s.expires_at_ms >
            std::numeric_limits<int64_t>::max() - options_.window_ms) {
      return std::numeric_limits<int64_t>::max();
    }
    return s.expires_at_ms + options_.window_ms;
  }

  // The credits `s` could still spend at `now_ms`.
  double live_credits(const State& s, int64_t now_ms) const noexcept {
    return options_.window_coupled && now_ms >= s.expires_at_ms ? 0.0
                                                                : s.credits;
  }

  int64_t policy_window_ms() const noexcept { return 0; }
  const Options& options() const noexcept { return options_; }

 private:
  explicit LocalCredits(const Options& options) : options_(options) {}
  Options options_;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_LOCAL_CREDITS_H_
