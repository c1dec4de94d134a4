// sim/event_loop.h
//
// Provides `EventLoop`: the fleet simulator's discrete-event loop in virtual
// time (microseconds from the start of a run; docs/simulation.md).
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

  // The current virtual time (us): the time of the action running, or of
  // the last one run.
  int64_t now_us() const noexcept { return now_us_; }
  // Actions run so far.
  uint64_t events() const noexcept { return events_; }
  bool empty() const noexcept { return heap_.empty(); }

  // Runs `action` at `time_us` (not before now).
  void at(int64_t time_us, Action action) {
    heap_.push_back(
        Item{std::max(time_us, now_us_), seq_++, std::move(action)});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  void after(int64_t delay_us, Action action) {
    at(now_us_ + std::max<int64_t>(delay_us, 0), std::move(action));
  }

  // Runs every action due at or before `end_us`, in order; the clock then
  // stands at `end_us`.
  void run_until(int64_t end_us) {
    while (!heap_.empty() && heap_.front().time_us <= end_us) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      Item item = std::move(heap_.back());
      heap_.pop_back();
      now_us_ = item.time_us;
      ++events_;
      std::move(item.action)();
    }
    now_us_ = std::max(now_us_, end_us);
  }

 private:
  struct Item {
    int64_t time_us;
    uint64_t seq;
    Action action;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.time_us != b.time_us ? a.time_us > b.time_us : a.seq > b.seq;
    }
  };
  std::vector<Item> heap_;
  int64_t now_us_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_ = 0;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_EVENT_LOOP_H_
