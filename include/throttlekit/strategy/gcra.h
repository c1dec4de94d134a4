// throttlekit/strategy/gcra.h
//
// Provides `Gcra`, the generic cell rate algorithm: ThrottleKit's default
// strategy (docs/semantics.md, "GCRA"). Its whole state is one double, the
// theoretical arrival time (TAT), which is why the memory store and
// `GcraCell` can update it with one compare-and-swap.
//
// With `T = period_ms / limit` (the emission interval) and
// `tau = T * burst` (the tolerance):
//
//     inc      = T * cost
//     tat_eff  = max(state or now, now)
//     new_tat  = tat_eff + inc
//     allow_at = new_tat - tau
//     deny iff now < allow_at            (equality admits)
//
// A cold key admits exactly `burst` units at once, then paces at one unit per
// T ms. A clock that jumps backwards only makes it stricter. A cost above
// `burst` can never pass; its denial still carries the finite retry hint
// `ceil(allow_at - now)` (the wait if the burst were large enough).

#ifndef THROTTLEKIT_STRATEGY_GCRA_H_
#define THROTTLEKIT_STRATEGY_GCRA_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class Gcra {
 public:
  struct Options {
    // Units per period; 1 .. 2^53-1.
    int64_t limit = 0;
    // The period in ms; 1 .. 2^53-1.
    int64_t period_ms = 0;
    // Units a cold key may take at once; 0 means `limit`. 1 .. 2^53-1.
    int64_t burst = 0;
  };

  // The theoretical arrival time in epoch ms. Cold is -infinity, which makes
  // `max(tat, now)` equal `now` with no branch.
  struct State {
    double tat = -std::numeric_limits<double>::infinity();
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "gcra";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<Gcra> create(const Options& options) {
    if (auto s =
            detail::check_int_options("gcra", {{"limit", options.limit},
                                               {"period_ms", options.period_ms},
                                               {"burst", options.burst, 0}});
        !s.ok()) {
      return s;
    }
    return Gcra(options);
  }

  const Options& options() const noexcept { return options_; }
  // The emission interval T in ms.
  double emission_interval_ms() const noexcept { return t_; }
  // The tolerance tau = T * burst in ms.
  double tolerance_ms() const noexcept { return tau_; }
  int64_t burst() const noexcept { return burst_; }
  int64_t policy_window_ms() const noexcept { return options_.period_ms; }

  // See strategy.h. Writes `state` only when allowed.
  THROTTLEKIT_ALWAYS_INLINE Decision check(State& state, int64_t now_ms,
                                           double cost) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double tat_eff = std::max(state.tat, now);
    const double new_tat = tat_eff + t_ * cost;
    const double allow_at = new_tat - tau_;
    if (now < allow_at) {
      return Decision{false, burst_, remaining(tat_eff, now),
                      detail::ceil_to_int(tat_eff),
                      detail::ceil_to_int(allow_at - now)};
    }
    state.tat = new_tat;
    return Decision{true, burst_, remaining(new_tat, now),
                    detail::ceil_to_int(new_tat), 0};
  }

  // See strategy.h.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double tat_eff = std::max(state.tat, now);
    const double allow_at = tat_eff + t_ - tau_;
    const bool allowed = !(now < allow_at);
    return Decision{allowed, burst_, remaining(tat_eff, now),
                    detail::ceil_to_int(tat_eff),
                    allowed ? 0 : detail::ceil_to_int(allow_at - now)};
  }

  // See strategy.h.
  Forecast forecast(const State& state, int64_t now_ms,
                    double cost) const noexcept {
    const double now = static_cast<double>(now_ms);
    const double tat_eff = std::max(state.tat, now);
    const double allow_at = tat_eff + t_ * cost - tau_;
    const int64_t next =
        now < allow_at ? now_ms + detail::ceil_to_int(allow_at - now) : now_ms;
    return Forecast{remaining(tat_eff, now), next,
                    detail::ceil_to_int(tat_eff)};
  }

  // The TTL hint of docs/semantics.md (`max(1, ceil(new_tat - now))`) as an
  // instant: once `now >= ceil(tat)`, `max(tat, now) == now`, exactly cold.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (std::isinf(state.tat)) return std::numeric_limits<int64_t>::min();
    return detail::ceil_to_int(state.tat);
  }

 private:
  explicit Gcra(const Options& o)
      : options_(o),
        burst_(o.burst == 0 ? o.limit : o.burst),
        t_(static_cast<double>(o.period_ms) / static_cast<double>(o.limit)),
        tau_(t_ * static_cast<double>(burst_)) {}

  // max(0, floor((tau - (tat - now)) / T))
  int64_t remaining(double tat, double now) const noexcept {
    return std::max<int64_t>(0,
                             detail::floor_to_int((tau_ - (tat - now)) / t_));
  }

  Options options_;
  int64_t burst_;
  double t_;
  double tau_;
};

static_assert(Strategy<Gcra>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_GCRA_H_
