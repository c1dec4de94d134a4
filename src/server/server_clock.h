// src/server/server_clock.h (internal)
//
// Provides `ServerClock`: the clock the server's policies, leases and doors
// read, the wall clock or a manual one a test moves.
//
// Thread-safety: `now_ms` is safe to call concurrently (a manual clock is
// moved by its test).

#ifndef THROTTLEKIT_SRC_SERVER_SERVER_CLOCK_H_
#define THROTTLEKIT_SRC_SERVER_SERVER_CLOCK_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "throttlekit/core/clock.h"

namespace throttlekit::server {

struct ServerClock {
  const ManualClock* manual = nullptr;  // null: the system clock
  int64_t now_ms() const noexcept {
    return manual != nullptr ? manual->now_ms() : SystemClock{}.now_ms();
  }
};

// How long a background loop on `clock`, next due at `due_ms` (INT64_MAX:
// nothing due), waits before it looks again: until then, at least 1 ms and
// at most `cap_ms`, and at most 5 ms on a manual clock (a test moves it
// without waking anyone).
inline int64_t wait_ms_until(const ServerClock& clock, int64_t due_ms,
                             int64_t cap_ms) {
  const int64_t cap =
      clock.manual != nullptr ? std::min<int64_t>(5, cap_ms) : cap_ms;
  if (due_ms == std::numeric_limits<int64_t>::max()) return cap;
  return std::clamp<int64_t>(due_ms - clock.now_ms(), 1, cap);
}

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_SERVER_CLOCK_H_
