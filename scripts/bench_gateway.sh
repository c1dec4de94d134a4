#!/usr/bin/env bash
# Measures nginx with auth_request to throttlekit-server's forward-auth door
# (examples/gateways/nginx.conf, its limit raised so that every request is
# admitted and counted) beside nginx proxying alone, under wrk, in front of
# the same upstream (an nginx location answering 200). Prints wrk's
# requests per second per mode and the ratio (docs/gateways.md,
# "Benchmark"). Then bench/forward_auth_benchmark: the door beside a plain
# 200 on the same HTTP server.
#
# Usage: scripts/bench_gateway.sh [seconds] [connections]   (defaults 10, 32)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
connections="${2:-32}"
scripts/install-deps.sh bench-http
scripts/install-deps.sh test
cmake --preset release >/dev/null
cmake --build --preset release --target throttlekit-server \
  forward_auth_benchmark

dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
door_port=$(free_port)
upstream_port=$(free_port)
proxy_port=$(free_port)

# The example's server, its limit out of reach.
sed 's/requests_per_unit: 10}/requests_per_unit: 2000000000}/' \
  examples/gateways/server.yaml > "$dir/server.yaml"
build/release/src/server/throttlekit-server --config "$dir/server.yaml" \
  --listen 127.0.0.1:0 --forward-auth-listen "127.0.0.1:$door_port" \
  > "$dir/server.out" 2>&1 &
pids+=($!)

# nginx: the example's server block, and the same block without the
# auth_request lines (proxying alone) on the next port; the upstream a
# location of its own.
sed -e "s/127.0.0.1:9090/127.0.0.1:$door_port/" \
    -e "s/127.0.0.1:8080/127.0.0.1:$upstream_port/" \
    -e "s/127.0.0.1:8000/127.0.0.1:$proxy_port/" \
    examples/gateways/nginx.conf > "$dir/with_auth.conf"
alone_port=$(free_port)
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/body; proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi; uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  include $dir/with_auth.conf;
  server {
    listen 127.0.0.1:$alone_port;
    location / { proxy_pass http://127.0.0.1:$upstream_port; }
  }
  server {
    listen 127.0.0.1:$upstream_port;
    location / { return 200 "up\n"; }
  }
}
CONF
/usr/sbin/nginx -c "$dir/nginx.conf" -p "$dir" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 100); do
  if curl -s -o /dev/null "http://127.0.0.1:$proxy_port/" &&
     grep -q "forward auth on" "$dir/server.out"; then
    break
  fi
  sleep 0.1
done

declare -A rps
for mode in alone auth; do
  port=$alone_port
  [[ "$mode" == auth ]] && port=$proxy_port
  echo "== nginx $mode: wrk -t2 -c$connections -d${seconds}s"
  out=$(wrk -t2 -c"$connections" -d"${seconds}s" "http://127.0.0.1:$port/")
  echo "$out"
  rps[$mode]=$(echo "$out" | sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p')
  non2xx=$(echo "$out" | sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p')
  if [[ -n "$non2xx" ]]; then
    echo "bench_gateway: $mode answered $non2xx non-2xx responses" >&2
    exit 1
  fi
done
python3 -c "print('nginx with auth_request / nginx alone: %.0f / %.0f = %.2f' % (${rps[auth]}, ${rps[alone]}, ${rps[auth]} / ${rps[alone]}))"

echo "== the door beside a plain 200 (bench/forward_auth_benchmark)"
build/release/bench/forward_auth_benchmark
