// Federation (docs/federation.md, "Benchmark"), in one binary:
//
// BM_Floor_LookupPlusCas: a flat_hash_map lookup plus one uncontended
// compare-and-swap, the physical floor of a keyed local spend.
// BM_Leased_CheckAtHotKey / BM_Federated_CheckAtHotKey: a check served from
// the local balance (a budget that never runs out in a run) by the leased
// engine and by a federated limiter. Target: federated at most 1.5x the
// floor, like the leased check.
//
// BM_Federated_RoundTripsPerAdmission: one thread checks one busy key of a
// federated limiter with batch 16 over a MemoryCoordinator (no network, so
// the count is exact and the run short); counter `trips_per_admission` =
// global leases / admissions. Target: exactly 1/16.
//
// BM_FleetBudget_DebitRedis beside BM_Floor_RedisTime (`TIME`: one round
// trip to the same server): a fleet token budget debit over Redis, with
// counter `round_trips_per_debit` from the coordinator's stats. Target: one.
// BM_Federated_LeaseWindowedRedis: one global lease on Redis (what a
// region's crossing costs). Skipped without THROTTLEKIT_REDIS_PORT.
//
// Run: scripts/bench_federation.sh (starts a private Redis on loopback,
// runs this, stops it).

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench_floors.h"
#include "bench_redis.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/federation/fleet_token_budget.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace {

constexpr int64_t kNow = 1'700'000'000'123;
constexpr int64_t kHuge = int64_t{1} << 52;

void BM_Floor_LookupPlusCas(benchmark::State& state) {
  bench::floor_lookup_plus_cas(state);
}
BENCHMARK(BM_Floor_LookupPlusCas);

std::shared_ptr<Coordinator> memory() {
  static auto* m =
      new std::shared_ptr<Coordinator>(*MemoryCoordinator::create());
  return *m;
}

void BM_Leased_CheckAtHotKey(benchmark::State& state) {
  static LeasedLimiter* l =
      LeasedLimiter::create(
          {.limit = kHuge, .window_ms = kHuge, .batch = int64_t{1} << 20},
          memory())
          ->release();
  const std::string key = "tenant:1004" + std::to_string(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(l->check_at(key, kNow));
}
BENCHMARK(BM_Leased_CheckAtHotKey)->ThreadRange(1, 2)->UseRealTime();

void BM_Federated_CheckAtHotKey(benchmark::State& state) {
  static FederatedLimiter* l =
      federate(*make_strategy(
                   FixedWindow::Options{.limit = kHuge, .window_ms = kHuge}),
               memory(),
               {.region = "bench",
                .batch = int64_t{1} << 20,
                .background_worker = false})
          ->release();
  const std::string key = "tenant:2004" + std::to_string(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(l->check_at(key, kNow));
}
BENCHMARK(BM_Federated_CheckAtHotKey)->ThreadRange(1, 2)->UseRealTime();

void BM_Federated_RoundTripsPerAdmission(benchmark::State& state) {
  auto l = federate(
      *make_strategy(FixedWindow::Options{.limit = kHuge, .window_ms = kHuge}),
      *MemoryCoordinator::create(),
      {.region = "bench", .batch = 16, .background_worker = false});
  int64_t admitted = 0;
  for (auto _ : state) {
    absl::StatusOr<Decision> d = (*l)->check_at("busy", kNow);
    admitted += d->allowed ? 1 : 0;
  }
  const auto stats = (*l)->stats();
  state.counters["trips_per_admission"] =
      static_cast<double>(stats.global_leases) / static_cast<double>(admitted);
  state.counters["global_leases"] = static_cast<double>(stats.global_leases);
  state.SetItemsProcessed(admitted);
}
BENCHMARK(BM_Federated_RoundTripsPerAdmission)->Iterations(16 * 100'000);

std::shared_ptr<Coordinator> shared_redis() {
  static auto* s = new std::shared_ptr<Coordinator>(
      bench::bench_redis(),
      [](Coordinator*) {});  // the static coordinator lives on
  return *s;
}

void BM_Floor_RedisTime(benchmark::State& state) {
  bench::floor_redis_time(state);
}
BENCHMARK(BM_Floor_RedisTime)->Threads(1)->Threads(8)->UseRealTime();

void BM_FleetBudget_DebitRedis(benchmark::State& state) {
  if (bench::skip_without_redis(state)) return;
  RedisCoordinator* r = bench::bench_redis();
  static FleetTokenBudget* b =
      FleetTokenBudget::create({.budget = kHuge, .window_ms = 60'000},
                               shared_redis())
          ->release();
  const int64_t before = r->stats().requests;
  for (auto _ : state) benchmark::DoNotOptimize(b->debit("bench:tokens", 17));
  if (state.thread_index() == 0) {
    state.counters["round_trips_per_debit"] = benchmark::Counter(
        static_cast<double>(r->stats().requests - before) /
        static_cast<double>(state.iterations() * state.threads()));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FleetBudget_DebitRedis)->Threads(1)->Threads(8)->UseRealTime();

void BM_Federated_LeaseWindowedRedis(benchmark::State& state) {
  if (bench::skip_without_redis(state)) return;
  RedisCoordinator* r = bench::bench_redis();
  const LeaseBudget budget = *LeaseBudget::create({kHuge, 60'000});
  for (auto _ : state) {
    benchmark::DoNotOptimize(r->lease_windowed(budget, "bench:fed", 16));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Federated_LeaseWindowedRedis)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
