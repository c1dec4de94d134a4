#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL server on loopback for the test suite.
# Usage: postgres_server.sh start|stop|down|up|freeze|thaw <dir> <port>
# start: initdb into a fresh temporary directory (mktemp -d under /tmp; its
#        path is recorded in <dir>/datadir), listening on 127.0.0.1:<port>
#        only, trust authentication, fsync off; waits until it accepts
#        connections (30 s at most). A server left behind by an earlier run in
#        <dir> is stopped first. As root, initdb and pg_ctl run as the
#        `postgres` user (runuser), which owns the data directory.
#        Database `postgres`, user `postgres`.
# stop:  stops the server of <dir> (resuming it first if it was SIGSTOPped),
#        removes its data directory and <dir>. Stopping a server that is not
#        running succeeds.
# down / up: stop the server keeping its data, and start it again (fault
#        tests: a server restart).
# freeze / thaw: SIGSTOP / SIGCONT the postmaster and all its children
#        (fault tests: a server that stops answering).
set -euo pipefail
action="$1" dir="$2" port="$3"

bindir=""
for candidate in "$(pg_config --bindir 2>/dev/null || true)" \
                 /usr/lib/postgresql/*/bin; do
  if [[ -n "$candidate" && -x "$candidate/initdb" && -x "$candidate/pg_ctl" ]]; then
    bindir="$candidate"
  fi
done
if [[ -z "$bindir" ]]; then
  echo "postgres_server.sh: no initdb/pg_ctl found" >&2
  exit 1
fi

as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# The postmaster's pid, or nothing.
postmaster_pid() {
  local data
  data="$(cat "$dir/datadir" 2>/dev/null)" || return 0
  [[ -f "$data/postmaster.pid" ]] && head -1 "$data/postmaster.pid"
  return 0
}

launch() {
  local data="$1"
  as_owner "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off \
        -c unix_socket_directories=$data -c max_connections=200" \
    start >/dev/null || {
      echo "postgres did not start on port $port; log:" >&2
      cat "$data/server.log" >&2 || true
      exit 1; }
}

signal_all() {
  local pid
  pid="$(postmaster_pid)"
  [[ -n "$pid" ]] || { echo "no server in $dir" >&2; exit 1; }
  if [[ "$1" == STOP ]]; then
    pkill -STOP -P "$pid" || true
    kill -STOP "$pid"
  else
    kill -CONT "$pid"
    pkill -CONT -P "$pid" || true
  fi
}

stop() {
  if [[ -f "$dir/datadir" ]]; then
    local data pid
    data="$(cat "$dir/datadir")"
    if [[ -f "$data/postmaster.pid" ]]; then
      pid="$(head -1 "$data/postmaster.pid")"
      # Resume every process of the server (a test may have frozen them).
      pkill -CONT -P "$pid" 2>/dev/null || true
      kill -CONT "$pid" 2>/dev/null || true
      as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w -t 20 stop \
        >/dev/null 2>&1 || true
      if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    case "$data" in
      /tmp/throttlekit-pg.*) rm -rf "$data" ;;
    esac
  fi
  rm -rf "$dir"
}

case "$action" in
  start)
    stop
    mkdir -p "$dir"
    data="$(mktemp -d /tmp/throttlekit-pg.XXXXXX)"
    echo "$data" > "$dir/datadir"
    if [[ "$(id -u)" == 0 ]]; then
      chown postgres:postgres "$data"
    fi
    chmod 700 "$data"
    as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust \
      --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2; exit 1; }
    launch "$data"
    echo "postgres up on 127.0.0.1:$port ($data)"
    ;;
  down)
    as_owner "$bindir/pg_ctl" -D "$(cat "$dir/datadir")" -m fast -w -t 30 \
      stop >/dev/null
    ;;
  up)
    launch "$(cat "$dir/datadir")"
    ;;
  freeze)
    signal_all STOP
    ;;
  thaw)
    signal_all CONT
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: $0 start|stop|down|up|freeze|thaw <dir> <port>" >&2
    exit 2
    ;;
esac
