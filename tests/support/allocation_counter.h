// tests/support/allocation_counter.h
//
// Counts every heap allocation of a test binary, so tests can assert that a
// path allocates nothing:
//
//     const long before = throttlekit::testing::allocations();
//     ...;
//     EXPECT_EQ(throttlekit::testing::allocations() - before, 0);
//
// The counting operator new/delete are in allocation_counter.cc, linked into
// every test executable (cmake/ThrottleKitHelpers.cmake), so this header can
// be included from any number of files of one binary.

#ifndef THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
#define THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// clang's ThreadSanitizer links its runtime's operator new into every
// binary (whole-archive), so there allocation_counter.cc replaces nothing and
// `allocations()` stays 0: allocation-freedom is asserted by the optimised
// and AddressSanitizer runs of the same tests, races by this one.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THROTTLEKIT_TESTS_RUNTIME_OWNS_NEW 1
#endif
#endif

namespace throttlekit::testing {
inline std::atomic<long> g_allocations{0};
// Heap allocations made so far by this binary (0 under clang's TSan).
inline long allocations() {
  return g_allocations.load(std::memory_order_relaxed);
}
}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
