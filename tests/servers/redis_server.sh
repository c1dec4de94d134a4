#!/usr/bin/env bash
# Starts or stops a throwaway redis-server on loopback for the test suite.
# Usage: redis_server.sh start|stop <dir> <port>
# start: a fresh server (no persistence) with its pid, log and data in <dir>;
#        waits until it answers PING (10 s at most). A server left behind by
#        an earlier run in <dir> is stopped first.
# stop:  stops the server of <dir> (resuming it first if it was SIGSTOPped)
#        and removes <dir>. Stopping a server that is not running succeeds.
set -euo pipefail
action="$1" dir="$2" port="$3"
# `alive` (the multi-server fixtures' `stop` is replaced below).
source "$(dirname "$0")/redis_fixture_lib.sh"

stop() {
  if [[ -f "$dir/redis.pid" ]]; then
    local pid
    pid="$(cat "$dir/redis.pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 100); do
        alive "$pid" || break
        sleep 0.05
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
}

case "$action" in
  start)
    stop
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" \
      --logfile "$dir/redis.log" --protected-mode yes
    for _ in $(seq 200); do
      if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
        echo "redis-server up on 127.0.0.1:$port ($dir)"
        exit 0
      fi
      sleep 0.05
    done
    echo "redis-server did not answer on port $port; log:" >&2
    cat "$dir/redis.log" >&2 || true
    exit 1
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start|stop <dir> <port>" >&2
    exit 2
    ;;
esac
