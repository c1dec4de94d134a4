-- Token bucket (include/throttlekit/strategy/token_bucket.h).
-- Options: capacity, refill_per_sec. State: d1 = tokens, d2 = last.

-- reset_at (TokenBucket::first_full_ms): the first whole ms >= p_at at which
-- the state {p_tokens, p_last} the call leaves is full, p_x being its tokens
-- at p_at. The closed form is the guess (and the answer from 2^53 - 1 on);
-- the search takes detail::first_ms's probes: forward from the guess until
-- full, back until not, then bisect.
CREATE OR REPLACE FUNCTION {{t}}_token_bucket_full_at(
    p_tokens double precision, p_last double precision,
    p_at double precision, p_x double precision,
    p_cap double precision, p_rate double precision)
RETURNS double precision LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  lim double precision := 9007199254740991.0::float8;
  guess double precision := p_at + ceil((p_cap - p_x) / p_rate);
  lo double precision;
  hi double precision;
  step double precision := 1;
  probe double precision;
  mid double precision;
BEGIN
  IF NOT (guess < lim) THEN RETURN guess; END IF;
  IF p_x >= p_cap THEN RETURN p_at; END IF;
  lo := p_at;
  hi := GREATEST(guess, p_at + 1);
  WHILE NOT (LEAST(p_cap, p_tokens + GREATEST(0::float8, hi - p_last) * p_rate)
             >= p_cap) LOOP
    IF hi >= lim THEN RETURN hi; END IF;
    lo := hi;
    hi := hi + step;
    step := step * 2;
  END LOOP;
  step := 1;
  WHILE hi - lo > 1 LOOP
    probe := GREATEST(lo + 1, hi - step);
    IF NOT (LEAST(p_cap, p_tokens + GREATEST(0::float8, probe - p_last) * p_rate)
            >= p_cap) THEN
      lo := probe;
      EXIT;
    END IF;
    hi := probe;
    step := step * 2;
  END LOOP;
  WHILE hi - lo > 1 LOOP
    mid := floor(lo + (hi - lo) / 2);
    IF LEAST(p_cap, p_tokens + GREATEST(0::float8, mid - p_last) * p_rate)
       >= p_cap THEN
      hi := mid;
    ELSE
      lo := mid;
    END IF;
  END LOOP;
  RETURN hi;
END
$$;

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
      o_reset_at := {{t}}_to_int({{t}}_token_bucket_full_at(
          r.d1, r.d2, at_, tokens, cap, rate));
      o_retry := CASE WHEN o_allowed THEN 0
                      ELSE {{t}}_to_int((at_ - now_d)
                                        + ceil((cost - tokens) / rate)) END;
      RETURN;
    END IF;
    left_ := tokens - cost;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(left_));
    o_reset_at := {{t}}_to_int({{t}}_token_bucket_full_at(
        left_, at_, at_, left_, cap, rate));
    o_retry := 0;
    -- expires_at_ms (TokenBucket::expires_at_ms) of the new state is that
    -- same first full ms.
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 1::smallint, left_, at_, 0, 0,
                   NULL, NULL, NULL, o_reset_at) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
