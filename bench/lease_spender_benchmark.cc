// LeaseSpender::spend (the client-side spend of a leased batch) beside its
// floor, an uncontended atomic fetch_sub on an int64, in one run.
//
//     cmake --build --preset release --target lease_spender_benchmark
//     build/release/bench/lease_spender_benchmark

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/twotier/lease_spender.h"
#include "throttlekit/twotier/leased_limiter.h"

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

// The keyed floor: one absl::flat_hash_map lookup of a 12-byte key plus one
// uncontended compare-and-swap.
void BM_Floor_LookupPlusCas(benchmark::State& state) {
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
BENCHMARK(BM_Floor_LookupPlusCas);

// A keyed leased check on a hot key with a caller-supplied `now`: almost
// always a local spend (one lease per 2^20 checks).
void BM_LeasedLimiter_CheckAtHotKey(benchmark::State& state) {
  static auto* limiter = [] {
    std::shared_ptr<Coordinator> store(*MemoryCoordinator::create());
    return LeasedLimiter<>::create({.limit = int64_t{1} << 52,
                                    .window_ms = int64_t{1} << 52,
                                    .batch = int64_t{1} << 20},
                                   store)
        ->release();
  }();
  const std::string key = "tenant:10042";
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->check_at(key, kNow));
  }
}
BENCHMARK(BM_LeasedLimiter_CheckAtHotKey);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
