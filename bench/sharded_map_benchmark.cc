// The stores built on `detail::ShardedMap` (store/internal/sharded_map.h)
// beside the floor of any locked map: one uncontended lock/unlock around a
// flat_hash_map lookup, in one run.
//
// - MemoryCoordinator::check (GCRA) on a hot key, and on a stream of new
//   keys into a full map (every call inserts and evicts one key).
// - DenyCache::lookup of a held denial, and remember() of new keys into a
//   full cache (insert + eviction).
//
//     cmake --build --preset release --target sharded_map_benchmark
//     build/release/bench/sharded_map_benchmark

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/twotier/deny_cache.h"

namespace throttlekit {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// The floor: one uncontended lock/unlock around a lookup.
void BM_Floor_MutexMapLookup(benchmark::State& state) {
  std::mutex mu;
  absl::flat_hash_map<std::string, int64_t> map;
  for (int i = 0; i < 1000; ++i) map["key-" + std::to_string(i)] = i;
  const std::string key = "key-42";
  for (auto _ : state) {
    benchmark::DoNotOptimize(key);
    std::lock_guard lock(mu);
    benchmark::DoNotOptimize(map.find(key)->second += 1);
  }
}
BENCHMARK(BM_Floor_MutexMapLookup);

const AnyStrategy& gcra() {
  static const AnyStrategy s = *make_strategy(
      Gcra::Options{.limit = int64_t{1} << 40, .period_ms = 1000});
  return s;
}

void BM_MemoryCoordinator_CheckHotKey(benchmark::State& state) {
  std::unique_ptr<MemoryCoordinator> c = *MemoryCoordinator::create({});
  for (auto _ : state) {
    benchmark::DoNotOptimize(c->check(gcra(), "user:42", kNow));
  }
}
BENCHMARK(BM_MemoryCoordinator_CheckHotKey);

// The same step through `check_async` (memory completes it inline): beside
// the blocking check above, the cost of deriving one form from the other
// (docs/coordinator.md, "One hook per verb").
void BM_MemoryCoordinator_CheckAsyncHotKey(benchmark::State& state) {
  std::unique_ptr<MemoryCoordinator> c = *MemoryCoordinator::create({});
  int64_t allowed = 0;
  for (auto _ : state) {
    c->check_async(gcra(), "user:42", kNow, 1,
                   [&allowed](absl::StatusOr<Decision> d) {
                     allowed += d.ok() && d->allowed;
                   });
  }
  benchmark::DoNotOptimize(allowed);
}
BENCHMARK(BM_MemoryCoordinator_CheckAsyncHotKey);

// 1024 keys held at most, every call a new key: insert + eviction.
void BM_MemoryCoordinator_CheckNewKeyFullMap(benchmark::State& state) {
  std::unique_ptr<MemoryCoordinator> c =
      *MemoryCoordinator::create({.max_keys = 1024});
  std::vector<std::string> keys;
  for (int i = 0; i < 65536; ++i) keys.push_back("user:" + std::to_string(i));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(c->check(gcra(), keys[i++ & 65535], kNow));
  }
  state.counters["keys_held"] = static_cast<double>(c->size());
}
BENCHMARK(BM_MemoryCoordinator_CheckNewKeyFullMap);

Decision denial() { return Decision{false, 10, 0, kNow + 1000, 1000}; }

void BM_DenyCache_LookupHit(benchmark::State& state) {
  DenyCache cache(1 << 16);
  cache.remember("user:42", kNow, 1.0, denial());
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.lookup("user:42", kNow, 1.0));
  }
}
BENCHMARK(BM_DenyCache_LookupHit);

void BM_DenyCache_RememberNewKeyFullCache(benchmark::State& state) {
  DenyCache cache(1024);
  std::vector<std::string> keys;
  for (int i = 0; i < 65536; ++i) keys.push_back("user:" + std::to_string(i));
  size_t i = 0;
  for (auto _ : state) {
    cache.remember(keys[i++ & 65535], kNow, 1.0, denial());
  }
  state.counters["keys_held"] = static_cast<double>(cache.size());
}
BENCHMARK(BM_DenyCache_RememberNewKeyFullCache);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
