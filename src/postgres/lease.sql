-- Leases (include/throttlekit/coordinator/lease.h), exactly as
-- MemoryCoordinator: a fixed-window budget read on the store clock.
-- State: n1 = window start, n2 = credits handed out in it, tokens = the
-- give-back tokens seen in this window.

-- Takes min(p_want, credits left) from the current window of `p_key`.
CREATE OR REPLACE FUNCTION {{t}}_lease(
    p_key bytea, p_limit bigint, p_window_ms bigint, p_want bigint,
    OUT o_granted bigint, OUT o_window_remaining bigint,
    OUT o_window_start_ms bigint, OUT o_expires_at_ms bigint,
    OUT o_now_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  key_id bytea := sha256(p_key);
  r {{t}};
  locked boolean := false;
  used bigint;
  same_window boolean;
  now_start bigint;
BEGIN
  o_now_ms := {{t}}_now(0);
  now_start := {{t}}_floor_div(o_now_ms, p_window_ms) * p_window_ms;
  -- The fast path: a whole grant from a key that has state is one UPDATE
  -- whose SET, WHERE and RETURNING are the loop's arithmetic below on the
  -- row it locks (window start GREATEST(now_start, n1), used n2 in that
  -- window, else 0; granted = p_want). Anything else (a partial or no
  -- grant, a cold key, another kind) finds no row and takes the loop.
  UPDATE {{t}} AS s SET
      n1 = GREATEST(now_start, s.n1),
      n2 = CASE WHEN s.n1 = GREATEST(now_start, s.n1) THEN s.n2 ELSE 0 END
           + p_want,
      tokens = CASE WHEN s.n1 = GREATEST(now_start, s.n1) THEN s.tokens END,
      expires_at_ms = GREATEST(now_start, s.n1) + p_window_ms
    WHERE s.id = key_id AND s.kind = 7 AND p_want > 0
      AND p_want <= p_limit - CASE WHEN s.n1 = GREATEST(now_start, s.n1)
                                   THEN s.n2 ELSE 0 END
    RETURNING p_want, p_limit - s.n2, s.n1, s.expires_at_ms
    INTO o_granted, o_window_remaining, o_window_start_ms, o_expires_at_ms;
  IF FOUND THEN
    RETURN;
  END IF;
  LOOP
    r := {{t}}_load(key_id, NOT locked, 7::smallint, 'lease');
    -- A clock behind the stored window draws from that newer window
    -- (docs/semantics.md, "A stale now").
    o_window_start_ms := now_start;
    IF r.key IS NOT NULL AND r.n1 > o_window_start_ms THEN
      o_window_start_ms := r.n1;
    END IF;
    o_expires_at_ms := o_window_start_ms + p_window_ms;
    same_window := r.key IS NOT NULL AND r.n1 = o_window_start_ms;
    used := CASE WHEN same_window THEN r.n2 ELSE 0 END;
    o_granted := LEAST(GREATEST(p_limit - used, 0), p_want);
    o_window_remaining := GREATEST(0, p_limit - used - o_granted);
    IF o_granted = 0 THEN
      RETURN;
    END IF;
    -- A write is decided on the row read with its lock ({{t}}_load).
    IF r.key IS NOT NULL AND NOT locked THEN
      locked := true;
      CONTINUE;
    END IF;
    IF {{t}}_store(key_id, p_key, r.key IS NOT NULL, 7::smallint, 0, 0,
                   o_window_start_ms, used + o_granted, NULL, NULL,
                   CASE WHEN same_window THEN r.tokens ELSE NULL END,
                   o_expires_at_ms) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;

-- Gives `p_credits` back to the window that started at `p_window_start_ms`
-- if it is still the current one; idempotent per non-empty token; returns
-- the credits restored (never more than the window handed out).
CREATE OR REPLACE FUNCTION {{t}}_give_back(
    p_key bytea, p_window_ms bigint, p_window_start_ms bigint,
    p_credits bigint, p_token bytea)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  key_id bytea := sha256(p_key);
  v_now bigint := {{t}}_now(0);
  r {{t}};
  back bigint;
  current_ bigint := {{t}}_floor_div(v_now, p_window_ms) * p_window_ms;
BEGIN
  r := {{t}}_load(key_id, false, 7::smallint, 'lease');
  -- The current window is the stored one when the clock is behind it; the
  -- credits of any other window are forfeited.
  IF r.key IS NOT NULL AND r.n1 > current_ THEN
    current_ := r.n1;
  END IF;
  IF p_window_start_ms <> current_ OR r.key IS NULL
     OR r.n1 <> p_window_start_ms THEN
    RETURN 0;
  END IF;
  IF length(p_token) > 0 THEN
    IF p_token = ANY (r.tokens) THEN
      RETURN 0;
    END IF;
    r.tokens := array_append(r.tokens, p_token);
  END IF;
  back := LEAST(p_credits, r.n2);
  PERFORM {{t}}_store(key_id, p_key, true, 7::smallint, 0, 0, r.n1, r.n2 - back,
                      NULL, NULL, r.tokens, r.expires_at_ms);
  RETURN back;
END
$$;
