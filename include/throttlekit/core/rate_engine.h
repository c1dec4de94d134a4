// throttlekit/core/rate_engine.h
//
// Provides the `RateEngine` concept: the one surface every rate engine
// answers, so a request handler written against it runs unchanged on the
// embedded store, on Redis or Postgres, strict, cached-deny or leased
// (docs/architecture.md, "One surface"):
//
//     check(key, cost = 1)            -> absl::StatusOr<Decision>
//     check_at(key, now_ms, cost = 1) -> absl::StatusOr<Decision>
//     check_many(keys, out, cost = 1) -> absl::Status   (out: span<Decision>)
//     check_many(keys, cost = 1)      -> absl::StatusOr<std::vector<Decision>>
//     peek(key)                       -> absl::StatusOr<Decision>
//     forecast(key, cost = 1)         -> absl::StatusOr<Forecast>
//     reset(key)                      -> absl::Status
//     stats()                         -> E::Stats (the engine's counters)
//
// Engines: `RateLimiter<S>` (memory), `StrictRateLimiter<S>` over any
// `Coordinator`, `CachedDenyLimiter<S>`, `LeasedLimiter`, `TwoTier<S>`. Each
// is created by a static `create(options..., clock)` returning
// absl::StatusOr, with the clock injected (defaulting to the system clock).
// A verb an engine cannot answer honestly returns kUnimplemented naming the
// engine and the verb (`unimplemented_verb`); nothing is silently ignored.
// Bad arguments (an empty key, cost 0, NaN, ...) are kInvalidArgument on
// every engine, checked before anything else.

#ifndef THROTTLEKIT_CORE_RATE_ENGINE_H_
#define THROTTLEKIT_CORE_RATE_ENGINE_H_

#include <atomic>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"

namespace throttlekit {

template <class E>
concept RateEngine = requires(E& e, std::string_view key, int64_t now_ms,
                              double cost,
                              std::span<const std::string_view> keys,
                              std::span<Decision> out) {
  typename E::Stats;
  { e.check(key) } -> std::same_as<absl::StatusOr<Decision>>;
  { e.check(key, cost) } -> std::same_as<absl::StatusOr<Decision>>;
  { e.check_at(key, now_ms, cost) } -> std::same_as<absl::StatusOr<Decision>>;
  { e.check_many(keys, out, cost) } -> std::same_as<absl::Status>;
  {
    e.check_many(keys, cost)
    } -> std::same_as<absl::StatusOr<std::vector<Decision>>>;
  { e.peek(key) } -> std::same_as<absl::StatusOr<Decision>>;
  { e.forecast(key, cost) } -> std::same_as<absl::StatusOr<Forecast>>;
  { e.reset(key) } -> std::same_as<absl::Status>;
  { e.stats() } -> std::same_as<typename E::Stats>;
};

// An engine callable from an event loop (docs/async.md): `check_async`
// completes exactly once without blocking its caller on the store
// (core/completion.h), `check_at_async` does so at a given epoch-ms `now`,
// and `async_check` is its awaitable
// (core/check_awaitable.h). `RateLimiter` (inline), `StrictRateLimiter`
// and `CachedDenyLimiter` (through the coordinator's asynchronous path),
// `LeasedLimiter` (hits inline, misses through `lease_async`) and
// `TwoTier` answer it today.
template <class E>
concept AsyncRateEngine = RateEngine<E> &&
    requires(E& e, std::string_view key, int64_t now_ms, double cost,
             DecisionCompletion done) {
  e.check_async(key, cost, std::move(done));
  e.check_at_async(key, now_ms, cost, std::move(done));
  e.async_check(key, cost);
};

// True when `engine`, asked without a `now` (`check`, `check_async`),
// decides at a shared store on the store's clock, read inside the store's
// atomic step: `StrictRateLimiter`, `CachedDenyLimiter`, `TwoTier` in its
// strict and cached-deny modes, the fused Redis pair. An engine says so
// with a `decides_at_store()` member; without one, false. Callers holding a
// `now` of their own read before the round trip (`UnifiedAdmission`) ask
// such an engine without it, because a stale `now` reaching the store after
// its window's state expired there counts the ended window afresh
// (docs/redis.md, "Physical TTL and a stale now").
template <class E>
bool decides_at_store(const E& engine) noexcept {
  if constexpr (requires {
                  { engine.decides_at_store() } -> std::convertible_to<bool>;
                }) {
    return engine.decides_at_store();
  } else {
    return false;
  }
}

// The status of a verb `engine` cannot answer honestly, saying why.
inline absl::Status unimplemented_verb(std::string_view engine,
                                       std::string_view verb,
                                       std::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat(absl::string_view(engine.data(), engine.size()), ".",
                   absl::string_view(verb.data(), verb.size()), ": ",
                   absl::string_view(why.data(), why.size())));
}

// check_many as a loop, for engines whose batch is one: `check(key)` for
// each key, independently (a denial of one does not undo the others).
// `out.size()` must equal `keys.size()`; on an invalid key or cost nothing
// is checked; the first error after that stops the batch and is returned.
template <class Check>
absl::Status check_each(std::span<const std::string_view> keys,
                        std::span<Decision> out, double cost, Check check) {
  if (out.size() != keys.size()) {
    return absl::InvalidArgumentError(
        "check_many: out.size() must equal keys.size()");
  }
  for (std::string_view key : keys) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
  }
  if (absl::Status s = validate_cost(cost); !s.ok()) return s;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<Decision> d = check(keys[i]);
    if (!d.ok()) return d.status();
    out[i] = *d;
  }
  return absl::OkStatus();
}

// The start every `check_many_async` shares: completes `on_done` inline
// and returns true when the batch needs no step (an invalid key or cost:
// its status, nothing checked; no keys: no decisions); else false, with
// `on_done` untouched.
inline bool batch_settled_inline(std::span<const std::string_view> keys,
                                 double cost,
                                 Completion<std::vector<Decision>>& on_done) {
  absl::Status s;
  for (std::string_view key : keys) {
    s = validate_key(key);
    if (!s.ok()) break;
  }
  if (s.ok()) s = validate_cost(cost);
  if (!s.ok()) {
    std::move(on_done)(std::move(s));
    return true;
  }
  if (keys.empty()) {
    std::move(on_done)(std::vector<Decision>());
    return true;
  }
  return false;
}

// The body of a `check_many_async` that checks each key on its own:
// `check_one(i, on_answer)` starts key i's check (every key at one
// instant, which `check_one` captures) and `on_answer` takes its answer.
// Each answer goes to its own slot; the last to arrive completes
// `on_done` with the decisions in key order, or the first error in key
// order (the other keys checked all the same). One allocation per batch.
// Call it after `batch_settled_inline`.
template <class CheckOne>
void gather_each_async(size_t n, Completion<std::vector<Decision>> on_done,
                       CheckOne&& check_one) {
  struct Batch {
    Batch(size_t n, Completion<std::vector<Decision>> on_done)
        : answers(n, absl::UnknownError("unanswered")),
          left(n),
          done(std::move(on_done)) {}
    std::vector<absl::StatusOr<Decision>> answers;
    std::atomic<size_t> left;
    Completion<std::vector<Decision>> done;
  };
  auto batch = std::make_shared<Batch>(n, std::move(on_done));
  for (size_t i = 0; i < n; ++i) {
    check_one(i, [batch, i](absl::StatusOr<Decision> d) {
      batch->answers[i] = std::move(d);
      // acq_rel: the last sees every other slot's write.
      if (batch->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      std::vector<Decision> out;
      out.reserve(batch->answers.size());
      for (absl::StatusOr<Decision>& a : batch->answers) {
        if (!a.ok()) {
          std::move(batch->done)(a.status());
          return;
        }
        out.push_back(*a);
      }
      std::move(batch->done)(std::move(out));
    });
  }
}

// The vector form of check_many over the span form.
template <class E>
absl::StatusOr<std::vector<Decision>> check_many_vector(
    E& engine, std::span<const std::string_view> keys, double cost) {
  std::vector<Decision> out(keys.size());
  if (absl::Status s = engine.check_many(keys, std::span<Decision>(out), cost);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_RATE_ENGINE_H_
