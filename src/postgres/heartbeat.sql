-- Heartbeats (coordinator/heartbeat_core.h): the node table of one key,
-- stepped by the C++ core on the client inside one transaction that holds
-- the key's row lock (docs/distributed_concurrency.md, "Postgres").
-- State (kind 8): tokens = the node ids, sorted; ticks = nine integers per
-- node in the same order (L_local, inflight, expires_at, share, seq,
-- demand, generation, acked share, max unacked share), as Redis's layout;
-- expires_at_ms = the last node's lease expiry.

-- The node ids as comma-separated hex, in their stored order ('' for none).
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_ids(p_ids bytea[])
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_to_string(
    ARRAY(SELECT encode(x, 'hex') FROM unnest(p_ids) WITH ORDINALITY
          AS u(x, i) ORDER BY i), ','), '')
$$;

-- Locks the key's row (creating an empty one if there is none) and returns
-- the store time (`p_now`, or the clock for 0) and the table: the ids as
-- comma-separated hex, the integers comma-separated. A table whose last
-- lease lapsed (plus `p_slack_ms`) reads as empty, as in MemoryCoordinator.
-- Called after BEGIN: the lock is held until the caller's COMMIT.
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_load(
    p_key bytea, p_now bigint, p_slack_ms bigint,
    OUT o_now_ms bigint, OUT o_ids text, OUT o_values text)
LANGUAGE plpgsql AS $$
DECLARE
  v_id bytea := sha256(p_key);
  r {{t}};
BEGIN
  o_now_ms := {{t}}_now(p_now);
  r := {{t}}_load(v_id, false, 8::smallint, 'heartbeat');
  IF r.key IS NULL THEN
    INSERT INTO {{t}} (id, key, kind, expires_at_ms)
      VALUES (v_id, p_key, 8, 0) ON CONFLICT (id) DO NOTHING;
    r := {{t}}_load(v_id, false, 8::smallint, 'heartbeat');
  END IF;
  IF r.expires_at_ms <= o_now_ms - p_slack_ms THEN
    r.tokens := NULL;  -- lapsed: a fresh table
    r.ticks := NULL;
  END IF;
  o_ids := {{t}}_heartbeat_ids(r.tokens);
  o_values := coalesce(array_to_string(r.ticks, ','), '');
END
$$;

-- Writes the table the step produced (the row is locked by
-- `{{t}}_heartbeat_load` in the same transaction).
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_store(
    p_key bytea, p_ids bytea[], p_values bigint[], p_expires_at_ms bigint)
RETURNS void LANGUAGE sql AS $$
  UPDATE {{t}} SET tokens = p_ids, ticks = p_values,
      expires_at_ms = p_expires_at_ms
    WHERE id = sha256(p_key)
$$;

-- The table as stored (also one whose last lease lapsed and that no beat
-- has replaced yet), without locking or writing (heartbeat_nodes).
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_read(
    p_key bytea,
    OUT o_kind smallint, OUT o_ids text, OUT o_values text)
LANGUAGE plpgsql AS $$
DECLARE
  r {{t}};
BEGIN
  SELECT * INTO r FROM {{t}} WHERE id = sha256(p_key);
  o_kind := r.kind;
  IF r.key IS NULL OR r.kind <> 8 THEN
    r.tokens := NULL;
    r.ticks := NULL;
  END IF;
  o_ids := {{t}}_heartbeat_ids(r.tokens);
  o_values := coalesce(array_to_string(r.ticks, ','), '');
END
$$;
