#!/bin/sh
# The compiler launcher of THROTTLEKIT_BENCHMARK_SYNTAX_ONLY
# (cmake/ThrottleKitHelpers.cmake): runs the compile command it is given
# (which carries -fsyntax-only, so clang writes the dependency file and no
# object) and, when it succeeds, creates the empty object file named after
# -o, so that the build sees the step done.
"$@" || exit $?
out=""
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then
    out="$arg"
  fi
  prev="$arg"
done
if [ -n "$out" ]; then
  : >"$out"
fi
