// sim/sim_clock.h
//
// Provides the simulator's clocks (docs/simulation.md): `TrueClock`, the
// store's clock, which is the loop's virtual time as epoch milliseconds;
// and `NodeClock`, a node's own clock: the true time plus an offset and a
// drift (parts per million of the time elapsed; negative: a slow clock),
// which a scenario may also step. Both satisfy `EpochClock` (core/clock.h),
// and `NodeClock` is also a `NanoClock` (through `NanoClockRef`), so the
// production engines take them as they take the system clocks.
//
// Thread-safety: none (the simulation's one thread).

#ifndef THROTTLEKIT_SIM_SIM_CLOCK_H_
#define THROTTLEKIT_SIM_SIM_CLOCK_H_

#include <cstdint>

#include "sim/event_loop.h"

namespace throttlekit::sim {

// The epoch of virtual time 0 (a fixed instant, so runs do not depend on
// the date they run).
inline constexpr int64_t kSimEpochMs = 1'700'000'000'000;

class TrueClock {
 public:
  explicit TrueClock(const EventLoop& loop) noexcept : loop_(&loop) {}
  int64_t now_ms() const noexcept {
    return kSimEpochMs + loop_->now_us() / 1000;
  }

 private:
  const EventLoop* loop_;
};

class NodeClock {
 public:
  NodeClock(const EventLoop& loop, int64_t offset_us,
            int64_t drift_ppm) noexcept
      : loop_(&loop), offset_us_(offset_us), drift_ppm_(drift_ppm) {}
  int64_t now_ms() const noexcept { return kSimEpochMs + now_us() / 1000; }
  // The same clock in nanoseconds from the run's start (a `NanoClock`, for
  // the engines that measure time in ns: latency, lease lapses).
  int64_t now_ns() const noexcept { return now_us() * 1000; }
  // Moves the clock by `delta_us` from now on (a jump; negative: back).
  void step(int64_t delta_us) noexcept { offset_us_ += delta_us; }

 private:
  int64_t now_us() const noexcept {
    const int64_t t = loop_->now_us();
    return t + offset_us_ + t * drift_ppm_ / 1'000'000;
  }

  const EventLoop* loop_;
  int64_t offset_us_;
  int64_t drift_ppm_;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_SIM_CLOCK_H_
