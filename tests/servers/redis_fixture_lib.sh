#!/usr/bin/env bash
# Shared by the multi-server Redis fixtures (redis_cluster.sh,
# redis_sentinel.sh), which source it after setting `dir` (the fixture's
# directory, one subdirectory per port) and `all_ports`.

# Stops every server of "$dir" (resuming SIGSTOPped ones first: a stopped
# process ignores SIGTERM until resumed) and removes "$dir". The pids are
# read once: a server removes its pid file as it exits.
stop() {
  local pids=() pid port
  for port in "${all_ports[@]}"; do
    pid="$(cat "$dir/$port/redis.pid" 2>/dev/null || true)"
    [[ -n "$pid" ]] || continue
    pids+=("$pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

# Prints $1 and the end of every server's log, then exits 1.
fail() {
  local port
  echo "$1; logs:" >&2
  for port in "${all_ports[@]}"; do
    echo "--- $port" >&2
    tail -n 20 "$dir/$port/redis.log" >&2 2>/dev/null || true
  done
  exit 1
}
