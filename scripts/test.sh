#!/usr/bin/env bash
# Installs what is missing, builds once and runs the whole test suite: unit,
# property, model, conformance, integration and consumer tests on an
# optimised clang build (preset `check`: warnings and clang's thread safety
# analysis as errors, so every file's lock annotations are checked by the
# build itself); the unit and property tests again under Address and
# UndefinedBehavior sanitizers; then a ThreadSanitizer build of the
# concurrency tests (label `tsan`). Every build is clang's (it compiles this
# code about twice as fast as gcc; the gcc `release` preset builds the
# benchmarks and the demo). Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test

start=$(date +%s)
phase() { echo "== $1 ($(( $(date +%s) - start )) s in)"; }
phase "optimised build (clang, -Werror, -Wthread-safety)"
cmake --preset check >/dev/null
cmake --build --preset check
phase "optimised tests"
ctest --preset check -j2

phase "AddressSanitizer + UndefinedBehaviorSanitizer build (unit, property)"
cmake --preset asan >/dev/null
cmake --build --preset asan --target throttlekit_asan_tests
phase "AddressSanitizer + UndefinedBehaviorSanitizer tests"
ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
  ctest --preset asan -j2 -L "unit|property"

phase "ThreadSanitizer build (concurrency tests only)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target throttlekit_tsan_tests
phase "ThreadSanitizer tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --preset tsan -j2
echo "== done in $(( $(date +%s) - start )) s"
