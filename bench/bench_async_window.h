// bench/bench_async_window.h
//
// `run_async_window`: one caller thread keeping at most `depth`
// asynchronous checks in flight, for the asynchronous benchmarks
// (docs/async.md). The caller tops the window up to `depth` whenever half
// of it has completed and sleeps on an atomic in between, as an event loop
// serves other work, so between depth/2 and depth checks are in flight.
// `submit(on_done)` starts one check that calls `on_done(absl::StatusOr<
// Decision>)` once. Sets items_per_second and an `errors` counter.

#ifndef THROTTLEKIT_BENCH_BENCH_ASYNC_WINDOW_H_
#define THROTTLEKIT_BENCH_BENCH_ASYNC_WINDOW_H_

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::bench {

template <class Submit>
void run_async_window(benchmark::State& state, int64_t depth, Submit submit) {
  const int64_t low = depth / 2;  // the caller wakes at this many in flight
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> errors{0};
  const auto wait_until_at_most = [&in_flight](int64_t bound) {
    for (int64_t n = in_flight.load(std::memory_order_acquire); n > bound;
         n = in_flight.load(std::memory_order_acquire)) {
      in_flight.wait(n, std::memory_order_acquire);
    }
  };
  const auto on_done = [&in_flight, &errors, low](absl::StatusOr<Decision> d) {
    if (!d.ok()) errors.fetch_add(1);
    const int64_t before = in_flight.fetch_sub(1, std::memory_order_acq_rel);
    if (before == low + 1 || before == 1) in_flight.notify_one();
  };
  for (auto _ : state) {
    if (in_flight.load(std::memory_order_acquire) >= depth) {
      wait_until_at_most(low);
    }
    in_flight.fetch_add(1, std::memory_order_relaxed);
    submit(on_done);
  }
  wait_until_at_most(0);
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors.load());
}

// The depths every asynchronous benchmark runs at:
// `BENCHMARK(BM_X)->Apply(bench::async_depths)`.
inline void async_depths(benchmark::internal::Benchmark* b) {
  for (int depth : {1, 16, 64, 256}) b->Arg(depth);
  b->UseRealTime()->MinTime(2.0);
}

}  // namespace throttlekit::bench

#endif  // THROTTLEKIT_BENCH_BENCH_ASYNC_WINDOW_H_
