-- Federation (include/throttlekit/coordinator/federation_core.h), exactly
-- as MemoryCoordinator. State (kind 9): n1 = the window's budget left,
-- n2 = the window's end, tokens = the tokens reconciled in it;
-- expires_at_ms = the window's end, so `{{t}}_sweep` collects old rows.

-- The current window's start at `p_now` given the stored row.
CREATE OR REPLACE FUNCTION {{t}}_fed_start(r {{t}}, p_window_ms bigint,
                                           p_now bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN r.key IS NOT NULL
                   AND r.n2 - p_window_ms
                       > {{t}}_floor_div(p_now, p_window_ms) * p_window_ms
    THEN r.n2 - p_window_ms
    ELSE {{t}}_floor_div(p_now, p_window_ms) * p_window_ms END
$$;

-- Takes min(p_want, budget left) from the current window of `p_key`.
CREATE OR REPLACE FUNCTION {{t}}_fed_lease(
    p_key bytea, p_limit bigint, p_window_ms bigint, p_want bigint,
    p_now bigint,
    OUT o_granted bigint, OUT o_budget bigint, OUT o_window_start_ms bigint,
    OUT o_expires_at_ms bigint, OUT o_now_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  r {{t}};
  same_window boolean;
BEGIN
  o_now_ms := {{t}}_now(p_now);
  LOOP
    r := {{t}}_load(id, false, 9::smallint, 'federation');
    o_window_start_ms := {{t}}_fed_start(r, p_window_ms, o_now_ms);
    o_expires_at_ms := o_window_start_ms + p_window_ms;
    same_window := r.key IS NOT NULL AND r.n2 = o_expires_at_ms;
    o_budget := CASE WHEN same_window THEN r.n1 ELSE p_limit END;
    o_granted := LEAST(p_want, o_budget);
    o_budget := o_budget - o_granted;
    IF o_granted = 0 THEN
      RETURN;
    END IF;
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 9::smallint, 0, 0, o_budget,
                   o_expires_at_ms, NULL, NULL,
                   CASE WHEN same_window THEN r.tokens ELSE NULL END,
                   o_expires_at_ms) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;

-- Gives `p_leftover` back to the window that started at
-- `p_window_start_ms` if it is the current one, once per (window, token);
-- returns the credits restored.
CREATE OR REPLACE FUNCTION {{t}}_fed_reconcile(
    p_key bytea, p_limit bigint, p_window_ms bigint,
    p_window_start_ms bigint, p_leftover bigint, p_token bytea, p_now bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  v_now bigint := {{t}}_now(p_now);
  r {{t}};
  after_ bigint;
  start_ bigint;
BEGIN
  r := {{t}}_load(id, false, 9::smallint, 'federation');
  IF r.key IS NULL THEN
    RETURN 0;
  END IF;
  start_ := {{t}}_fed_start(r, p_window_ms, v_now);
  IF p_window_start_ms <> start_ OR r.n2 <> start_ + p_window_ms
     OR p_token = ANY (COALESCE(r.tokens, ARRAY[]::bytea[])) THEN
    RETURN 0;
  END IF;
  after_ := LEAST(p_limit, r.n1 + p_leftover);
  PERFORM {{t}}_store(id, p_key, true, 9::smallint, 0, 0, after_, r.n2,
                      NULL, NULL, array_append(r.tokens, p_token),
                      r.expires_at_ms);
  RETURN after_ - r.n1;
END
$$;
