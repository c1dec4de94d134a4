// LeaseSpender::spend (the client-side spend of a leased batch) beside its
// floor, an uncontended atomic fetch_sub on an int64, in one run.
//
//     cmake --build --preset release --target lease_spender_benchmark
//     build/release/bench/lease_spender_benchmark

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>

#include "throttlekit/twotier/lease_spender.h"

namespace throttlekit {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// One atomic per thread: uncontended.
void BM_Floor_FetchSub(benchmark::State& state) {
  alignas(64) std::atomic<int64_t> word{int64_t{1} << 60};
  for (auto _ : state) {
    benchmark::DoNotOptimize(word.fetch_sub(1, std::memory_order_acq_rel));
  }
}
BENCHMARK(BM_Floor_FetchSub)->Threads(1)->Threads(2)->UseRealTime();

LeaseSpender& shared_spender() {
  static LeaseSpender* s = [] {
    auto* spender = new LeaseSpender(1000, /*window_coupled=*/true);
    spender->refill(
        LeaseGrant{int64_t{1} << 50, 0, kNow, kNow + 3'600'000, kNow});
    return spender;
  }();
  return *s;
}

// One spender per thread (a hot key per node is the common case).
void BM_LeaseSpender_Spend(benchmark::State& state) {
  LeaseSpender spender(1000, /*window_coupled=*/true);
  spender.refill(LeaseGrant{int64_t{1} << 50, 0, kNow, kNow + 3'600'000, kNow});
  for (auto _ : state) {
    benchmark::DoNotOptimize(spender.spend(kNow, 1));
  }
}
BENCHMARK(BM_LeaseSpender_Spend)->Threads(1)->Threads(2)->UseRealTime();

// Every thread on one spender: the contended case.
void BM_LeaseSpender_SpendShared(benchmark::State& state) {
  LeaseSpender& spender = shared_spender();
  for (auto _ : state) {
    benchmark::DoNotOptimize(spender.spend(kNow, 1));
  }
}
BENCHMARK(BM_LeaseSpender_SpendShared)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
