#!/usr/bin/env bash
# Installs what is missing, builds the demo and runs it: ThrottleKit's main
# job on its embedded in-memory default (no server needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh demo
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTHROTTLEKIT_BUILD_TESTS=OFF -DTHROTTLEKIT_BUILD_BENCHMARKS=OFF \
  -DTHROTTLEKIT_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/demo -j2 --target api_front_door_demo
exec build/demo/examples/api_front_door_demo "$@"
