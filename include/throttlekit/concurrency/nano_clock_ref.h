// throttlekit/concurrency/nano_clock_ref.h
//
// Provides `NanoClockRef<C>`: refers to a nanosecond clock owned elsewhere
// (a `ManualMonotonicClock` shared by a test or a simulator and a limiter),
// the `NanoClock` counterpart of `ClockRef`.

#ifndef THROTTLEKIT_CONCURRENCY_NANO_CLOCK_REF_H_
#define THROTTLEKIT_CONCURRENCY_NANO_CLOCK_REF_H_

#include <cstdint>

#include "throttlekit/core/clock.h"

namespace throttlekit {

// The referent must outlive this object. Thread-safe iff the referent is.
template <NanoClock C>
class NanoClockRef {
 public:
  explicit NanoClockRef(const C& clock) noexcept : clock_(&clock) {}
  int64_t now_ns() const noexcept { return clock_->now_ns(); }

 private:
  const C* clock_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_NANO_CLOCK_REF_H_
