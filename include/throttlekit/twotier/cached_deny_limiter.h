// throttlekit/twotier/cached_deny_limiter.h
//
// Provides `CachedDenyLimiter<S>`: the two-tier engine's cached-deny mode
// (docs/twotier.md, "Cached-deny mode"). Every admission is decided by the
// store exactly as in strict mode (`StrictRateLimiter`: one round trip, the
// fleet shares one limit); a denial is remembered locally for its retry hint
// (`DenyCache`), and a call on that key for at least the denied cost is
// answered from memory in that time. A flood on a blocked key costs no round
// trips.
//
//     auto limiter = CachedDenyLimiter<Gcra>::create(
//         {.limit = 100, .period_ms = 60'000}, redis, {.prefix = "api"});
//     absl::StatusOr<Decision> d = limiter->check("user:42");
//
// Bound: never admits more than strict mode (admissions are the store's).
// A cached denial may deny what the store would now admit when capacity was
// freed early (a `reset` on another node, a give-back): conservative for at
// most the hint. `reset` on this node forgets its cached denial. The cache
// is per process: nodes learn of a denial each on its own.
//
// Clocks: the store decides on its clock (`check`) or the caller's
// (`check_at`); the cache counts the hint down on this node's clock `C`
// (`check`) or the caller's `now_ms` (`check_at`), so clock skew between the
// node and the store does not stretch a denial.
//
// Failure: outages follow `fail_policy` as in `StrictRateLimiter`; a
// fail-closed denial is not cached (the store is retried on the next call).
//
// Without waiting (docs/async.md): `check_async` / `check_at_async` answer
// a cached denial inline, before returning, with no allocation; otherwise
// they send the store step through the coordinator's asynchronous path and
// complete with what `check` would return (the same cache update and fail
// policy, one code path after the store's answer).
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive the limiter, and the limiter every pending
// asynchronous call.

#ifndef THROTTLEKIT_TWOTIER_CACHED_DENY_LIMITER_H_
#define THROTTLEKIT_TWOTIER_CACHED_DENY_LIMITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/twotier/deny_cache.h"

namespace throttlekit {

struct CachedDenyOptions {
  // Names the keyspace: store keys are `prefix:key`.
  std::string prefix;
  // Denials remembered at once per node; 16 .. 2^32.
  int64_t max_keys = int64_t{1} << 16;
  // What an outage becomes (fail_policy.h).
  FailPolicy fail_policy = FailPolicy::kPropagate;
};

template <Strategy S, EpochClock C = SystemClock>
class CachedDenyLimiter {
 public:
  struct Stats {
    int64_t store_checks = 0;    // round trips to the store
    int64_t cached_denials = 0;  // denials answered from the cache
    int64_t outages = 0;         // outages decided by the fail policy
  };

  // Validates the strategy and options; errors name the field.
  static absl::StatusOr<std::unique_ptr<CachedDenyLimiter>> create(
      const typename S::Options& strategy_options,
      std::shared_ptr<Coordinator> coordinator, CachedDenyOptions options = {},
      C clock = C{}) {
    if (options.max_keys < 16 || options.max_keys > (int64_t{1} << 32)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cached_deny.max_keys must be in [16, 2^32]; got ",
                       options.max_keys));
    }
    if (absl::Status s = options.fail_policy.validate("cached_deny"); !s.ok()) {
      return s;
    }
    // The strict limiter passes outages through; this one applies the
    // policy so that it knows which denials are synthetic.
    absl::StatusOr<std::unique_ptr<StrictRateLimiter<S>>> strict =
        StrictRateLimiter<S>::create(strategy_options, std::move(coordinator),
                                     {.prefix = options.prefix});
    if (!strict.ok()) return strict.status();
    return std::unique_ptr<CachedDenyLimiter>(new CachedDenyLimiter(
        *std::move(strict), std::move(options), std::move(clock)));
  }

  // Admits or denies `cost` units for `key`: the store decides on its clock
  // unless a cached denial covers the call.
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return decide(key, clock_.now_ms(), 0, cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms` for the store and
  // the cache alike.
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    return decide(key, now_ms, now_ms, cost);
  }

  // As `check`, without waiting for the store: `on_done` runs exactly once
  // with what `check` would return (core/completion.h), inline for bad
  // input and a cached denial. Thread-safe.
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    decide_async(key, clock_.now_ms(), 0, cost, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    decide_async(key, clock_.now_ms(), 0, 1, std::forward<F>(on_done));
  }
  // As `check_at`, without waiting for the store. Thread-safe.
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    decide_async(key, now_ms, now_ms, cost, std::forward<F>(on_done));
  }
  // `co_await limiter->async_check(key)` (core/check_awaitable.h).
  CheckAwaitable<CachedDenyLimiter> async_check(std::string_view key,
                                                double cost = 1) {
    return CheckAwaitable<CachedDenyLimiter>(*this, key, cost);
  }

  // Checks every key as `check` does (the store on its clock, the cache at
  // one `now` of this node's clock), each independently; `out.size()` must
  // equal `keys.size()`. On an invalid key or cost nothing is checked.
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    const int64_t now = clock_.now_ms();
    return check_each(keys, out, cost, [&](std::string_view key) {
      return decide(key, now, 0, cost);
    });
  }
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return check_many_vector(*this, keys, cost);
  }

  // The store's decision for a cost-1 request, without consuming.
  absl::StatusOr<Decision> peek(std::string_view key) {
    return strict_->peek(key);
  }

  // The store's forecast (the cache never changes what the store would
  // admit; a cached denial only answers for it while it lasts).
  absl::StatusOr<Forecast> forecast(std::string_view key, double cost = 1) {
    return strict_->forecast(key, cost);
  }

  // Forgets `key` on the store and in this node's cache.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    cache_.forget(key);
    return strict_->reset(key);
  }

  Stats stats() const {
    return Stats{store_checks_.load(std::memory_order_relaxed),
                 cached_denials_.load(std::memory_order_relaxed),
                 outages_.load(std::memory_order_relaxed)};
  }
  // Denials held in the cache now.
  size_t cached() const noexcept { return cache_.size(); }

  // `check` decides on the store's clock (core/rate_engine.h).
  static constexpr bool decides_at_store() noexcept { return true; }
  const S& strategy() const noexcept { return strict_->strategy(); }

 private:
  CachedDenyLimiter(std::unique_ptr<StrictRateLimiter<S>> strict,
                    CachedDenyOptions options, C clock)
      : strict_(std::move(strict)),
        options_(std::move(options)),
        clock_(std::move(clock)),
        limit_(strict_->strategy().peek(typename S::State{}, 1).limit),
        cache_(static_cast<size_t>(options_.max_keys)) {}

  // `local_ms` runs the cache; `store_ms` goes to the store (0: its clock).
  absl::StatusOr<Decision> decide(std::string_view key, int64_t local_ms,
                                  int64_t store_ms, double cost) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      return invalid(key, cost);
    }
    if (std::optional<Decision> d = cached_denial(key, local_ms, cost)) {
      return *d;
    }
    store_checks_.fetch_add(1, std::memory_order_relaxed);
    return settle(key, local_ms, cost, strict_->check_at(key, store_ms, cost));
  }

  // `decide` without waiting for the store: the same steps, the store's
  // answer settled in the completion.
  template <class F>
  void decide_async(std::string_view key, int64_t local_ms, int64_t store_ms,
                    double cost, F&& on_done) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      std::forward<F>(on_done)(absl::StatusOr<Decision>(invalid(key, cost)));
      return;
    }
    if (std::optional<Decision> d = cached_denial(key, local_ms, cost)) {
      std::forward<F>(on_done)(absl::StatusOr<Decision>(*d));
      return;
    }
    store_checks_.fetch_add(1, std::memory_order_relaxed);
    strict_->check_at_async(
        key, store_ms, cost,
        [this, key = std::string(key), local_ms, cost,
         done = std::forward<F>(on_done)](absl::StatusOr<Decision> d) mutable {
          std::move(done)(settle(key, local_ms, cost, std::move(d)));
        });
  }

  [[gnu::cold]] static absl::Status invalid(std::string_view key, double cost) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return validate_cost(cost);
  }

  // A live cached denial covering `cost`, counted.
  std::optional<Decision> cached_denial(std::string_view key, int64_t local_ms,
                                        double cost) {
    std::optional<Decision> d = cache_.lookup(key, local_ms, cost);
    if (d.has_value()) cached_denials_.fetch_add(1, std::memory_order_relaxed);
    return d;
  }

  // The store's answer `d` to a check of `cost` on `key`: the fail policy
  // decides an outage; a denial is remembered.
  absl::StatusOr<Decision> settle(std::string_view key, int64_t local_ms,
                                  double cost, absl::StatusOr<Decision> d) {
    if (!d.ok()) {
      absl::StatusOr<Decision> decided =
          options_.fail_policy.on_error(d.status(), limit_, local_ms);
      if (decided.ok()) outages_.fetch_add(1, std::memory_order_relaxed);
      return decided;
    }
    if (!d->allowed) cache_.remember(key, local_ms, cost, *d);
    return d;
  }

  const std::unique_ptr<StrictRateLimiter<S>> strict_;
  const CachedDenyOptions options_;
  const C clock_;
  const int64_t limit_;
  DenyCache cache_;
  std::atomic<int64_t> store_checks_{0}, cached_denials_{0}, outages_{0};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_CACHED_DENY_LIMITER_H_
