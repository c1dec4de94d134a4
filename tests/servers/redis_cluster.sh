#!/usr/bin/env bash
# Starts or stops a throwaway Redis Cluster on loopback for the test suite:
# 3 primaries with 1 replica each, on ports <base> .. <base>+5, short node
# timeouts, no persistence.
# Usage: redis_cluster.sh start|stop <dir> <base>
# start: six fresh cluster-enabled servers (pid, log, nodes.conf in
#        <dir>/<port>), joined with `redis-cli --cluster create
#        --cluster-replicas 1`; waits until every node reports
#        cluster_state:ok and knows all 16384 slots and every replica has
#        synced with its primary (30 s at most). A cluster left behind in
#        <dir> is stopped first.
# stop:  stops every server of <dir> (resuming SIGSTOPped ones first) and
#        removes <dir>. Stopping a cluster that is not running succeeds.
# restart <dir> <base> <port>: starts again the node on <port> (killed by a
#        test) with its nodes.conf, so it rejoins the cluster; waits until
#        it answers PING.
set -euo pipefail
action="$1" dir="$2" base="$3"
ports=()
for i in 0 1 2 3 4 5; do ports+=("$((base + i))"); done
all_ports=("${ports[@]}")

source "$(dirname "$0")/redis_fixture_lib.sh"

start_node() {
  local port="$1"
  server_dir "$port"
  redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$dir/$port" --daemonize yes \
    --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" \
    --protected-mode yes --cluster-enabled yes \
    --cluster-config-file "$dir/$port/nodes.conf" \
    --cluster-node-timeout 2000 --repl-diskless-sync-delay 0
}

case "$action" in
  restart)
    port="$4"
    start_node "$port"
    for _ in $(seq 200); do
      if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
        exit 0
      fi
      sleep 0.05
    done
    fail "redis-server did not answer on port $port"
    ;;
  start)
    stop
    for port in "${ports[@]}"; do start_node "$port"; done
    for port in "${ports[@]}"; do
      up=0
      for _ in $(seq 200); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
          up=1
          break
        fi
        sleep 0.05
      done
      [[ "$up" == 1 ]] || fail "redis-server did not answer on port $port"
    done
    addresses=()
    for port in "${ports[@]}"; do addresses+=("127.0.0.1:$port"); done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas 1 \
      --cluster-yes > "$dir/create.log" 2>&1 ||
      fail "redis-cli --cluster create failed: $(tail -n 5 "$dir/create.log")"
    # Ready: every node sees the whole cluster, and every replica has
    # finished its first sync (a replica that has not cannot take over).
    for _ in $(seq 600); do
      ok=1
      for port in "${ports[@]}"; do
        info="$(redis-cli -p "$port" cluster info 2>/dev/null || true)"
        if ! grep -q "cluster_state:ok" <<<"$info" ||
          ! grep -q "cluster_slots_assigned:16384" <<<"$info"; then
          ok=0
          break
        fi
        repl="$(redis-cli -p "$port" info replication 2>/dev/null || true)"
        if grep -q "role:slave" <<<"$repl" &&
          ! grep -q "master_link_status:up" <<<"$repl"; then
          ok=0
          break
        fi
      done
      if [[ "$ok" == 1 ]]; then
        echo "redis cluster up on 127.0.0.1:${ports[0]}..${ports[5]} ($dir)"
        exit 0
      fi
      sleep 0.05
    done
    fail "the cluster did not reach cluster_state:ok"
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start|stop <dir> <base> | restart <dir> <base> <port>" >&2
    exit 2
    ;;
esac
