#!/usr/bin/env bash
# Runs bench/distributed_concurrency_benchmark.cc against a private
# redis-server (port 16481) and Postgres (port 25441) on loopback, started
# here and stopped on exit. Builds the release preset first. Extra arguments
# go to the benchmark (e.g. --benchmark_filter=Beat).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target distributed_concurrency_benchmark
redis_dir="$(mktemp -d /tmp/tk-bench-dc-redis.XXXXXX)"
pg_dir="$(mktemp -d /tmp/tk-bench-dc-pg.XXXXXX)"
cleanup() {
  bash tests/servers/redis_server.sh stop "$redis_dir" 16481 || true
  bash tests/servers/postgres_server.sh stop "$pg_dir" 25441 || true
}
trap cleanup EXIT
bash tests/servers/redis_server.sh start "$redis_dir" 16481
bash tests/servers/postgres_server.sh start "$pg_dir" 25441
THROTTLEKIT_REDIS_PORT=16481 THROTTLEKIT_BENCH_PG_PORT=25441 \
  build/release/bench/distributed_concurrency_benchmark "$@"
