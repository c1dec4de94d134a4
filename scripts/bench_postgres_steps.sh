#!/usr/bin/env bash
# Measures each Postgres strategy step's server time beside its floors
# (issue 52, docs/postgres.md, "The step beside a single upsert"): a private
# PostgreSQL on loopback (port 16533, started here and stopped on exit, with
# pg_stat_statements loaded) gets the coordinator's schema and functions
# (src/postgres/*.sql, table `tkb`) and a table of the same shape
# (`tkb_floor`). pgbench, one client, prepared statements, one statement per
# transaction as the coordinator sends them, runs each statement for 4 s;
# over the last 3 s the script reads the server process's CPU time
# (/proc/<pid>/schedstat, ns) and the statements it completed
# (pg_stat_statements), so a statement's server time is the backend's CPU
# per statement, its round trip and commit included. Statements:
#   SELECT 1 (the protocol's floor), a single-row INSERT ... ON CONFLICT DO
#   UPDATE ... RETURNING on tkb_floor (the floor of any one-statement step),
#   and the fixed window, GCRA, token bucket and lease steps under a limit
#   far above the load (every call admitted and written), plus a fixed
#   window step on a key already over its limit (every call denied), and
#   `fw_bare`: the fixed window's fast-path UPDATE ... RETURNING sent bare
#   (a reference: what the step would cost without its PL/pgSQL wrapping;
#   it only updates, so its keys are made first), and `upsert_plpgsql`:
#   the upsert inside a PL/pgSQL function called as the steps are (a
#   reference: what the wrapping alone costs);
# each on one hot key and spread over 1,000 keys (`random(1, 1000)`).
# pgbench runs on CPU 0 and the server process it talks to on CPU 1 (on a
# machine with two or more), which keeps a statement's figure within about
# a microsecond between runs (unpinned, it moved by five).
# Three repetitions (VACUUM before each statement's run); prints the
# medians: CPU per statement and that as a multiple of the upsert's (the
# whole server time), CPU beyond SELECT 1's and that as a multiple of the
# upsert's (same key pattern), and pgbench's mean latency.
source "$(dirname "$0")/bench_lib.sh"
port=16533
reps="${REPS:-3}"
start_server postgres_server "$port" >/dev/null
work="$(mktemp -d /tmp/tk-bench-pgsteps.XXXXXX)"
bench_lib_stops+=("rm -rf '$work'")
psql_() { psql -h 127.0.0.1 -p "$port" -U postgres -q -v ON_ERROR_STOP=1 "$@"; }
value() { psql_ -At -c "$1"; }
psql_ -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
srv="$(ls -dt /tmp/tk-bench-postgres_server-"$port".* | head -1)"
bash tests/servers/postgres_server.sh down "$srv" "$port"
bash tests/servers/postgres_server.sh up "$srv" "$port"
psql_ -c "CREATE EXTENSION pg_stat_statements"
(cd src/postgres && cat schema.sql common.sql gcra.sql token_bucket.sql \
  fixed_window.sql sliding_window.sql sliding_log.sql quota.sql \
  token_budget.sql lease.sql heartbeat.sql federation.sql) |
  sed 's/{{t}}/tkb/g' >"$work/ddl.sql"
psql_ -1 -f "$work/ddl.sql" >/dev/null 2>&1
psql_ -c "CREATE TABLE tkb_floor (LIKE tkb INCLUDING ALL);"
psql_ -c "CREATE FUNCTION tkb_floor_upsert(p_key bytea, OUT o_d2 float8)
  LANGUAGE plpgsql AS \$\$
  BEGIN
    INSERT INTO tkb_floor (id, key, kind, d1, d2, expires_at_ms)
      VALUES (sha256(p_key), p_key, 2, 0, 1, 9000000000000)
      ON CONFLICT (id) DO UPDATE SET d2 = tkb_floor.d2 + 1,
        expires_at_ms = EXCLUDED.expires_at_ms
      RETURNING d2 INTO o_d2;
  END \$\$;"

# One script per statement and key pattern; `K` is the key's suffix. Keys
# have no ':' (pgbench reads ':name' as a variable).
statement() {
  local k="$1"
  cat <<EOF
select1|SELECT 1;
upsert|INSERT INTO tkb_floor (id, key, kind, d1, d2, expires_at_ms) VALUES (sha256(('b-floor' || $k)::bytea), ('b-floor' || $k)::bytea, 2, 0, 1, 9000000000000) ON CONFLICT (id) DO UPDATE SET d2 = tkb_floor.d2 + 1, expires_at_ms = EXCLUDED.expires_at_ms RETURNING d2;
fixed_window|SELECT * FROM tkb_fixed_window(('b-fw' || $k)::bytea, 0, 1, false, 1000000000000, 60000);
gcra|SELECT * FROM tkb_gcra(('b-gcra' || $k)::bytea, 0, 1, false, 1000000000, 1000, 1000000000);
token_bucket|SELECT * FROM tkb_token_bucket(('b-tb' || $k)::bytea, 0, 1, false, 1000000000, 1000000000);
lease|SELECT * FROM tkb_lease(('b-lease' || $k)::bytea, 1000000000000, 3600000, 1);
fw_denied|SELECT * FROM tkb_fixed_window(('b-deny' || $k)::bytea, 0, 1, false, 1, 3600000);
upsert_plpgsql|SELECT * FROM tkb_floor_upsert(('b-floor' || $k)::bytea);
fw_bare|WITH w AS (SELECT floor(tkb_now(0)::float8 / 60000::float8) * 60000::float8 AS ws OFFSET 0), u AS (UPDATE tkb AS s SET d1 = GREATEST(w.ws, s.d1), d2 = CASE WHEN s.d1 = GREATEST(w.ws, s.d1) THEN s.d2 ELSE 0::float8 END + 1::float8, expires_at_ms = tkb_to_int(GREATEST(w.ws, s.d1) + 60000::float8) FROM w WHERE s.id = sha256(('b-bare' || $k)::bytea) AND s.kind = 2 AND CASE WHEN s.d1 = GREATEST(w.ws, s.d1) THEN s.d2 ELSE 0::float8 END + 1::float8 <= 1000000000000::float8 RETURNING true, 1000000000000::bigint, GREATEST(0, tkb_floor_int(1000000000000::float8 - s.d2)), tkb_to_int(s.d1 + 60000::float8), 0::bigint) SELECT * FROM u;
EOF
}
names=(select1 upsert fixed_window gcra token_bucket lease fw_denied fw_bare
  upsert_plpgsql)
# fw_bare's keys exist before it runs (it updates, never inserts).
psql_ -c "SELECT tkb_fixed_window(('b-bare' || k)::bytea, 0, 1, false,
            1000000000000, 60000)
          FROM (SELECT i::text AS k FROM generate_series(1, 1000) i
                UNION ALL SELECT '') keys" >/dev/null
for pattern in hot spread; do
  if [[ "$pattern" == hot ]]; then k="''"; set_k=""; else k=":k"; set_k='\set k random(1, 1000)'; fi
  statement "$k" | while IFS='|' read -r name sql; do
    printf '%s\n%s\n' "$set_k" "$sql" >"$work/$pattern-$name.sql"
  done
done

calls() {
  value "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
         WHERE query NOT LIKE '%pg_stat%' AND query NOT LIKE '%VACUUM%'"
}
pin_client=""
(($(nproc) >= 2)) && pin_client="taskset -c 0"
for rep in $(seq "$reps"); do
  for pattern in hot spread; do
    for s in "${names[@]}"; do
      psql_ -c "VACUUM tkb" -c "VACUUM tkb_floor"
      $pin_client pgbench -h 127.0.0.1 -p "$port" -U postgres -n -M prepared \
        -c 1 -T 4 -f "$work/$pattern-$s.sql" postgres >"$work/pgbench.out" 2>&1 &
      bench=$!
      pid=""
      for _ in $(seq 50); do
        sleep 0.1
        pid=$(value "SELECT pid FROM pg_stat_activity
                     WHERE application_name = 'pgbench'")
        [[ -n "$pid" ]] && break
      done
      [[ -n "$pin_client" ]] && taskset -p -c 1 "$pid" >/dev/null
      sleep 0.5
      c0=$(calls); t0=$(awk '{print $1}' "/proc/$pid/schedstat")
      sleep 3
      t1=$(awk '{print $1}' "/proc/$pid/schedstat"); c1=$(calls)
      wait "$bench"
      lat=$(awk '/latency average/ {print $4}' "$work/pgbench.out")
      echo "$pattern $s $(((t1 - t0) / (c1 - c0))) $lat" >>"$work/samples"
    done
  done
done
python3 - "$work/samples" "${names[@]}" <<'PY'
import statistics, sys
cpu, lat = {}, {}
for line in open(sys.argv[1]):
    pattern, name, ns, ms = line.split()
    cpu.setdefault((pattern, name), []).append(int(ns) / 1000)
    lat.setdefault((pattern, name), []).append(float(ms) * 1000)
print(f"{'keys':<7}{'statement':<16}{'cpu us':>8}{'x upsert':>10}"
      f"{'beyond SELECT 1':>17}{'x upsert':>10}{'spread':>14}"
      f"{'latency us':>12}")
for pattern in ["hot", "spread"]:
    med = {n: statistics.median(cpu[(pattern, n)]) for n in sys.argv[2:]}
    base = med["select1"]
    floor = med["upsert"] - base
    for n in sys.argv[2:]:
        c = cpu[(pattern, n)]
        whole = f"{med[n] / med['upsert']:.2f}"
        ratio = "" if n == "select1" else f"{(med[n] - base) / floor:.2f}"
        print(f"{pattern:<7}{n:<16}{med[n]:>8.1f}{whole:>10}"
              f"{med[n] - base:>17.1f}{ratio:>10}"
              f"{f'{min(c):.1f}-{max(c):.1f}':>14}"
              f"{statistics.median(lat[(pattern, n)]):>12.0f}")
PY
