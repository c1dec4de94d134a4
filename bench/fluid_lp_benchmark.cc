// Benchmarks the fluid-LP dual solver and the bid-price filter, each with
// its yardstick in the same binary:
//
// - BM_FluidLp_Solve2Axis/n: solve_fluid_lp on n random continuous classes
//   (no ties, so n distinct planes) for n = 10 .. 100000, with the fitted
//   complexity (O(n log n) expected: the bisection's 64 probes of O(n)
//   each, the sorts, and O(n) per candidate vertex on the optimal face).
// - BM_FluidLp_Solve2AxisEnumerated/n: the enumerator it replaced (now the
//   oracle, detail::solve_fluid_lp_enumerated) on the same instances, n =
//   10 .. 1000 (O(n^3) worst case; beyond 1000 it takes seconds).
// - BM_FluidLp_Solve3Axis/n: the 3-axis form (still the enumerator), n =
//   10 .. 100 (O(n^4) worst case).
// - BM_BidPricePolicy_Admits: the frozen policy's admits() (one acquire
//   load, the bid, one relaxed counter), 1 and 2 threads on one policy.
// - BM_Floor_TwoMultipliesAndCompare: the floor of any bid-price filter,
//   p_R + p_C * cost + p_K * hold <= value on volatile doubles.
//
//     cmake --build --preset release --target fluid_lp_benchmark
//     build/release/bench/fluid_lp_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "throttlekit/admission/bid_price_policy.h"
#include "throttlekit/admission/fluid_lp.h"

namespace throttlekit {
namespace {

struct Instance {
  std::vector<LpClass> classes;
  LpBudgets budgets;
};

// n classes, values in [0, 10), costs in [1, 10), holds in [0, 2) s,
// arrivals in [1, 100); budgets at half the requests, 30% of the cost and
// 30% of the concurrency-seconds demanded, so every axis binds.
Instance random_instance(int n, bool three_axis) {
  std::mt19937_64 rng(42 + n);
  std::uniform_real_distribution<double> u(0, 1);
  Instance in;
  double requests = 0, cost = 0, hold = 0;
  for (int i = 0; i < n; ++i) {
    const LpClass k{.arrivals = 1 + 99 * u(rng),
                    .value = 10 * u(rng),
                    .cost = 1 + 9 * u(rng),
                    .hold = 2 * u(rng)};
    in.classes.push_back(k);
    requests += k.arrivals;
    cost += k.arrivals * k.cost;
    hold += k.arrivals * k.hold;
  }
  in.budgets = {.requests = 0.5 * requests,
                .cost = 0.3 * cost,
                .concurrency_seconds = std::nullopt};
  if (three_axis) in.budgets.concurrency_seconds = 0.3 * hold;
  return in;
}

template <auto Solve>
void solve_2axis(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Instance in = random_instance(n, false);
  for (auto _ : state) {
    absl::StatusOr<Duals> p = Solve(in.classes, in.budgets);
    benchmark::DoNotOptimize(p);
  }
  state.SetComplexityN(n);
}

void BM_FluidLp_Solve2Axis(benchmark::State& state) {
  solve_2axis<solve_fluid_lp>(state);
}
BENCHMARK(BM_FluidLp_Solve2Axis)
    ->RangeMultiplier(10)
    ->Range(10, 100000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity(benchmark::oNLogN);

void BM_FluidLp_Solve2AxisEnumerated(benchmark::State& state) {
  solve_2axis<detail::solve_fluid_lp_enumerated>(state);
}
BENCHMARK(BM_FluidLp_Solve2AxisEnumerated)
    ->RangeMultiplier(10)
    ->Range(10, 1000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity();

template <auto Solve>
void solve_3axis(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Instance in = random_instance(n, true);
  for (auto _ : state) {
    absl::StatusOr<Duals> p = Solve(in.classes, in.budgets);
    benchmark::DoNotOptimize(p);
  }
  state.SetComplexityN(n);
}

// The descent (falling back to the enumerator only where it says).
void BM_FluidLp_Solve3Axis(benchmark::State& state) {
  solve_3axis<solve_fluid_lp>(state);
}
BENCHMARK(BM_FluidLp_Solve3Axis)
    ->RangeMultiplier(10)
    ->Range(10, 10000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity();

void BM_FluidLp_Solve3AxisEnumerated(benchmark::State& state) {
  solve_3axis<detail::solve_fluid_lp_enumerated>(state);
}
BENCHMARK(BM_FluidLp_Solve3AxisEnumerated)
    ->Arg(10)
    ->Arg(30)
    ->Arg(100)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity();

BidPricePolicy& shared_policy() {
  static std::unique_ptr<BidPricePolicy> policy =
      *BidPricePolicy::create({.duals = Duals{0.5, 0.25, 1}});
  return *policy;
}

void BM_BidPricePolicy_Admits(benchmark::State& state) {
  BidPricePolicy& policy = shared_policy();
  volatile double value = 3, cost = 4, hold = 0.5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(policy.admits(value, cost, hold));
  }
}
BENCHMARK(BM_BidPricePolicy_Admits)->ThreadRange(1, 2)->UseRealTime();

// The floor: the bid and the comparison, nothing else.
void BM_Floor_TwoMultipliesAndCompare(benchmark::State& state) {
  volatile double p_rate = 0.5, p_cost = 0.25, p_hold = 1;
  volatile double value = 3, cost = 4, hold = 0.5;
  for (auto _ : state) {
    benchmark::DoNotOptimize(value >= p_rate + p_cost * cost + p_hold * hold);
  }
}
BENCHMARK(BM_Floor_TwoMultipliesAndCompare)->ThreadRange(1, 2)->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
