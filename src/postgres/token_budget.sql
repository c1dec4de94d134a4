-- Token budget (include/throttlekit/strategy/token_budget.h), the cost
-- axis. Options: budget, window_ms. A check debits ceil(cost) tokens.
-- State: n1 = served, n2 = window start.
CREATE OR REPLACE FUNCTION {{t}}_token_budget(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_budget bigint, p_window_ms bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  win double precision := p_window_ms::float8;
  r {{t}};
  served bigint;
  start_ bigint;
BEGIN
  o_limit := p_budget;
  LOOP
    r := {{t}}_load(id, p_peek, 6::smallint, 'token_budget');
    IF r.key IS NULL OR now_d >= r.n2::float8 + win THEN
      served := 0;
      start_ := {{t}}_to_int(floor(now_d / win) * win);
    ELSE
      served := r.n1;
      start_ := r.n2;
    END IF;
    o_reset_at := {{t}}_to_int(start_::float8 + win);
    IF served >= p_budget THEN
      o_allowed := false;
      o_remaining := 0;
      o_retry := GREATEST(0, {{t}}_ceil_int(o_reset_at::float8 - now_d));
      RETURN;
    END IF;
    o_allowed := true;
    o_retry := 0;
    IF p_peek THEN
      o_remaining := p_budget - served;
      RETURN;
    END IF;
    served := served + {{t}}_ceil_int(p_cost);
    o_remaining := GREATEST(0, p_budget - served);
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 6::smallint, 0, 0, served,
                   start_, NULL, NULL, NULL, o_reset_at) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
