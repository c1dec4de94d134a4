#!/usr/bin/env bash
# Runs bench/redis_benchmark.cc against a private redis-server on loopback
# (port 16479), a private Redis Cluster of 3 primaries with a replica
# each (ports 17300..17305) and a private primary with a replica under 3
# sentinels (ports 17320..17324), started here and stopped on exit. Builds the
# release preset first. Extra arguments go to the benchmark (e.g.
# --benchmark_filter=...).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target redis_benchmark
dir="$(mktemp -d /tmp/tk-bench-redis.XXXXXX)"
trap 'bash tests/servers/redis_server.sh stop "$dir/single" 16479;
      bash tests/servers/redis_cluster.sh stop "$dir/cluster" 17300;
      bash tests/servers/redis_sentinel.sh stop "$dir/sentinel" 17320;
      rm -rf "$dir"' EXIT
bash tests/servers/redis_server.sh start "$dir/single" 16479
bash tests/servers/redis_cluster.sh start "$dir/cluster" 17300
bash tests/servers/redis_sentinel.sh start "$dir/sentinel" 17320
THROTTLEKIT_REDIS_PORT=16479 THROTTLEKIT_REDIS_CLUSTER_PORT=17300 \
  THROTTLEKIT_REDIS_SENTINEL_PORT=17320 \
  build/release/bench/redis_benchmark "$@"
