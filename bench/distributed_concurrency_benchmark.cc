// Distributed concurrency (docs/distributed_concurrency.md, "Benchmark"),
// in one binary:
//
// BM_Local_AcquireRelease / BM_Distributed_AcquireRelease: a local
// `AdaptiveConcurrency` acquire + release beside the same through a
// `DistributedConcurrency` node beating every 10 ms to a memory
// coordinator (its ceiling is the fleet share; the beat is off the hot
// path). The target: distributed at most 1.2x local.
//
// BM_Beat_Memory: one coordinator step on a MemoryCoordinator (the step's
// CPU cost). BM_Beat_Redis beside BM_Floor_RedisTime (`TIME`, one round
// trip to the same server), BM_Beat_Postgres beside BM_Floor_PostgresNow
// (one round trip reading the store clock): counter `round_trips_per_beat`
// from the coordinator's `stats().batches`. At 8 threads (8 nodes on one
// key, 8 connections) BM_Beat_Redis's items_per_second is the beats per
// second one Redis sustains for one key.
//
// Run: scripts/bench_distributed_concurrency.sh (starts a private Redis and
// Postgres on loopback, runs this, stops them). Without
// THROTTLEKIT_REDIS_PORT / THROTTLEKIT_BENCH_PG_PORT the server benchmarks
// are skipped with a message.

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench_permits.h"
#include "bench_redis.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/postgres/postgres_coordinator.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace {

constexpr int64_t kLarge = int64_t{1} << 20;  // never the binding limit

AdaptiveConcurrencyOptions wide() {
  AdaptiveConcurrencyOptions o;
  o.initial_limit = o.min_limit = o.max_limit = kLarge;
  return o;
}

AdaptiveConcurrency& local() {
  static AdaptiveConcurrency* l =
      AdaptiveConcurrency::create(wide())->release();
  return *l;
}

DistributedConcurrency& distributed() {
  static DistributedConcurrency* d = [] {
    DistributedConcurrencyOptions o;
    o.node_id = "bench";
    o.key = "bench:fleet";
    o.heartbeat_ms = 10;
    o.local = wide();
    std::shared_ptr<Coordinator> memory = *MemoryCoordinator::create({});
    DistributedConcurrency* n =
        DistributedConcurrency::create(o, memory)->release();
    (void)n->beat_now();
    return n;
  }();
  return *d;
}

void BM_Local_AcquireRelease(benchmark::State& state) {
  bench::acquire_release(state, local(), PermitOutcome::kSuccess);
}
BENCHMARK(BM_Local_AcquireRelease)->ThreadRange(1, 2)->UseRealTime();

void BM_Distributed_AcquireRelease(benchmark::State& state) {
  DistributedConcurrency& d = distributed();
  bench::acquire_release(state, d, PermitOutcome::kSuccess);
  if (state.thread_index() == 0) {
    state.counters["share"] = static_cast<double>(d.stats().share);
  }
}
BENCHMARK(BM_Distributed_AcquireRelease)->ThreadRange(1, 2)->UseRealTime();

// One node per thread beating on one key: returns the beats made.
template <class Store>
void beat_loop(benchmark::State& state, Store& store) {
  // Per node and store, kept across the library's repeated runs (a seq
  // starting over would make every beat stale: a cheaper path).
  static std::atomic<int64_t> seqs[64];
  static std::atomic<int64_t> gens[64];
  const int node = state.thread_index();
  const std::string id = "node" + std::to_string(node);
  const HeartbeatOptions o{.lease_ttl_ms = 60'000};
  int64_t seq = seqs[node].load();
  int64_t gen = gens[node].load();
  for (auto _ : state) {
    absl::StatusOr<HeartbeatGrant> g = store.heartbeat("bench:beats",
                                                       {.node_id = id,
                                                        .seq = ++seq,
                                                        .applied_gen = gen,
                                                        .inflight = seq % 4,
                                                        .local_limit = 64},
                                                       o);
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      return;
    }
    if (g->stale) {
      state.SkipWithError("a stale beat: the benchmark's seqs went back");
      return;
    }
    gen = g->generation;
  }
  seqs[node].store(seq);
  gens[node].store(gen);
  state.SetItemsProcessed(state.iterations());
}

void BM_Beat_Memory(benchmark::State& state) {
  static MemoryCoordinator* memory = MemoryCoordinator::create({})->release();
  beat_loop(state, *memory);
}
BENCHMARK(BM_Beat_Memory)->Threads(1)->UseRealTime();

PostgresCoordinator* postgres() {
  static PostgresCoordinator* p = []() -> PostgresCoordinator* {
    const char* port = std::getenv("THROTTLEKIT_BENCH_PG_PORT");
    if (port == nullptr) return nullptr;
    PostgresCoordinatorOptions o;
    o.port = std::atoi(port);
    o.table = "tk_bench_dc";
    o.connections = 8;
    auto c = PostgresCoordinator::create(o);
    return c.ok() ? c->release() : nullptr;
  }();
  return p;
}

// Round trips the store wrote per beat (single-threaded runs only, where
// nothing else writes meanwhile).
template <class Store>
void count_round_trips(benchmark::State& state, Store& store,
                       const BackendStats& before) {
  if (state.threads() != 1) return;
  state.counters["round_trips_per_beat"] =
      static_cast<double>(store.stats().batches - before.batches) /
      static_cast<double>(state.iterations());
}

void BM_Floor_RedisTime(benchmark::State& state) {
  bench::floor_redis_time(state);
}
BENCHMARK(BM_Floor_RedisTime)->Threads(1)->Threads(8)->UseRealTime();

void BM_Beat_Redis(benchmark::State& state) {
  if (bench::skip_without_redis(state)) return;
  RedisCoordinator* r = bench::bench_redis();
  const BackendStats before = r->stats();
  beat_loop(state, *r);
  count_round_trips(state, *r, before);
}
BENCHMARK(BM_Beat_Redis)->Threads(1)->Threads(8)->UseRealTime();

void BM_Floor_PostgresNow(benchmark::State& state) {
  PostgresCoordinator* p = postgres();
  if (p == nullptr) {
    state.SkipWithError("THROTTLEKIT_BENCH_PG_PORT is not set (or no server)");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(p->now_ms());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Floor_PostgresNow)->Threads(1)->UseRealTime();

void BM_Beat_Postgres(benchmark::State& state) {
  PostgresCoordinator* p = postgres();
  if (p == nullptr) {
    state.SkipWithError("THROTTLEKIT_BENCH_PG_PORT is not set (or no server)");
    return;
  }
  const BackendStats before = p->stats();
  beat_loop(state, *p);
  count_round_trips(state, *p, before);
}
BENCHMARK(BM_Beat_Postgres)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
