#!/usr/bin/env bash
# Runs bench/redis_benchmark.cc against a private redis-server on loopback
# (port 16479), started here and stopped on exit. Builds the release preset
# first. Extra arguments go to the benchmark (e.g. --benchmark_filter=...).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target redis_benchmark
dir="$(mktemp -d /tmp/tk-bench-redis.XXXXXX)"
trap 'bash tests/servers/redis_server.sh stop "$dir" 16479' EXIT
bash tests/servers/redis_server.sh start "$dir" 16479
THROTTLEKIT_REDIS_PORT=16479 build/release/bench/redis_benchmark "$@"
