#!/usr/bin/env bash
# The .deb packages as a user gets them (docs/packaging.md): runs cpack in a
# built ThrottleKit build tree, unpacks libthrottlekit-dev and
# throttlekit-server into a scratch root with `dpkg -x` (no root needed,
# nothing installed on this machine), and checks that
#   - each package has its control fields: Depends on the -dev packages of
#     the backends built / on the server's shared libraries (dpkg-shlibdeps)
#     and adduser; the server's maintainer scripts and conffiles;
#   - tests/consumer/project builds against the unpacked library through
#     find_package (with its redis and postgres components when built) and
#     its binaries get the right decisions;
#   - a one-file consumer builds through pkg-config against the unpacked
#     throttlekit*.pc files and runs;
#   - the systemd unit names the unpacked binary and configuration;
#   - the unpacked server starts on the unpacked example configuration (a
#     free loopback port, the memory store), answers /healthz when it has
#     the HTTP door, stays up a second and exits 0 on SIGTERM.
#
# Usage: tests/packaging/package_test.sh <build dir> <scratch dir>
# The build tree may have tests, benchmarks and examples: only the `library`
# and `server` components are packaged. Needs dpkg-deb, cpack, pkg-config
# and dpkg-shlibdeps (dpkg-dev). Exit status 0 when every check passes.
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 <build dir> <scratch dir>" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
scratch=$(cd "$2" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
root="$scratch/root"
server_pid=""

fail() {
  echo "package_test: FAIL: $*" >&2
  exit 1
}
step() { echo "package_test: $*"; }
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

for tool in cpack dpkg-deb dpkg pkg-config dpkg-shlibdeps; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found (dpkg-shlibdeps: apt-get install dpkg-dev)"
done
[[ -f "$build/CPackConfig.cmake" ]] ||
  fail "$build/CPackConfig.cmake missing: configure with THROTTLEKIT_INSTALL=ON"
cache_value() {
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1
}
cxx=$(cache_value CMAKE_CXX_COMPILER)
generator=$(cache_value CMAKE_GENERATOR)

# What this build tree must yield.
want_server=0
if grep -q '^set(CPACK_COMPONENTS_ALL ".*server' "$build/CPackConfig.cmake"; then
  want_server=1
  [[ -x "$build/src/server/throttlekit-server" ]] ||
    fail "throttlekit-server is not built in $build"
fi
want_redis=OFF
want_postgres=OFF
[[ -f "$build/src/redis/libthrottlekit_redis.a" ]] && want_redis=ON
[[ -f "$build/src/postgres/libthrottlekit_postgres.a" ]] && want_postgres=ON
step "build $build: server=$want_server redis=$want_redis postgres=$want_postgres"

# --- cpack ------------------------------------------------------------------
rm -rf "$scratch/debs" "$root" "$scratch/control" "$scratch/consumer" \
  "$scratch/pkgconfig-consumer" "$scratch/unit" "$scratch/server"
mkdir -p "$scratch/debs" "$root"
step "cpack -G DEB"
if ! (cd "$build" && cpack -G DEB -B "$scratch/debs" \
      >"$scratch/cpack.log" 2>&1); then
  cat "$scratch/cpack.log" >&2
  fail "cpack failed (log above)"
fi
shopt -s nullglob
lib_debs=("$scratch/debs"/libthrottlekit-dev_*.deb)
server_debs=("$scratch/debs"/throttlekit-server_*.deb)
all_debs=("$scratch/debs"/*.deb)
shopt -u nullglob
((${#lib_debs[@]} == 1)) || fail "expected one libthrottlekit-dev .deb"
((${#server_debs[@]} == want_server)) ||
  fail "expected $want_server throttlekit-server .deb, got ${#server_debs[@]}"
((${#all_debs[@]} == 1 + want_server)) ||
  fail "unexpected packages: ${all_debs[*]##*/}"
for deb in "${all_debs[@]}"; do
  step "built ${deb##*/}"
done

# --- control fields ---------------------------------------------------------
field() { dpkg-deb -f "$1" "$2"; }
depends_on() {  # <deb> <package>: Depends names the package
  local depends
  depends=$(field "$1" Depends)
  [[ ", $depends," =~ [,\|]\ *$2[\ ,] ]] ||
    fail "${1##*/}: Depends lacks $2 (Depends: $depends)"
}
lib_deb=${lib_debs[0]}
[[ $(field "$lib_deb" Package) == libthrottlekit-dev ]] ||
  fail "${lib_deb##*/}: wrong Package field"
[[ $(field "$lib_deb" Version) == [0-9]*-[0-9]* ]] ||
  fail "${lib_deb##*/}: Version is not upstream-revision"
depends_on "$lib_deb" libabsl-dev
[[ $want_redis == ON ]] && depends_on "$lib_deb" libhiredis-dev
[[ $want_postgres == ON ]] && depends_on "$lib_deb" libpqxx-dev
step "libthrottlekit-dev Depends: $(field "$lib_deb" Depends)"
if ((want_server)); then
  server_deb=${server_debs[0]}
  [[ $(field "$server_deb" Package) == throttlekit-server ]] ||
    fail "${server_deb##*/}: wrong Package field"
  # adduser for postinst; libc6 and gRPC only dpkg-shlibdeps can have added.
  for dep in adduser libc6 'libgrpc\+\+[0-9.]*'; do
    depends_on "$server_deb" "$dep"
  done
  step "throttlekit-server Depends: $(field "$server_deb" Depends)"
  control="$scratch/control"
  dpkg-deb -e "$server_deb" "$control"
  for script in postinst prerm postrm; do
    [[ -x "$control/$script" ]] || fail "server: no executable $script"
    sh -n "$control/$script" || fail "server: $script is not valid sh"
  done
  grep -q 'adduser --system' "$control/postinst" ||
    fail "server: postinst does not create a system user"
  grep -qx /etc/throttlekit/server.yaml "$control/conffiles" ||
    fail "server: /etc/throttlekit/server.yaml is not a conffile"
fi

# --- unpack -----------------------------------------------------------------
for deb in "${all_debs[@]}"; do
  dpkg -x "$deb" "$root"
done
[[ -f "$root/usr/include/throttlekit/throttlekit.h" ]] ||
  fail "library: no usr/include/throttlekit/throttlekit.h"
config=$(find "$root/usr" -path '*/cmake/throttlekit/throttlekitConfig.cmake')
[[ -n "$config" ]] || fail "library: no throttlekitConfig.cmake"
pc=$(find "$root/usr" -path '*/pkgconfig/throttlekit.pc')
[[ -n "$pc" ]] || fail "library: no throttlekit.pc"
for component in redis postgres; do
  flag="want_$component"
  if [[ ${!flag} == ON ]]; then
    [[ -n $(find "$root/usr" -name "libthrottlekit_$component.a") ]] ||
      fail "library: no libthrottlekit_$component.a"
    [[ -f "$(dirname "$pc")/throttlekit-$component.pc" ]] ||
      fail "library: no throttlekit-$component.pc"
  fi
done
if [[ -n $(find "$root" -path '*gtest*' -o -path '*benchmark*' | head -n 1) ]]; then
  fail "a package carries test or benchmark files"
fi

# --- a CMake consumer: find_package against the unpacked library -------------
step "tests/consumer/project through find_package (redis=$want_redis postgres=$want_postgres)"
consumer="$scratch/consumer"
if ! cmake -S "$source_dir/tests/consumer/project" -B "$consumer" \
     -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
     -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
     -DTHROTTLEKIT_CONSUMER_MODE=find_package \
     -DTHROTTLEKIT_CONSUMER_REDIS=$want_redis \
     -DTHROTTLEKIT_CONSUMER_POSTGRES=$want_postgres \
     >"$scratch/consumer.log" 2>&1 ||
   ! cmake --build "$consumer" -j 1 >>"$scratch/consumer.log" 2>&1; then
  cat "$scratch/consumer.log" >&2
  fail "the find_package consumer did not configure or build (log above)"
fi
found_dir=$(sed -n 's/^throttlekit_DIR:PATH=//p' "$consumer/CMakeCache.txt")
[[ "$found_dir" == "$root"/* ]] ||
  fail "find_package found $found_dir, not the unpacked package"
"$consumer/consumer" || fail "the find_package consumer got wrong decisions"
for component in redis postgres; do
  flag="want_$component"
  if [[ ${!flag} == ON ]]; then
    "$consumer/consumer_$component" ||
      fail "the find_package $component consumer failed"
  fi
done

# --- a pkg-config consumer --------------------------------------------------
modules=(throttlekit)
defines=()
for component in redis postgres; do
  flag="want_$component"
  if [[ ${!flag} == ON ]]; then
    modules+=("throttlekit-$component")
    defines+=("-DWITH_${component^^}")
  fi
done
step "a one-file consumer through pkg-config: ${modules[*]}"
pcc="$scratch/pkgconfig-consumer"
mkdir -p "$pcc"
cat >"$pcc/main.cc" <<'EOF'
// Built with only `pkg-config --cflags --libs throttlekit...`.
#include <cstdio>

#include "throttlekit/throttlekit.h"
#ifdef WITH_REDIS
#include "throttlekit/redis/redis_coordinator.h"
#endif
#ifdef WITH_POSTGRES
#include "throttlekit/postgres/postgres_coordinator.h"
#endif

int main() {
  auto gcra = throttlekit::Gcra::create({2, 1000, 0});
  if (!gcra.ok()) return 1;
  throttlekit::Gcra::State state;
  const int64_t now = 1'700'000'000'000;
  const bool a = gcra->check(state, now, 1).allowed;
  const bool b = gcra->check(state, now, 1).allowed;
  const bool c = gcra->check(state, now, 1).allowed;
  if (!a || !b || c) return 2;
#ifdef WITH_REDIS
  if (throttlekit::RedisCoordinator::create({.port = 0}).ok()) return 3;
#endif
#ifdef WITH_POSTGRES
  throttlekit::PostgresCoordinatorOptions bad;
  bad.table = "no such table; --";
  if (throttlekit::PostgresCoordinator::create(bad).ok()) return 4;
#endif
  std::puts("pkg-config consumer: ok");
  return 0;
}
EOF
pc_dir=$(dirname "$pc")
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
includedir=$(pkg-config --variable=includedir throttlekit)
[[ "$(realpath "$includedir")" == "$root"/* ]] ||
  fail "throttlekit.pc points at $includedir, not the unpacked package"
# shellcheck disable=SC2046  # pkg-config's output is words by design
if ! "$cxx" -std=c++20 "${defines[@]}" "$pcc/main.cc" -o "$pcc/consumer" \
     $(pkg-config --cflags --libs "${modules[@]}") >"$pcc/build.log" 2>&1; then
  cat "$pcc/build.log" >&2
  fail "the pkg-config consumer did not build (log above)"
fi
"$pcc/consumer" || fail "the pkg-config consumer failed: $?"

if ((want_server == 0)); then
  step "PASS (no server in this build)"
  exit 0
fi

# --- the systemd unit -------------------------------------------------------
unit="$root/usr/lib/systemd/system/throttlekit-server.service"
[[ -f "$unit" ]] || fail "server: no usr/lib/systemd/system/throttlekit-server.service"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
read -r -a exec_words <<<"$exec_start"
[[ -x "$root${exec_words[0]}" ]] ||
  fail "unit: ExecStart ${exec_words[0]} is not in the package"
[[ "${exec_words[1]}" == --config && -f "$root${exec_words[2]}" ]] ||
  fail "unit: ExecStart does not name the packaged configuration"
for line in User=throttlekit NoNewPrivileges=yes ProtectSystem=strict; do
  grep -qx "$line" "$unit" || fail "unit: no $line"
done
if command -v systemd-analyze >/dev/null; then
  # Its syntax: a copy whose ExecStart names the unpacked binary (verify
  # checks that it exists); a warning about the unit (it names the file) fails.
  mkdir -p "$scratch/unit"
  sed "s|^ExecStart=|ExecStart=$root|" "$unit" \
    >"$scratch/unit/throttlekit-server.service"
  if ! systemd-analyze verify --man=no \
       "$scratch/unit/throttlekit-server.service" >"$scratch/verify.log" 2>&1 ||
     grep -q 'throttlekit-server.service' "$scratch/verify.log"; then
    cat "$scratch/verify.log" >&2
    fail "systemd-analyze verify rejects the unit (log above)"
  fi
  step "systemd-analyze verify: the unit parses cleanly"
fi

# --- the unpacked server on the unpacked configuration ------------------------
server_dir="$scratch/server"
mkdir -p "$server_dir"
start_server() {
  "$root${exec_words[0]}" --config "$root${exec_words[2]}" \
    --listen 127.0.0.1:0 "$@" >"$server_dir/out" 2>"$server_dir/err" &
  server_pid=$!
}
wait_for_line() {  # <pattern>: waits up to 15 s for a stdout line
  for _ in $(seq 150); do
    grep -q "$1" "$server_dir/out" && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
http=1
start_server --metrics-listen 127.0.0.1:0
if ! wait_for_line 'listening on port '; then
  if grep -q 'no HTTP door' "$server_dir/err"; then
    http=0
    start_server
    wait_for_line 'listening on port ' || true
  fi
fi
grep -q 'listening on port [0-9]*, store memory' "$server_dir/out" || {
  cat "$server_dir/out" "$server_dir/err" >&2
  fail "the server did not say it listens on the memory store (output above)"
}
step "$(grep 'listening on port' "$server_dir/out")"
if ((http)); then
  wait_for_line 'metrics on http://' || fail "the server did not start /metrics"
  metrics_port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/.*|\1|p' \
    "$server_dir/out")
  # HTTP/1.0 over bash's /dev/tcp: the server closes after one answer.
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port" || fail "cannot connect to /healthz"
  printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  answer=$(timeout 5 cat <&3 | tr -d '\r') || true
  exec 3<&-
  [[ "$(head -n 1 <<<"$answer")" == *" 200 "* &&
     "$(tail -n 1 <<<"$answer")" == ok ]] ||
    fail "GET /healthz answered: $answer"
  step "GET /healthz: 200 ok"
fi
sleep 1
kill -0 "$server_pid" 2>/dev/null || {
  cat "$server_dir/err" >&2
  fail "the server exited within a second of starting (stderr above)"
}
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
((status == 0)) || fail "the server exited $status on SIGTERM"
step "the server stopped on SIGTERM (exit 0)"
step "PASS"
