// throttlekit/strategy/token_budget.h
//
// Provides `TokenBudget`, the cost axis (docs/semantics.md, "Token
// budget"): a budget of `budget` tokens per window (LLM tokens, bytes,
// credits) where the size of a request is only known roughly in advance, so
// the check is "is anything left?" rather than "does this fit?".
//
// State `{served, window_start}`. With `w = window_ms`:
//
//     roll iff now >= window_start + w:
//         window_start = floor(now / w) * w,  served = 0
//     deny iff served >= budget  (before the debit; no write)
//         remaining = 0, retry = max(0, ceil(reset - now))
//     else served += tokens      (the crossing debit counts in full)
//         remaining = max(0, budget - served)
//     reset_at = window_start + w
//
// So a window serves at most `budget + largest debit - 1` tokens: the last
// admitted debit starts below the budget and may cross it.
//
// `debit(state, now, tokens)` is the API: it validates that `tokens` is an
// integer in [1, 2^53 - 1] and returns kInvalidArgument otherwise. The type
// also models the `Strategy` concept so that it can sit in a `RateLimiter`
// or a combined admission: `check(state, now, cost)` debits `ceil(cost)`
// tokens of an already valid cost (`validate_cost`), like the sliding log.
//
// Choices where docs/semantics.md is silent (docs, pinned by
// token_budget_test.cc):
// - A clock that goes back never rolls back: the stored window keeps
//   counting even when `now` is before `window_start`; `reset_at` stays that
//   window's end and the retry is measured from `now`.
// - A debit larger than the budget passes when nothing has been served (it
//   is the crossing debit); there is no "cost above the ceiling" here.
// - `peek` answers the cost-1 question; `forecast` reports `budget - served`
//   as `spendable_now` (any single debit passes while it is positive).

#ifndef THROTTLEKIT_STRATEGY_TOKEN_BUDGET_H_
#define THROTTLEKIT_STRATEGY_TOKEN_BUDGET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class TokenBudget {
 public:
  struct Options {
    // Tokens per window; 1 .. 2^53-1.
    int64_t budget = 0;
    // The window in ms, epoch-aligned; 1 .. 2^53-1.
    int64_t window_ms = 0;
  };

  // Tokens served in the window starting at `window_start_ms`. Cold: no
  // window (the first call rolls).
  struct State {
    int64_t served = 0;
    int64_t window_start_ms = std::numeric_limits<int64_t>::min();
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "token_budget";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<TokenBudget> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "token_budget",
            {{"budget", options.budget}, {"window_ms", options.window_ms}});
        !s.ok()) {
      return s;
    }
    return TokenBudget(options);
  }

  // OK iff `tokens` is an integer in [1, 2^53 - 1]; otherwise
  // kInvalidArgument naming the value (NaN, infinite, fractional, <= 0, or
  // too large). An int64 argument converts exactly below 2^53 and to a value
  // >= 2^53 above it, so it is judged correctly too.
  static absl::Status validate_tokens(double tokens) {
    if (!(tokens >= 1) || !(tokens <= static_cast<double>(kMaxSafeInteger)) ||
        detail::floor_d(tokens) != tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_budget: tokens must be an integer in [1, ",
                       kMaxSafeInteger, "]; got ", tokens));
    }
    return absl::OkStatus();
  }

  const Options& options() const noexcept { return options_; }
  int64_t policy_window_ms() const noexcept { return options_.window_ms; }

  // Debits `tokens` at `now_ms`: the decision, or kInvalidArgument for
  // tokens that are not an integer in [1, 2^53 - 1] (state untouched).
  // Writes `state` only when allowed. Not thread-safe on one `state`.
  absl::StatusOr<Decision> debit(State& state, int64_t now_ms,
                                 double tokens) const {
    if (auto s = validate_tokens(tokens); !s.ok()) return s;
    return debit_valid(state, now_ms, static_cast<int64_t>(tokens));
  }

  // See strategy.h: debits `ceil(cost)` tokens of a valid cost.
  Decision check(State& state, int64_t now_ms, double cost) const noexcept {
    return debit_valid(state, now_ms, detail::ceil_to_int(cost));
  }

  // See strategy.h: the cost-1 decision, consuming nothing.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const State s = effective(state, now_ms);
    if (s.served >= options_.budget) return deny(s, now_ms);
    return Decision{true, options_.budget, options_.budget - s.served,
                    reset_at(s), 0};
  }

  // See strategy.h. Any debit (whatever `cost`) passes now while
  // `served < budget`, otherwise at the reset. Full at `now` when nothing
  // is served, else at the reset.
  Forecast forecast(const State& state, int64_t now_ms,
                    double /*cost*/) const noexcept {
    const State s = effective(state, now_ms);
    const int64_t spendable = std::max<int64_t>(0, options_.budget - s.served);
    const int64_t next =
        spendable > 0 ? now_ms : now_ms + retry_after(s, now_ms);
    return Forecast{spendable, next, s.served > 0 ? reset_at(s) : now_ms};
  }

  // The window's end: at `now >= window_start + window_ms` the next call
  // rolls to a fresh window, exactly like a cold key. INT64_MIN when cold.
  int64_t expires_at_ms(const State& state) const noexcept {
    if (state.window_start_ms == std::numeric_limits<int64_t>::min()) {
      return state.window_start_ms;
    }
    return reset_at(state);
  }

 private:
  explicit TokenBudget(const Options& o)
      : options_(o), window_(static_cast<double>(o.window_ms)) {}

  // The state as the call at `now` sees it: rolled to
  // floor(now / w) * w when now >= start + w, else unchanged.
  State effective(const State& state, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    if (now >= static_cast<double>(state.window_start_ms) + window_) {
      return State{0, detail::to_int(detail::floor_d(now / window_) * window_)};
    }
    return state;
  }

  int64_t reset_at(const State& s) const noexcept {
    return detail::to_int(static_cast<double>(s.window_start_ms) + window_);
  }

  // max(0, ceil(reset - now))
  int64_t retry_after(const State& s, int64_t now_ms) const noexcept {
    return std::max<int64_t>(
        0, detail::ceil_to_int(static_cast<double>(reset_at(s)) -
                               static_cast<double>(now_ms)));
  }

  Decision deny(const State& s, int64_t now_ms) const noexcept {
    return Decision{false, options_.budget, 0, reset_at(s),
                    retry_after(s, now_ms)};
  }

  Decision debit_valid(State& state, int64_t now_ms,
                       int64_t tokens) const noexcept {
    State s = effective(state, now_ms);
    if (s.served >= options_.budget) return deny(s, now_ms);
    s.served += tokens;
    state = s;
    return Decision{true, options_.budget,
                    std::max<int64_t>(0, options_.budget - s.served),
                    reset_at(s), 0};
  }

  Options options_;
  double window_;
};

static_assert(Strategy<TokenBudget>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_TOKEN_BUDGET_H_
