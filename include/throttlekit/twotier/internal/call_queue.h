// throttlekit/twotier/internal/call_queue.h
//
// Provides `detail::CallQueue<Request>`: how an escrow that answers without
// waiting (`WeightedFairEscrow`, `FederatedFairEscrow`; docs/async.md)
// keeps one store round trip in flight and decides, in arrival order, the
// calls that arrive meanwhile.
//
// A call's first step (`CallStep`) is decided at once or needs the store
// (`Request`: what to ask it). The owner, under its mutex: while a round
// trip is in flight (`in_flight`), queues every new call (`waiting`);
// otherwise begins it, and when it needs the store sets `in_flight` and
// sends the request after unlocking. When the reply lands the owner
// decides that call, then `drain`s the queue: the queued calls are begun
// in order, the decided ones kept for `Landing::complete` (run after
// unlocking, in order); when the round trip failed, each queued call that
// needs the store fails with that status at once (an outage costs the
// queue one deadline, not one per call); otherwise the first that needs
// the store is handed back to be sent, the rest left queued behind it.
//
// Thread-safety: none; the owner guards it with its mutex and runs
// `Landing::complete` outside it.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_CALL_QUEUE_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_CALL_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::detail {

// A call waiting for the store: queued, or sending its own round trip.
struct QueuedCall {
  size_t tenant;
  int64_t now_ms;
  double cost;
  DecisionCompletion done;  // empty for a blocking caller's own call
};

// One call's step: decided (`result`), or needing the store (`request`).
template <class Request>
struct CallStep {
  bool decided = true;
  Decision result;
  Request request{};
};

template <class Request>
class CallQueue {
 public:
  // What a landing decided: completions to run after unlocking, and the
  // queued call (with its request) to send next, if any.
  struct Landing {
    std::vector<std::pair<DecisionCompletion, absl::StatusOr<Decision>>> ready;
    std::optional<QueuedCall> next;
    Request next_request{};

    // Runs the decided calls' completions, in arrival order.
    void complete() {
      for (auto& [done, d] : ready) std::move(done)(std::move(d));
    }
  };

  // A round trip is in flight; calls arriving queue in `waiting`.
  bool in_flight = false;
  std::deque<QueuedCall> waiting;

  // After a round trip landed with `failure` (OK when it succeeded):
  // begins the queued calls in order (`begin(call)` returns a
  // `CallStep<Request>`) until one needs the store and the round trip
  // succeeded (handed back in `next`); `in_flight` is cleared when none is.
  template <class Begin>
  Landing drain(const absl::Status& failure, Begin&& begin) {
    Landing out;
    while (!waiting.empty()) {
      QueuedCall call = std::move(waiting.front());
      waiting.pop_front();
      const CallStep<Request> step = begin(call);
      if (step.decided) {
        out.ready.emplace_back(std::move(call.done), step.result);
      } else if (!failure.ok()) {
        out.ready.emplace_back(std::move(call.done), failure);
      } else {
        out.next = std::move(call);
        out.next_request = step.request;
        break;
      }
    }
    if (!out.next) in_flight = false;
    return out;
  }
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_CALL_QUEUE_H_
