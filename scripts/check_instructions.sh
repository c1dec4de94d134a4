#!/usr/bin/env bash
# Instructions per memory-coordinator check, blocking and without waiting
# (bench/check_instructions.cc), counted by callgrind: this checkout's
# headers and, for each REF given, that commit's, all built by the same
# command (g++ -O2, as the release preset) so the rows compare exactly.
# A count, not a time: it does not move with the machine's load
# (docs/coordinator.md, "Benchmark"). Needs valgrind.
#
#   scripts/check_instructions.sh [REF...]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work="$(mktemp -d /tmp/tk-instructions.XXXXXX)"
trap 'rm -rf "$work"' EXIT
libs="$(pkg-config --libs absl_statusor absl_flat_hash_map absl_hash \
        absl_synchronization absl_str_format absl_time)"
count() {  # count BINARY N MODE: instructions of one run
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" "$3" 2>&1 |
    awk '/Collected/ {print $4}'
}
measure() {  # measure LABEL INCLUDE_DIR
  local bin="$work/bin-${1//[^A-Za-z0-9]/_}"
  g++ -std=gnu++20 -O2 -DNDEBUG -ffp-contract=off -I"$2" \
    bench/check_instructions.cc -o "$bin" $libs
  for mode in sync async; do
    local a b
    a=$(count "$bin" 10000 "$mode")
    b=$(count "$bin" 110000 "$mode")
    printf '%-12s %-6s %5d instructions per check\n' "$1" "$mode" \
      $(( (b - a) / 100000 ))
  done
}
measure "this" include
for ref in "$@"; do
  mkdir -p "$work/$ref"
  git archive "$ref" include | tar -x -C "$work/$ref"
  measure "$ref" "$work/$ref/include"
done
