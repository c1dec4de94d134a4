#!/usr/bin/env bash
# Installs what is missing, builds once and runs the whole test suite: unit,
# property, model, conformance, integration and consumer tests on an
# optimised build; the unit and property tests again under Address and
# UndefinedBehavior sanitizers; then a ThreadSanitizer build of the
# concurrency tests (label `tsan`). Between them, clang compiles every file
# with its thread safety analysis as errors (lock annotations are checked,
# not decorative). Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test

start=$(date +%s)
echo "== release build"
cmake --preset release >/dev/null
cmake --build --preset release
echo "== release tests"
ctest --preset release -j2

echo "== clang thread safety analysis (-Wthread-safety as errors, compile only)"
cmake --preset thread-safety >/dev/null
objects=$(ninja -C build/thread-safety -t targets all |
          sed -n 's/^\(.*\.o\): CXX_COMPILER.*/\1/p')
ninja -C build/thread-safety -j2 $objects
echo "== thread safety analysis: $(wc -w <<<"$objects") files clean"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (unit, property)"
cmake --preset asan >/dev/null
cmake --build --preset asan --target throttlekit_asan_tests
echo "== AddressSanitizer + UndefinedBehaviorSanitizer tests"
ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
  ctest --preset asan -j2 -L "unit|property"

echo "== ThreadSanitizer build (concurrency tests only)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target throttlekit_tsan_tests
echo "== ThreadSanitizer tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --preset tsan -j2
echo "== done in $(( $(date +%s) - start )) s"
