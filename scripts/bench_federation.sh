#!/usr/bin/env bash
# Runs bench/federation_benchmark.cc against a private redis-server (port
# 16482) on loopback, started here and stopped on exit. Builds the release
# preset's target first. Extra arguments go to the benchmark (e.g.
# --benchmark_filter=Federated).
source "$(dirname "$0")/bench_lib.sh"
build_release federation_benchmark
start_server redis_server 16482
THROTTLEKIT_REDIS_PORT=16482 build/release/bench/federation_benchmark "$@"
