-- Fixed window (include/throttlekit/strategy/fixed_window.h).
-- Options: limit, window_ms. State: d1 = window start, d2 = count.
CREATE OR REPLACE FUNCTION {{t}}_fixed_window(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_window_ms bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  lim double precision := p_limit::float8;
  win double precision := p_window_ms::float8;
  start_ double precision;
  reset_ double precision;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  r {{t}};
  count_ double precision;
BEGIN
  o_limit := p_limit;
  LOOP
    r := {{t}}_load(id, p_peek, 2::smallint, 'fixed_window');
    -- A stale now (a stored window newer than now's) counts into the stored
    -- window (docs/semantics.md, "A stale now").
    start_ := floor(now_d / win) * win;
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
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 2::smallint, start_,
                   count_ + cost, 0, 0, NULL, NULL, NULL,
                   {{t}}_to_int(start_ + win)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
