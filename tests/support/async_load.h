// tests/support/async_load.h
//
// Load for the asynchronous-path tests (docs/async.md), the same on every
// backend:
// - `run_in_window`: one thread submits `total` checks, at most `window`
//   in flight, and counts each completion in its own slot;
// - `FaultStream`: threads keep checks in flight while a script changes
//   the server (stops, freezes, restarts it) phase by phase; every
//   completion is counted in its slot and by the phase it was submitted in,
//   with the slowest call's latency.
// - `DecisionWaiter`: one completion as a future;
// - `expect_async_equals_blocking`: every strategy's timeline sent
//   asynchronously at once and, on another key, through the blocking
//   path: the decisions equal step for step.
// The loads wait until nothing is in flight before returning.

#ifndef THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_
#define THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/run_threads.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::testing {

// One asynchronous answer, waited for.
struct DecisionWaiter {
  std::promise<absl::StatusOr<Decision>> promise;
  DecisionCompletion completion() {
    return [this](absl::StatusOr<Decision> d) { promise.set_value(d); };
  }
  absl::StatusOr<Decision> get() { return promise.get_future().get(); }
};

// For each strategy, `steps` checks at rising times (costs 0.5 to 3) sent
// with `check_async` all at once on one key, and the same timeline through
// `check` on another key: equal decisions, step for step. The keys start
// with `prefix` (unique per run).
inline void expect_async_equals_blocking(
    Coordinator& c, const std::vector<AnyStrategy>& strategies, int steps,
    const std::string& prefix) {
  for (size_t s = 0; s < strategies.size(); ++s) {
    std::vector<int64_t> at(steps);
    std::vector<double> cost(steps);
    int64_t now = 1'700'000'000'000;
    for (int i = 0; i < steps; ++i) {
      now += (i * 37) % 211;
      at[i] = now;
      cost[i] = i % 5 == 4 ? 0.5 : 1 + (i * 7) % 3;
    }
    const std::string blocking_key = absl::StrCat(prefix, ":b:", s);
    const std::string async_key = absl::StrCat(prefix, ":a:", s);
    // All at once: one connection keeps their order.
    std::vector<DecisionWaiter> waiters(steps);
    for (int i = 0; i < steps; ++i) {
      c.check_async(strategies[s], async_key, at[i], cost[i],
                    waiters[i].completion());
    }
    for (int i = 0; i < steps; ++i) {
      absl::StatusOr<Decision> blocking =
          c.check(strategies[s], blocking_key, at[i], cost[i]);
      absl::StatusOr<Decision> async = waiters[i].get();
      ASSERT_TRUE(blocking.ok()) << blocking.status();
      ASSERT_TRUE(async.ok()) << async.status();
      EXPECT_EQ(*async, *blocking) << "strategy " << s << " step " << i;
    }
  }
}

// Every strategy, with options whose timelines above cross their limits.
inline std::vector<AnyStrategy> async_conformance_strategies() {
  return {
      *make_strategy(Gcra::Options{3, 1000, 0}),
      *make_strategy(TokenBucket::Options{3, 0.5}),
      *make_strategy(FixedWindow::Options{5, 1000}),
      *make_strategy(SlidingWindow::Options{10, 1000, 4}),
      *make_strategy(SlidingLog::Options{3, 700}),
      *make_strategy(Quota::Options{5, QuotaPeriod::kDay, 1, 0}),
      *make_strategy(TokenBudget::Options{5, 1000}),
  };
}

// `calls` checks queued on `owner`'s coordinator, then `owner` reset (the
// last reference): its destructor must complete every one, successfully.
template <class Owner>
void expect_destruction_completes_queued(Owner& owner, int calls,
                                         const std::string& key) {
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});
  std::atomic<int> completed{0}, ok{0};
  for (int i = 0; i < calls; ++i) {
    owner->check_async(gcra, key, 0, 1, [&](absl::StatusOr<Decision> d) {
      if (d.ok()) ok.fetch_add(1);
      completed.fetch_add(1);
    });
  }
  owner.reset();
  EXPECT_EQ(completed.load(), calls);
  EXPECT_EQ(ok.load(), calls);
}

struct WindowResult {
  int allowed = 0;
  int failed = 0;
  // Slots completed other than exactly once (0 when every call completed
  // exactly once).
  int not_once = 0;
};

// `submit(on_done)` starts one check that calls on_done(StatusOr<Decision>).
template <class Submit>
WindowResult run_in_window(int total, int window, Submit submit) {
  std::vector<std::atomic<int>> completed(total);
  std::atomic<int> in_flight{0}, allowed{0}, failed{0};
  for (int i = 0; i < total; ++i) {
    while (in_flight.load() >= window) std::this_thread::yield();
    in_flight.fetch_add(1);
    submit([&, i](absl::StatusOr<Decision> d) {
      completed[i].fetch_add(1);
      if (!d.ok()) {
        failed.fetch_add(1);
      } else if (d->allowed) {
        allowed.fetch_add(1);
      }
      in_flight.fetch_sub(1);
    });
  }
  while (in_flight.load() > 0) std::this_thread::yield();
  WindowResult r{allowed.load(), failed.load(), 0};
  for (int i = 0; i < total; ++i) r.not_once += completed[i].load() != 1;
  return r;
}

class FaultStream {
 public:
  static constexpr int kPhases = 8;
  static constexpr int kSlots = 1 << 21;

  FaultStream() : completed_(kSlots), began_ns_(kSlots) {}

  // `submitters` threads keep up to `per_thread` checks in flight each
  // (at most about 8 submissions per ms per thread) while `script(*this)`
  // runs on another thread; then waits up to 3 s for the last completions.
  // `submit(on_done)` starts one check.
  template <class Submit, class Script>
  void run(int submitters, int per_thread, Submit submit, Script script) {
    run_threads(submitters + 1, [&](int t) {
      if (t == submitters) {
        script(*this);
        stop_.store(true);
        return;
      }
      while (!stop_.load()) {
        if (in_flight_.load() >= per_thread * submitters) {
          absl::SleepFor(absl::Microseconds(200));
          continue;
        }
        const int slot = next_.fetch_add(1);
        if (slot >= kSlots) break;
        if (slot % 8 == 0) absl::SleepFor(absl::Milliseconds(1));
        in_flight_.fetch_add(1);
        const int p = phase_.load();
        began_ns_[slot] = absl::GetCurrentTimeNanos();
        submit([this, slot, p](absl::StatusOr<Decision> d) {
          record(slot, p, d.status());
        });
      }
    });
    for (int i = 0; i < 300 && in_flight_.load() > 0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  // For the script: the phase new submissions count in, and a wait (up to
  // 12 s) for the first success submitted in phase `p`.
  void set_phase(int p) { phase_.store(p); }
  void wait_ok(int p) {
    for (int i = 0; i < 600 && ok_[p].load() == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  int in_flight() const { return in_flight_.load(); }
  bool ran_out_of_slots() const { return next_.load() >= kSlots; }
  // Slots submitted but completed other than exactly once.
  int not_once() const {
    int n = 0;
    for (int i = 0; i < std::min(next_.load(), kSlots); ++i) {
      n += completed_[i].load() != 1;
    }
    return n;
  }
  int ok(int p) const { return ok_[p].load(); }
  int deadline_exceeded(int p) const { return late_[p].load(); }
  int unavailable(int p) const { return down_[p].load(); }
  int other() const { return other_.load(); }
  absl::Duration slowest() const {
    return absl::Nanoseconds(slowest_ns_.load());
  }

 private:
  void record(int slot, int p, const absl::Status& s) {
    const int64_t ns = absl::GetCurrentTimeNanos() - began_ns_[slot];
    int64_t prev = slowest_ns_.load();
    while (ns > prev && !slowest_ns_.compare_exchange_weak(prev, ns)) {
    }
    completed_[slot].fetch_add(1);
    if (s.ok()) {
      ok_[p].fetch_add(1);
    } else if (absl::IsDeadlineExceeded(s)) {
      late_[p].fetch_add(1);
    } else if (absl::IsUnavailable(s)) {
      down_[p].fetch_add(1);
    } else {
      other_.fetch_add(1);
    }
    in_flight_.fetch_sub(1);
  }

  std::vector<std::atomic<int>> completed_;
  std::vector<int64_t> began_ns_;
  std::atomic<int> next_{0}, in_flight_{0}, phase_{0}, other_{0};
  std::atomic<int64_t> slowest_ns_{0};
  std::array<std::atomic<int>, kPhases> ok_{}, late_{}, down_{};
  std::atomic<bool> stop_{false};
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_
