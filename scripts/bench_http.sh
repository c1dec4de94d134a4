#!/usr/bin/env bash
# Measures the HTTP middleware example (examples/http_middleware.cc) under
# wrk: the same handler without admission, with the in-process admission
# (a rate no request reaches, so every request pays the admission and none
# is denied) and with throttlekit-server deciding over gRPC. Prints wrk's
# summary per mode and the overhead per request (1/rate - 1/baseline).
#
# Usage: scripts/bench_http.sh [seconds] [connections]   (defaults 10, 32)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
connections="${2:-32}"
scripts/install-deps.sh bench-http
cmake --preset release >/dev/null
cmake --build --preset release --target http_middleware throttlekit-server

dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# Starts "$@" in the background (its pid in $last_pid) and waits for its
# "listening on port N" (the port in $last_port).
start() {
  local out="$dir/out.$RANDOM"
  "$@" >"$out" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
  for _ in $(seq 100); do
    if grep -q "listening on port" "$out"; then
      last_port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$out" |
                  head -1)
      return
    fi
    sleep 0.1
  done
  echo "bench_http: $* did not start" >&2
  cat "$out" >&2
  exit 1
}

cat >"$dir/server.yaml" <<'YAML'
version: 1
limiters:
  http:
    admission:
      concurrency: {maxInflight: 1000000}
      rate: {strategy: gcra, limit: 1000000000, period: 1s, burst: 1000000000}
YAML
start build/release/src/server/throttlekit-server \
  --config "$dir/server.yaml" --listen 127.0.0.1:0
server_port=$last_port

declare -A rps
for mode in baseline local server; do
  case "$mode" in
    baseline) args=(--no-limit) ;;
    local) args=(--rate 1000000000) ;;
    server) args=(--server "127.0.0.1:$server_port") ;;
  esac
  start build/release/examples/http_middleware --port 0 "${args[@]}"
  port=$last_port
  echo "== $mode (${args[*]})"
  out=$(wrk -t2 -c"$connections" -d"${seconds}s" --latency \
        -H "X-Tenant: bench" "http://127.0.0.1:$port/hello")
  echo "$out"
  rps[$mode]=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' <<<"$out")
  kill "$last_pid"
done
for mode in local server; do
  python3 - "$mode" "${rps[baseline]}" "${rps[$mode]}" <<'PY'
import sys
mode, base, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print(f"== {mode}: {rate:.0f} req/s vs {base:.0f} without admission; "
      f"overhead {1e6 / rate - 1e6 / base:.1f} us per request "
      f"({rate / base:.2f}x)")
PY
done
