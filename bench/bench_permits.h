// bench/bench_permits.h
//
// The hot loop of the in-flight limiters' benchmarks, defined once:
// - `acquire_release`: every iteration acquires a permit from `limiter`
//   (any limiter with `acquire()` returning a `Permit`:
//   `AdaptiveConcurrency`, `DistributedConcurrency`) and settles it as
//   `outcome` at once.

#ifndef THROTTLEKIT_BENCH_BENCH_PERMITS_H_
#define THROTTLEKIT_BENCH_BENCH_PERMITS_H_

#include <benchmark/benchmark.h>

#include "throttlekit/concurrency/adaptive_concurrency.h"

namespace throttlekit::bench {

template <class Limiter>
void acquire_release(benchmark::State& state, Limiter& limiter,
                     PermitOutcome outcome) {
  for (auto _ : state) {
    typename Limiter::Permit permit = limiter.acquire();
    benchmark::DoNotOptimize(permit);
    permit.release(outcome);
  }
}

}  // namespace throttlekit::bench

#endif  // THROTTLEKIT_BENCH_BENCH_PERMITS_H_
