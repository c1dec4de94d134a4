// throttlekit/core/check_awaitable.h
//
// Provides `CheckAwaitable<E>`: an engine's `check_async` as a C++20
// awaitable (and `CompletionAwaitable<T>`, the same for any verb that
// completes once with a `T`, e.g. `UnifiedAdmission::async_admit`), so a
// coroutine writes
//
//     absl::StatusOr<Decision> d = co_await limiter->async_check("user:42");
//
// with any coroutine type (no task type is imposed; docs/async.md). The
// coroutine does not suspend when the answer is already known (an
// in-memory engine, invalid arguments); otherwise it suspends and is
// resumed exactly once, on the thread that completed the check (a store
// backend's I/O thread): a coroutine that must continue on its own event
// loop uses the Asio adapter (asio/async_check.h), which dispatches there.
//
// Contract: `key` must stay valid until the co_await expression ends (a
// temporary argument does); the engine must outlive it. One awaitable is
// awaited once. Thread-safety: as the engine's `check_async`.

#ifndef THROTTLEKIT_CORE_CHECK_AWAITABLE_H_
#define THROTTLEKIT_CORE_CHECK_AWAITABLE_H_

#include <atomic>
#include <coroutine>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

// The suspension logic every awaitable of an asynchronous verb shares: the
// result `T` of a verb that completes exactly once, inline or later.
template <class T>
class CompletionAwaitable {
 public:
  CompletionAwaitable() = default;
  CompletionAwaitable(const CompletionAwaitable&) = delete;
  CompletionAwaitable& operator=(const CompletionAwaitable&) = delete;

  bool await_ready() const noexcept { return false; }
  T await_resume() { return *std::move(result_); }

 protected:
  // Calls `start(completion)`, which starts the verb with `completion`;
  // suspends unless it completed inline. Whichever of this function and the
  // completion comes second resumes (or continues) the coroutine, so an
  // inline answer never resumes it recursively.
  template <class Start>
  bool suspend(std::coroutine_handle<> waiting, Start&& start) {
    waiting_ = waiting;
    std::forward<Start>(start)([this](T v) {
      result_.emplace(std::move(v));
      if (second_.exchange(true, std::memory_order_acq_rel)) {
        waiting_.resume();
      }
    });
    return !second_.exchange(true, std::memory_order_acq_rel);
  }

 private:
  std::coroutine_handle<> waiting_;
  std::optional<T> result_;
  // Set by the first of suspend's return and the completion.
  std::atomic<bool> second_{false};
};

template <class E>
class [[nodiscard]] CheckAwaitable
    : public CompletionAwaitable<absl::StatusOr<Decision>> {
 public:
  CheckAwaitable(E& engine, std::string_view key, double cost)
      : engine_(engine), key_(key), cost_(cost) {}

  // Starts the check; suspends unless it completed inline.
  bool await_suspend(std::coroutine_handle<> waiting) {
    return suspend(waiting, [this](auto done) {
      engine_.check_async(key_, cost_, std::move(done));
    });
  }

 private:
  E& engine_;
  std::string_view key_;
  double cost_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_CHECK_AWAITABLE_H_
