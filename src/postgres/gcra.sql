-- GCRA (include/throttlekit/strategy/gcra.h), one atomic step on one key.
-- Options: limit, period_ms, burst (0 = limit). State: d1 = tat.
CREATE OR REPLACE FUNCTION {{t}}_gcra(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_period_ms bigint, p_burst bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  key_id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  burst bigint := CASE WHEN p_burst = 0 THEN p_limit ELSE p_burst END;
  t double precision := p_period_ms::float8 / p_limit::float8;
  tau double precision := t * burst::float8;
  r {{t}};
  locked boolean := false;
  tat_eff double precision;
  new_tat double precision;
  allow_at double precision;
BEGIN
  o_limit := burst;
  -- The fast path: an admitted check on a key that has state is one UPDATE
  -- whose SET, WHERE and RETURNING are the loop's arithmetic below on the
  -- row it locks (tat_eff = GREATEST(d1, now_d); new_tat = tat_eff +
  -- t * cost). Anything else (a peek, a denial, a cold key, another kind)
  -- finds no row and takes the loop.
  IF NOT p_peek THEN
    UPDATE {{t}} AS s SET
        d1 = GREATEST(s.d1, now_d) + t * p_cost,
        expires_at_ms = {{t}}_expiry(GREATEST(s.d1, now_d) + t * p_cost)
      WHERE s.id = key_id AND s.kind = 0
        AND NOT (now_d < GREATEST(s.d1, now_d) + t * p_cost - tau)
      RETURNING true,
                GREATEST(0, {{t}}_floor_int((tau - (s.d1 - now_d)) / t)),
                {{t}}_ceil_int(s.d1), 0
      INTO o_allowed, o_remaining, o_reset_at, o_retry;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  LOOP
    r := {{t}}_load(key_id, NOT locked, 0::smallint, 'gcra');
    tat_eff := CASE WHEN r.key IS NULL THEN now_d
                    ELSE GREATEST(r.d1, now_d) END;
    IF p_peek THEN
      allow_at := tat_eff + t - tau;
      o_allowed := NOT (now_d < allow_at);
      o_remaining := GREATEST(0, {{t}}_floor_int((tau - (tat_eff - now_d)) / t));
      o_reset_at := {{t}}_ceil_int(tat_eff);
      o_retry := CASE WHEN o_allowed THEN 0
                      ELSE {{t}}_ceil_int(allow_at - now_d) END;
      RETURN;
    END IF;
    new_tat := tat_eff + t * p_cost;
    allow_at := new_tat - tau;
    IF now_d < allow_at THEN
      o_allowed := false;
      o_remaining := GREATEST(0, {{t}}_floor_int((tau - (tat_eff - now_d)) / t));
      o_reset_at := {{t}}_ceil_int(tat_eff);
      o_retry := {{t}}_ceil_int(allow_at - now_d);
      RETURN;
    END IF;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int((tau - (new_tat - now_d)) / t));
    o_reset_at := {{t}}_ceil_int(new_tat);
    o_retry := 0;
    -- A write is decided on the row read with its lock ({{t}}_load).
    IF r.key IS NOT NULL AND NOT locked THEN
      locked := true;
      CONTINUE;
    END IF;
    IF {{t}}_store(key_id, p_key, r.key IS NOT NULL, 0::smallint, new_tat, 0,
                   0, 0, NULL, NULL, NULL, {{t}}_expiry(new_tat)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
