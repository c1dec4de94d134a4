// tests/support/allocation_counter.h
//
// Replaces the global operator new/delete of the ONE test binary whose
// source includes it (include it from exactly one .cc per binary), counting
// every heap allocation, so tests can assert that a path allocates nothing:
//
//     const long before = throttlekit::testing::allocations();
//     ...;
//     EXPECT_EQ(throttlekit::testing::allocations() - before, 0);

#ifndef THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
#define THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// clang's ThreadSanitizer links its runtime's operator new into every
// binary (whole-archive), so there this header replaces nothing and
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

#ifndef THROTTLEKIT_TESTS_RUNTIME_OWNS_NEW

void* operator new(size_t n) {
  throttlekit::testing::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer uses it): left
// to the runtime, its memory would be freed by the `free` below.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  throttlekit::testing::g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
// GCC cannot see that these frees pair with the malloc in operator new.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif  // THROTTLEKIT_TESTS_RUNTIME_OWNS_NEW

#endif  // THROTTLEKIT_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
