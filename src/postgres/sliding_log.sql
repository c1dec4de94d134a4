-- Sliding window log (include/throttlekit/strategy/sliding_log.h).
-- Options: limit, window_ms. State: runs of admitted units as parallel
-- arrays, ticks[i] = timestamp (ascending, distinct), counts[i] = units.
-- A unit survives at `now` iff now - window_ms < its timestamp (double).
CREATE OR REPLACE FUNCTION {{t}}_sliding_log(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_window_ms bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  caller_now bigint := {{t}}_now(p_now);
  v_now bigint;
  now_d double precision;
  win double precision := p_window_ms::float8;
  cutoff double precision;
  units bigint := CASE WHEN p_peek THEN 1 ELSE {{t}}_ceil_int(p_cost) END;
  r {{t}};
  count_ bigint;
  oldest double precision;
  rank_ bigint;
  kth bigint;
  new_ticks bigint[];
  new_counts double precision[];
BEGIN
  o_limit := p_limit;
  LOOP
    r := {{t}}_load(id, p_peek, 4::smallint, 'sliding_log');
    -- A stale now (behind the newest unit) is decided at the newest unit
    -- and stamped there; retries count from the caller's now
    -- (docs/semantics.md, "A stale now").
    v_now := GREATEST(caller_now,
                      COALESCE(r.ticks[array_length(r.ticks, 1)], caller_now));
    now_d := v_now::float8;
    cutoff := now_d - win;
    SELECT COALESCE(sum(u.n), 0)::bigint, COALESCE(min(u.k)::float8, now_d)
      INTO count_, oldest
      FROM unnest(r.ticks, r.counts) AS u(k, n)
      WHERE cutoff < u.k::float8;
    IF units > p_limit - count_ THEN
      o_allowed := false;
      o_remaining := GREATEST(0, p_limit - count_);
      o_reset_at := {{t}}_ceil_int(oldest + win);
      IF count_ = 0 THEN
        o_retry := p_window_ms;
      ELSE
        rank_ := LEAST(GREATEST(count_ + units - p_limit, 1), count_);
        SELECT x.k INTO kth FROM (
            SELECT u.k, sum(u.n) OVER (ORDER BY u.k) AS cum
              FROM unnest(r.ticks, r.counts) AS u(k, n)
              WHERE cutoff < u.k::float8) AS x
          WHERE x.cum >= rank_ ORDER BY x.k LIMIT 1;
        o_retry := GREATEST(1, {{t}}_ceil_int(kth::float8 + win
                                              - caller_now::float8));
      END IF;
      RETURN;
    END IF;
    o_allowed := true;
    o_retry := 0;
    IF p_peek THEN
      o_remaining := p_limit - count_;
      o_reset_at := {{t}}_ceil_int(oldest + win);
      RETURN;
    END IF;
    o_remaining := GREATEST(0, p_limit - count_ - units);
    -- Prune the expired runs, add `units` at now (merged into a run at the
    -- same timestamp).
    SELECT array_agg(x.k ORDER BY x.k), array_agg(x.n ORDER BY x.k)
      INTO new_ticks, new_counts
      FROM (SELECT y.k, sum(y.n) AS n
              FROM (SELECT u.k, u.n FROM unnest(r.ticks, r.counts) AS u(k, n)
                      WHERE cutoff < u.k::float8
                    UNION ALL SELECT v_now, units::float8) AS y
              GROUP BY y.k) AS x;
    o_reset_at := {{t}}_ceil_int(new_ticks[1]::float8 + win);
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 4::smallint, 0, 0, 0, 0,
                   new_ticks, new_counts, NULL,
                   {{t}}_ceil_int(new_ticks[array_length(new_ticks, 1)]::float8
                                  + win)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
