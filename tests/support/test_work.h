// tests/support/test_work.h
//
// `scaled_work(n, at_least)`: how many rounds of a fixed-work loop this
// build's test runs. The optimised pass runs `n`; the sanitizer passes run
// THROTTLEKIT_TEST_WORK_PERCENT of it (20, the share of property cases they
// run; set for every test by cmake/ThrottleKitHelpers.cmake), never fewer
// than `at_least`. Sanitizers look for memory errors and races along the
// same paths, which a fifth of the rounds still takes many times; the
// search for a rare interleaving or input is the optimised pass's
// (docs/testing.md).

#ifndef THROTTLEKIT_TESTS_SUPPORT_TEST_WORK_H_
#define THROTTLEKIT_TESTS_SUPPORT_TEST_WORK_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace throttlekit::testing {

inline int64_t scaled_work(int64_t n, int64_t at_least) {
  const char* v = std::getenv("THROTTLEKIT_TEST_WORK_PERCENT");
  const int64_t percent = v != nullptr ? std::atoi(v) : 100;
  if (percent <= 0 || percent >= 100) return n;
  return std::max(std::min(n, at_least), n * percent / 100);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_TEST_WORK_H_
