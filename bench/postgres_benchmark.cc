// Strict checks over Postgres next to the physical floor on the same server.
//
// BM_Postgres_Select1: one prepared `SELECT 1` round trip on a plain libpqxx
// connection (one per thread): the floor of any call to this server.
// BM_PostgresCoordinator_Check: `Coordinator::check` (GCRA, a key per thread,
// mostly admitted, so each call writes its row). Counter
// `round_trips_per_check`: requests the coordinator wrote per check (from
// `stats().batches`; connection set-up is not counted, and the warm-up
// connections of other threads land in `connects`).
// BM_PostgresCoordinator_CheckHotKey:
// every thread on one key (row-lock contention).
// BM_PostgresCoordinator_CheckAsync/<depth>: one caller thread with at most
// `depth` asynchronous checks in flight on the pipelined connection
// (docs/async.md), beside BM_PostgresCoordinator_Check/threads:1, the same
// check on one connection unpipelined.
//
// The server comes from THROTTLEKIT_BENCH_PG_HOST / THROTTLEKIT_BENCH_PG_PORT
// (docs/postgres.md, "Benchmark"); without them every benchmark is skipped.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "bench_async_window.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace {

bool configured() {
  return std::getenv("THROTTLEKIT_BENCH_PG_PORT") != nullptr;
}

PostgresCoordinatorOptions options() {
  PostgresCoordinatorOptions o;
  const char* host = std::getenv("THROTTLEKIT_BENCH_PG_HOST");
  o.host = host != nullptr ? host : "127.0.0.1";
  o.port = std::atoi(std::getenv("THROTTLEKIT_BENCH_PG_PORT"));
  o.table = "tk_bench";
  o.connections = 8;
  return o;
}

PostgresCoordinator* coordinator() {
  static PostgresCoordinator* pg = [] {
    auto c = PostgresCoordinator::create(options());
    return c.ok() ? c->release() : nullptr;
  }();
  return pg;
}

void BM_Postgres_Select1(benchmark::State& state) {
  if (!configured()) {
    state.SkipWithError("THROTTLEKIT_BENCH_PG_PORT is not set");
    return;
  }
  const PostgresCoordinatorOptions o = options();
  pqxx::connection conn("host=" + o.host + " port=" + std::to_string(o.port) +
                        " dbname=postgres user=postgres");
  conn.prepare("one", "SELECT 1");
  for (auto _ : state) {
    pqxx::nontransaction tx(conn);
    benchmark::DoNotOptimize(tx.exec_prepared("one"));
  }
}
BENCHMARK(BM_Postgres_Select1)->Threads(1)->Threads(8)->UseRealTime();

void run_checks(benchmark::State& state, const std::string& key) {
  PostgresCoordinator* pg = configured() ? coordinator() : nullptr;
  if (pg == nullptr) {
    state.SkipWithError("no Postgres server (THROTTLEKIT_BENCH_PG_PORT)");
    return;
  }
  const AnyStrategy s =
      *make_strategy(Gcra::Options{.limit = 1'000'000'000, .period_ms = 1000});
  // Warm: this thread's connection and prepared statements exist.
  if (!pg->check(s, key, 0).ok()) {
    state.SkipWithError("check failed");
    return;
  }
  const int64_t before = pg->stats().batches;
  int64_t errors = 0;
  for (auto _ : state) {
    absl::StatusOr<Decision> d = pg->check(s, key, 0);
    if (!d.ok()) ++errors;
    benchmark::DoNotOptimize(d);
  }
  // The delta counts every thread's requests over (about) the same span,
  // so it is divided by all threads' checks, and averaged over threads.
  state.counters["round_trips_per_check"] = benchmark::Counter(
      static_cast<double>(pg->stats().batches - before) /
          static_cast<double>(state.iterations() * state.threads()),
      benchmark::Counter::kAvgThreads);
  state.counters["errors"] = static_cast<double>(errors);
}

void BM_PostgresCoordinator_Check(benchmark::State& state) {
  run_checks(state, "bench-key-" + std::to_string(state.thread_index()));
}
BENCHMARK(BM_PostgresCoordinator_Check)->Threads(1)->Threads(8)->UseRealTime();

void BM_PostgresCoordinator_CheckHotKey(benchmark::State& state) {
  run_checks(state, "bench-hot");
}
BENCHMARK(BM_PostgresCoordinator_CheckHotKey)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

void BM_PostgresCoordinator_CheckAsync(benchmark::State& state) {
  PostgresCoordinator* pg = configured() ? coordinator() : nullptr;
  if (pg == nullptr) {
    state.SkipWithError("no Postgres server (THROTTLEKIT_BENCH_PG_PORT)");
    return;
  }
  const AnyStrategy s =
      *make_strategy(Gcra::Options{.limit = 1'000'000'000, .period_ms = 1000});
  const std::string key = "bench-async";
  const int64_t before = pg->stats().batches;
  bench::run_async_window(state, state.range(0), [&](const auto& on_done) {
    pg->check_async(s, key, 0, 1, on_done);
  });
  state.counters["checks_per_batch"] =
      static_cast<double>(state.iterations()) /
      static_cast<double>(std::max<int64_t>(1, pg->stats().batches - before));
}
BENCHMARK(BM_PostgresCoordinator_CheckAsync)->Apply(bench::async_depths);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
