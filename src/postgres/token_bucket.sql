-- Token bucket (include/throttlekit/strategy/token_bucket.h).
-- Options: capacity, refill_per_sec. State: d1 = tokens, d2 = last.
CREATE OR REPLACE FUNCTION {{t}}_token_bucket(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_capacity bigint, p_refill_per_sec double precision,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  cap double precision := p_capacity::float8;
  rate double precision := p_refill_per_sec / 1000.0::float8;
  r {{t}};
  tokens double precision;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  left_ double precision;
  at_ double precision;
  t double precision;
  step double precision;
BEGIN
  o_limit := p_capacity;
  LOOP
    r := {{t}}_load(id, p_peek, 1::smallint, 'token_bucket');
    -- A cold key is a full bucket (the C++ cold state refills +infinity).
    -- at_ = max(now, last): a stale now refills nothing and is decided at
    -- last, which an allowed call keeps (docs/semantics.md, "A stale now").
    tokens := CASE WHEN r.key IS NULL THEN cap
                   ELSE LEAST(cap, r.d1 + GREATEST(0::float8, now_d - r.d2) * rate)
              END;
    at_ := CASE WHEN r.key IS NULL THEN now_d ELSE GREATEST(now_d, r.d2) END;
    IF NOT (tokens >= cost) OR p_peek THEN
      o_allowed := tokens >= cost;
      o_remaining := GREATEST(0, {{t}}_floor_int(tokens));
      o_reset_at := {{t}}_to_int(at_ + ceil((cap - tokens) / rate));
      o_retry := CASE WHEN o_allowed THEN 0
                      ELSE {{t}}_to_int((at_ - now_d)
                                        + ceil((cost - tokens) / rate)) END;
      RETURN;
    END IF;
    left_ := tokens - cost;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(left_));
    o_reset_at := {{t}}_to_int(at_ + ceil((cap - left_) / rate));
    o_retry := 0;
    -- expires_at_ms (TokenBucket::expires_at_ms): the first ms from which
    -- the rounded refill reaches capacity.
    t := at_ + ceil((cap - left_) / rate);
    step := 1;
    WHILE t < 9007199254740991.0::float8
          AND LEAST(cap, left_ + GREATEST(0::float8, t - at_) * rate) < cap LOOP
      t := t + step;
      step := step * 2;
    END LOOP;
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 1::smallint, left_, at_, 0, 0,
                   NULL, NULL, NULL, {{t}}_to_int(t)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
