-- Fixed window (include/throttlekit/strategy/fixed_window.h).
-- Options: limit, window_ms. State: d1 = window start, d2 = count.
CREATE OR REPLACE FUNCTION {{t}}_fixed_window(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_window_ms bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  key_id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  lim double precision := p_limit::float8;
  win double precision := p_window_ms::float8;
  start_ double precision;
  reset_ double precision;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  r {{t}};
  locked boolean := false;
  count_ double precision;
  now_start double precision := floor(now_d / win) * win;
BEGIN
  o_limit := p_limit;
  -- The fast path: an admitted check on a key that has state is one UPDATE
  -- whose SET, WHERE and RETURNING are the loop's arithmetic below on the
  -- row it locks (start_ = GREATEST(now_start, d1)). Anything else (a
  -- peek, a denial, a cold key, another kind) finds no row and takes the
  -- loop.
  IF NOT p_peek THEN
    UPDATE {{t}} AS s SET
        d1 = GREATEST(now_start, s.d1),
        d2 = CASE WHEN s.d1 = GREATEST(now_start, s.d1) THEN s.d2
                  ELSE 0::float8 END + cost,
        expires_at_ms = {{t}}_to_int(GREATEST(now_start, s.d1) + win)
      WHERE s.id = key_id AND s.kind = 2
        AND CASE WHEN s.d1 = GREATEST(now_start, s.d1) THEN s.d2
                 ELSE 0::float8 END + cost <= lim
      RETURNING true, GREATEST(0, {{t}}_floor_int(lim - s.d2)),
                {{t}}_to_int(s.d1 + win), 0
      INTO o_allowed, o_remaining, o_reset_at, o_retry;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  LOOP
    r := {{t}}_load(key_id, NOT locked, 2::smallint, 'fixed_window');
    -- A stale now (a stored window newer than now's) counts into the stored
    -- window (docs/semantics.md, "A stale now").
    start_ := now_start;
    IF r.key IS NOT NULL AND r.d1 > start_ THEN
      start_ := r.d1;
    END IF;
    reset_ := start_ + win;
    o_reset_at := {{t}}_to_int(reset_);
    count_ := CASE WHEN r.key IS NOT NULL AND r.d1 = start_ THEN r.d2
                   ELSE 0::float8 END;
    IF NOT (count_ + cost <= lim) OR p_peek THEN
      o_allowed := count_ + cost <= lim;
      o_remaining := GREATEST(0, {{t}}_floor_int(lim - count_));
      o_retry := CASE WHEN o_allowed THEN 0
                      ELSE {{t}}_to_int(ceil(reset_ - now_d)) END;
      RETURN;
    END IF;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(lim - (count_ + cost)));
    o_retry := 0;
    -- A write is decided on the row read with its lock ({{t}}_load).
    IF r.key IS NOT NULL AND NOT locked THEN
      locked := true;
      CONTINUE;
    END IF;
    IF {{t}}_store(key_id, p_key, r.key IS NOT NULL, 2::smallint, start_,
                   count_ + cost, 0, 0, NULL, NULL, NULL,
                   {{t}}_to_int(start_ + win)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
