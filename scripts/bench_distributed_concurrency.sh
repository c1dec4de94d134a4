#!/usr/bin/env bash
# Runs bench/distributed_concurrency_benchmark.cc against a private
# redis-server (port 16481) and Postgres (port 25441) on loopback, started
# here and stopped on exit. Builds the release preset first. Extra arguments
# go to the benchmark (e.g. --benchmark_filter=Beat).
source "$(dirname "$0")/bench_lib.sh"
build_release distributed_concurrency_benchmark
start_server redis_server 16481
start_server postgres_server 25441
THROTTLEKIT_REDIS_PORT=16481 THROTTLEKIT_BENCH_PG_PORT=25441 \
  build/release/bench/distributed_concurrency_benchmark "$@"
