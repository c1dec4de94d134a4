-- Token bucket (include/throttlekit/strategy/token_bucket.h).
-- Options: capacity, refill_per_sec. State: d1 = tokens, d2 = last.

-- reset_at (TokenBucket::first_full_ms, through detail::to_int): the first
-- whole ms >= p_at at which the state {p_tokens, p_last} the call leaves is
-- full, p_x being its tokens at p_at. It returns the integer itself:
-- {{t}}_to_int around a call is not inlined (it names its argument four
-- times), and a SQL function that is not inlined costs more than the whole
-- step. The closed form is the guess (and the answer from 2^53 - 1 on); the
-- search takes detail::first_ms's probes: forward from the guess until
-- full, back until not, then bisect.
CREATE OR REPLACE FUNCTION {{t}}_token_bucket_reset_at(
    p_tokens double precision, p_last double precision,
    p_at double precision, p_x double precision,
    p_cap double precision, p_rate double precision)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  lim double precision := 9007199254740991.0::float8;
  guess double precision := p_at + ceil((p_cap - p_x) / p_rate);
  lo double precision;
  hi double precision;
  step double precision := 1;
  probe double precision;
  mid double precision;
BEGIN
  IF NOT (guess < lim) THEN RETURN {{t}}_to_int(guess); END IF;
  IF p_x >= p_cap THEN RETURN {{t}}_to_int(p_at); END IF;
  lo := p_at;
  hi := GREATEST(guess, p_at + 1);
  WHILE NOT (LEAST(p_cap, p_tokens + GREATEST(0::float8, hi - p_last) * p_rate)
             >= p_cap) LOOP
    IF hi >= lim THEN RETURN {{t}}_to_int(hi); END IF;
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
  RETURN {{t}}_to_int(hi);
END
$$;

-- An earlier version's reset_at, which returned the double; nothing calls it
-- since (CREATE OR REPLACE cannot change a result type, so it had a name of
-- its own).
DROP FUNCTION IF EXISTS {{t}}_token_bucket_full_at(
    double precision, double precision, double precision, double precision,
    double precision, double precision);

CREATE OR REPLACE FUNCTION {{t}}_token_bucket(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_capacity bigint, p_refill_per_sec double precision,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  key_id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  cap double precision := p_capacity::float8;
  rate double precision := p_refill_per_sec / 1000.0::float8;
  r {{t}};
  locked boolean := false;
  tokens double precision;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  left_ double precision;
  at_ double precision;
BEGIN
  o_limit := p_capacity;
  -- The fast path: an admitted check on a key that has state is one UPDATE
  -- whose SET, WHERE and RETURNING are the loop's arithmetic below on the
  -- row it locks (its tokens at max(now, last) LEAST(cap, d1 + GREATEST(0,
  -- now - d2) * rate), less the cost; the new state's first full ms is both
  -- its expiry and reset_at). Anything else (a peek, a denial, a cold key,
  -- another kind) finds no row and takes the loop.
  IF NOT p_peek THEN
    UPDATE {{t}} AS s SET
        d1 = LEAST(cap, s.d1 + GREATEST(0::float8, now_d - s.d2) * rate)
             - p_cost,
        d2 = GREATEST(now_d, s.d2),
        expires_at_ms = {{t}}_token_bucket_reset_at(
            LEAST(cap, s.d1 + GREATEST(0::float8, now_d - s.d2) * rate)
              - p_cost,
            GREATEST(now_d, s.d2), GREATEST(now_d, s.d2),
            LEAST(cap, s.d1 + GREATEST(0::float8, now_d - s.d2) * rate)
              - p_cost,
            cap, rate)
      WHERE s.id = key_id AND s.kind = 1
        AND LEAST(cap, s.d1 + GREATEST(0::float8, now_d - s.d2) * rate)
            >= p_cost
      RETURNING true, GREATEST(0, {{t}}_floor_int(s.d1)), s.expires_at_ms, 0
      INTO o_allowed, o_remaining, o_reset_at, o_retry;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  LOOP
    r := {{t}}_load(key_id, NOT locked, 1::smallint, 'token_bucket');
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
      o_reset_at := {{t}}_token_bucket_reset_at(r.d1, r.d2, at_, tokens, cap,
                                                rate);
      o_retry := CASE WHEN o_allowed THEN 0
                      ELSE {{t}}_to_int((at_ - now_d)
                                        + ceil((cost - tokens) / rate)) END;
      RETURN;
    END IF;
    left_ := tokens - cost;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(left_));
    o_reset_at := {{t}}_token_bucket_reset_at(left_, at_, at_, left_, cap,
                                              rate);
    o_retry := 0;
    -- expires_at_ms (TokenBucket::expires_at_ms) of the new state is that
    -- same first full ms.
    -- A write is decided on the row read with its lock ({{t}}_load).
    IF r.key IS NOT NULL AND NOT locked THEN
      locked := true;
      CONTINUE;
    END IF;
    IF {{t}}_store(key_id, p_key, r.key IS NOT NULL, 1::smallint, left_, at_,
                   0, 0, NULL, NULL, NULL, o_reset_at) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
