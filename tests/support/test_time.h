// tests/support/test_time.h
//
// Provides `kEpoch`, the instant most tests start from: a large epoch as in
// production (2023-11-14T22:13:20Z), a multiple of 1000 ms, so it is a
// window start for every window length dividing 1000 ms.

#ifndef THROTTLEKIT_TESTS_SUPPORT_TEST_TIME_H_
#define THROTTLEKIT_TESTS_SUPPORT_TEST_TIME_H_

#include <cstdint>

namespace throttlekit::testing {

inline constexpr int64_t kEpoch = 1'700'000'000'000;

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_TEST_TIME_H_
