#!/usr/bin/env bash
# Installs what is missing, builds once per configuration and runs the whole
# test suite: unit, property, model, conformance, integration and consumer
# tests on an optimised clang build (preset `check`: warnings and clang's
# thread safety analysis as errors, so every file's lock annotations are
# checked by the build itself); the unit and property tests again under
# Address and UndefinedBehavior sanitizers; then a ThreadSanitizer build of
# the concurrency tests (label `tsan`). Every build is clang's (it compiles
# this code about twice as fast as gcc; the gcc `release` preset builds the
# benchmarks and the demo). Exits non-zero if anything fails.
#
# Ends with a table of the phases' times beside their budgets
# (docs/testing.md). A phase over 1.5x its budget, or a whole run over 20
# minutes, fails the run: the next change that doubles a phase is noticed
# when it lands. THROTTLEKIT_TEST_BUDGET=off reports without failing (a
# slower machine than the 2-core CI class).
set -euo pipefail
cd "$(dirname "$0")/.."

# Budgets in seconds on the CI machine class (2 cores, fresh clone).
declare -A budget=(
  [install]=120
  [check-build]=360
  [check-tests]=420
  [asan-build]=300
  [asan-tests]=200
  [tsan-build]=200
  [tsan-tests]=150
)
total_limit=1200
order=(install check-build check-tests asan-build asan-tests tsan-build
       tsan-tests)
declare -A took=()
run_start=$(date +%s)
current=""
phase_start=0

begin() {
  current="$1"
  phase_start=$(date +%s)
  echo "== $1: $2 ($(( phase_start - run_start )) s in)"
}
end() {
  took[$current]=$(( $(date +%s) - phase_start ))
  current=""
}

# The table, also when a phase fails (its row says so).
report() {
  local rc=$?
  if [[ -n "$current" ]]; then
    took[$current]="$(( $(date +%s) - phase_start ))"
  fi
  local total=$(( $(date +%s) - run_start )) sum=0 over=()
  echo
  printf '%-12s %8s %8s  %s\n' phase seconds budget verdict
  for p in "${order[@]}"; do
    local b=${budget[$p]} t=${took[$p]:-} verdict="not run"
    sum=$(( sum + b ))
    if [[ -n "$t" ]]; then
      verdict="ok"
      if [[ "$p" == "$current" ]]; then
        verdict="FAILED"
      elif (( t * 2 > b * 3 )); then
        verdict="OVER 1.5x"
        over+=("$p")
      elif (( t > b )); then
        verdict="over budget (within 1.5x)"
      fi
    fi
    printf '%-12s %8s %8s  %s\n' "$p" "${t:--}" "$b" "$verdict"
  done
  local total_verdict="ok (budgets sum to ${sum} s)"
  if (( total > total_limit )); then
    total_verdict="OVER the ${total_limit} s limit"
    over+=(total)
  fi
  printf '%-12s %8s %8s  %s\n' total "$total" "$total_limit" "$total_verdict"
  if (( rc == 0 && ${#over[@]} > 0 )); then
    if [[ "${THROTTLEKIT_TEST_BUDGET:-on}" == "off" ]]; then
      echo "== over budget: ${over[*]} (THROTTLEKIT_TEST_BUDGET=off: not failing)"
    else
      echo "== FAILED: over budget: ${over[*]} (docs/testing.md#the-budget)"
      rc=1
    fi
  fi
  exit "$rc"
}
trap report EXIT

begin install "the Debian packages the tests need"
scripts/install-deps.sh test
end

begin check-build "optimised build (clang, -Werror, -Wthread-safety)"
cmake --preset check >/dev/null
cmake --build --preset check
end

begin check-tests "optimised tests"
ctest --preset check -j2
end

begin asan-build "AddressSanitizer + UndefinedBehaviorSanitizer build (unit, property)"
cmake --preset asan >/dev/null
cmake --build --preset asan --target throttlekit_asan_tests
end

begin asan-tests "AddressSanitizer + UndefinedBehaviorSanitizer tests"
ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
  ctest --preset asan -j2 -L "unit|property"
end

begin tsan-build "ThreadSanitizer build (concurrency tests only)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target throttlekit_tsan_tests
end

begin tsan-tests "ThreadSanitizer tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --preset tsan -j2
end
