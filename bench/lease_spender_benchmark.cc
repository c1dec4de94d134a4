// The local spend of leased mode beside its floors, in one run:
// LeaseSpender::spend (the client-side spend of a leased batch) beside an
// uncontended atomic fetch_sub on an int64, and the keyed leased check
// (LeasedLimiter) beside a flat_hash_map lookup plus a CAS and a clock
// read; one and two threads, with the clock read inside and with a
// caller-supplied `now`.
//
//     cmake --build --preset release --target lease_spender_benchmark
//     build/release/bench/lease_spender_benchmark

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "bench_floors.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"
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
BENCHMARK(BM_Floor_FetchSub)->ThreadRange(1, 2)->UseRealTime();

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
BENCHMARK(BM_LeaseSpender_Spend)->ThreadRange(1, 2)->UseRealTime();

// The same with the clock read inside (SystemClock, as `check()` does).
void BM_LeaseSpender_SpendClock(benchmark::State& state) {
  const SystemClock clock;
  LeaseSpender spender(1000, /*window_coupled=*/true);
  spender.refill(LeaseGrant{int64_t{1} << 50, 0, 0, int64_t{1} << 52, 0});
  for (auto _ : state) {
    benchmark::DoNotOptimize(spender.spend(clock.now_ms(), 1));
  }
}
BENCHMARK(BM_LeaseSpender_SpendClock)->ThreadRange(1, 2)->UseRealTime();

void BM_Floor_SystemClockRead(benchmark::State& state) {
  const SystemClock clock;
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ms());
}
BENCHMARK(BM_Floor_SystemClockRead)->ThreadRange(1, 2)->UseRealTime();

// Every thread on one spender: the contended case.
void BM_LeaseSpender_SpendShared(benchmark::State& state) {
  LeaseSpender& spender = shared_spender();
  for (auto _ : state) {
    benchmark::DoNotOptimize(spender.spend(kNow, 1));
  }
}
BENCHMARK(BM_LeaseSpender_SpendShared)->ThreadRange(1, 2)->UseRealTime();

// The keyed floor: one absl::flat_hash_map lookup of a 12-byte key plus one
// uncontended compare-and-swap.
void BM_Floor_LookupPlusCas(benchmark::State& state) {
  bench::floor_lookup_plus_cas(state);
}
BENCHMARK(BM_Floor_LookupPlusCas);

// One limiter shared by every benchmark thread: a budget that never runs
// out in a run, a lease per 2^20 checks.
LeasedLimiter& limiter() {
  static auto* l = [] {
    std::shared_ptr<Coordinator> store(*MemoryCoordinator::create());
    return LeasedLimiter::create({.limit = int64_t{1} << 52,
                                  .window_ms = int64_t{1} << 52,
                                  .batch = int64_t{1} << 20},
                                 store)
        ->release();
  }();
  return *l;
}

// A keyed leased check on a hot key with a caller-supplied `now`: almost
// always a local spend. Each thread has its own hot key.
void BM_LeasedLimiter_CheckAtHotKey(benchmark::State& state) {
  LeasedLimiter& l = limiter();
  const std::string key = "tenant:1004" + std::to_string(state.thread_index());
  for (auto _ : state) {
    benchmark::DoNotOptimize(l.check_at(key, kNow));
  }
}
BENCHMARK(BM_LeasedLimiter_CheckAtHotKey)->ThreadRange(1, 2)->UseRealTime();

// The same with the clock read inside (`check`).
void BM_LeasedLimiter_CheckHotKey(benchmark::State& state) {
  LeasedLimiter& l = limiter();
  const std::string key = "tenant:2004" + std::to_string(state.thread_index());
  for (auto _ : state) {
    benchmark::DoNotOptimize(l.check(key));
  }
}
BENCHMARK(BM_LeasedLimiter_CheckHotKey)->ThreadRange(1, 2)->UseRealTime();

// `check_at_async` on the hot key: a local hit completes inline (no
// allocation), beside `BM_LeasedLimiter_CheckAtHotKey`, its blocking twin.
void BM_LeasedLimiter_CheckAtAsyncHotKey(benchmark::State& state) {
  LeasedLimiter& l = limiter();
  const std::string key = "tenant:3004" + std::to_string(state.thread_index());
  int64_t allowed = 0;
  for (auto _ : state) {
    l.check_at_async(key, kNow, 1, [&allowed](absl::StatusOr<Decision> d) {
      allowed += d->allowed;
    });
  }
  benchmark::DoNotOptimize(allowed);
}
BENCHMARK(BM_LeasedLimiter_CheckAtAsyncHotKey)
    ->ThreadRange(1, 2)
    ->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
