// throttlekit/coordinator/strict_rate_limiter.h
//
// Provides `StrictRateLimiter<S, C>`: a `RateEngine` (rate_engine.h: check,
// check_at, check_many, peek, forecast, reset, stats) over any `Coordinator`
// (strict mode: one store round trip per check, exact). Point it at a
// `RedisCoordinator` or `PostgresCoordinator` and every process sharing the
// store shares one limit:
//
//     auto limiter = StrictRateLimiter<Gcra>::create(
//         {.limit = 100, .period_ms = 60'000}, redis,
//         {.prefix = "api", .fail_policy = FailPolicy::kOpen});
//     absl::StatusOr<Decision> d = limiter->check("user:42");
//
// Keys become `prefix:key` (`join_key`). `check` uses the store's clock
// (`now = 0` on the wire) so that processes with skewed clocks agree;
// `check_at` takes a caller-supplied `now`.
//
// Failure: `options.fail_policy` (fail_policy.h) turns an outage into a
// decision or returns it; `stats().outages` counts the decided ones.
// Invalid arguments and kFailedPrecondition are always returned as statuses.
// The clock `C` only dates those outage decisions (the store's clock, or
// the caller's `now`, decides everything else).
//
// Without waiting: `check_async` / `check_at_async` (core/completion.h,
// docs/async.md) send the same step through the coordinator's asynchronous
// path and complete with what `check` would return, the fail policy
// applied; `co_await limiter->async_check(key)` is the coroutine form
// (core/check_awaitable.h). `check_many_async` sends a batch's steps
// together and is what the blocking `check_many` waits on.
//
// Thread-safety: every method is safe to call concurrently. The coordinator
// must outlive the limiter (it is shared), and the limiter every pending
// asynchronous call.

#ifndef THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_
#define THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/completion_latch.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

struct StrictRateLimiterOptions {
  // Names the keyspace: keys become `prefix:key`.
  std::string prefix;
  // What an outage becomes (fail_policy.h).
  FailPolicy fail_policy = FailPolicy::kPropagate;
};

template <Strategy S, EpochClock C = SystemClock>
class StrictRateLimiter {
 public:
  struct Stats {
    int64_t outages = 0;  // outages the fail policy decided
  };

  // Validates the strategy and options; errors name the field.
  static absl::StatusOr<std::unique_ptr<StrictRateLimiter>> create(
      const typename S::Options& strategy_options,
      std::shared_ptr<Coordinator> coordinator,
      StrictRateLimiterOptions options = {}, C clock = C{}) {
    absl::StatusOr<S> strategy = S::create(strategy_options);
    if (!strategy.ok()) return strategy.status();
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError(
          "strict_rate_limiter: coordinator is null");
    }
    if (absl::Status s = options.fail_policy.validate("strict_rate_limiter");
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<StrictRateLimiter>(
        new StrictRateLimiter(*std::move(strategy), std::move(coordinator),
                              std::move(options), std::move(clock)));
  }

  // Admits or denies `cost` units for `key` at the store's clock.
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return check_at(key, 0, cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms` (0: store clock).
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return decide(
        coordinator_->check(strategy_, join_key(prefix_, key), now_ms, cost),
        now_ms);
  }

  // As `check`, without waiting for the store: `on_done` runs exactly once
  // with what `check` would return (core/completion.h), on the thread that
  // read the reply, or inline for invalid arguments and for a backend whose
  // step needs no I/O. Thread-safe.
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    check_at_async(key, 0, cost, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    check_at_async(key, 0, 1, std::forward<F>(on_done));
  }

  // As `check_at`, without waiting for the store. Thread-safe.
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    if (absl::Status s = validate_key(key); !s.ok()) {
      std::forward<F>(on_done)(absl::StatusOr<Decision>(std::move(s)));
      return;
    }
    coordinator_->check_async(strategy_, join_key(prefix_, key), now_ms, cost,
                              [this, now_ms, done = std::forward<F>(on_done)](
                                  absl::StatusOr<Decision> d) mutable {
                                std::move(done)(decide(std::move(d), now_ms));
                              });
  }

  // `co_await limiter->async_check(key)`: `check_async` as an awaitable
  // (core/check_awaitable.h). `key` must stay valid until the co_await
  // expression ends.
  CheckAwaitable<StrictRateLimiter> async_check(std::string_view key,
                                                double cost = 1) {
    return CheckAwaitable<StrictRateLimiter>(*this, key, cost);
  }

  // Checks every key (each independently) at one `now` read from the store
  // once, the keys' steps pipelined together: two round trips (the clock,
  // then the batch), not one per key, so a batch's `now` is at most one
  // round trip stale when its steps run. The same key twice is checked in
  // order (its second step is sent once its first is answered). On an
  // invalid key or cost nothing is checked. Under kPropagate an outage is
  // returned, the first in key order; the other keys' steps went out with
  // it and may have been counted.
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    CompletionLatch<std::vector<Decision>> latch;
    check_many_async(keys, cost, latch.completion());
    return latch.wait();
  }

  // As `check_many`, without waiting for the store: `on_done` runs exactly
  // once with what `check_many` would return, on the thread that read the
  // last reply (inline for invalid arguments and for a backend whose steps
  // need no I/O). The keys are copied before this returns. Thread-safe.
  void check_many_async(std::span<const std::string_view> keys, double cost,
                        Completion<std::vector<Decision>> on_done) {
    if (batch_settled_inline(keys, cost, on_done)) return;
    auto batch = std::make_shared<Batch>(this, keys, cost, std::move(on_done));
    coordinator_->now_ms_async([batch](absl::StatusOr<int64_t> now) {
      StrictRateLimiter& self = *batch->self;
      if (!now.ok()) {
        if (absl::Status s =
                self.policy_.on_error(now.status(), self.limit_, 0).status();
            !s.ok()) {
          std::move(batch->done)(std::move(s));
          return;
        }
      }
      batch->at = now.ok() ? *now : 0;
      // Each key's first occurrence; its chain sends the later ones.
      for (size_t i = 0; i < batch->keys.size(); ++i) {
        if (batch->first[i]) send_chain(batch, i);
      }
    });
  }

  // As above, writing one decision per key into `out` (`out.size()` must
  // equal `keys.size()`).
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    if (out.size() != keys.size()) {
      return absl::InvalidArgumentError(
          "check_many: out.size() must equal keys.size()");
    }
    absl::StatusOr<std::vector<Decision>> d = check_many(keys, cost);
    if (!d.ok()) return d.status();
    std::copy(d->begin(), d->end(), out.begin());
    return absl::OkStatus();
  }

  // The decision a cost-1 request would get now, without consuming.
  absl::StatusOr<Decision> peek(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return decide(coordinator_->peek(strategy_, join_key(prefix_, key), 0), 0);
  }

  // What `key` could spend now and when it refills, for requests of
  // `cost`, at the store's clock. Writes nothing. Outages are returned as
  // their status under every fail policy (there is no decision to make).
  absl::StatusOr<Forecast> forecast(std::string_view key, double cost = 1) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return coordinator_->forecast(strategy_, join_key(prefix_, key), 0, cost);
  }

  // Forgets `key` on the store.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return coordinator_->reset(strategy_, join_key(prefix_, key));
  }

  Stats stats() const noexcept {
    return Stats{outages_.load(std::memory_order_relaxed)};
  }
  // Outages turned into decisions by the fail policy so far.
  int64_t outages() const noexcept { return stats().outages; }

  // `check` decides on the store's clock (core/rate_engine.h).
  static constexpr bool decides_at_store() noexcept { return true; }

  const S& strategy() const noexcept { return std::get<S>(strategy_); }
  const std::string& prefix() const noexcept { return prefix_; }
  Coordinator& coordinator() const noexcept { return *coordinator_; }

 private:
  StrictRateLimiter(S strategy, std::shared_ptr<Coordinator> coordinator,
                    StrictRateLimiterOptions options, C clock)
      : strategy_(std::in_place_type<S>, std::move(strategy)),
        coordinator_(std::move(coordinator)),
        prefix_(std::move(options.prefix)),
        policy_(options.fail_policy),
        clock_(std::move(clock)),
        limit_(std::get<S>(strategy_).peek(typename S::State{}, 1).limit) {}

  // One `check_many_async` in progress. `next[i]`: the index of the key's
  // next occurrence (or npos); `state[i]`: 0 while its step is being sent,
  // then 1 if its answer came first or 2 if the sending did, so whichever
  // of the two comes second sends the next occurrence (a backend that
  // answers inline walks a chain in a loop, never recursing).
  struct Batch {
    static constexpr size_t npos = static_cast<size_t>(-1);
    Batch(StrictRateLimiter* self, std::span<const std::string_view> keys,
          double cost, Completion<std::vector<Decision>> done)
        : self(self),
          keys(keys.begin(), keys.end()),
          out(keys.size(), absl::UnknownError("not checked")),
          next(keys.size(), npos),
          first(keys.size(), true),
          state(keys.size()),
          left(keys.size()),
          cost(cost),
          done(std::move(done)) {
      absl::flat_hash_map<std::string_view, size_t> last;
      for (size_t i = 0; i < this->keys.size(); ++i) {
        auto [it, fresh] = last.try_emplace(this->keys[i], i);
        if (!fresh) {
          next[it->second] = i;
          first[i] = false;
          it->second = i;
        }
      }
    }
    StrictRateLimiter* self;
    std::vector<std::string> keys;
    std::vector<absl::StatusOr<Decision>> out;
    std::vector<size_t> next;
    std::vector<bool> first;
    std::vector<std::atomic<int>> state;
    std::atomic<size_t> left;
    double cost;
    int64_t at = 0;
    Completion<std::vector<Decision>> done;
  };

  // Sends key `i`'s step and, while answers come before the sending ends,
  // the steps of its later occurrences.
  static void send_chain(const std::shared_ptr<Batch>& batch, size_t i) {
    Batch& b = *batch;
    while (i != Batch::npos) {
      b.self->check_at_async(
          b.keys[i], b.at, b.cost, [batch, i](absl::StatusOr<Decision> d) {
            Batch& b = *batch;
            b.out[i] = std::move(d);
            const size_t next = b.next[i];
            if (b.state[i].exchange(1, std::memory_order_acq_rel) == 2 &&
                next != Batch::npos) {
              send_chain(batch, next);  // the sender has left
            }
            if (b.left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
              finish(b);
            }
          });
      if (b.state[i].exchange(2, std::memory_order_acq_rel) != 1) return;
      i = b.next[i];  // answered already: send the next one here
    }
  }

  // Every key answered: the first status in key order, else the decisions.
  static void finish(Batch& b) {
    std::vector<Decision> decisions;
    decisions.reserve(b.out.size());
    for (absl::StatusOr<Decision>& d : b.out) {
      if (!d.ok()) {
        std::move(b.done)(d.status());
        return;
      }
      decisions.push_back(*d);
    }
    std::move(b.done)(std::move(decisions));
  }

  absl::StatusOr<Decision> decide(absl::StatusOr<Decision> d, int64_t now_ms) {
    if (d.ok()) [[likely]] {
      return d;
    }
    absl::StatusOr<Decision> decided = policy_.on_error(
        d.status(), limit_, now_ms != 0 ? now_ms : clock_.now_ms());
    if (decided.ok()) outages_.fetch_add(1, std::memory_order_relaxed);
    return decided;
  }

  const AnyStrategy strategy_;
  const std::shared_ptr<Coordinator> coordinator_;
  const std::string prefix_;
  const FailPolicy policy_;
  const C clock_;
  const int64_t limit_;
  std::atomic<int64_t> outages_{0};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_
