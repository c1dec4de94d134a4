# scripts/bench_lib.sh: what the measuring scripts share. Sourced (never
# run) by scripts/bench_*.sh and the like; it moves to the repository's
# root, and gives them:
# - `build_release TARGET...`: the release preset configured and the
#   targets built;
# - `start_server KIND PORT`: a private server on loopback from
#   tests/servers/KIND.sh (redis_server, redis_cluster, redis_sentinel,
#   postgres_server) in a temporary directory, echoed; stopped and its
#   directory removed when the script exits, the last started first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bench_lib_stops=()
bench_lib_cleanup() {
  local i
  for ((i = ${#bench_lib_stops[@]} - 1; i >= 0; i--)); do
    eval "${bench_lib_stops[$i]}" || true
  done
}
trap bench_lib_cleanup EXIT

build_release() {
  cmake --preset release >/dev/null
  cmake --build --preset release --target "$@"
}

start_server() {
  local kind="$1" port="$2" dir
  dir="$(mktemp -d "/tmp/tk-bench-$kind-$port.XXXXXX")"
  bench_lib_stops+=("bash tests/servers/$kind.sh stop '$dir' $port >/dev/null 2>&1; rm -rf '$dir'")
  bash "tests/servers/$kind.sh" start "$dir" "$port"
}
