#!/usr/bin/env bash
# Prints the ratios issue 52 judges throughput by, medians of three
# (docs/performance.md, "Throughput that grows with depth"):
# - bench/redis_benchmark.cc on a private redis-server (16479) and a private
#   Redis Cluster (17300..17305): BM_AsyncStrictCheck at 1 in flight beside
#   the blocking BM_StrictCheck (one thread), at 16, 64 and 256 beside
#   `redis-benchmark -c 1 -P <depth>`, and whether it grows with depth;
#   BM_AsyncClusterCheck beside `redis-benchmark --cluster` at the same
#   depth per primary;
#   (three repetitions in one process);
# - bench/server_benchmark.cc on a private redis-server (16483), each
#   benchmark in a process of its own, the pairs alternated three times:
#   the Envoy door's leased descriptor beside its memory descriptor, and
#   the own protocol's federated (leased) Check beside its memory Check, at
#   1 and 32 client threads.
# Builds the release preset's two targets first. `--redis-only` and
# `--server-only` run one half.
source "$(dirname "$0")/bench_lib.sh"
which="${1:-all}"
work="$(mktemp -d /tmp/tk-bench-ratios.XXXXXX)"
bench_lib_stops+=("rm -rf '$work'")
build_release redis_benchmark server_benchmark >/dev/null
aggregate=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  --benchmark_format=json)
if [[ "$which" != --server-only ]]; then
  start_server redis_server 16479 >/dev/null
  start_server redis_cluster 17300 >/dev/null
  THROTTLEKIT_REDIS_PORT=16479 THROTTLEKIT_REDIS_CLUSTER_PORT=17300 \
    build/release/bench/redis_benchmark "${aggregate[@]}" \
    --benchmark_filter='BM_StrictCheck/.*threads:1$|BM_AsyncStrictCheck|RedisBenchmarkFloor/c1_P|BM_AsyncClusterCheck|RedisClusterFloor' \
    >"$work/redis.json"
fi
if [[ "$which" != --redis-only ]]; then
  start_server redis_server 16483 >/dev/null
  # Each in a process of its own (32 client threads grow gRPC's thread
  # pools in the process for good, which moves whatever runs after them),
  # the pairs alternated three times; the medians are across processes.
  for rep in 1 2 3; do
    i=0
    for filter in 'BM_Check/.*threads:1$' 'BM_CheckFederated/.*threads:1$' \
      'BM_EnvoyShouldRateLimit/1/.*threads:1$' 'BM_EnvoyRedis/1/.*threads:1$' \
      'BM_Check/.*threads:32$' 'BM_CheckFederated/.*threads:32$' \
      'BM_EnvoyShouldRateLimit/1/.*threads:32$' \
      'BM_EnvoyRedis/1/.*threads:32$'; do
      THROTTLEKIT_REDIS_PORT=16483 build/release/bench/server_benchmark \
        --benchmark_format=json --benchmark_filter="$filter" \
        >"$work/server-$rep-$i.json"
      i=$((i + 1))
    done
  done
fi
python3 - "$work" <<'PY'
import json, os, re, statistics, sys

def medians(path):
    if not os.path.exists(path):
        return {}
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"]] = b
    return out

def find(runs, pattern, field):
    for name, b in runs.items():
        if re.fullmatch(pattern, name):
            return b.get(field)
    return None

def row(what, value, floor, target):
    if value is None or floor is None:
        print(f"  {what:<48} not measured")
        return
    ratio = value / floor
    verdict = "" if target is None else (
        "  ok" if ratio >= target else f"  below {target}")
    print(f"  {what:<48} {value:>12,.0f} / {floor:>12,.0f} = {ratio:.2f}{verdict}")

redis = medians(os.path.join(sys.argv[1], "redis.json"))
if redis:
    print("asynchronous strict checks, one connection (checks/s / floor):")
    blocking = find(redis, r"BM_StrictCheck/.*threads:1", "items_per_second")
    rates = []
    for depth in (1, 16, 64, 256):
        rate = find(redis, rf"BM_AsyncStrictCheck/{depth}/.*", "items_per_second")
        rates.append(rate)
        if depth == 1:
            row("1 in flight vs the blocking call", rate, blocking, 0.9)
        else:
            floor = find(redis, rf"RedisBenchmarkFloor/c1_P{depth}/.*", "rps")
            row(f"{depth} in flight vs redis-benchmark -P {depth}", rate, floor, 0.85)
    if None not in rates:
        grows = all(a <= b for a, b in zip(rates, rates[1:]))
        print(f"  non-decreasing from 1 to 256 in flight: {'yes' if grows else 'no'}")
    print("asynchronous strict checks on the cluster, per primary in flight:")
    for depth in (1, 16, 64, 256):
        rate = find(redis, rf"BM_AsyncClusterCheck/{depth}/.*", "items_per_second")
        floor = find(redis, rf"RedisClusterFloor/P{depth}/.*", "rps")
        row(f"{depth} vs redis-benchmark --cluster -P {depth}", rate, floor, 0.85)
samples = {}
for f in sorted(os.listdir(sys.argv[1])):
    if f.startswith("server-"):
        for b in json.load(open(os.path.join(sys.argv[1], f)))["benchmarks"]:
            samples.setdefault(b["run_name"], []).append(
                b.get("items_per_second", 0))
server = {name: {"items_per_second": statistics.median(v)}
          for name, v in samples.items()}
if server:
    print("the server, leased beside memory (calls/s):")
    for threads in (1, 32):
        memory = find(server, rf"BM_EnvoyShouldRateLimit/1/.*threads:{threads}", "items_per_second")
        leased = find(server, rf"BM_EnvoyRedis/1/.*threads:{threads}", "items_per_second")
        row(f"Envoy door, leased descriptor, {threads} streams", leased, memory, 0.9)
    for threads in (1, 32):
        memory = find(server, rf"BM_Check/.*threads:{threads}", "items_per_second")
        leased = find(server, rf"BM_CheckFederated/.*threads:{threads}", "items_per_second")
        row(f"own Check, federated (leased), {threads} threads", leased, memory, 0.9)
PY
