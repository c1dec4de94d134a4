// throttlekit/store/rate_limiter.h
//
// Provides `RateLimiter<S, C>`
//
//     auto limiter = throttlekit::RateLimiter<throttlekit::Gcra>::create(
//         {.limit = 100, .period_ms = 60'000});
//     absl::StatusOr<Decision> d = limiter->check("user:42");
//     if (d.ok() && !d->allowed) return reply_429(*d);
//
// Each call reads the clock once (or takes a caller-supplied `now_ms`,
// which saves the ~25 ns clock read on hot paths that already have the time).
// Invalid arguments (an empty key, a key over 1 MiB, cost 0, negative, NaN,
// infinite or above 2^53-1) return kInvalidArgument naming the problem and
// never reach the store.
//
// The prefix names the limiter's keyspace; it is joined with `join_key` where
// keys leave the process (distributed backends, logs). In memory every
// limiter has its own store, so the prefix never costs a string build.
//
// `check_async` and `async_check` (core/completion.h, docs/async.md) are
// the asynchronous forms every engine shares; in memory nothing waits, so
// they complete inline, before returning, and allocate nothing.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_STORE_RATE_LIMITER_H_
#define THROTTLEKIT_STORE_RATE_LIMITER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/key.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

struct RateLimiterOptions {
  // Names the keyspace (`prefix:key` where keys leave the process).
  std::string prefix;
  // Bounds and sharding of the embedded store.
  MemoryStoreOptions store;
};

template <Strategy S, EpochClock C = DefaultClock>
class RateLimiter {
 public:
  struct Stats {
    int64_t keys = 0;  // keys the store holds (expired ones included)
  };

  // Validates the strategy and store options; errors name the field.
  static absl::StatusOr<RateLimiter> create(
      const typename S::Options& strategy_options,
      RateLimiterOptions options = {}, C clock = C{}) {
    absl::StatusOr<S> strategy = S::create(strategy_options);
    if (!strategy.ok()) return strategy.status();
    auto store = MemoryStore<S>::create(*std::move(strategy), options.store);
    if (!store.ok()) return store.status();
    return RateLimiter(std::move(options.prefix), *std::move(store),
                       std::move(clock));
  }

  RateLimiter(RateLimiter&&) noexcept = default;
  RateLimiter& operator=(RateLimiter&&) noexcept = default;

  // Admits or denies `cost` units for `key` now. Thread-safe.
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return check_at(key, clock_.now_ms(), cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms`. Thread-safe.
  THROTTLEKIT_ALWAYS_INLINE absl::StatusOr<Decision> check_at(
      std::string_view key, int64_t now_ms, double cost = 1) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      return validate(key, cost);
    }
    return store_->check(key, now_ms, cost);
  }

  // As `check`, with the answer passed to `on_done`, inline, before this
  // returns (in memory nothing waits; the same surface as the store-backed
  // engines). Allocates nothing. Thread-safe.
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    std::forward<F>(on_done)(check(key, cost));
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    std::forward<F>(on_done)(check(key, 1));
  }
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    std::forward<F>(on_done)(check_at(key, now_ms, cost));
  }

  // `co_await limiter.async_check(key)` (core/check_awaitable.h): never
  // suspends.
  CheckAwaitable<RateLimiter> async_check(std::string_view key,
                                          double cost = 1) {
    return CheckAwaitable<RateLimiter>(*this, key, cost);
  }

  // Checks every key at one `now` (each key independently: a denial of one
  // does not undo the others), in key order, with the decisions `check_at`
  // would give one by one; distinct cold keys' cache misses overlap
  // (docs/memory_store.md, "Batches"). Writes one decision per key into `out`
  // (`out.size()` must equal `keys.size()`); on an invalid key or cost
  // nothing is checked. Allocates nothing. Thread-safe.
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    if (out.size() != keys.size()) {
      return absl::InvalidArgumentError(
          "check_many: out.size() must equal keys.size()");
    }
    for (std::string_view key : keys) {
      if (absl::Status s = validate(key, cost); !s.ok()) return s;
    }
    // The store overlaps the keys' cache misses (MemoryStore::check_many).
    store_->check_many(keys, clock_.now_ms(), cost, out);
    return absl::OkStatus();
  }

  // As above, returning the decisions in key order. Thread-safe.
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    std::vector<Decision> out(keys.size());
    if (absl::Status s = check_many(keys, std::span<Decision>(out), cost);
        !s.ok()) {
      return s;
    }
    return out;
  }

  // The decision a cost-1 request would get now, without consuming.
  // Thread-safe.
  absl::StatusOr<Decision> peek(std::string_view key) const {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return store_->peek(key, clock_.now_ms());
  }

  // What `key` could spend now and when it refills. Writes nothing.
  // Thread-safe.
  absl::StatusOr<Forecast> forecast(std::string_view key,
                                    double cost = 1) const {
    if (absl::Status s = validate(key, cost); !s.ok()) return s;
    return store_->forecast(key, clock_.now_ms(), cost);
  }

  // Forgets `key` (its next check sees a cold key). Thread-safe.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    store_->reset(key);
    return absl::OkStatus();
  }

  // Thread-safe (a walk over the store's shards).
  Stats stats() const { return Stats{static_cast<int64_t>(store_->size())}; }

  const std::string& prefix() const noexcept { return prefix_; }
  const S& strategy() const noexcept { return store_->strategy(); }
  const MemoryStore<S>& store() const noexcept { return *store_; }
  const C& clock() const noexcept { return clock_; }

 private:
  RateLimiter(std::string prefix, std::unique_ptr<MemoryStore<S>> store,
              C clock)
      : prefix_(std::move(prefix)),
        store_(std::move(store)),
        clock_(std::move(clock)) {}

  static absl::Status validate(std::string_view key, double cost) {
    if (is_valid_key(key) && is_valid_cost(cost)) [[likely]] {
      return absl::OkStatus();
    }
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return validate_cost(cost);
  }

  std::string prefix_;
  std::unique_ptr<MemoryStore<S>> store_;
  C clock_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_STORE_RATE_LIMITER_H_
