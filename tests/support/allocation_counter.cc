// tests/support/allocation_counter.cc: the counting global operator
// new/delete behind allocation_counter.h, linked into every test executable.
// A test thread that allocates costs one relaxed atomic add more.
#include "support/allocation_counter.h"

#include <cstdlib>
#include <new>

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
