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

#include "bench_permits.h"
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

// Acquire + release on the shared limiter of `Law`, each permit settled as
// `Outcome` (a constant, as in a caller's code).
template <ConcurrencyLaw Law, PermitOutcome Outcome>
void acquire_release(benchmark::State& state) {
  bench::acquire_release(state, shared_limiter(Law), Outcome);
}

// The variants above, in their order, at 1 and 2 threads.
[[maybe_unused]] const bool kRegistered = [] {
  const struct {
    const char* name;
    void (*run)(benchmark::State&);
  } variants[] = {
      {"BM_AdaptiveConcurrency_AcquireRelease",
       acquire_release<ConcurrencyLaw::kGradient2, PermitOutcome::kSuccess>},
      {"BM_AdaptiveConcurrency_AcquireReleaseAimd",
       acquire_release<ConcurrencyLaw::kAimd, PermitOutcome::kSuccess>},
      {"BM_AdaptiveConcurrency_AcquireIgnore",
       acquire_release<ConcurrencyLaw::kGradient2, PermitOutcome::kIgnored>},
  };
  for (const auto& v : variants) {
    benchmark::RegisterBenchmark(v.name, v.run)
        ->ThreadRange(1, 2)
        ->UseRealTime();
  }
  return true;
}();

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
