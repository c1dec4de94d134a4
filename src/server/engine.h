// src/server/engine.h
//
// Provides `Engine`: a rate engine behind one virtual interface, so the
// server picks a strategy and a store from its configuration at run time and
// composes them (a limiter, the axes of an admission) as the library does at
// compile time. `Engine` satisfies the `RateEngine` concept
// (include/throttlekit/core/rate_engine.h); `make_engine` wraps any concrete
// engine.
//
// Thread-safety: as the wrapped engine (every library engine is thread-safe).

#ifndef THROTTLEKIT_SRC_SERVER_ENGINE_H_
#define THROTTLEKIT_SRC_SERVER_ENGINE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/rate_engine.h"

namespace throttlekit::server {

class Engine {
 public:
  struct Stats {};

  virtual ~Engine() = default;

  virtual absl::StatusOr<Decision> check(std::string_view key,
                                         double cost = 1) = 0;
  virtual absl::StatusOr<Decision> check_at(std::string_view key,
                                            int64_t now_ms,
                                            double cost = 1) = 0;
  virtual absl::Status check_many(std::span<const std::string_view> keys,
                                  std::span<Decision> out, double cost = 1) = 0;
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return check_many_vector(*this, keys, cost);
  }
  virtual absl::StatusOr<Decision> peek(std::string_view key) = 0;
  virtual absl::StatusOr<Forecast> forecast(std::string_view key,
                                            double cost = 1) = 0;
  virtual absl::Status reset(std::string_view key) = 0;
  // Without waiting (docs/async.md): the wrapped engine's `check_async`
  // where it is an `AsyncRateEngine`; otherwise `check`, completed inline.
  virtual void check_async(std::string_view key, double cost,
                           DecisionCompletion on_done) {
    std::move(on_done)(check(key, cost));
  }
  // As `check_async`, at a caller-supplied epoch-ms `now_ms`.
  virtual void check_at_async(std::string_view key, int64_t now_ms, double cost,
                              DecisionCompletion on_done) {
    std::move(on_done)(check_at(key, now_ms, cost));
  }
  // `co_await engine.async_check(key)` (core/check_awaitable.h).
  CheckAwaitable<Engine> async_check(std::string_view key, double cost = 1) {
    return CheckAwaitable<Engine>(*this, key, cost);
  }
  // `check_many` without waiting: the wrapped engine's `check_many_async`
  // where it has one (a strict engine: the batch pipelined); otherwise
  // `check_many`, completed inline.
  virtual void check_many_async(std::span<const std::string_view> keys,
                                double cost,
                                Completion<std::vector<Decision>> on_done) {
    std::move(on_done)(check_many(keys, cost));
  }
  // True when `check_many_async` never makes its calling thread wait on a
  // store.
  virtual bool batches_without_waiting() const { return false; }
  // True when `check_async` never makes its calling thread wait on a store
  // (an asynchronous engine, or one whose every answer is in memory); the
  // server runs the others' checks on its blocking pool (blocking_pool.h).
  virtual bool answers_without_waiting() const { return false; }
  // The wrapped engine's `decides_at_store` (core/rate_engine.h).
  virtual bool decides_at_store() const { return false; }
  Stats stats() const { return {}; }
};

static_assert(AsyncRateEngine<Engine>);

namespace detail {

template <RateEngine E>
class EngineOf final : public Engine {
 public:
  explicit EngineOf(std::shared_ptr<E> engine) : engine_(std::move(engine)) {}

  absl::StatusOr<Decision> check(std::string_view key, double cost) override {
    return engine_->check(key, cost);
  }
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost) override {
    return engine_->check_at(key, now_ms, cost);
  }
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost) override {
    return engine_->check_many(keys, out, cost);
  }
  absl::StatusOr<Decision> peek(std::string_view key) override {
    return engine_->peek(key);
  }
  absl::StatusOr<Forecast> forecast(std::string_view key,
                                    double cost) override {
    return engine_->forecast(key, cost);
  }
  absl::Status reset(std::string_view key) override {
    return engine_->reset(key);
  }
  void check_async(std::string_view key, double cost,
                   DecisionCompletion on_done) override {
    if constexpr (AsyncRateEngine<E>) {
      engine_->check_async(key, cost, std::move(on_done));
    } else {
      std::move(on_done)(engine_->check(key, cost));
    }
  }
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      DecisionCompletion on_done) override {
    if constexpr (AsyncRateEngine<E>) {
      engine_->check_at_async(key, now_ms, cost, std::move(on_done));
    } else {
      std::move(on_done)(engine_->check_at(key, now_ms, cost));
    }
  }
  bool answers_without_waiting() const override { return AsyncRateEngine<E>; }
  void check_many_async(std::span<const std::string_view> keys, double cost,
                        Completion<std::vector<Decision>> on_done) override {
    if constexpr (kBatchesAsync) {
      engine_->check_many_async(keys, cost, std::move(on_done));
    } else {
      std::move(on_done)(engine_->check_many(keys, cost));
    }
  }
  bool batches_without_waiting() const override { return kBatchesAsync; }
  bool decides_at_store() const override {
    return throttlekit::decides_at_store(*engine_);
  }

 private:
  static constexpr bool kBatchesAsync =
      requires(E & e, std::span<const std::string_view> keys, double cost,
               Completion<std::vector<Decision>> done) {
    e.check_many_async(keys, cost, std::move(done));
  };

  std::shared_ptr<E> engine_;
};

}  // namespace detail

// Wraps `engine` behind the virtual interface.
template <RateEngine E>
std::shared_ptr<Engine> make_engine(std::shared_ptr<E> engine) {
  return std::make_shared<detail::EngineOf<E>>(std::move(engine));
}
template <RateEngine E>
std::shared_ptr<Engine> make_engine(std::unique_ptr<E> engine) {
  return make_engine(std::shared_ptr<E>(std::move(engine)));
}

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ENGINE_H_
