// bench/sim/event_queue.h
//
// Provides the event queue of the concurrency simulator (issue 5, "Proof: a
// simulator"): a min-heap of timestamped events in simulated nanoseconds.
//
// Determinism: events at the same instant leave the queue in the order they
// were scheduled (ties are broken by a sequence number), so one seed always
// produces one history, on every run and every platform.

#ifndef THROTTLEKIT_BENCH_SIM_EVENT_QUEUE_H_
#define THROTTLEKIT_BENCH_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <queue>
#include <vector>

namespace throttlekit::sim {

enum class EventType : uint8_t {
  kArrival,        // a client sends one request
  kServiceDone,    // a server finishes the request `arg`
  kClientTimeout,  // the client of request `arg` gives up
  kCapacity,       // the backend's server count becomes `arg`
  kSlowdown,       // service times are multiplied by `arg` / 1000
  kSample,         // record the limiter's limit and in-flight count
};

struct Event {
  int64_t time_ns;
  uint64_t seq;
  EventType type;
  int64_t arg;
};

// A min-heap of events ordered by (time_ns, seq). Not thread-safe.
class EventQueue {
 public:
  // Schedules `type(arg)` at `time_ns`; among events at one instant, earlier
  // calls run first.
  void schedule(int64_t time_ns, EventType type, int64_t arg = 0) {
    heap_.push(Event{time_ns, next_seq_++, type, arg});
  }
  bool empty() const { return heap_.empty(); }
  // Removes and returns the earliest event. Precondition: !empty().
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time_ns != b.time_ns) return a.time_ns > b.time_ns;
      return a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_BENCH_SIM_EVENT_QUEUE_H_
