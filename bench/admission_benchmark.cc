// Unified admission beside the sum of its parts, in one run
// (docs/admission.md, "Benchmark"):
//
// - BM_Part_AcquireRelease, BM_Part_RateCheckAt, BM_Part_CostCheckAt: a
//   concurrency slot taken and released (kSuccess), a GCRA check_at and a
//   token-bucket check_at on a hot key, each alone;
// - BM_Admit_ThreeAxes: admit_at over all three, then release: the target
//   is at most 1.3x the sum of the three parts;
// - BM_Floor_FailedAcquire and BM_Admit_ConcurrencyDenied: a bare refused
//   acquire, and an admit_at refused by the concurrency axis (the lease
//   shim's decision built): the target is at most 1.2x.
//
//     cmake --build --preset release --target admission_benchmark
//     build/release/bench/admission_benchmark

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;
using Rate = RateLimiter<Gcra>;
using Cost = RateLimiter<TokenBucket>;

std::shared_ptr<Rate> rate() {
  return std::make_shared<Rate>(
      *Rate::create({.limit = int64_t{1} << 40, .period_ms = 1000}));
}
std::shared_ptr<Cost> cost() {
  return std::make_shared<Cost>(
      *Cost::create({.capacity = int64_t{1} << 40, .refill_per_sec = 1e12}));
}
// The per-sample law (min_limit 1), as when the figures in docs were taken.
std::shared_ptr<AdaptiveConcurrency> slots(int64_t limit) {
  AdaptiveConcurrencyOptions o =
      AdaptiveConcurrencyOptions::per_sample_gradient2();
  o.initial_limit = limit;
  o.max_limit = limit;
  return std::shared_ptr<AdaptiveConcurrency>(*AdaptiveConcurrency::create(o));
}

void BM_Part_AcquireRelease(benchmark::State& state) {
  auto c = slots(1000);
  for (auto _ : state) {
    AdaptiveConcurrency::Permit p = c->acquire();
    benchmark::DoNotOptimize(p);
    p.release(PermitOutcome::kSuccess);
  }
}
BENCHMARK(BM_Part_AcquireRelease);

void BM_Part_RateCheckAt(benchmark::State& state) {
  auto r = rate();
  for (auto _ : state) benchmark::DoNotOptimize(r->check_at("tenant", kNow));
}
BENCHMARK(BM_Part_RateCheckAt);

void BM_Part_CostCheckAt(benchmark::State& state) {
  auto c = cost();
  for (auto _ : state) {
    benchmark::DoNotOptimize(c->check_at("tenant", kNow, 3));
  }
}
BENCHMARK(BM_Part_CostCheckAt);

void BM_Admit_ThreeAxes(benchmark::State& state) {
  auto adm = *UnifiedAdmission<Rate, Cost>::create(
      {.concurrency = slots(1000), .rate = rate(), .cost = cost()});
  int64_t denied = 0;
  for (auto _ : state) {
    absl::StatusOr<Admission> a = adm->admit_at("tenant", kNow, 3);
    denied += !a->allowed();
    a->release(PermitOutcome::kSuccess);
  }
  state.counters["denied"] = static_cast<double>(denied);
}
BENCHMARK(BM_Admit_ThreeAxes);

void BM_Floor_FailedAcquire(benchmark::State& state) {
  auto c = slots(1);
  AdaptiveConcurrency::Permit held = c->acquire();
  for (auto _ : state) {
    AdaptiveConcurrency::Permit p = c->acquire();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_Floor_FailedAcquire);

void BM_Admit_ConcurrencyDenied(benchmark::State& state) {
  auto adm = *UnifiedAdmission<Rate, Cost>::create(
      {.concurrency = slots(1), .rate = rate(), .cost = cost()});
  absl::StatusOr<Admission> held = adm->admit_at("tenant", kNow, 3);
  int64_t allowed = 0;
  for (auto _ : state) {
    absl::StatusOr<Admission> a = adm->admit_at("tenant", kNow, 3);
    benchmark::DoNotOptimize(a);
    allowed += a->allowed();
  }
  state.counters["allowed"] = static_cast<double>(allowed);
}
BENCHMARK(BM_Admit_ConcurrencyDenied);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
