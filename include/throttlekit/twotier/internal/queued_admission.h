// throttlekit/twotier/internal/queued_admission.h
//
// Provides `detail::QueuedAdmission<Owner, Request>`: the admission paths
// the two fair escrows (`WeightedFairEscrow`, `FederatedFairEscrow`) share
// around their `detail::CallQueue` (call_queue.h): one store round trip in
// flight, the calls arriving meanwhile queued and decided in arrival order
// when it lands. The escrows differ in what they ask the store and how an
// answer is booked; how a call waits for its turn, is sent, or is answered
// inline is the same, and lives here once.
//
// The owner derives from it (CRTP), befriends it, and provides, besides
// `mu_` and `CallQueue<Request> queue_` (guarded by `mu_`):
// - `CallStep<Request> begin(size_t tenant, int64_t now_ms, double cost)`,
//   under `mu_`: the call's first step, decided or needing the store;
// - `void send(QueuedCall call, Request ask)`: sends `ask` without waiting
//   (`queue_.in_flight` is set) and lands it from the reply's thread;
// - `absl::StatusOr<Decision> ask_waited(QueuedCall& call, Request ask)`:
//   asks the store on the calling thread and lands the answer.
// `Request::want` is -1 for "no request".
//
// Thread-safety: the owner's; every path here takes the owner's `mu_`.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_QUEUED_ADMISSION_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_QUEUED_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <future>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/twotier/internal/call_queue.h"

namespace throttlekit::detail {

template <class Owner, class Request>
class QueuedAdmission {
 protected:
  // The blocking path: decided inline, or (`admit_waiting`) its request
  // sent and waited for, or its turn in the queue waited for.
  absl::StatusOr<Decision> admit_index(size_t i, int64_t now_ms, double cost) {
    Owner& o = owner();
    Request ask;  // want -1: a request was in flight (queued, not begun)
    {
      MutexLock lock(o.mu_);
      if (!o.queue_.in_flight) [[likely]] {
        const CallStep<Request> step = o.begin(i, now_ms, cost);
        if (step.decided) [[likely]]
          return step.result;
        o.queue_.in_flight = true;
        ask = step.request;
      }
    }
    return admit_waiting(i, now_ms, cost, ask);
  }

  // The asynchronous path past validation: queued behind a request in
  // flight, answered inline (nothing allocated), or its request sent.
  template <DecisionCallback F>
  void admit_queued(size_t i, int64_t now_ms, double cost, F&& on_done) {
    Owner& o = owner();
    Decision decided;
    Request ask;  // want -1: decided inline
    {
      MutexLock lock(o.mu_);
      if (o.queue_.in_flight) {
        o.queue_.waiting.push_back(QueuedCall{
            i, now_ms, cost, DecisionCompletion(std::forward<F>(on_done))});
        return;
      }
      const CallStep<Request> step = o.begin(i, now_ms, cost);
      if (step.decided) {
        decided = step.result;
      } else {
        o.queue_.in_flight = true;
        ask = step.request;
      }
    }
    if (ask.want < 0) {
      std::forward<F>(on_done)(decided);
      return;
    }
    o.send(QueuedCall{i, now_ms, cost,
                      DecisionCompletion(std::forward<F>(on_done))},
           ask);
  }

  // A round trip `c` asked has landed (`failure`: its status). Under
  // `mu_`, `book()` books the answer: an `absl::StatusOr<Decision>`, or an
  // `absl::StatusOr<CallStep<Request>>` whose undecided step is a second
  // request `c` needs (returned: nothing drained, the queue waits on).
  // Otherwise `c` is decided (`*mine`) and the queue drains (in order; a
  // failed round trip fails the queued calls that need the store); then,
  // outside `mu_`, `c`'s completion runs if it has one, the drained calls'
  // in arrival order, and the next request is sent if one is due.
  template <class Book>
  std::optional<Request> land_call(QueuedCall& c, const absl::Status& failure,
                                   Book&& book,
                                   absl::StatusOr<Decision>* mine) {
    Owner& o = owner();
    typename CallQueue<Request>::Landing landing;
    {
      MutexLock lock(o.mu_);
      auto booked = book();
      if constexpr (std::is_same_v<decltype(booked),
                                   absl::StatusOr<Decision>>) {
        *mine = std::move(booked);
      } else {
        if (booked.ok() && !booked->decided) return booked->request;
        *mine = booked.ok() ? absl::StatusOr<Decision>(booked->result)
                            : booked.status();
      }
      // The lambda runs inside `drain`, under this lock (the analysis
      // cannot follow it there).
      landing = o.queue_.drain(
          failure, [&o](const QueuedCall& w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return o.begin(w.tenant, w.now_ms, w.cost);
          });
    }
    if (c.done != nullptr) std::move(c.done)(*mine);
    landing.complete();
    if (landing.next) o.send(*std::move(landing.next), landing.next_request);
    return std::nullopt;
  }

 private:
  Owner& owner() { return static_cast<Owner&>(*this); }

  // `admit_index` past the inline answer: this call needs `ask` (it sends
  // it; `queue_.in_flight` is set) or, `want` -1, a request was in flight.
  [[gnu::noinline]] absl::StatusOr<Decision> admit_waiting(size_t i,
                                                           int64_t now_ms,
                                                           double cost,
                                                           Request ask) {
    Owner& o = owner();
    while (ask.want < 0) {
      std::promise<absl::StatusOr<Decision>> turn;
      std::future<absl::StatusOr<Decision>> answer = turn.get_future();
      {
        MutexLock lock(o.mu_);
        if (!o.queue_.in_flight) {  // it landed meanwhile: this call's turn
          const CallStep<Request> step = o.begin(i, now_ms, cost);
          if (step.decided) return step.result;
          o.queue_.in_flight = true;
          ask = step.request;
          break;
        }
        o.queue_.waiting.push_back(
            QueuedCall{i, now_ms, cost, [&turn](absl::StatusOr<Decision> d) {
                         turn.set_value(std::move(d));
                       }});
      }
      return answer.get();
    }
    // This call asks; the calls arriving meanwhile queue behind it.
    QueuedCall c{i, now_ms, cost, nullptr};
    return o.ask_waited(c, ask);
  }
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_QUEUED_ADMISSION_H_
