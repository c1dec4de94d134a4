// throttlekit/core/completion.h
//
// Provides the completion of an asynchronous call (docs/async.md): what an
// engine's `check_async` and a coordinator's `*_async` verbs call when the
// answer is known.
//
//     limiter->check_async("user:42", 1, [](absl::StatusOr<Decision> d) {
//       ...  // runs exactly once, with the decision or a status
//     });
//
// The contract, on every engine and coordinator that takes one:
// - it runs exactly once, with what the blocking verb would have returned
//   (a decision, or a status: invalid arguments, an outage the fail policy
//   leaves to the caller, kDeadlineExceeded);
// - it runs within the blocking verb's deadline;
// - it never runs with a lock of the library held, so it may call the
//   engine again;
// - an answer that needs no I/O (an in-memory check, a leased local hit)
//   runs it inline, before the call returns, and allocates nothing beyond
//   what the callable itself holds; an answer that needs the store runs it
//   on the thread that read the store's reply (the backend's I/O thread, or
//   a blocking caller that happened to lead the connection).
//
// Engines take any callable invocable with `absl::StatusOr<T>` (a template
// parameter, so the inline path never type-erases); coordinators, which
// are virtual, take the type-erased `Completion<T>`.

#ifndef THROTTLEKIT_CORE_COMPLETION_H_
#define THROTTLEKIT_CORE_COMPLETION_H_

#include <concepts>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"

namespace throttlekit {

// A completion called once with a `T` or a status.
template <class T>
using Completion = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

using DecisionCompletion = Completion<Decision>;

// A callable an engine's `check_async` accepts.
template <class F>
concept DecisionCallback = std::invocable<F, absl::StatusOr<Decision>>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_COMPLETION_H_
