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
# (docs/testing.md). A phase over 1.5x its budget, or a whole run over
# `total_limit`, fails the run: the next change that doubles a phase is noticed
# when it lands. THROTTLEKIT_TEST_BUDGET=off reports without failing (a
# slower machine than the 2-core CI class).
set -euo pipefail
cd "$(dirname "$0")/.."

# Budgets in seconds on the CI machine class (2 cores, fresh clone).
declare -A budget=(
  [install]=300
  [check-build]=380
  [asan-build]=440
  [tsan-build]=240
  [check-serial]=290
  [check-tests]=380
  [sanitizer-wait]=250
  [tsan-wait]=120
  [asan-tests]=150
  [tsan-tests]=140
)
# The run's limit. The target is 20 minutes (1200 s), which today's runs on
# this machine class miss (docs/testing.md: 1359 to 1481 s; they met it
# when the class was faster); the limit that fails a run is 25 minutes, so
# that run-to-run noise on a shared machine (a build measured 290 s and
# 470 s on the same head) never fails a green run, while a change that adds
# minutes does.
total_limit=1500
order=(install check-build asan-build tsan-build check-serial check-tests
       sanitizer-wait asan-tests tsan-wait tsan-tests)
declare -A took=()
run_start=$(date +%s)
current=""
phase_start=0
sanitizer_pid=""

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
  if [[ -n "$sanitizer_pid" ]]; then
    kill -- "-$sanitizer_pid" 2>/dev/null || true
  fi
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

# The tests labelled `serial` (timed fleet bounds, a shared server's script
# cache) first, each with nothing beside it: no other test, no build.
begin check-serial "optimised tests that run alone (label serial)"
ctest --preset check -L serial
end

# The sanitizer builds run from here on beside the other optimised tests,
# under the idle scheduling class (SCHED_IDLE, and the idle I/O class): they
# get a core only when no test wants it, and a test waking up takes it back
# at once. Those tests keep the cores busy most of the time (docs/testing.md),
# so the builds mostly run after them, but never delay them. The serial
# fleet tests ran before,
# alone: even under SCHED_IDLE a build beside them starved their table
# readers into failures (docs/testing.md). The builds' rows are their own
# times, beside the tests.
sanitizer_builds() {
  set -e
  local t0 t1
  t0=$(date +%s)
  cmake --preset asan >/dev/null
  cmake --build --preset asan --target throttlekit_asan_tests
  t1=$(date +%s)
  echo "asan-build $(( t1 - t0 ))" >> build/sanitizer-builds.times
  # The ASan tests may start now; the TSan build goes on beside them.
  touch build/asan-build.done
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target throttlekit_tsan_tests
  echo "tsan-build $(( $(date +%s) - t1 ))" >> build/sanitizer-builds.times
}
export -f sanitizer_builds
rm -f build/sanitizer-builds.times build/asan-build.done
idle=(chrt --idle 0)
if ! chrt --idle 0 true 2>/dev/null; then
  idle=(nice -n 19)
  echo "== chrt --idle is refused here: the sanitizer builds run at nice 19"
fi
if ionice -c 3 true 2>/dev/null; then
  idle+=(ionice -c 3)
fi
# A process group of its own (set -m), so the report can stop the builds;
# the same session, so the scheduler weighs them against the tests.
set -m
"${idle[@]}" bash -c sanitizer_builds > build/sanitizer-builds.log 2>&1 &
sanitizer_pid=$!
set +m

# Then the other optimised tests, two at a time.
begin check-tests "the other optimised tests"
ctest --preset check -j2 -LE serial
end

# Waits for the background builds to finish (or fail).
wait_sanitizer_builds() {
  local rc=0
  wait "$sanitizer_pid" || rc=$?
  sanitizer_pid=""
  cat build/sanitizer-builds.log
  [[ -f build/sanitizer-builds.times ]] && while read -r p t; do took[$p]=$t; done < build/sanitizer-builds.times
  if (( rc != 0 )); then
    echo "== the sanitizer builds failed (exit $rc)"
    exit "$rc"
  fi
}

# The ASan build first: its tests start as soon as it is done, while the
# TSan build goes on beside them at idle priority.
begin sanitizer-wait "the rest of the ASan + UBSan build (unit, property)"
while [[ ! -f build/asan-build.done ]] && kill -0 "$sanitizer_pid" 2>/dev/null; do
  sleep 1
done
if [[ ! -f build/asan-build.done ]]; then
  wait_sanitizer_builds
fi
end

begin asan-tests "AddressSanitizer + UndefinedBehaviorSanitizer tests"
ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
  ctest --preset asan -j2 -L "unit|property"
end

begin tsan-wait "the rest of the TSan build (tsan)"
wait_sanitizer_builds
end

# Three at a time: nothing else runs by now, and the longest of them wait
# on real clocks and servers (the real-clock tests cross hundreds of
# windows in fixed wall time), leaving cores idle at two.
begin tsan-tests "ThreadSanitizer tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --preset tsan -j3
end
