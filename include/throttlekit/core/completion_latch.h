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
// value and returns: no lock, no signal, so a blocking verb built on an
// inline answer costs one indirect call and a move. Another thread signals
// under the latch's mutex, so the waiter cannot return (and destroy the
// latch) before the completing thread is done with it.
//
// Thread-safety: one completion, on any thread, and one waiter: the thread
// that made the latch.

#ifndef THROTTLEKIT_CORE_COMPLETION_LATCH_H_
#define THROTTLEKIT_CORE_COMPLETION_LATCH_H_

#include <condition_variable>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit {

template <class T>
class CompletionLatch {
 public:
  CompletionLatch() = default;
  CompletionLatch(const CompletionLatch&) = delete;
  CompletionLatch& operator=(const CompletionLatch&) = delete;

  // The completion to hand to the asynchronous call; call once.
  Completion<T> completion() {
    return [this](absl::StatusOr<T> v) { set(std::move(v)); };
  }

  // Blocks until the completion has run; returns its value. Called by the
  // thread that made the latch.
  absl::StatusOr<T> wait() {
    if (inline_.has_value()) return *std::move(inline_);
    MutexLock lock(mu_);
    NativeWait native(mu_);
    cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return value_.has_value();
    });
    return *std::move(value_);
  }

 private:
  void set(absl::StatusOr<T> v) {
    if (std::this_thread::get_id() == waiter_) {
      // The waiter itself, before wait(): nobody else reads `inline_`.
      inline_.emplace(std::move(v));
      return;
    }
    MutexLock lock(mu_);
    value_ = std::move(v);
    cv_.notify_one();
  }

  const std::thread::id waiter_ = std::this_thread::get_id();
  // Written and read by the waiting thread only.
  std::optional<absl::StatusOr<T>> inline_;
  Mutex mu_;
  std::condition_variable cv_;
  std::optional<absl::StatusOr<T>> value_ ABSL_GUARDED_BY(mu_);
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_COMPLETION_LATCH_H_
