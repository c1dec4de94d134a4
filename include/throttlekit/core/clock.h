// throttlekit/core/clock.h
//
// Provides the clocks strategies are driven by. Every check reads the clock
// once and passes `now_ms` (integer epoch milliseconds) down; strategies never
// read a clock themselves (docs/architecture.md, "Cross-cutting rules",
// Time).
//
// - `SystemClock`: CLOCK_REALTIME, millisecond epoch time (about 20-30 ns).
// - `TscClock` (core/tsc_clock.h): the CPU's invariant timestamp counter,
//   re-synchronised against CLOCK_REALTIME every 100 ms, never stepping
//   backwards; CLOCK_REALTIME where the counter is unsuitable.
// - `DefaultClock`: the clock the in-memory engines (`RateLimiter`,
//   `Cell`, `GcraCell`) read unless another is named: `TscClock`. The
//   store-backed engines keep `SystemClock` (their windows follow the
//   store's clock; docs/performance.md, "The fast clock", says why).
// - `CoarseSystemClock`: CLOCK_REALTIME_COARSE (a few ns; resolution is the
//   kernel tick, typically 1-4 ms). For callers who can live with that.
// - `ManualClock`: set by hand; may move backwards. For tests and simulations.
// - `MonotonicClock` / `ManualMonotonicClock`: nanoseconds for latency
//   measurement (adaptive concurrency), never epoch time.
//
// Limiters take the clock as a template parameter (a policy, as folly's
// TokenBucket does) so the hot path makes no virtual call; `Clock` is the
// type-erased interface for code that needs one at run time.

#ifndef THROTTLEKIT_CORE_CLOCK_H_
#define THROTTLEKIT_CORE_CLOCK_H_

#include <time.h>

#include <atomic>
#include <concepts>
#include <cstdint>

#include "throttlekit/core/tsc_clock.h"

namespace throttlekit {

// A source of epoch milliseconds. Implementations are thread-safe.
template <class C>
concept EpochClock = requires(const C& c) {
  { c.now_ms() }
  noexcept->std::same_as<int64_t>;
};

// Type-erased epoch clock. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Epoch milliseconds. Thread-safe.
  virtual int64_t now_ms() const noexcept = 0;
};

// The wall clock, at millisecond resolution. Thread-safe; stateless.
struct SystemClock {
  int64_t now_ms() const noexcept {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
  }
};

// The in-memory engines' default clock (see the file comment).
using DefaultClock = TscClock;

// The wall clock read through the kernel's coarse clock: cheaper, but only as
// fine as the scheduler tick (1-4 ms on common kernels). Decisions stay
// correct; retry hints and window edges become that much less precise.
// Thread-safe; stateless.
struct CoarseSystemClock {
  int64_t now_ms() const noexcept {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
  }
};

// A clock moved by hand; may go backwards. Thread-safe (one atomic word).
// Not copyable: limiters refer to one instance (see `ClockRef`).
class ManualClock {
 public:
  explicit ManualClock(int64_t start_ms = 0) noexcept : now_ms_(start_ms) {}
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  int64_t now_ms() const noexcept {
    return now_ms_.load(std::memory_order_acquire);
  }
  // Sets the time; any value, including one in the past.
  void set_ms(int64_t now_ms) noexcept {
    now_ms_.store(now_ms, std::memory_order_release);
  }
  // Moves the time by `delta_ms` (may be negative).
  void advance_ms(int64_t delta_ms) noexcept {
    now_ms_.fetch_add(delta_ms, std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> now_ms_;
};

// Refers to a clock owned elsewhere (a `ManualClock` shared by a test and a
// limiter, or any `Clock`). The referent must outlive this object.
template <class C>
class ClockRef {
 public:
  explicit ClockRef(const C& clock) noexcept : clock_(&clock) {}
  int64_t now_ms() const noexcept { return clock_->now_ms(); }

 private:
  const C* clock_;
};

// Adapts any `EpochClock` to the type-erased `Clock` interface.
template <EpochClock C>
class ClockAdapter final : public Clock {
 public:
  explicit ClockAdapter(C clock = C{}) : clock_(std::move(clock)) {}
  int64_t now_ms() const noexcept override { return clock_.now_ms(); }

 private:
  C clock_;
};

// A source of monotonic nanoseconds for latency measurement. Thread-safe.
template <class C>
concept NanoClock = requires(const C& c) {
  { c.now_ns() }
  noexcept->std::same_as<int64_t>;
};

// CLOCK_MONOTONIC in nanoseconds. Thread-safe; stateless.
struct MonotonicClock {
  int64_t now_ns() const noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }
};

// A monotonic nanosecond clock moved by hand. Thread-safe.
class ManualMonotonicClock {
 public:
  explicit ManualMonotonicClock(int64_t start_ns = 0) noexcept
      : now_ns_(start_ns) {}
  ManualMonotonicClock(const ManualMonotonicClock&) = delete;
  ManualMonotonicClock& operator=(const ManualMonotonicClock&) = delete;

  int64_t now_ns() const noexcept {
    return now_ns_.load(std::memory_order_acquire);
  }
  void advance_ns(int64_t delta_ns) noexcept {
    now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_CLOCK_H_
