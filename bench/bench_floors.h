// bench/bench_floors.h
//
// Floors more than one benchmark binary sets its engines beside, defined
// once (each binary registers the ones it reports with BENCHMARK):
// - `floor_lookup_plus_cas`: a flat_hash_map lookup plus one uncontended
//   compare-and-swap, the physical floor of a keyed local spend.

#ifndef THROTTLEKIT_BENCH_BENCH_FLOORS_H_
#define THROTTLEKIT_BENCH_BENCH_FLOORS_H_

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace throttlekit::bench {

inline void floor_lookup_plus_cas(benchmark::State& state) {
  absl::flat_hash_map<std::string, int64_t> map;
  for (int i = 0; i < 1000; ++i) map["tenant:" + std::to_string(10000 + i)] = i;
  const std::string key = "tenant:10042";
  alignas(64) std::atomic<int64_t> word{0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(key);
    auto it = map.find(key);
    int64_t seen = word.load(std::memory_order_relaxed);
    word.compare_exchange_strong(seen, seen + it->second,
                                 std::memory_order_acq_rel);
  }
}

}  // namespace throttlekit::bench

#endif  // THROTTLEKIT_BENCH_BENCH_FLOORS_H_
