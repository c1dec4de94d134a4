#!/usr/bin/env bash
# Installs what is missing, builds throttlekit-server and runs it on the
# embedded memory store with examples/server.yaml (docs/server.md).
#
# Usage: scripts/server.sh [server args...]
#   (no args)  --config examples/server.yaml --listen 127.0.0.1:50051
#   args       passed to throttlekit-server as given (--config FILE,
#              --listen HOST:PORT, --redis HOST:PORT, --postgres HOST:PORT)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh server
cmake -S . -B build/server -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTHROTTLEKIT_BUILD_TESTS=OFF -DTHROTTLEKIT_BUILD_BENCHMARKS=OFF \
  -DTHROTTLEKIT_BUILD_EXAMPLES=OFF -DTHROTTLEKIT_BUILD_SERVER=ON >/dev/null
cmake --build build/server -j2 --target throttlekit-server
if (($# == 0)); then
  set -- --config examples/server.yaml --listen 127.0.0.1:50051
fi
exec build/server/src/server/throttlekit-server "$@"
