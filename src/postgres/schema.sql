-- ThrottleKit Postgres schema (docs/postgres.md). `{{t}}` is the table name
-- (checked against ^[a-z_][a-z0-9_]{0,39}$ before it is substituted); every
-- object is named after it, so coordinators on different tables never share
-- an object. Run as one multi-statement query (one implicit transaction)
-- under a transaction-scoped advisory lock, so processes starting at once
-- serialise their DDL.
--
-- One row per key. A key is any 1 byte .. 1 MiB; it is stored whole in
-- `key` and identified by `id = sha256(key)` (a B-tree entry must stay small;
-- distinct keys with one SHA-256 are not a practical concern). `kind` is the state's strategy (0 gcra, 1 token_bucket,
-- 2 fixed_window, 3 sliding_window, 4 sliding_log, 5 quota, 6 token_budget,
-- 7 lease, 8 heartbeat, 9 federation); the generic columns hold each kind's state as documented in
-- docs/postgres.md. `expires_at_ms` is an instant from which the state
-- decides exactly as a cold key: that first instant, or for GCRA that
-- rounded up to a multiple of 1024 ms (`{{t}}_expiry`), never earlier;
-- `{{t}}_sweep` deletes rows past it plus a slack.
SELECT pg_advisory_xact_lock(7283019944120375);
CREATE TABLE IF NOT EXISTS {{t}} (
  id bytea PRIMARY KEY,
  key bytea NOT NULL,
  kind smallint NOT NULL,
  d1 double precision NOT NULL DEFAULT 0,
  d2 double precision NOT NULL DEFAULT 0,
  n1 bigint NOT NULL DEFAULT 0,
  n2 bigint NOT NULL DEFAULT 0,
  ticks bigint[],
  counts double precision[],
  tokens bytea[],
  expires_at_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS {{t}}_expires_idx ON {{t}} (expires_at_ms);
