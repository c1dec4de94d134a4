#!/usr/bin/env bash
# Starts or stops a throwaway Sentinel-guarded Redis on loopback for the test
# suite: a primary on <base>, its replica on <base>+1, and three sentinels on
# <base>+2 .. <base>+4 watching them under the master name "tk" (quorum 2,
# down after 1000 ms, failover timeout 2000 ms: a second failover may
# start 4 s after the last), no persistence.
# Usage: redis_sentinel.sh start|stop <dir> <base>
# start: fresh servers (pid, log and config in <dir>/<port>); waits until
#        the replica has synced and every sentinel knows the replica and the
#        two other sentinels (30 s at most), so a failover can run at once.
#        A set left behind in <dir> is stopped first.
# stop:  stops every server of <dir> (resuming SIGSTOPped ones first) and
#        removes <dir>. Stopping a set that is not running succeeds.
# restart <dir> <base> <port>: starts again the data node on <port> (killed
#        by a test) as a replica of the primary the sentinels name now, and
#        waits until its link to that primary is up and the sentinels see it
#        as a replica (a node that returns as a primary would be demoted by
#        the sentinels anyway; starting it as a replica skips the window in
#        which two primaries take writes).
set -euo pipefail
action="$1" dir="$2" base="$3"
data_ports=("$base" "$((base + 1))")
sentinel_ports=("$((base + 2))" "$((base + 3))" "$((base + 4))")
all_ports=("${data_ports[@]}" "${sentinel_ports[@]}")
name=tk

source "$(dirname "$0")/redis_fixture_lib.sh"

wait_ping() {
  for _ in $(seq 200); do
    if redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; then return 0; fi
    sleep 0.05
  done
  fail "redis did not answer on port $1"
}

# A data node; extra arguments (e.g. --replicaof) are passed on.
start_data() {
  local port="$1"
  shift
  server_dir "$port"
  redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$dir/$port" --daemonize yes \
    --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" \
    --protected-mode yes --repl-diskless-sync-delay 0 "$@"
}

# A sentinel: its configuration is a file it rewrites as it learns.
start_sentinel() {
  local port="$1"
  server_dir "$port"
  cat > "$dir/$port/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize yes
pidfile $dir/$port/redis.pid
logfile $dir/$port/redis.log
dir $dir/$port
sentinel monitor $name 127.0.0.1 $base 2
sentinel down-after-milliseconds $name 1000
sentinel failover-timeout $name 2000
sentinel parallel-syncs $name 1
EOF
  redis-server "$dir/$port/sentinel.conf" --sentinel
}

# The value of `field` in `SENTINEL MASTER tk` as sentinel $1 reports it.
master_field() {
  redis-cli -p "$1" sentinel master "$name" 2>/dev/null |
    awk -v f="$2" 'prev == f { print; exit } { prev = $0 }'
}

# True when the node on $1 is a replica whose link to its primary is up.
synced_replica() {
  local repl
  repl="$(redis-cli -p "$1" info replication 2>/dev/null || true)"
  grep -q "role:slave" <<<"$repl" && grep -q "master_link_status:up" <<<"$repl"
}

case "$action" in
  start)
    stop
    start_data "${data_ports[0]}"
    wait_ping "${data_ports[0]}"
    start_data "${data_ports[1]}" --replicaof 127.0.0.1 "${data_ports[0]}"
    wait_ping "${data_ports[1]}"
    for port in "${sentinel_ports[@]}"; do start_sentinel "$port"; done
    for port in "${sentinel_ports[@]}"; do wait_ping "$port"; done
    for _ in $(seq 600); do
      ok=1
      synced_replica "${data_ports[1]}" || ok=0
      for port in "${sentinel_ports[@]}"; do
        [[ "$ok" == 1 ]] || break
        [[ "$(master_field "$port" num-slaves)" == 1 ]] || ok=0
        [[ "$(master_field "$port" num-other-sentinels)" == 2 ]] || ok=0
      done
      if [[ "$ok" == 1 ]]; then
        echo "redis sentinel set up on 127.0.0.1:$base..$((base + 4)) ($dir)"
        exit 0
      fi
      sleep 0.05
    done
    fail "the sentinels did not see the replica and each other"
    ;;
  restart)
    port="$4"
    # A sentinel that has not yet heard of the failover still names the
    # node being restarted: take the first answer that is a primary now.
    primary=""
    for _ in $(seq 200); do
      for sentinel in "${sentinel_ports[@]}"; do
        p="$(redis-cli -p "$sentinel" sentinel get-master-addr-by-name \
          "$name" 2>/dev/null | tail -n 1 || true)"
        if [[ -n "$p" && "$p" != "$port" ]] &&
          [[ "$(redis-cli -p "$p" role 2>/dev/null | head -n 1)" == master ]]; then
          primary="$p"
          break 2
        fi
      done
      sleep 0.05
    done
    [[ -n "$primary" ]] || fail "no primary other than $port to replicate"
    start_data "$port" --replicaof 127.0.0.1 "$primary"
    wait_ping "$port"
    for _ in $(seq 600); do
      if synced_replica "$port" &&
        [[ "$(master_field "${sentinel_ports[0]}" num-slaves)" -ge 1 ]]; then
        exit 0
      fi
      sleep 0.05
    done
    fail "the restarted node on $port did not sync with $primary"
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start|stop <dir> <base> | restart <dir> <base> <port>" >&2
    exit 2
    ;;
esac
