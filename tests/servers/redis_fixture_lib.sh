#!/usr/bin/env bash
# Shared by the Redis fixtures. `alive` serves them all (redis_server.sh
# too); the multi-server fixtures (redis_cluster.sh, redis_sentinel.sh)
# source the rest after setting `dir` (the fixture's directory, one
# subdirectory per port) and `all_ports`.

# True while process $1 runs. A process that has exited but not yet been
# reaped (a zombie: a daemonized server's parent is init, which in a
# container may reap only every second or so) counts as gone: `kill -0`
# alone would wait out the reaper on every stop.
alive() {
  local state
  state="$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# Makes "$dir/$1", a server's directory (pid, log, configuration), on tmpfs
# when /dev/shm is writable ("$dir/$1" is then a link there): a sentinel
# fsyncs its configuration at every change it learns, and on a disk busy with
# the suite's builds one fsync can stall it past 2 s, which puts it in TILT
# mode (no failover for 30 s: docs/testing.md).
server_dir() {
  mkdir -p "$dir"
  if [[ -e "$dir/$1" ]]; then return 0; fi
  local shm
  if [[ -d /dev/shm && -w /dev/shm ]] &&
    shm="$(mktemp -d /dev/shm/throttlekit-redis-"$1".XXXXXX 2>/dev/null)"; then
    ln -s "$shm" "$dir/$1"
  else
    mkdir -p "$dir/$1"
  fi
}

# Stops every server of "$dir" (resuming SIGSTOPped ones first: a stopped
# process ignores SIGTERM until resumed) and removes "$dir", with the tmpfs
# directories it links to. The pids are read once: a server removes its pid
# file as it exits.
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
      alive "$pid" || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for port in "${all_ports[@]}"; do
    if [[ -L "$dir/$port" ]]; then rm -rf "$(readlink "$dir/$port")"; fi
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
