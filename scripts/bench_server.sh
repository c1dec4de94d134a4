#!/usr/bin/env bash
# Runs bench/server_benchmark.cc: Check beside a no-op RPC on an in-process
# throttlekit-server, and Tier-1 Checks of a federated policy beside Tier-2
# local spends (batch 10/100/1000) against a private redis-server (port
# 16483) started here and stopped on exit. Builds the release preset's
# target first; extra arguments go to the benchmark.
source "$(dirname "$0")/bench_lib.sh"
build_release server_benchmark
start_server redis_server 16483
THROTTLEKIT_REDIS_PORT=16483 build/release/bench/server_benchmark "$@"
