// sim/event_loop.h
//
// Provides `EventLoop`: the simulators' discrete-event loop in virtual time
// (from the start of a run; docs/simulation.md): the fleet scenarios
// schedule in microseconds, the concurrency simulator (bench/sim/) in
// nanoseconds, on the same loop.
//
// Determinism: actions at one instant run in the order they were scheduled
// (ties broken by a sequence number), so a run is a function of its seed
// and configuration alone, on every machine.
//
// Thread-safety: none. A simulation runs on one thread; actions may schedule
// more actions.

#ifndef THROTTLEKIT_SIM_EVENT_LOOP_H_
#define THROTTLEKIT_SIM_EVENT_LOOP_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace throttlekit::sim {

class EventLoop {
 public:
  using Action = absl::AnyInvocable<void() &&>;

  // The current virtual time: the time of the action running, or of the
  // last one run; in microseconds (the fleet scenarios) or nanoseconds (the
  // concurrency simulator, bench/sim/).
  int64_t now_us() const noexcept { return now_ns_ / 1000; }
  int64_t now_ns() const noexcept { return now_ns_; }
  // Actions run so far.
  uint64_t events() const noexcept { return events_; }
  bool empty() const noexcept { return heap_.empty(); }

  // Runs `action` at `time_us` (not before now).
  void at(int64_t time_us, Action action) {
    at_ns(time_us * 1000, std::move(action));
  }
  void after(int64_t delay_us, Action action) {
    at_ns(now_ns_ + std::max<int64_t>(delay_us, 0) * 1000, std::move(action));
  }
  // Runs `action` at `time_ns` (not before now).
  void at_ns(int64_t time_ns, Action action) {
    heap_.push_back(
        Item{std::max(time_ns, now_ns_), seq_++, std::move(action)});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // Runs every action due at or before `end_us`, in order; the clock then
  // stands at `end_us`.
  void run_until(int64_t end_us) { run_until_ns(end_us * 1000); }
  void run_until_ns(int64_t end_ns) {
    while (!heap_.empty() && heap_.front().time_ns <= end_ns) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      Item item = std::move(heap_.back());
      heap_.pop_back();
      now_ns_ = item.time_ns;
      ++events_;
      std::move(item.action)();
    }
    now_ns_ = std::max(now_ns_, end_ns);
  }

 private:
  struct Item {
    int64_t time_ns;
    uint64_t seq;
    Action action;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
    }
  };
  std::vector<Item> heap_;
  int64_t now_ns_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_ = 0;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_EVENT_LOOP_H_
