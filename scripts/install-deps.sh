#!/usr/bin/env bash
# Installs the Debian packages ThrottleKit needs that this machine lacks.
# Usage: scripts/install-deps.sh demo|server|package|test|bench-http
# Runs apt-get only when something is missing; needs root (or sudo).
set -euo pipefail

profile="${1:-test}"
packages=(cmake ninja-build g++ libabsl-dev)
# throttlekit-server: gRPC and protobuf (with their code generators) and
# yaml-cpp for its configuration.
server_packages=(libgrpc++-dev libprotobuf-dev protobuf-compiler
                 protobuf-compiler-grpc libyaml-cpp-dev)
if [[ "$profile" == "server" ]]; then
  packages+=("${server_packages[@]}")
fi
# scripts/package.sh: the .deb packages with both backends and the server's
# HTTP door; dpkg-shlibdeps (dpkg-dev) computes the server's Depends.
if [[ "$profile" == "package" ]]; then
  packages+=("${server_packages[@]}" pkg-config libhiredis-dev libpqxx-dev
             libcpp-httplib-dev dpkg-dev)
fi
# scripts/bench_http.sh: the example server, throttlekit-server and wrk.
if [[ "$profile" == "bench-http" ]]; then
  packages+=("${server_packages[@]}" libcpp-httplib-dev wrk pkg-config)
fi
if [[ "$profile" == "test" ]]; then
  # The HTTP middleware example and its test (cpp-httplib); the server's
  # TLS tests make their certificates with the openssl command.
  packages+=("${server_packages[@]}" libcpp-httplib-dev openssl)
  # clang builds the suite; its sanitizer runtimes (libclang-rt-dev) are
  # only recommended by clang, so they are named here.
  # The distributed backends' client libraries, the real servers the
  # integration, conformance and fault tests start on loopback, and the
  # spin model checker of the `model` tests.
  packages+=(libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
             clang libclang-rt-dev clang-format pkg-config libhiredis-dev
             redis-server
             libpqxx-dev postgresql spin)
  # The packaging test (dpkg-shlibdeps computes the server package's
  # dependencies) and the server's fleet-door test, which adds an address
  # off loopback with iproute2's `ip`.
  packages+=(dpkg-dev iproute2)
  # The Envoy door's second client, in Python (grpcio, with stubs generated
  # at test time by protoc's Python output and grpc_python_plugin).
  packages+=(python3-grpcio python3-protobuf)
  # The Asio adapter's tests (asio/async_check.h; standalone, header-only)
  # and the Asio HTTP example (examples/asio_http_server.cc).
  packages+=(libasio-dev)
  # The proxies the forward-auth door is tested behind (docs/gateways.md).
  packages+=(nginx caddy)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ "$(id -u)" != 0 ]]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
