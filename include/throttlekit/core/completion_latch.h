// throttlekit/core/completion_latch.h
//
// Provides `CompletionLatch<T>`: how a blocking verb is built on its
// asynchronous form (docs/async.md, "One decision path"). The caller hands
// `completion()` to the asynchronous call and `wait()`s for the value; a
// completion that ran inline makes `wait()` return at once.
//
//     CompletionLatch<Decision> latch;
//     engine.miss_async(key, now, cost, latch.completion());
//     absl::StatusOr<Decision> d = latch.wait();
//
// The completion holds only a pointer to the latch (it fits in the
// `Completion`'s inline storage: no allocation), so the latch must outlive
// it: `wait()` before the latch goes out of scope, always. A completion
// that runs on the waiting thread (inline, before `wait()`) stores its
// value and returns: no lock, no signal, no system call (`complete`, for a
// caller that holds the latch itself, skips the type-erased call too).
// Another thread publishes the value through one atomic word and wakes
// the waiter (C++20 atomic wait), then says it is done with the latch; the
// waiter returns (and destroys the latch) only after that.
//
// Thread-safety: one completion, on any thread, and one waiter: the thread
// that made the latch.

#ifndef THROTTLEKIT_CORE_COMPLETION_LATCH_H_
#define THROTTLEKIT_CORE_COMPLETION_LATCH_H_

#include <atomic>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "throttlekit/core/completion.h"

namespace throttlekit {

namespace completion_latch_internal {
// A per-thread address: which thread runs a completion, told without a
// call into the threads library (`std::this_thread::get_id()` is one).
inline const void* this_thread_tag() noexcept {
  static thread_local char tag;
  return &tag;
}
}  // namespace completion_latch_internal

template <class T>
class CompletionLatch {
 public:
  // The value lands in the latch's own slot; `wait()` returns it.
  CompletionLatch() : own_(std::in_place, absl::in_place), slot_(&*own_) {}
  // The value lands in `into`, which must outlive the latch: a caller of
  // this form calls `await()` and returns `into` (the blocking verb's
  // return value, written in place: no move out of the latch).
  explicit CompletionLatch(absl::StatusOr<T>& into) : slot_(&into) {}
  CompletionLatch(const CompletionLatch&) = delete;
  CompletionLatch& operator=(const CompletionLatch&) = delete;

  // The completion to hand to the asynchronous call; call once.
  Completion<T> completion() {
    return [this](absl::StatusOr<T> v) { complete(std::move(v)); };
  }

  // What the completion does, for a caller that holds the latch itself
  // (coordinator/verb_completion.h): once, instead of the completion.
  void complete(absl::StatusOr<T>&& v) {
    *slot_ = std::move(v);
    if (completion_latch_internal::this_thread_tag() == waiter_) {
      // The waiter itself, before wait(): sequenced before its read.
      state_.store(kInline, std::memory_order_relaxed);
      return;
    }
    state_.store(kDone, std::memory_order_release);
    state_.notify_one();
    notified_.store(true, std::memory_order_release);
  }

  // Blocks until the completion has run. Called by the thread that made
  // the latch.
  void await() {
    int s = state_.load(std::memory_order_acquire);
    if (s == kInline) [[likely]] {
      return;
    }
    while (s == kPending) {
      state_.wait(kPending, std::memory_order_acquire);
      s = state_.load(std::memory_order_acquire);
    }
    // The completing thread may still be inside notify_one: the latch
    // lives until it is out.
    while (!notified_.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
  }

  // `await()`, then the value (moved out of the latch's own slot).
  absl::StatusOr<T> wait() {
    await();
    return std::move(*slot_);
  }

 private:
  static constexpr int kPending = 0;
  static constexpr int kInline = 1;  // completed by the waiting thread
  static constexpr int kDone = 2;    // completed by another thread

  const void* const waiter_ = completion_latch_internal::this_thread_tag();
  // Written once by the completion, read by the waiter after `state_`
  // says it was (release/acquire), or by the waiting thread itself.
  // Holds a `T{}` until then (not a status: absl's default status is built
  // out of line).
  std::optional<absl::StatusOr<T>> own_;  // engaged in the first form only
  absl::StatusOr<T>* const slot_;
  std::atomic<int> state_{kPending};
  std::atomic<bool> notified_{false};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_COMPLETION_LATCH_H_
