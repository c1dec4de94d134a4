// Strict-mode check() over a real Redis next to its floors, in one run:
// redis-benchmark sending EVALSHA of the same GCRA script to the same
// server, unpipelined at the same concurrency and with -c 50 -P 16; and the
// two-tier leased mode next to strict at batch 10, 100 and 1000; one
// caller thread with 1, 16, 64 and 256 asynchronous checks in flight next
// to redis-benchmark with one connection at the same pipeline depths;
// strict checks on a Redis Cluster of 3 primaries beside the one node, and
// asynchronous ones beside redis-benchmark --cluster at the same depth per
// primary; and on a Sentinel-guarded primary, with and without
// durable_writes.
//
// Run: scripts/bench_redis.sh (starts a private redis-server, a private
// cluster and a private Sentinel set on loopback, runs this binary, stops
// them). Or point it at a server with THROTTLEKIT_REDIS_PORT, a cluster
// node with THROTTLEKIT_REDIS_CLUSTER_PORT and a Sentinel set with
// THROTTLEKIT_REDIS_SENTINEL_PORT (THROTTLEKIT_BENCH_CONNECTIONS overrides
// the pool size). Counters: items_per_second (checks/s), p50_us and
// p99_us (each thread's percentiles, averaged over threads), and for the
// floors rps / p50_us / p99_us as redis-benchmark printed them.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_async_window.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/redis/fused_rate_cost.h"
#include "throttlekit/redis/key_slot.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace {

int port() {
  const char* p = std::getenv("THROTTLEKIT_REDIS_PORT");
  return p != nullptr ? std::atoi(p) : 16379;
}

// Options that always admit (so every call writes, as a busy key does).
const AnyStrategy& strategy() {
  static const AnyStrategy s =
      *make_strategy(Gcra::Options{1'000'000'000, 1000, 0});
  return s;
}

RedisCoordinator& coordinator() {
  static RedisCoordinator* c =
      RedisCoordinator::create({.port = port(), .connections = 2})->release();
  return *c;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// SCRIPT LOAD of the exact GCRA script the coordinator sends.
// Loads the GCRA script on the server at `at` (SCRIPT LOAD); its SHA-1.
std::string load_gcra(int at) {
  const std::string path =
      "/tmp/tk-bench-gcra-" + std::to_string(getpid()) + ".lua";
  std::ofstream(path) << RedisCoordinator::lua_script("gcra");
  std::string s =
      run("redis-cli -p " + std::to_string(at) + " -x SCRIPT LOAD < " + path);
  std::remove(path.c_str());
  s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
  return s;
}

const std::string& gcra_sha() {
  static const std::string sha = load_gcra(port());
  return sha;
}

// Strict GCRA checks of one key per thread (`stem` + the thread's index)
// through `redis`, with per-thread latency percentiles.
void drive_strict(benchmark::State& state, RedisCoordinator& redis,
                  const std::string& stem) {
  const std::string key = stem + std::to_string(state.thread_index());
  std::vector<double> us;
  us.reserve(1 << 16);
  int64_t errors = 0;
  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    absl::StatusOr<Decision> d = redis.check(strategy(), key, 0);
    const auto end = std::chrono::steady_clock::now();
    if (!d.ok()) ++errors;
    benchmark::DoNotOptimize(d);
    us.push_back(
        std::chrono::duration<double, std::micro>(end - begin).count());
  }
  state.SetItemsProcessed(state.iterations());
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    const auto avg = benchmark::Counter::kAvgThreads;
    state.counters["p50_us"] = benchmark::Counter(us[us.size() / 2], avg);
    state.counters["p99_us"] =
        benchmark::Counter(us[us.size() * 99 / 100], avg);
  }
  state.counters["errors"] = static_cast<double>(errors);
}

void BM_StrictCheck(benchmark::State& state) {
  drive_strict(state, coordinator(), "bench:strict:");
}
BENCHMARK(BM_StrictCheck)
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(2.0);

// A coordinator on the Redis Cluster whose first node is at
// THROTTLEKIT_REDIS_CLUSTER_PORT (scripts/bench_redis.sh starts it) with
// `connections` per primary, once it has read the slot map; null without
// the variable.
RedisCoordinator* cluster_coordinator(int connections) {
  const char* port = std::getenv("THROTTLEKIT_REDIS_CLUSTER_PORT");
  if (port == nullptr) return nullptr;
  RedisCoordinator* c =
      RedisCoordinator::create(
          {.connections = connections,
           .cluster_seeds = {std::string("127.0.0.1:") + port}})
          ->release();
  for (int i = 0; i < 200 && c->stats().refreshes == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return c;
}

// The same checks on a Redis Cluster of 3 primaries (docs/redis.md, "Redis
// Cluster"): at 1 thread the routing's cost beside BM_StrictCheck on one
// node; at 32 threads the keys spread over the three primaries (all on
// this machine's two cores).
void BM_ClusterStrictCheck(benchmark::State& state) {
  static RedisCoordinator* cluster = cluster_coordinator(2);
  if (cluster == nullptr) {
    state.SkipWithError("no cluster (THROTTLEKIT_REDIS_CLUSTER_PORT)");
    return;
  }
  const int64_t redirects = cluster->stats().redirects;
  drive_strict(state, *cluster, "bench:cluster:");
  state.counters["redirects"] =
      static_cast<double>(cluster->stats().redirects - redirects);
}
BENCHMARK(BM_ClusterStrictCheck)
    ->Threads(1)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(2.0);

// The same checks on a Sentinel-guarded primary with one replica
// (docs/redis.md, "Redis Sentinel"; THROTTLEKIT_REDIS_SENTINEL_PORT: the
// primary's port, the sentinels 2..4 above it, as scripts/bench_redis.sh
// starts them), with durable_writes 0 (the argument) beside BM_StrictCheck
// on one node: the cost of finding the primary through the sentinels
// (none per call); and with durable_writes 1: each pipelined batch waits
// for the replica's acknowledgement (WAIT 1), the price of losing no
// acknowledged write in a failover.
void BM_SentinelStrictCheck(benchmark::State& state) {
  static RedisCoordinator* sentinel[2] = {nullptr, nullptr};
  static const bool ready = [] {
    const char* port = std::getenv("THROTTLEKIT_REDIS_SENTINEL_PORT");
    if (port == nullptr) return false;
    for (int durable = 0; durable < 2; ++durable) {
      RedisCoordinatorOptions o;
      o.connections = 2;
      for (int i = 2; i <= 4; ++i) {
        o.sentinels.push_back("127.0.0.1:" +
                              std::to_string(std::atoi(port) + i));
      }
      o.master_name = "tk";
      o.durable_writes = durable;
      sentinel[durable] = RedisCoordinator::create(o)->release();
    }
    return true;
  }();
  if (!ready) {
    state.SkipWithError("no sentinels (THROTTLEKIT_REDIS_SENTINEL_PORT)");
    return;
  }
  RedisCoordinator& redis = *sentinel[state.range(0)];
  const int64_t unreplicated = redis.stats().unreplicated;
  drive_strict(state, redis, "bench:sentinel:");
  state.counters["unreplicated"] =
      static_cast<double>(redis.stats().unreplicated - unreplicated);
}
BENCHMARK(BM_SentinelStrictCheck)
    ->ArgName("durable_writes")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(2.0);

// Unified admission with the fused rate + cost axes (one script over two
// keys, always admitting) and a fixed concurrency ceiling, beside
// BM_StrictCheck (one GCRA script) at the same thread counts. Counter
// `round_trips_per_admit`: the coordinator's answered requests per admit
// (exactly 1 when fused). Target: items_per_second >= 90% of
// BM_StrictCheck's at 1 and 32 threads.
struct Fused {
  std::shared_ptr<RedisCoordinator> redis;
  std::unique_ptr<UnifiedAdmission<FusedRateCost>> admission;
};

Fused& fused() {
  static Fused* f = [] {
    auto* out = new Fused;
    out->redis = std::shared_ptr<RedisCoordinator>(
        RedisCoordinator::create({.port = port(), .connections = 2})
            ->release());
    auto pair = std::shared_ptr<FusedRateCost>(*FusedRateCost::create(
        {.rate = Gcra::Options{1'000'000'000, 1000, 0},
         .cost = TokenBucket::Options{.capacity = int64_t{1} << 50,
                                      .refill_per_sec = 1e12},
         .prefix = "bench:fused"},
        out->redis));
    out->admission = *UnifiedAdmission<FusedRateCost>::create(
        {.max_inflight = 1024, .rate = pair});
    return out;
  }();
  return *f;
}

void BM_FusedAdmit(benchmark::State& state) {
  Fused& f = fused();
  const std::string key = "t" + std::to_string(state.thread_index());
  std::vector<double> us;
  us.reserve(1 << 16);
  int64_t errors = 0, denied = 0;
  const int64_t before = f.redis->stats().requests;
  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    absl::StatusOr<Admission> a = f.admission->admit(key, 3);
    const auto end = std::chrono::steady_clock::now();
    if (!a.ok()) {
      ++errors;
    } else {
      denied += !a->allowed();
      a->release(PermitOutcome::kSuccess);
    }
    us.push_back(
        std::chrono::duration<double, std::micro>(end - begin).count());
  }
  state.SetItemsProcessed(state.iterations());
  std::sort(us.begin(), us.end());
  const auto avg = benchmark::Counter::kAvgThreads;
  if (!us.empty()) {
    state.counters["p50_us"] = benchmark::Counter(us[us.size() / 2], avg);
    state.counters["p99_us"] =
        benchmark::Counter(us[us.size() * 99 / 100], avg);
  }
  // Every thread's requests over about the same span, divided by every
  // thread's admits (as the Postgres benchmark counts round trips).
  state.counters["round_trips_per_admit"] = benchmark::Counter(
      static_cast<double>(f.redis->stats().requests - before) /
          static_cast<double>(state.iterations() * state.threads()),
      avg);
  state.counters["errors"] = static_cast<double>(errors);
  state.counters["denied"] = static_cast<double>(denied);
}
BENCHMARK(BM_FusedAdmit)->Threads(1)->Threads(32)->UseRealTime()->MinTime(2.0);

// The same admission without waiting (`admit_async`, docs/async.md): one
// caller thread with at most `depth` admissions in flight, each one fused
// script, completed on the coordinator's I/O thread; beside BM_FusedAdmit's
// one and 32 blocking threads.
void BM_FusedAdmitAsync(benchmark::State& state) {
  Fused& f = fused();
  const int64_t before = f.redis->stats().requests;
  bench::run_async_window(state, state.range(0), [&](const auto& on_done) {
    f.admission->admit_async(
        {.key = "async", .cost = 3}, [&on_done](absl::StatusOr<Admission> a) {
          on_done(a.ok() ? absl::StatusOr<Decision>(a->decision())
                         : absl::StatusOr<Decision>(a.status()));
        });
  });
  state.counters["round_trips_per_admit"] =
      static_cast<double>(f.redis->stats().requests - before) /
      static_cast<double>(std::max<int64_t>(1, state.iterations()));
}
BENCHMARK(BM_FusedAdmitAsync)->Apply(bench::async_depths);

// The same admission over the two strict engines (two round trips), for
// what the fusion buys.
void BM_SequentialAdmit(benchmark::State& state) {
  using StrictGcra = StrictRateLimiter<Gcra>;
  using StrictBucket = StrictRateLimiter<TokenBucket>;
  static auto* admission = [] {
    auto redis = fused().redis;
    auto rate = std::shared_ptr<StrictGcra>(*StrictGcra::create(
        {1'000'000'000, 1000, 0}, redis, {.prefix = "bench:seq:r"}));
    auto cost = std::shared_ptr<StrictBucket>(*StrictBucket::create(
        {.capacity = int64_t{1} << 50, .refill_per_sec = 1e12}, redis,
        {.prefix = "bench:seq:c"}));
    return UnifiedAdmission<StrictGcra, StrictBucket>::create(
               {.max_inflight = 1024, .rate = rate, .cost = cost})
        ->release();
  }();
  const std::string key = "t" + std::to_string(state.thread_index());
  int64_t errors = 0;
  const int64_t before = fused().redis->stats().requests;
  for (auto _ : state) {
    absl::StatusOr<Admission> a = admission->admit(key, 3);
    if (!a.ok()) ++errors;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["round_trips_per_admit"] = benchmark::Counter(
      static_cast<double>(fused().redis->stats().requests - before) /
          static_cast<double>(state.iterations() * state.threads()),
      benchmark::Counter::kAvgThreads);
  state.counters["errors"] = static_cast<double>(errors);
}
BENCHMARK(BM_SequentialAdmit)
    ->Threads(1)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(2.0);

// Leased vs strict over the same server, one client thread, a fixed-window
// budget that never runs out: strict pays one round trip per check; leased
// one per `batch` admissions. Counter `round_trips_per_admit` is leases
// (or checks) per admitted request as the limiter counted them.
// Checks key "k" once per iteration; counts admitted items and errors.
template <class Limiter>
int64_t drive(benchmark::State& state, Limiter& limiter) {
  int64_t admitted = 0, errors = 0;
  for (auto _ : state) {
    absl::StatusOr<Decision> d = limiter.check("k");
    if (!d.ok()) {
      ++errors;
    } else {
      admitted += d->allowed;
    }
  }
  state.SetItemsProcessed(admitted);
  state.counters["errors"] = static_cast<double>(errors);
  return admitted;
}

void BM_StrictFixedWindow(benchmark::State& state) {
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = int64_t{1} << 50, .window_ms = 3'600'000},
      std::shared_ptr<Coordinator>(&coordinator(), [](Coordinator*) {}),
      {.prefix = "bench:strict-fw"});
  const int64_t admitted = drive(state, *limiter);
  state.counters["round_trips_per_admit"] =
      admitted > 0 ? static_cast<double>(state.iterations()) / admitted : 0;
}
BENCHMARK(BM_StrictFixedWindow)->UseRealTime()->MinTime(2.0);

// A batch of `Arg` distinct keys per iteration, one thread: `check_many`
// (one read of the store's clock, then every key's step pipelined) beside
// the same keys checked one `check_at` at a time at one read of the clock
// (what `check_many` did before: a round trip per key). Items: keys.
std::vector<std::string> batch_keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("k" + std::to_string(i));
  return keys;
}
void run_batches(benchmark::State& state, bool pipelined) {
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = int64_t{1} << 50, .window_ms = 3'600'000},
      std::shared_ptr<Coordinator>(&coordinator(), [](Coordinator*) {}),
      {.prefix = pipelined ? "bench:many" : "bench:many-seq"});
  const std::vector<std::string> owned =
      batch_keys(static_cast<int>(state.range(0)));
  const std::vector<std::string_view> keys(owned.begin(), owned.end());
  int64_t errors = 0;
  for (auto _ : state) {
    if (pipelined) {
      absl::StatusOr<std::vector<Decision>> d = limiter->check_many(keys);
      errors += d.ok() ? 0 : 1;
      benchmark::DoNotOptimize(d);
    } else {
      absl::StatusOr<int64_t> now = coordinator().now_ms();
      for (std::string_view k : keys) {
        absl::StatusOr<Decision> d = limiter->check_at(k, now.ok() ? *now : 0);
        errors += d.ok() ? 0 : 1;
        benchmark::DoNotOptimize(d);
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["errors"] = static_cast<double>(errors);
}
void BM_StrictCheckMany(benchmark::State& state) { run_batches(state, true); }
void BM_StrictCheckManySequential(benchmark::State& state) {
  run_batches(state, false);
}
BENCHMARK(BM_StrictCheckMany)->Arg(8)->Arg(64)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_StrictCheckManySequential)
    ->Arg(8)
    ->Arg(64)
    ->UseRealTime()
    ->MinTime(2.0);

void BM_Leased(benchmark::State& state) {
  auto limiter = *LeasedLimiter::create(
      {.prefix = "bench:leased:" + std::to_string(state.range(0)),
       .limit = int64_t{1} << 50,
       .window_ms = 3'600'000,  // no roll in the run: every batch is spent
       .batch = state.range(0)},
      std::shared_ptr<Coordinator>(&coordinator(), [](Coordinator*) {}));
  const int64_t admitted = drive(state, *limiter);
  state.counters["round_trips_per_admit"] =
      admitted > 0 ? static_cast<double>(limiter->stats().leases) / admitted
                   : 0;
  (void)limiter->close();
}
// A fixed number of checks per batch size, a multiple of the batch (about
// 2 s each), so every lease of the run is spent whole and the round trips
// per admission are measured without a partly spent last lease.
BENCHMARK(BM_Leased)->Arg(10)->Iterations(400'000)->UseRealTime();
BENCHMARK(BM_Leased)->Arg(100)->Iterations(4'000'000)->UseRealTime();
BENCHMARK(BM_Leased)->Arg(1000)->Iterations(20'000'000)->UseRealTime();

// One caller thread with at most 64 asynchronous leased checks in flight
// on one key (docs/async.md): hits complete inline, misses wait for the
// key's one lease in flight; beside `BM_Leased` (one blocking caller) of
// the same batch.
// Arg 1 (`low_water`): with `low_water = batch / 2`, so the next batch is
// leased in the background before the key runs dry and checks rarely wait.
void BM_LeasedAsync(benchmark::State& state) {
  auto limiter = *LeasedLimiter::create(
      {.prefix = "bench:leased-async:" + std::to_string(state.range(0)) + ":" +
                 std::to_string(state.range(1)),
       .limit = int64_t{1} << 50,
       .window_ms = 3'600'000,
       .batch = state.range(0),
       .low_water = state.range(1) != 0 ? state.range(0) / 2 : 0},
      std::shared_ptr<Coordinator>(&coordinator(), [](Coordinator*) {}));
  bench::run_async_window(state, 64, [&](const auto& on_done) {
    limiter->check_async("k", 1, on_done);
  });
  state.counters["round_trips_per_admit"] =
      static_cast<double>(limiter->stats().leases) /
      static_cast<double>(std::max<int64_t>(1, state.iterations()));
  (void)limiter->close();
}
BENCHMARK(BM_LeasedAsync)
    ->ArgNames({"batch", "low_water"})
    ->ArgsProduct({{10, 100}, {0, 1}})
    ->UseRealTime()
    ->MinTime(2.0);

// The federated limiter over Redis (docs/federation.md, docs/async.md):
// one blocking caller (`BM_Federated`), then one caller thread with at most
// 64 asynchronous checks in flight (`BM_FederatedAsync`), on one key, of
// batch 10 or 100; arg 1 (`escrow`): with the region's escrow on the same
// Redis (leases of 4 batches, the excess parked and taken back), so a miss
// is two or three round trips in a chain.
std::unique_ptr<FederatedLimiter> bench_federated(benchmark::State& state,
                                                  const std::string& stem) {
  const std::string id = stem + std::to_string(state.range(0)) + ":" +
                         std::to_string(state.range(1));
  std::shared_ptr<Coordinator> redis(&coordinator(), [](Coordinator*) {});
  return *federate(*make_strategy(FixedWindow::Options{
                       .limit = int64_t{1} << 50, .window_ms = 3'600'000}),
                   redis,
                   {.region = "bench",
                    .prefix = "bench:fed:" + id,
                    .escrow_prefix = "bench:fed-l2:" + id,
                    .batch = state.range(0),
                    .regional_escrow = state.range(1) != 0 ? redis : nullptr});
}

void federated_counters(benchmark::State& state, FederatedLimiter& limiter) {
  const FederatedLimiter::Stats s = limiter.stats();
  const double checks =
      static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["global_leases_per_check"] =
      static_cast<double>(s.global_leases) / checks;
  state.counters["escrow_takes_per_check"] =
      static_cast<double>(s.escrow_takes) / checks;
  (void)limiter.close();
}

// The federated benchmarks' runs: batch 10 or 100, without and with the
// escrow, each for 2 s of real time.
void federated_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "escrow"})
      ->ArgsProduct({{10, 100}, {0, 1}})
      ->UseRealTime()
      ->MinTime(2.0);
}

void BM_Federated(benchmark::State& state) {
  std::unique_ptr<FederatedLimiter> limiter = bench_federated(state, "b:");
  drive(state, *limiter);
  federated_counters(state, *limiter);
}
BENCHMARK(BM_Federated)->Apply(federated_args);

void BM_FederatedAsync(benchmark::State& state) {
  std::unique_ptr<FederatedLimiter> limiter = bench_federated(state, "a:");
  bench::run_async_window(state, 64, [&](const auto& on_done) {
    limiter->check_async("k", 1, on_done);
  });
  federated_counters(state, *limiter);
}
BENCHMARK(BM_FederatedAsync)->Apply(federated_args);

// The pipelining factor between two snapshots of a coordinator's stats:
// checks per write to the socket.
void count_per_batch(benchmark::State& state, const BackendStats& before,
                     const BackendStats& after) {
  state.counters["per_batch"] =
      static_cast<double>(after.requests - before.requests) /
      static_cast<double>(std::max<int64_t>(1, after.batches - before.batches));
}

// One caller thread with at most `depth` asynchronous strict checks in
// flight (docs/async.md; bench_async_window.h) on one connection, beside
// redis-benchmark with one connection and the same pipeline depth
// (RedisBenchmarkFloor/c1_P<depth>: it sends `depth`, then waits for all
// their replies) and the blocking BM_StrictCheck at 32 threads.
void BM_AsyncStrictCheck(benchmark::State& state) {
  static RedisCoordinator* redis =
      RedisCoordinator::create({.port = port(), .connections = 1})->release();
  const std::string key = "bench:async";
  const BackendStats before = redis->stats();
  bench::run_async_window(state, state.range(0), [&](const auto& on_done) {
    redis->check_async(strategy(), key, 0, 1, on_done);
  });
  count_per_batch(state, before, redis->stats());
}
BENCHMARK(BM_AsyncStrictCheck)->Apply(bench::async_depths);

// The primaries of the benchmark's cluster.
constexpr int kClusterPrimaries = 3;

// The primary (0 .. 2) that serves `key`'s slot in a cluster of three
// whose slots were split evenly, as `redis-cli --cluster create` splits
// them (0-5460, 5461-10922, 10923-16383).
int primary_of(std::string_view key) {
  const int slot = key_slot(key);
  return slot < 5461 ? 0 : slot < 10923 ? 1 : 2;
}

// One caller thread with `depth` asynchronous strict checks in flight per
// primary (3 x depth in all) on the cluster, one connection per primary,
// over 3,072 keys, 1,024 of each primary's slots, taken in turn from each
// primary (so any run of consecutive checks, which is what the window
// holds, is spread evenly, as redis-benchmark's one client per primary
// is), beside redis-benchmark --cluster with one client per primary at
// pipeline depth `depth` (RedisClusterFloor/P<depth>). `per_batch`:
// checks per write.
void BM_AsyncClusterCheck(benchmark::State& state) {
  static RedisCoordinator* cluster = cluster_coordinator(1);
  if (cluster == nullptr) {
    state.SkipWithError("no cluster (THROTTLEKIT_REDIS_CLUSTER_PORT)");
    return;
  }
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> by_primary[kClusterPrimaries];
    for (int i = 0; by_primary[0].size() < 1024 ||
                    by_primary[1].size() < 1024 || by_primary[2].size() < 1024;
         ++i) {
      std::string key = "bench:acl:" + std::to_string(i);
      std::vector<std::string>& mine = by_primary[primary_of(key)];
      if (mine.size() < 1024) mine.push_back(std::move(key));
    }
    std::vector<std::string> k;
    for (size_t i = 0; i < 1024; ++i) {
      for (const auto& keys_of : by_primary) k.push_back(keys_of[i]);
    }
    return k;
  }();
  size_t next = 0;
  const BackendStats before = cluster->stats();
  bench::run_async_window(
      state, kClusterPrimaries * state.range(0), [&](const auto& on_done) {
        cluster->check_async(strategy(), keys[next], 0, 1, on_done);
        next = next + 1 == keys.size() ? 0 : next + 1;
      });
  const BackendStats after = cluster->stats();
  count_per_batch(state, before, after);
  state.counters["redirects"] =
      static_cast<double>(after.redirects - before.redirects);
}
BENCHMARK(BM_AsyncClusterCheck)->Apply(bench::async_depths);

// Sets the rps, p50_us and p99_us counters from redis-benchmark's --csv row
// for EVALSHA in `out` ("test", "rps", "avg_latency_ms", "min_latency_ms",
// "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", ...); false, and
// nothing set, without one.
bool report_evalsha_row(benchmark::State& state, const std::string& out) {
  std::vector<double> f;
  const size_t at = out.rfind("\"EVALSHA");
  if (at == std::string::npos) return false;
  std::stringstream ss(out.substr(at, out.find('\n', at) - at));
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    cell.erase(std::remove(cell.begin(), cell.end(), '"'), cell.end());
    f.push_back(std::atof(cell.c_str()));
  }
  if (f.size() < 7) return false;
  state.counters["rps"] = f[1];
  state.counters["p50_us"] = f[4] * 1000;
  state.counters["p99_us"] = f[6] * 1000;
  return true;
}

// redis-benchmark: EVALSHA of the same script, `clients` connections,
// `pipeline` commands in flight per connection.
void RedisBenchmarkFloor(benchmark::State& state, int clients, int pipeline) {
  const std::string sha = gcra_sha();
  const int requests = pipeline > 1 ? 400000 : 50000 * std::min(clients, 4);
  std::ostringstream cmd;
  cmd << "redis-benchmark -p " << port() << " -c " << clients << " -P "
      << pipeline << " -n " << requests << " --csv EVALSHA " << sha
      << " 1 bench:floor 0 1 c 0 1000000000 1000 0";
  for (auto _ : state) {
    report_evalsha_row(state, run(cmd.str()));
  }
}
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c1, 1, 1)->Iterations(1);
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c8, 8, 1)->Iterations(1);
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c32, 32, 1)->Iterations(1);
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c50_P16, 50, 16)->Iterations(1);
// One connection at the asynchronous benchmark's depths.
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c1_P16, 1, 16)->Iterations(1);
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c1_P64, 1, 64)->Iterations(1);
BENCHMARK_CAPTURE(RedisBenchmarkFloor, c1_P256, 1, 256)->Iterations(1);

// redis-benchmark --cluster: EVALSHA of the same script (loaded on every
// node first), one client per primary (it binds each client to a node and
// fills `{tag}` with a tag of that node's slots), `pipeline` in flight per
// client.
void RedisClusterFloor(benchmark::State& state, int pipeline) {
  const char* port = std::getenv("THROTTLEKIT_REDIS_CLUSTER_PORT");
  if (port == nullptr) {
    state.SkipWithError("no cluster (THROTTLEKIT_REDIS_CLUSTER_PORT)");
    return;
  }
  std::string sha;
  for (int i = 0; i < 2 * kClusterPrimaries; ++i) {
    sha = load_gcra(std::atoi(port) + i);
  }
  std::ostringstream cmd;
  cmd << "redis-benchmark --cluster -p " << port << " -c " << kClusterPrimaries
      << " -P " << pipeline << " -n 600000 --csv EVALSHA " << sha
      << " 1 bench:cfloor:{tag} 0 1 c 0 1000000000 1000 0";
  for (auto _ : state) {
    if (!report_evalsha_row(state, run(cmd.str()))) {
      state.SkipWithError("redis-benchmark --cluster printed no result");
      return;
    }
  }
}
BENCHMARK_CAPTURE(RedisClusterFloor, P1, 1)->Iterations(1);
BENCHMARK_CAPTURE(RedisClusterFloor, P16, 16)->Iterations(1);
BENCHMARK_CAPTURE(RedisClusterFloor, P64, 64)->Iterations(1);
BENCHMARK_CAPTURE(RedisClusterFloor, P256, 256)->Iterations(1);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
