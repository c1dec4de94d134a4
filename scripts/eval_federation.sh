#!/usr/bin/env bash
# The federation evaluation, full sweep (docs/federation.md, "Real
# fleets"): K in {2, 3, 5} regions x two OS processes each against one
# global redis-server, each region with its own redis-server as its escrow,
# demand skew 0 .. 1, 12 windows per point, then the outage in both modes.
# Starts its servers on loopback (private ports, temporary directories) and
# stops them. Writes the RESULT lines to docs/img/federation/results.txt and
# the plot docs/img/federation/utilisation.svg; prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target redis_tests
port=16490
dir="$(mktemp -d /tmp/tk-eval-fed.XXXXXX)"
cleanup() { bash tests/servers/redis_server.sh stop "$dir/main" "$port" || true; }
trap cleanup EXIT
mkdir -p "$dir/main" docs/img/federation
bash tests/servers/redis_server.sh start "$dir/main" "$port"
THROTTLEKIT_FEDERATION_SWEEP=full THROTTLEKIT_REDIS_PORT="$port" \
  THROTTLEKIT_REDIS_SERVER_SCRIPT="$PWD/tests/servers/redis_server.sh" \
  THROTTLEKIT_TEST_SERVERS_DIR="$dir" \
  build/release/tests/redis/redis_tests \
    --tk_source=tests/redis/federation_fleet_test.cc | tee "$dir/out.txt"
grep '^RESULT' "$dir/out.txt" > docs/img/federation/results.txt
python3 scripts/plot_federation.py docs/img/federation/results.txt \
  docs/img/federation/utilisation.svg
