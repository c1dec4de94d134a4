// tests/support/run_threads.h
//
// Provides `run_threads(n, fn)`: starts n threads, releases them together
// (so they contend from the first call), runs `fn(thread_index)` on each and
// returns the sum of what they return (0 when `fn` returns nothing). And
// `admitted_by_threads(n, checks, allowed)`: n threads released together
// each make `checks` calls `allowed(thread_index, i)` (whether call i was
// admitted); returns how many were admitted in all.

#ifndef THROTTLEKIT_TESTS_SUPPORT_RUN_THREADS_H_
#define THROTTLEKIT_TESTS_SUPPORT_RUN_THREADS_H_

#include <atomic>
#include <thread>
#include <type_traits>
#include <vector>

namespace throttlekit::testing {

template <class Fn>
long run_threads(int threads, Fn fn) {
  std::atomic<bool> go{false};
  std::atomic<long> total{0};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if constexpr (std::is_void_v<decltype(fn(t))>) {
        fn(t);
      } else {
        total.fetch_add(fn(t), std::memory_order_relaxed);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return total.load();
}

template <class Allowed>
long admitted_by_threads(int threads, int checks, Allowed allowed) {
  return run_threads(threads, [&](int t) {
    long n = 0;
    for (int i = 0; i < checks; ++i) n += allowed(t, i);
    return n;
  });
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_RUN_THREADS_H_
