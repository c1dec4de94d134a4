#!/usr/bin/env bash
# Connections ready before calls, measured (bench/store_readiness.cc): on a
# private redis-server (port 16493) and Postgres (port 25453), started here
# and stopped on exit, a coordinator with a 20 ms command timeout made
# ready, 8 threads for a second; then the store restarted under them.
# Builds the release preset first.
#
#   scripts/store_readiness.sh                 # this checkout
#   scripts/store_readiness.sh --compare REF   # and commit REF beside it
#
# --compare builds the same program against REF's library in a temporary
# worktree (without `wait_ready` if REF predates it: its connections open
# inside the first calls), so both are measured in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=""
if [[ "${1:-}" == "--compare" ]]; then ref="${2:?--compare needs a commit}"; fi
cmake --preset release >/dev/null
cmake --build --preset release --target store_readiness
bins=("build/release/bench/store_readiness")
labels=("this checkout")
if [[ -n "$ref" ]]; then
  tree="$(mktemp -d /tmp/tk-readiness-ref.XXXXXX)"
  git worktree add --detach "$tree" "$ref" >/dev/null
  cp bench/store_readiness.cc "$tree/bench/"
  # A commit from before the program has neither it nor `wait_ready`.
  if ! grep -q store_readiness "$tree/bench/CMakeLists.txt"; then
    cat >> "$tree/bench/CMakeLists.txt" <<'CMAKE'
add_executable(store_readiness store_readiness.cc)
target_link_libraries(store_readiness PRIVATE throttlekit::redis
  throttlekit::postgres)
target_compile_definitions(store_readiness PRIVATE THROTTLEKIT_NO_WAIT_READY)
CMAKE
  fi
  (cd "$tree" && cmake --preset release >/dev/null &&
     cmake --build --preset release --target store_readiness >/dev/null)
  bins+=("$tree/build/release/bench/store_readiness")
  labels+=("$ref")
fi
redis_dir="$(mktemp -d /tmp/tk-readiness-redis.XXXXXX)"
pg_dir="$(mktemp -d /tmp/tk-readiness-pg.XXXXXX)"
cleanup() {
  bash tests/servers/redis_server.sh stop "$redis_dir" 16493 || true
  bash tests/servers/postgres_server.sh stop "$pg_dir" 25453 || true
  if [[ -n "$ref" ]]; then git worktree remove --force "$tree" || true; fi
}
trap cleanup EXIT
bash tests/servers/redis_server.sh start "$redis_dir" 16493 >/dev/null
bash tests/servers/postgres_server.sh start "$pg_dir" 25453 >/dev/null
here="$(pwd)"
for i in "${!bins[@]}"; do
  echo "== ${labels[$i]}"
  "${bins[$i]}" --redis 16493 --restart-cmd \
    "cd '$here' && bash tests/servers/redis_server.sh stop '$redis_dir' 16493 >/dev/null && bash tests/servers/redis_server.sh start '$redis_dir' 16493 >/dev/null"
  "${bins[$i]}" --postgres 25453 --restart-cmd \
    "cd '$here' && bash tests/servers/postgres_server.sh down '$pg_dir' 25453 >/dev/null && bash tests/servers/postgres_server.sh up '$pg_dir' 25453 >/dev/null"
done
