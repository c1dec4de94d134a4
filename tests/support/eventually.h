// tests/support/eventually.h
//
// Provides `eventually(done, timeout_ms)`: polls `done()` every millisecond
// on the steady clock until it holds (true) or `timeout_ms` has passed
// (false), for a test waiting on a background thread (a pusher, a beat).

#ifndef THROTTLEKIT_TESTS_SUPPORT_EVENTUALLY_H_
#define THROTTLEKIT_TESTS_SUPPORT_EVENTUALLY_H_

#include <chrono>
#include <cstdint>
#include <thread>

namespace throttlekit::testing {

template <class Done>
bool eventually(Done done, int64_t timeout_ms = 2000) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_EVENTUALLY_H_
