#!/usr/bin/env bash
# Builds the .deb packages from a clean clone (docs/packaging.md):
# libthrottlekit-dev (headers, the Redis and Postgres backends, CMake and
# pkg-config files) and throttlekit-server (binary, systemd unit, example
# configuration). Installs what is missing (scripts/install-deps.sh
# package), configures a release build without tests, benchmarks or
# examples in build/package, builds it, runs cpack and prints the paths.
#
# Usage: scripts/package.sh            (JOBS=N sets the build's parallelism,
#                                       default 2)
# Check the result: bash tests/packaging/package_test.sh build/package
#                   build/package/test
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-2}"
build=build/package
scripts/install-deps.sh package
# Prefix /usr: GNUInstallDirs then picks Debian's multiarch libdir
# (lib/<triplet>); every component is asked for, so a missing library fails
# here instead of yielding a package without it.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DTHROTTLEKIT_INSTALL=ON \
  -DTHROTTLEKIT_BUILD_TESTS=OFF -DTHROTTLEKIT_BUILD_BENCHMARKS=OFF \
  -DTHROTTLEKIT_BUILD_EXAMPLES=OFF -DTHROTTLEKIT_BUILD_SERVER=ON \
  -DTHROTTLEKIT_REDIS=ON -DTHROTTLEKIT_POSTGRES=ON >/dev/null
cmake --build "$build" -j "$jobs"
rm -rf "$build/debs"
(cd "$build" && cpack -G DEB -B "$PWD/debs" >cpack.log) || {
  cat "$build/cpack.log" >&2
  exit 1
}
echo "package: built"
for deb in "$build"/debs/*.deb; do
  echo "  $(realpath "$deb")"
done
