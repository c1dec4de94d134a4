// Benchmarks AdaptiveConcurrency's acquire + release (a success, so every
// iteration also folds one latency sample into the control law) on one
// shared limiter, 1 and 2 threads, against its physical floor in the same
// binary: two MonotonicClock reads + one compare-and-swap + one fetch_sub on
// a shared counter, which is what any in-flight limiter that measures
// latency must do.
//
// Variants:
// - BM_AdaptiveConcurrency_AcquireRelease: gradient2 (the default law).
// - BM_AdaptiveConcurrency_AcquireReleaseAimd: AIMD.
// - BM_AdaptiveConcurrency_AcquireIgnore: settled as kIgnored (no clock read
//   at release, no sample): the slot bookkeeping alone.
// - BM_Floor_TwoClockReadsCasFetchSub: the floor.
// The limit (max 2^20) never binds, so every acquire is a grant.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace {

using Limiter = BasicAdaptiveConcurrency<MonotonicClock>;

Limiter& shared_limiter(ConcurrencyLaw law) {
  auto make = [](ConcurrencyLaw l) {
    AdaptiveConcurrencyOptions o;
    o.law = l;
    o.initial_limit = o.min_limit = o.max_limit = int64_t{1} << 20;
    return *Limiter::create(o);
  };
  static std::unique_ptr<Limiter> gradient2 = make(ConcurrencyLaw::kGradient2);
  static std::unique_ptr<Limiter> aimd = make(ConcurrencyLaw::kAimd);
  return law == ConcurrencyLaw::kAimd ? *aimd : *gradient2;
}

void BM_AdaptiveConcurrency_AcquireRelease(benchmark::State& state) {
  Limiter& limiter = shared_limiter(ConcurrencyLaw::kGradient2);
  for (auto _ : state) {
    Limiter::Permit lease = limiter.acquire();
    benchmark::DoNotOptimize(lease);
    lease.release(Limiter::Outcome::kSuccess);
  }
}
BENCHMARK(BM_AdaptiveConcurrency_AcquireRelease)
    ->ThreadRange(1, 2)
    ->UseRealTime();

void BM_AdaptiveConcurrency_AcquireReleaseAimd(benchmark::State& state) {
  Limiter& limiter = shared_limiter(ConcurrencyLaw::kAimd);
  for (auto _ : state) {
    Limiter::Permit lease = limiter.acquire();
    benchmark::DoNotOptimize(lease);
    lease.release(Limiter::Outcome::kSuccess);
  }
}
BENCHMARK(BM_AdaptiveConcurrency_AcquireReleaseAimd)
    ->ThreadRange(1, 2)
    ->UseRealTime();

void BM_AdaptiveConcurrency_AcquireIgnore(benchmark::State& state) {
  Limiter& limiter = shared_limiter(ConcurrencyLaw::kGradient2);
  for (auto _ : state) {
    Limiter::Permit lease = limiter.acquire();
    benchmark::DoNotOptimize(lease);
    lease.release(Limiter::Outcome::kIgnored);
  }
}
BENCHMARK(BM_AdaptiveConcurrency_AcquireIgnore)
    ->ThreadRange(1, 2)
    ->UseRealTime();

// The floor: what acquire + release cannot do without.
std::atomic<int64_t> g_floor_inflight{0};

void BM_Floor_TwoClockReadsCasFetchSub(benchmark::State& state) {
  const MonotonicClock clock;
  constexpr int64_t kLimit = int64_t{1} << 20;
  int64_t latency_sum = 0;
  for (auto _ : state) {
    int64_t seen = g_floor_inflight.load(std::memory_order_relaxed);
    while (seen < kLimit && !g_floor_inflight.compare_exchange_weak(
                                seen, seen + 1, std::memory_order_acquire,
                                std::memory_order_relaxed)) {
    }
    const int64_t start = clock.now_ns();
    const int64_t end = clock.now_ns();
    g_floor_inflight.fetch_sub(1, std::memory_order_release);
    latency_sum += end - start;
  }
  benchmark::DoNotOptimize(latency_sum);
}
BENCHMARK(BM_Floor_TwoClockReadsCasFetchSub)->ThreadRange(1, 2)->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
