// bench/bench_redis.h
//
// The Redis side of the benchmarks that run against a server (started by
// the scripts/bench_*.sh that run them), defined once:
// - `bench_redis()`: a RedisCoordinator (8 connections) on
//   THROTTLEKIT_REDIS_PORT, or null when it is unset or nobody answers;
// - `floor_redis_time`: `TIME`, one round trip to that server, the floor a
//   Redis-backed step is set beside (skipped with a message without one).

#ifndef THROTTLEKIT_BENCH_BENCH_REDIS_H_
#define THROTTLEKIT_BENCH_BENCH_REDIS_H_

#include <benchmark/benchmark.h>

#include <cstdlib>

#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::bench {

inline RedisCoordinator* bench_redis() {
  static RedisCoordinator* r = []() -> RedisCoordinator* {
    const char* port = std::getenv("THROTTLEKIT_REDIS_PORT");
    if (port == nullptr) return nullptr;
    auto c =
        RedisCoordinator::create({.port = std::atoi(port), .connections = 8});
    return c.ok() ? c->release() : nullptr;
  }();
  return r;
}

// True (and the benchmark marked skipped) when there is no server.
inline bool skip_without_redis(benchmark::State& state) {
  if (bench_redis() != nullptr) return false;
  state.SkipWithError("THROTTLEKIT_REDIS_PORT is not set (or no server)");
  return true;
}

inline void floor_redis_time(benchmark::State& state) {
  if (skip_without_redis(state)) return;
  RedisCoordinator* r = bench_redis();
  for (auto _ : state) benchmark::DoNotOptimize(r->now_ms());
  state.SetItemsProcessed(state.iterations());
}

}  // namespace throttlekit::bench

#endif  // THROTTLEKIT_BENCH_BENCH_REDIS_H_
