#!/usr/bin/env bash
# Runs bench/server_benchmark.cc: Check beside a no-op RPC on an in-process
# throttlekit-server, and Tier-1 Checks of a federated policy beside Tier-2
# local spends (batch 10/100/1000) against a private redis-server (port
# 16483) started here and stopped on exit. Builds the release preset's
# target first; extra arguments go to the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target server_benchmark
redis_dir="$(mktemp -d /tmp/tk-bench-server-redis.XXXXXX)"
cleanup() { bash tests/servers/redis_server.sh stop "$redis_dir" 16483 || true; }
trap cleanup EXIT
bash tests/servers/redis_server.sh start "$redis_dir" 16483
THROTTLEKIT_REDIS_PORT=16483 build/release/bench/server_benchmark "$@"
