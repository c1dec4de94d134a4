#!/usr/bin/env bash
# tk_sim refuses absurd flag values with its usage error (exit 2, naming
# the flag) instead of running out of memory: each line below must be
# refused. Usage: tk_sim_refusals.sh <tk_sim binary>
set -u
tk_sim="$1"
failed=0
while read -r args; do
  [[ -z "$args" ]] && continue
  # shellcheck disable=SC2086 # the line is the arguments
  out="$(timeout 10 "$tk_sim" $args --seeds 1 2>&1)"
  rc=$?
  flag="${args#* }"
  flag="${flag%% *}"
  if (( rc != 2 )) || [[ "$out" != *"bad flag or value: $flag"* ]]; then
    echo "tk_sim $args: exit $rc, not the usage error naming $flag:" >&2
    echo "$out" | head -3 >&2
    failed=1
  fi
done <<'LINES'
leased --rate 1e20
leased --rate 0
concurrency --rate 2e6
rlqs --demand 1e7
rlqs --breaks 2e6
rlqs --demand -1
LINES
if (( failed == 0 )); then echo "tk_sim_refusals: every absurd value refused"; fi
exit "$failed"
