#!/usr/bin/env bash
# Compiler launcher of the `thread-safety` preset: runs the compile command
# with -fsyntax-only (clang's thread safety analysis runs, no code is
# generated) and leaves an empty object file for ninja's bookkeeping. Only
# object files are built in that tree (scripts/test.sh); nothing is linked.
set -euo pipefail
out=""
prev=""
for arg in "$@"; do
  if [[ "$prev" == "-o" ]]; then out="$arg"; fi
  prev="$arg"
done
"$@" -fsyntax-only
if [[ -n "$out" ]]; then : > "$out"; fi
