#!/usr/bin/env bash
# Installs what is missing, builds the demo and runs it: ThrottleKit's main
# job on its embedded in-memory default (no server needed).
#
# Usage: scripts/demo.sh [--llm] [args...]
#   (default)  examples/api_front_door_demo.cc: three tenants, three
#              endpoints, one admit() per request; args go to it (--seed N)
#   --llm      examples/llm_gateway.cc instead: an LLM gateway (adaptive
#              concurrency, GCRA, token budget with learned reservations);
#              args go to it (--seed N, --verbose, --redis HOST:PORT)
set -euo pipefail
cd "$(dirname "$0")/.."
target=api_front_door_demo
if [[ "${1:-}" == "--llm" ]]; then
  target=llm_gateway
  shift
fi
scripts/install-deps.sh demo
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTHROTTLEKIT_BUILD_TESTS=OFF -DTHROTTLEKIT_BUILD_BENCHMARKS=OFF \
  -DTHROTTLEKIT_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/demo -j2 --target "$target"
exec "build/demo/examples/$target" "$@"
