-- Sliding window (include/throttlekit/strategy/sliding_window.h).
-- Options: limit, window_ms, buckets S. State: the ring of S + 1 slots kept
-- sparsely as parallel arrays (ticks[i], counts[i]), at most one entry per
-- ring index (tick mod (S + 1)): exactly the slots the C++ ring has written.
-- The S whole ticks are summed in ascending tick order, as in C++.
CREATE OR REPLACE FUNCTION {{t}}_sliding_window(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_window_ms bigint, p_buckets bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  now_d double precision := {{t}}_now(p_now)::float8;
  lim double precision := p_limit::float8;
  win double precision := p_window_ms::float8;
  s bigint := p_buckets;
  ring bigint := p_buckets + 1;
  w double precision := win / p_buckets::float8;
  cd double precision;
  c bigint;
  elapsed double precision;
  weight double precision;
  lag double precision;
  latest bigint;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  r {{t}};
  full_ double precision;
  oldest double precision;
  current double precision;
  estimate double precision;
  d double precision;
  top bigint;
  first_clear double precision;
  t double precision;
  new_ticks bigint[];
  new_counts double precision[];
BEGIN
  o_limit := p_limit;
  LOOP
    r := {{t}}_load(id, p_peek, 3::smallint, 'sliding_window');
    cd := floor(now_d / w);
    c := {{t}}_to_int(cd);
    elapsed := GREATEST(0::float8, now_d - cd * w);
    weight := LEAST(GREATEST((w - elapsed) / w, 0::float8), 1::float8);
    lag := 0;
    -- A stale now (a stored tick later than now's) is decided at the start
    -- of the latest tick and counts into it (docs/semantics.md, "A stale
    -- now").
    SELECT max(u.k) INTO latest
      FROM unnest(r.ticks, r.counts) AS u(k, n) WHERE u.n > 0;
    IF latest > c THEN
      c := latest;
      cd := latest::float8;
      weight := 1;
      lag := cd * w - now_d;
    END IF;
    o_reset_at := {{t}}_to_int(ceil((cd + 1) * w + win));
    SELECT COALESCE(sum(u.n ORDER BY u.k) FILTER (WHERE u.k > c - s), 0),
           COALESCE(sum(u.n) FILTER (WHERE u.k = c - s), 0),
           COALESCE(sum(u.n) FILTER (WHERE u.k = c), 0)
      INTO full_, oldest, current
      FROM unnest(r.ticks, r.counts) AS u(k, n)
      WHERE u.k >= c - s AND u.k <= c;
    estimate := full_ + oldest * weight;
    IF NOT (estimate + cost <= lim) OR p_peek THEN
      o_allowed := estimate + cost <= lim;
      o_remaining := GREATEST(0, {{t}}_floor_int(lim - estimate));
      o_retry := 0;
      IF NOT o_allowed THEN
        d := estimate + cost - lim;
        o_retry := GREATEST(1, {{t}}_to_int(
          CASE WHEN oldest > 0 AND d <= oldest * weight
               THEN ceil(lag + d * w / oldest)
               ELSE ceil((c::float8 + 1) * w - now_d) END));
      END IF;
      RETURN;
    END IF;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(lim - (estimate + cost)));
    o_retry := 0;
    -- Slot c += cost (replacing whatever tick held its ring index).
    SELECT array_agg(x.k ORDER BY x.k), array_agg(x.n ORDER BY x.k)
      INTO new_ticks, new_counts
      FROM (SELECT u.k, u.n FROM unnest(r.ticks, r.counts) AS u(k, n)
              WHERE {{t}}_floor_mod(u.k, ring) <> {{t}}_floor_mod(c, ring)
            UNION ALL SELECT c, current + cost) AS x;
    -- expires_at_ms: SlidingWindow::clear_at of the latest tick.
    top := new_ticks[array_length(new_ticks, 1)];
    first_clear := top::float8 + s::float8 + 1;
    t := ceil(first_clear * w);
    WHILE t < 9007199254740991.0::float8 AND floor(t / w) < first_clear LOOP
      t := t + 1;
    END LOOP;
    WHILE floor((t - 1) / w) >= first_clear LOOP
      t := t - 1;
    END LOOP;
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 3::smallint, 0, 0, 0, 0,
                   new_ticks, new_counts, NULL, {{t}}_to_int(t)) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
