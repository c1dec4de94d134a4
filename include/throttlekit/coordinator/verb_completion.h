// throttlekit/coordinator/verb_completion.h
//
// Provides `VerbCompletion<T>`: what a Coordinator backend's hook
// completes (coordinator.h, "Backends"). It carries the caller's
// `Completion<T>` and one fact about the caller: whether it is blocked on
// the calling thread until the completion runs (the blocking verb, which
// the base derives from the hook by waiting on it) or went on with its work
// (the `*_async` verb).
//
// A backend reads `caller_waits()` to choose where the work runs, never
// what it computes: a store with an I/O thread (Redis, Postgres) runs a
// waited-for call on the calling thread, which then leads a connection
// itself, instead of handing it to the I/O thread and waking the caller
// from there; the simulator answers a waited-for call at the instant of
// the call (its loop cannot block). A backend that needs no I/O (memory)
// completes inline either way, and ignores it.
//
// Thread-safety: a value type; complete it once, from any thread.

#ifndef THROTTLEKIT_COORDINATOR_VERB_COMPLETION_H_
#define THROTTLEKIT_COORDINATOR_VERB_COMPLETION_H_

#include <new>
#include <utility>

#include "absl/status/statusor.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/completion_latch.h"

namespace throttlekit {

// The answer of a verb that answers only a status (`reset`, `ping`).
struct Acknowledged {};

template <class T>
class VerbCompletion {
 public:
  // The completion of an asynchronous caller, who does not wait for it.
  explicit VerbCompletion(Completion<T> done) noexcept
      : done_(std::move(done)) {}
  // The same, `done` owned by the caller and alive until the hook returns
  // (the `*_async` verb's own argument): a hook that completes inline runs
  // it in place, and moving this completion (to keep it past the hook)
  // moves `done` out; so the inline path relocates no type-erased
  // callable.
  static VerbCompletion borrowed(Completion<T>& done) noexcept {
    return VerbCompletion(&done);
  }

  // The completion of a caller blocked on this thread until it runs.
  static VerbCompletion waited(Completion<T> done) noexcept {
    return VerbCompletion(std::move(done), true);
  }
  // The same, the caller waiting on `latch` (made by this thread): the
  // value goes straight into it, with no type-erased call and no
  // type-erased callable to move or destroy (the blocking verb,
  // `Coordinator::wait_for`).
  static VerbCompletion waited(CompletionLatch<T>& latch) noexcept {
    return VerbCompletion(&latch);
  }

  VerbCompletion(VerbCompletion&& other) noexcept
      : latch_(other.latch_), caller_waits_(other.caller_waits_) {
    if (latch_ != nullptr) return;
    new (&done_) Completion<T>(
        std::move(other.borrowed_ != nullptr ? *other.borrowed_ : other.done_));
  }
  VerbCompletion& operator=(VerbCompletion&&) = delete;
  ~VerbCompletion() {
    if (latch_ == nullptr && borrowed_ == nullptr) done_.~Completion<T>();
  }

  // Whether the caller is blocked on the calling thread until this runs.
  bool caller_waits() const noexcept { return caller_waits_; }

  // Runs the caller's completion with `v`; call once.
  void operator()(absl::StatusOr<T> v) && {
    if (latch_ != nullptr) {
      latch_->complete(std::move(v));
    } else if (borrowed_ != nullptr) {
      std::move (*borrowed_)(std::move(v));
    } else {
      std::move(done_)(std::move(v));
    }
  }

  // The caller's completion itself, to hand to a queue or to another
  // coordinator's `*_async` verb (which then owes it the same contract).
  Completion<T> release() && {
    if (latch_ != nullptr) return latch_->completion();
    if (borrowed_ != nullptr) return std::move(*borrowed_);
    return std::move(done_);
  }

  // A completion of a `U`, for the same caller, that completes this one
  // with `f(u)` (`f` maps an `absl::StatusOr<U>` to an `absl::StatusOr<T>`):
  // one verb answered by another. It holds this completion, so it may
  // allocate; for verbs off the hot path.
  template <class U, class F>
  VerbCompletion<U> then(F f) && {
    const bool waits = caller_waits_;
    return VerbCompletion<U>(
        [done = std::move(*this).release(), f = std::move(f)](
            absl::StatusOr<U> u) mutable { std::move(done)(f(std::move(u))); },
        waits);
  }

 private:
  template <class>
  friend class VerbCompletion;
  VerbCompletion(Completion<T> done, bool caller_waits) noexcept
      : done_(std::move(done)), caller_waits_(caller_waits) {}
  explicit VerbCompletion(CompletionLatch<T>* latch) noexcept
      : latch_(latch), caller_waits_(true) {}
  explicit VerbCompletion(Completion<T>* borrowed) noexcept
      : borrowed_(borrowed) {}

  // Exactly one is live: `latch_` when set (the waiter's latch), else
  // `borrowed_` when set (the caller's own completion), else `done_` (a
  // union member, so neither of the others constructs it).
  union {
    Completion<T> done_;
  };
  CompletionLatch<T>* latch_ = nullptr;
  Completion<T>* borrowed_ = nullptr;
  bool caller_waits_ = false;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_VERB_COMPLETION_H_
