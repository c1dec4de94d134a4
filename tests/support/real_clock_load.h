// tests/support/real_clock_load.h
//
// Provides the harness of the real-clock bound tests: many threads (more than
// the machine's cores) hammer one engine on its clock for a while and every
// admission is recorded with that clock's ms read just before and just after
// its call. Whatever instant an engine decided an admission at,
// it lies in [pre_ms, post_ms] (the engine read its clock, or raised its
// `now` to an instant another call had read, within the call), so the
// checkers here count admissions per window in the windows the engine names
// (its decisions' `reset_at_ms`) or, for continuous bounds, only those whose
// whole [pre_ms, post_ms] interval lies inside a span, which makes every
// check sound whatever the scheduling.
//
// - `hammer<Clock>(threads, duration_ms, call)`: runs `call(thread)`
//   (returning an absl::StatusOr<Decision>) in a loop on every thread until
//   the clock passes the end; returns the admissions, the calls and the
//   errors. `Clock` (default `SystemClock`) must be the engine's own clock
//   (or one it agrees with to the ms): an interval read on another clock
//   does not bound the engine's decision instant (`TscClock` can lead the
//   system clock by a fraction of a ms, more on a loaded machine).
// - `max_per_window(load)`: the most admissions (by cost 1) any window named
//   by `reset_at_ms` received, and how many windows were seen.
// - `max_in_span(load, span_ms)`: the most admissions whose call interval
//   lies inside one span [a, a + span_ms] (every a).

#ifndef THROTTLEKIT_TESTS_SUPPORT_REAL_CLOCK_LOAD_H_
#define THROTTLEKIT_TESTS_SUPPORT_REAL_CLOCK_LOAD_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::testing {

struct Admission {
  int64_t pre_ms;
  int64_t post_ms;
  int64_t reset_at_ms;
  int thread;  // the index of the thread that was admitted
};

struct Load {
  std::vector<Admission> admitted;
  int64_t calls = 0;
  int64_t errors = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

template <EpochClock Clock = SystemClock, class Call>
Load hammer(int threads, int64_t duration_ms, Call call) {
  const Clock clock;
  Load load;
  std::mutex mu;
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  load.start_ms = clock.now_ms();
  const int64_t end = load.start_ms + duration_ms;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<Admission> mine;
      mine.reserve(1 << 14);
      int64_t calls = 0, errors = 0;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (;;) {
        const int64_t pre = clock.now_ms();
        if (pre >= end) break;
        absl::StatusOr<Decision> d = call(t);
        const int64_t post = clock.now_ms();
        ++calls;
        if (!d.ok()) {
          ++errors;
        } else if (d->allowed) {
          mine.push_back(Admission{pre, post, d->reset_at_ms, t});
        }
      }
      std::lock_guard lock(mu);
      load.admitted.insert(load.admitted.end(), mine.begin(), mine.end());
      load.calls += calls;
      load.errors += errors;
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  load.end_ms = clock.now_ms();
  return load;
}

struct WindowCount {
  int64_t max = 0;      // the most admissions one window received
  int64_t windows = 0;  // windows with at least one admission
  int64_t worst_reset_at_ms = 0;
};

inline WindowCount max_per_window(const Load& load) {
  std::map<int64_t, int64_t> per;
  for (const Admission& a : load.admitted) ++per[a.reset_at_ms];
  WindowCount w;
  w.windows = static_cast<int64_t>(per.size());
  for (const auto& [end, n] : per) {
    if (n > w.max) {
      w.max = n;
      w.worst_reset_at_ms = end;
    }
  }
  return w;
}

// The most admissions with [pre_ms, post_ms] inside one [a, a + span_ms].
inline int64_t max_in_span(const Load& load, int64_t span_ms) {
  // Sorted by pre; for each a = some pre, count those with pre >= a and
  // post <= a + span (a window of pre values, filtered by post).
  std::vector<Admission> v = load.admitted;
  std::sort(v.begin(), v.end(), [](const Admission& x, const Admission& y) {
    return x.pre_ms < y.pre_ms;
  });
  int64_t best = 0;
  size_t lo = 0;
  std::map<int64_t, int64_t> posts;  // post -> count, for pre in [a, a+span]
  size_t hi = 0;
  while (lo < v.size()) {
    const int64_t a = v[lo].pre_ms;
    while (hi < v.size() && v[hi].pre_ms <= a + span_ms)
      ++posts[v[hi++].post_ms];
    int64_t n = 0;
    for (auto it = posts.begin(); it != posts.end() && it->first <= a + span_ms;
         ++it) {
      n += it->second;
    }
    best = std::max(best, n);
    // Advance past every admission with this pre.
    while (lo < v.size() && v[lo].pre_ms == a) {
      auto it = posts.find(v[lo].post_ms);
      if (--it->second == 0) posts.erase(it);
      ++lo;
    }
  }
  return best;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_REAL_CLOCK_LOAD_H_
