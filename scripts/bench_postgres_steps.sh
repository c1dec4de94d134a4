#!/usr/bin/env bash
# Measures each Postgres strategy step's cost beside its floors (issue 52,
# docs/postgres.md, "The step beside a single upsert"): a private
# PostgreSQL on loopback (port 16533, started here and stopped on exit)
# gets the coordinator's schema and functions (src/postgres/*.sql, table
# `tkb`) and a table of the same shape (`tkb_floor`); pgbench, one client,
# prepared statements, one statement per transaction as the coordinator
# sends them, runs each for 4 s, three times:
#   SELECT 1 (the round trip), a single-row INSERT ... ON CONFLICT DO UPDATE
#   ... RETURNING on tkb_floor (the floor of any one-statement step), and
#   the fixed window, GCRA, token bucket and lease steps, each on one hot
#   key under a limit far above the load (every call writes).
# Prints each statement's median latency and its cost beyond SELECT 1's,
# and that cost as a multiple of the upsert's.
source "$(dirname "$0")/bench_lib.sh"
port=16533
start_server postgres_server "$port" >/dev/null
work="$(mktemp -d /tmp/tk-bench-pgsteps.XXXXXX)"
bench_lib_stops+=("rm -rf '$work'")
psql_() { psql -h 127.0.0.1 -p "$port" -U postgres -q -v ON_ERROR_STOP=1 "$@"; }
(cd src/postgres && cat schema.sql common.sql gcra.sql token_bucket.sql \
  fixed_window.sql sliding_window.sql sliding_log.sql quota.sql \
  token_budget.sql lease.sql heartbeat.sql federation.sql) |
  sed 's/{{t}}/tkb/g' >"$work/ddl.sql"
psql_ -1 -f "$work/ddl.sql" >/dev/null
psql_ -c "CREATE TABLE tkb_floor (LIKE tkb INCLUDING ALL);"
# Keys without ':' (pgbench reads ':name' as a variable).
echo "SELECT 1;" >"$work/select1.sql"
echo "INSERT INTO tkb_floor (id, key, kind, d1, d2, expires_at_ms) VALUES (sha256('b-floor'::bytea), 'b-floor'::bytea, 2, 0, 1, 9000000000000) ON CONFLICT (id) DO UPDATE SET d2 = tkb_floor.d2 + 1, expires_at_ms = EXCLUDED.expires_at_ms RETURNING d2;" >"$work/upsert.sql"
echo "SELECT * FROM tkb_fixed_window('b-fw'::bytea, 0, 1, false, 1000000000000, 60000);" >"$work/fixed_window.sql"
echo "SELECT * FROM tkb_gcra('b-gcra'::bytea, 0, 1, false, 1000000000, 1000, 1000000000);" >"$work/gcra.sql"
echo "SELECT * FROM tkb_token_bucket('b-tb'::bytea, 0, 1, false, 1000000000, 1000000000);" >"$work/token_bucket.sql"
echo "SELECT * FROM tkb_lease('b-lease'::bytea, 1000000000000, 3600000, 1);" >"$work/lease.sql"
names=(select1 upsert fixed_window gcra token_bucket lease)
for rep in 1 2 3; do
  for s in "${names[@]}"; do
    lat=$(pgbench -h 127.0.0.1 -p "$port" -U postgres -n -M prepared -c 1 \
      -T 4 -f "$work/$s.sql" postgres 2>/dev/null |
      awk '/latency average/ {print $4}')
    echo "$s $lat" >>"$work/latencies"
  done
done
python3 - "$work/latencies" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, ms in rows:
    by.setdefault(name, []).append(float(ms) * 1000)
med = {k: statistics.median(v) for k, v in by.items()}
rt, up = med["select1"], med["upsert"] - med["select1"]
print(f"{'statement':<14}{'latency us':>12}{'beyond SELECT 1':>17}{'x upsert':>10}")
for k in ["select1", "upsert", "fixed_window", "gcra", "token_bucket", "lease"]:
    extra = med[k] - rt
    ratio = "" if k == "select1" else f"{extra / up:.2f}"
    print(f"{k:<14}{med[k]:>12.1f}{extra:>17.1f}{ratio:>10}")
PY
