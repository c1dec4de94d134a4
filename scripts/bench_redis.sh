#!/usr/bin/env bash
# Runs bench/redis_benchmark.cc against a private redis-server on loopback
# (port 16479), a private Redis Cluster of 3 primaries with a replica
# each (ports 17300..17305) and a private primary with a replica under 3
# sentinels (ports 17320..17324), started here and stopped on exit. Builds the
# release preset first. Extra arguments go to the benchmark (e.g.
# --benchmark_filter=...).
source "$(dirname "$0")/bench_lib.sh"
build_release redis_benchmark
start_server redis_server 16479
start_server redis_cluster 17300
start_server redis_sentinel 17320
THROTTLEKIT_REDIS_PORT=16479 THROTTLEKIT_REDIS_CLUSTER_PORT=17300 \
  THROTTLEKIT_REDIS_SENTINEL_PORT=17320 \
  build/release/bench/redis_benchmark "$@"
