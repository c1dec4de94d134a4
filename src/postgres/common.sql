-- Helpers shared by the strategy functions. All arithmetic is IEEE double
-- (`double precision`) in the order of the C++ strategies; the conversions
-- below reproduce throttlekit::detail::to_int (saturating, NaN -> 0).
-- The small SQL helpers are deliberately not STRICT: PostgreSQL inlines
-- them into the calling expression only then (a STRICT one with a CASE body
-- is called as a function, which made a check ~60% slower).

-- now_ms, or the store clock (epoch ms, exact numeric) when now_ms = 0.
CREATE OR REPLACE FUNCTION {{t}}_now(p_now bigint) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN p_now = 0
    THEN floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
    ELSE p_now END
$$;

-- detail::to_int: truncation toward zero, saturating at the int64 range.
CREATE OR REPLACE FUNCTION {{t}}_to_int(v double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN v = 'NaN'::float8 THEN 0::bigint
    WHEN v >= '9.2233720368547748e18'::float8 THEN 9223372036854775807::bigint
    WHEN v <= '-9.2233720368547758e18'::float8
      THEN (-9223372036854775807 - 1)::bigint
    ELSE trunc(v)::bigint END
$$;

-- detail::floor_to_int and detail::ceil_to_int.
CREATE OR REPLACE FUNCTION {{t}}_floor_int(v double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT {{t}}_to_int(floor(v)) $$;
CREATE OR REPLACE FUNCTION {{t}}_ceil_int(v double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT {{t}}_to_int(ceil(v)) $$;

-- The stored expiry of a state that decides as a cold key from `v` (epoch
-- ms) on: `v` rounded up to a multiple of 1024 ms (exact in IEEE double:
-- the division and product by a power of two do not round). A row's expiry
-- only says when `{{t}}_sweep` may delete it, and a later deletion is
-- always safe; on the grid, consecutive steps of a busy key store the same
-- expiry, so PostgreSQL updates the row in place (a HOT update: no new
-- entry in either index) instead of adding an index entry at every call.
CREATE OR REPLACE FUNCTION {{t}}_expiry(v double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT {{t}}_to_int(ceil(v / 1024::float8) * 1024::float8)
$$;

-- Floor division and modulo of integers (civil_time.h).
CREATE OR REPLACE FUNCTION {{t}}_floor_div(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN a % b <> 0 AND a < 0 THEN a / b - 1 ELSE a / b END
$$;
CREATE OR REPLACE FUNCTION {{t}}_floor_mod(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT a - b * {{t}}_floor_div(a, b) $$;

-- The row of the key whose SHA-256 is `p_id`, or an all-NULL row when there is none. Writers
-- (`p_peek` false) lock it until the end of the call's transaction. The
-- fixed window, GCRA, token bucket and lease read without the lock first
-- (their fast path's UPDATE found no row to admit): a denial is decided on
-- that read and writes nothing; a write reads the row again with the lock
-- and decides again (a cold key is inserted, ON CONFLICT guarding it). A row
-- of another kind raises SQLSTATE TK001 (kFailedPrecondition in C++), with
-- the message MemoryCoordinator gives.
CREATE OR REPLACE FUNCTION {{t}}_load(p_id bytea, p_peek boolean,
                                      p_kind smallint, p_asked text)
RETURNS {{t}} LANGUAGE plpgsql AS $$
DECLARE
  r {{t}};
BEGIN
  IF p_peek THEN
    SELECT * INTO r FROM {{t}} WHERE id = p_id;
  ELSE
    SELECT * INTO r FROM {{t}} WHERE id = p_id FOR UPDATE;
  END IF;
  IF r.key IS NOT NULL AND r.kind <> p_kind THEN
    RAISE EXCEPTION USING ERRCODE = 'TK001', MESSAGE = format(
      'key holds %s state; asked for %s',
      (ARRAY['gcra', 'token_bucket', 'fixed_window', 'sliding_window',
             'sliding_log', 'quota', 'token_budget', 'lease',
             'heartbeat', 'federation'])[r.kind + 1],
      p_asked);
  END IF;
  RETURN r;
END
$$;

-- Writes the state of `p_key` (SHA-256 `p_id`): updates the locked row
-- when `p_found`, else inserts it. Returns false when a concurrent caller
-- inserted the key first (the caller then reloads and decides again on the
-- now-locked row).
CREATE OR REPLACE FUNCTION {{t}}_store(
    p_id bytea, p_key bytea, p_found boolean, p_kind smallint,
    p_d1 double precision, p_d2 double precision, p_n1 bigint, p_n2 bigint,
    p_ticks bigint[], p_counts double precision[], p_tokens bytea[],
    p_expires_at_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF p_found THEN
    UPDATE {{t}} SET d1 = p_d1, d2 = p_d2, n1 = p_n1, n2 = p_n2,
        ticks = p_ticks, counts = p_counts, tokens = p_tokens,
        expires_at_ms = p_expires_at_ms
      WHERE id = p_id;
    RETURN true;
  END IF;
  INSERT INTO {{t}} (id, key, kind, d1, d2, n1, n2, ticks, counts, tokens,
                     expires_at_ms)
    VALUES (p_id, p_key, p_kind, p_d1, p_d2, p_n1, p_n2, p_ticks, p_counts,
            p_tokens, p_expires_at_ms)
    ON CONFLICT (id) DO NOTHING;
  RETURN FOUND;
END
$$;

-- Deletes up to `p_max` rows whose expiry plus `p_slack_ms` lies before the
-- store clock; returns how many it deleted.
CREATE OR REPLACE FUNCTION {{t}}_sweep(p_slack_ms bigint, p_max bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := {{t}}_now(0);
  n bigint;
BEGIN
  DELETE FROM {{t}} WHERE id IN (
    SELECT id FROM {{t}} WHERE expires_at_ms < v_now - p_slack_ms
    LIMIT p_max FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;
