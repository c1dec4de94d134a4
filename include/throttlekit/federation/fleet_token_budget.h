// throttlekit/federation/fleet_token_budget.h
//
// Provides `FleetTokenBudget`: one token budget per window (LLM tokens,
// bytes, credits) shared by every gateway of a fleet (docs/federation.md,
// "Fleet token budget"). Each debit is the token-budget rule (strategy/
// token_budget.h) as ONE atomic step on ONE shared store key, the store's
// clock deciding the window, so gateways with skewed clocks agree and a
// window is never double-counted:
//
//     auto budget = FleetTokenBudget::create(
//         {.budget = 1'000'000, .window_ms = 60'000}, redis);
//     // as a response streams: stop at the first denial
//     absl::StatusOr<Decision> d = (*budget)->debit("tenant:7", 250);
//
// Redis: hash `<prefix>:<key>` with `s` (served) and `w` (window start),
// rolled inside the step once `now >= w + window_ms`; a denial writes
// nothing; an allowed debit writes and sets the TTL to the window's end.
// Memory and Postgres run the same rule (docs/conformance.md).
//
// Bound: a window serves at most `budget + largest debit - 1` tokens for
// any number of gateways (the crossing debit counts in full; every later
// debit of the window is refused), so debiting per token makes it exact.
// This is window-coupled leasing at batch 1: one round trip per debit
// (stream in chunks to trade round trips for the overshoot bound).
//
// Without waiting: `debit_async` sends the same step through the
// coordinator's asynchronous path (`debit` waits for it).
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive the budget, and the budget every pending
// `debit_async`.

#ifndef THROTTLEKIT_FEDERATION_FLEET_TOKEN_BUDGET_H_
#define THROTTLEKIT_FEDERATION_FLEET_TOKEN_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/completion_latch.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {

struct FleetTokenBudgetOptions {
  // Tokens per window; 1 .. 2^53-1.
  int64_t budget = 0;
  // The window in ms, epoch-aligned on the store's clock; 1 .. 2^53-1.
  int64_t window_ms = 0;
  // Store keys are `prefix:key`.
  std::string prefix = "tk:budget";
  // What an outage becomes (fail_policy.h); kPropagate returns it.
  FailPolicy fail_policy = FailPolicy::kPropagate;
};

class FleetTokenBudget {
 public:
  struct Stats {
    int64_t debits = 0;   // allowed debits
    int64_t tokens = 0;   // tokens they debited
    int64_t denials = 0;  // refused debits
    int64_t outages = 0;  // outages the fail policy decided
  };

  // Validates the options; errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<FleetTokenBudget>> create(
      FleetTokenBudgetOptions options,
      std::shared_ptr<Coordinator> coordinator) {
    absl::StatusOr<TokenBudget> strategy = TokenBudget::create(
        {.budget = options.budget, .window_ms = options.window_ms});
    if (!strategy.ok()) return strategy.status();
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError(
          "fleet_token_budget: coordinator is null");
    }
    if (absl::Status s = options.fail_policy.validate("fleet_token_budget");
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<FleetTokenBudget>(new FleetTokenBudget(
        std::move(options), AnyStrategy(*strategy), std::move(coordinator)));
  }

  // Debits `tokens` (an integer in [1, 2^53-1]) from `key`'s window on the
  // store's clock: allowed while anything is left before the debit (the
  // crossing debit counts in full), else refused with nothing written.
  // One round trip; waits for `debit_async`.
  absl::StatusOr<Decision> debit(std::string_view key, int64_t tokens) {
    CompletionLatch<Decision> latch;
    debit_async(key, tokens, latch.completion());
    return latch.wait();
  }

  // As `debit`, without waiting for the store (docs/async.md): `on_done`
  // runs exactly once with what `debit` would return, on the thread that
  // read the reply (inline for bad input and for a backend whose step
  // needs no I/O). The key is copied before this returns. Thread-safe.
  void debit_async(std::string_view key, int64_t tokens,
                   Completion<Decision> on_done) {
    if (tokens < 1 || tokens > kMaxSafeInteger) {
      std::move(on_done)(absl::InvalidArgumentError(absl::StrCat(
          "fleet_token_budget: tokens must be an integer in [1, 2^53-1]; "
          "got ",
          tokens)));
      return;
    }
    if (absl::Status s = validate_key(key); !s.ok()) {
      std::move(on_done)(std::move(s));
      return;
    }
    coordinator_->check_async(strategy_, join_key(options_.prefix, key), 0,
                              static_cast<double>(tokens),
                              [this, tokens, done = std::move(on_done)](
                                  absl::StatusOr<Decision> d) mutable {
                                std::move(done)(account(std::move(d), tokens));
                              });
  }

  // The tokens `key`'s current window (store clock) has left before the
  // next debit: budget - served, at least 0. Writes nothing.
  absl::StatusOr<int64_t> remaining(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    absl::StatusOr<Forecast> f =
        coordinator_->forecast(strategy_, join_key(options_.prefix, key), 0);
    if (!f.ok()) return f.status();
    return f->spendable_now;
  }

  // Forgets `key`'s window: the next debit starts a fresh one.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return coordinator_->reset(strategy_, join_key(options_.prefix, key));
  }

  Stats stats() const {
    return Stats{debits_.load(std::memory_order_relaxed),
                 tokens_.load(std::memory_order_relaxed),
                 denials_.load(std::memory_order_relaxed),
                 outages_.load(std::memory_order_relaxed)};
  }
  const FleetTokenBudgetOptions& options() const noexcept { return options_; }

 private:
  // A debit's answer counted, an outage given to the fail policy.
  absl::StatusOr<Decision> account(absl::StatusOr<Decision> d, int64_t tokens) {
    if (!d.ok()) {
      // The store's clock is out of reach: this process's dates the outage.
      absl::StatusOr<Decision> decided = options_.fail_policy.on_error(
          d.status(), options_.budget, SystemClock{}.now_ms());
      if (decided.ok()) outages_.fetch_add(1, std::memory_order_relaxed);
      return decided;
    }
    if (d->allowed) {
      debits_.fetch_add(1, std::memory_order_relaxed);
      tokens_.fetch_add(tokens, std::memory_order_relaxed);
    } else {
      denials_.fetch_add(1, std::memory_order_relaxed);
    }
    return d;
  }

  FleetTokenBudget(FleetTokenBudgetOptions options, AnyStrategy strategy,
                   std::shared_ptr<Coordinator> coordinator)
      : options_(std::move(options)),
        strategy_(std::move(strategy)),
        coordinator_(std::move(coordinator)) {}

  const FleetTokenBudgetOptions options_;
  const AnyStrategy strategy_;
  const std::shared_ptr<Coordinator> coordinator_;
  std::atomic<int64_t> debits_{0}, tokens_{0}, denials_{0}, outages_{0};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_FEDERATION_FLEET_TOKEN_BUDGET_H_
