#!/usr/bin/env bash
# What a key held past its window costs on every store, the price of the
# TTL slack (include/throttlekit/core/ttl_slack.h; docs/semantics.md, "A
# stale now"). 10^6 fixed-window keys of 16 bytes, each in the layout the
# library writes:
# - MemoryStore and MemoryCoordinator: admitted through the library
#   (bench/ttl_slack_memory.cc), the heap measured before and after;
# - Redis: a hash with `s` and `c` and a TTL per key (docs/redis.md, "Key
#   layout"), written by one Lua loop in batches into a private
#   redis-server (port 16491), `used_memory` before and after;
# - Postgres: one row per key of the coordinator's table (id = sha256(key),
#   kind 2, d1 window start, d2 count, expires_at_ms), its table created by
#   the coordinator's own schema, rows inserted with generate_series into a
#   private server (port 25451), the table's total size (heap and both
#   indexes) after VACUUM.
# Builds the release preset first. Usage: scripts/ttl_slack_memory.sh [keys]
source "$(dirname "$0")/bench_lib.sh"
keys="${1:-1000000}"
build_release ttl_slack_memory

build/release/bench/ttl_slack_memory "$keys"

start_server redis_server 16491 >/dev/null
rc() { redis-cli -p 16491 "$@"; }
used() { rc INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }
before=$(used)
batch=100000
for (( from = 0; from < keys; from += batch )); do
  to=$(( from + batch < keys ? from + batch : keys ))
  rc EVAL "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
             local k = string.format('key:%012d', i)
             redis.call('HSET', k, 's', '1700000000000', 'c', '1')
             redis.call('PEXPIRE', k, 3600000)
           end
           return 0" 0 "$from" "$to" >/dev/null
done
after=$(used)
echo "Redis (fixed window hash + TTL): $keys keys, $(( (after - before) / keys )) bytes/key"

start_server postgres_server 25451 >/dev/null
psql_() { psql -h 127.0.0.1 -p 25451 -U postgres -d postgres -qAt "$@"; }
# The coordinator's table and functions, exactly as it creates them.
schema="$(sed 's/{{t}}/tk_slack/g' src/postgres/schema.sql)"
psql_ -c "$schema" >/dev/null
psql_ -c "INSERT INTO tk_slack (id, key, kind, d1, d2, expires_at_ms)
          SELECT sha256(k), k, 2, 1700000000000, 1, 1700000001000
          FROM (SELECT convert_to(format('key:%s', lpad(i::text, 12, '0')),
                                  'UTF8') AS k
                FROM generate_series(0, $keys - 1) AS i) AS s" >/dev/null
psql_ -c "VACUUM ANALYZE tk_slack" >/dev/null
bytes=$(psql_ -c "SELECT pg_total_relation_size('tk_slack')")
echo "Postgres (one row, primary key and expiry index): $keys keys, $(( bytes / keys )) bytes/key"
