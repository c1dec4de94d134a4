// WeightedFairEscrow::admit_at on a hot tenant beside its baseline, an
// uncontended std::mutex around a counter and a map lookup (what any
// escrow guarded by one lock pays), and water_fill itself for 10 and
// 10^4 tenants, in one run.
//
//     cmake --build --preset release --target fair_escrow_benchmark
//     build/release/bench/fair_escrow_benchmark

#include <benchmark/benchmark.h>

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "throttlekit/core/water_filling.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// The floor: one uncontended lock/unlock around a map lookup and an add.
void BM_Floor_MutexLookupAdd(benchmark::State& state) {
  static std::mutex mu;
  static absl::flat_hash_map<std::string, double> used = [] {
    absl::flat_hash_map<std::string, double> m;
    for (int i = 0; i < 10; ++i) m["tenant-" + std::to_string(i)] = 0;
    return m;
  }();
  const std::string tenant = "tenant-3";
  for (auto _ : state) {
    benchmark::DoNotOptimize(tenant);
    std::lock_guard lock(mu);
    benchmark::DoNotOptimize(used.find(tenant)->second += 1);
  }
}
BENCHMARK(BM_Floor_MutexLookupAdd)->ThreadRange(1, 2)->UseRealTime();

// Ten tenants, one window that never runs out in a run: every call is an
// admission within the budget (the borrowing path: one tenant active).
WeightedFairEscrow& escrow() {
  static auto* e = [] {
    WeightedFairEscrowOptions o{.limit = int64_t{1} << 52,
                                .window_ms = int64_t{1} << 52};
    for (int i = 0; i < 10; ++i) {
      o.tenants.push_back(
          {.name = "tenant-" + std::to_string(i), .weight = 1.0 + i});
    }
    return WeightedFairEscrow::create(std::move(o))->release();
  }();
  return *e;
}

// By name: one hash lookup per call.
void BM_Escrow_AdmitAtHotTenant(benchmark::State& state) {
  WeightedFairEscrow& e = escrow();
  const std::string tenant = "tenant-3";
  for (auto _ : state) {
    benchmark::DoNotOptimize(e.admit_at(tenant, kNow));
  }
}
BENCHMARK(BM_Escrow_AdmitAtHotTenant)->ThreadRange(1, 2)->UseRealTime();

// The same by name without waiting (`admit_at_async`, docs/async.md): an
// in-process escrow completes inline; the cost beside the blocking call.
void BM_Escrow_AdmitAtAsyncHotTenant(benchmark::State& state) {
  WeightedFairEscrow& e = escrow();
  const std::string tenant = "tenant-3";
  int64_t admitted = 0;
  for (auto _ : state) {
    e.admit_at_async(tenant, kNow, 1, [&admitted](absl::StatusOr<Decision> d) {
      admitted += d.ok() && d->allowed;
    });
  }
  benchmark::DoNotOptimize(admitted);
}
BENCHMARK(BM_Escrow_AdmitAtAsyncHotTenant)->ThreadRange(1, 2)->UseRealTime();

// By a resolved TenantId: the lock and the arithmetic only.
void BM_Escrow_AdmitAtTenantId(benchmark::State& state) {
  WeightedFairEscrow& e = escrow();
  const auto id = *e.tenant("tenant-3");
  for (auto _ : state) {
    benchmark::DoNotOptimize(e.admit_at(id, kNow));
  }
}
BENCHMARK(BM_Escrow_AdmitAtTenantId)->ThreadRange(1, 2)->UseRealTime();

void BM_WaterFill(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<WaterClaim> claims(static_cast<size_t>(state.range(0)));
  for (WaterClaim& c : claims) {
    c.weight = 1 + rng() % 100;
    c.demand = rng() % 10'000;
  }
  const int64_t capacity = 1000 * state.range(0);  // about 1 in 5 satisfied
  for (auto _ : state) {
    benchmark::DoNotOptimize(water_fill(capacity, claims));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_WaterFill)->Arg(10)->Arg(10'000);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
