#!/usr/bin/env bash
# Runs bench/federation_benchmark.cc against a private redis-server (port
# 16482) on loopback, started here and stopped on exit. Builds the release
# preset's target first. Extra arguments go to the benchmark (e.g.
# --benchmark_filter=Federated).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target federation_benchmark
redis_dir="$(mktemp -d /tmp/tk-bench-fed-redis.XXXXXX)"
cleanup() { bash tests/servers/redis_server.sh stop "$redis_dir" 16482 || true; }
trap cleanup EXIT
bash tests/servers/redis_server.sh start "$redis_dir" 16482
THROTTLEKIT_REDIS_PORT=16482 build/release/bench/federation_benchmark "$@"
