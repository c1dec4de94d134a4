// What a key held past its window costs in each in-process store, the
// price of the TTL slack (core/ttl_slack.h; docs/semantics.md, "A stale
// now"): 10^6 fixed-window keys of 16 bytes (the common case, a tenant or
// user id, stored inline by `MemoryStore`) admitted once each, the heap
// measured before and after (glibc's mallinfo2), bytes per key printed.
// scripts/ttl_slack_memory.sh runs it beside the same measurement on Redis
// and Postgres.
//
//     build/release/bench/ttl_slack_memory [keys]
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"

namespace tk = throttlekit;

namespace {

// Bytes allocated: from the heap's arenas and, for large blocks, mmapped.
size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Key i as 16 bytes ("key:" and 12 digits).
std::string key(int64_t i) { return absl::StrFormat("key:%012d", i); }

constexpr int64_t kNow = 1'700'000'000'000;

}  // namespace

int main(int argc, char** argv) {
  const int64_t keys = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
  if (keys < 1 || keys > (int64_t{1} << 30)) {
    std::fprintf(stderr, "usage: ttl_slack_memory [keys in 1 .. 2^30]\n");
    return 2;
  }
  const tk::FixedWindow::Options window{.limit = 100, .window_ms = 1000};
  // Fills a store built by `make` through `check(store, key)`; prints the
  // heap it took per key. False if a check failed.
  const auto measure = [keys](const char* name, auto make, auto check) {
    const size_t before = heap_bytes();
    auto store = make();
    for (int64_t i = 0; i < keys; ++i) {
      if (!check(store, key(i))) return false;
    }
    const size_t after = heap_bytes();
    std::printf(
        "%s: %lld keys, %.1f bytes/key\n", name, static_cast<long long>(keys),
        static_cast<double>(after - before) / static_cast<double>(keys));
    return true;
  };
  const bool ok =
      measure(
          "MemoryStore (RateLimiter<FixedWindow>)",
          [&] {
            tk::RateLimiterOptions o;
            o.store.max_keys = static_cast<size_t>(keys) * 2;
            return *tk::RateLimiter<tk::FixedWindow>::create(window, o);
          },
          [](auto& limiter, const std::string& k) {
            return limiter.check_at(k, kNow).ok();
          }) &&
      measure(
          "MemoryCoordinator (fixed window)",
          [&] {
            return *tk::MemoryCoordinator::create({.max_keys = keys * 2});
          },
          [strategy = *tk::make_strategy(window)](auto& coordinator,
                                                  const std::string& k) {
            return coordinator->check(strategy, k, kNow).ok();
          });
  return ok ? 0 : 1;
}
