-- Quota (include/throttlekit/strategy/quota.h, civil_time.h): calendar
-- periods in a fixed UTC offset. Options: limit, period (0 day, 1 week,
-- 2 month, 3 fixed), week_starts_on, offset_minutes, anchor_ms, period_ms.
-- State: n1 = the start of the period counted in, d1 = count.

-- Howard Hinnant's days_from_civil, with floor division.
CREATE OR REPLACE FUNCTION {{t}}_days_from_civil(y_in bigint, m bigint,
                                                 d bigint)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  y bigint := CASE WHEN m <= 2 THEN y_in - 1 ELSE y_in END;
  era bigint := {{t}}_floor_div(y, 400);
  yoe bigint := y - era * 400;
  mp bigint := (m + 9) % 12;
  doy bigint := (153 * mp + 2) / 5 + (d - 1);
  doe bigint := yoe * 365 + yoe / 4 - yoe / 100 + doy;
BEGIN
  RETURN era * 146097 + doe - 719468;
END
$$;

-- The period [o_start, o_reset) that contains `p_now` (Quota::period_at).
CREATE OR REPLACE FUNCTION {{t}}_quota_period(
    p_now bigint, p_period bigint, p_week_starts_on bigint,
    p_offset_minutes bigint, p_anchor_ms bigint, p_period_ms bigint,
    OUT o_start bigint, OUT o_reset bigint)
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  off bigint := p_offset_minutes * 60000;
  today bigint;
  first_day bigint;
  next_day bigint;
  z bigint; era bigint; doe bigint; yoe bigint; doy bigint; mp bigint;
  month_ bigint; year_ bigint;
BEGIN
  IF p_period = 3 THEN
    o_start := p_anchor_ms
      + {{t}}_floor_div(p_now - p_anchor_ms, p_period_ms) * p_period_ms;
    o_reset := o_start + p_period_ms;
    RETURN;
  END IF;
  today := {{t}}_floor_div(p_now + off, 86400000);
  first_day := today;
  next_day := today + 1;
  IF p_period = 1 THEN
    first_day := today - {{t}}_floor_mod(
      {{t}}_floor_mod(today + 4, 7) - p_week_starts_on, 7);
    next_day := first_day + 7;
  ELSIF p_period = 2 THEN
    -- civil_from_days(today): year and month.
    z := today + 719468;
    era := {{t}}_floor_div(z, 146097);
    doe := z - era * 146097;
    yoe := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp := (5 * doy + 2) / 153;
    month_ := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    year_ := yoe + era * 400 + CASE WHEN month_ <= 2 THEN 1 ELSE 0 END;
    first_day := {{t}}_days_from_civil(year_, month_, 1);
    next_day := CASE WHEN month_ = 12
                     THEN {{t}}_days_from_civil(year_ + 1, 1, 1)
                     ELSE {{t}}_days_from_civil(year_, month_ + 1, 1) END;
  END IF;
  o_start := first_day * 86400000 - off;
  o_reset := next_day * 86400000 - off;
END
$$;

CREATE OR REPLACE FUNCTION {{t}}_quota(
    p_key bytea, p_now bigint, p_cost double precision, p_peek boolean,
    p_limit bigint, p_period bigint, p_week_starts_on bigint,
    p_offset_minutes bigint, p_anchor_ms bigint, p_period_ms bigint,
    OUT o_allowed boolean, OUT o_limit bigint, OUT o_remaining bigint,
    OUT o_reset_at bigint, OUT o_retry bigint)
LANGUAGE plpgsql AS $$
DECLARE
  id bytea := sha256(p_key);
  v_now bigint := {{t}}_now(p_now);
  lim double precision := p_limit::float8;
  cost double precision := CASE WHEN p_peek THEN 1.0::float8 ELSE p_cost END;
  cur record;
  win record;
  r {{t}};
  count_ double precision;
BEGIN
  o_limit := p_limit;
  cur := {{t}}_quota_period(v_now, p_period, p_week_starts_on,
                            p_offset_minutes, p_anchor_ms, p_period_ms);
  LOOP
    r := {{t}}_load(id, p_peek, 5::smallint, 'quota');
    win := cur;
    count_ := 0;
    IF r.key IS NOT NULL AND r.n1 = cur.o_start THEN
      count_ := r.d1;
    ELSIF r.key IS NOT NULL AND r.n1 > cur.o_start THEN
      -- The clock went back across a boundary: the newer period holds.
      win := {{t}}_quota_period(r.n1, p_period, p_week_starts_on,
                                p_offset_minutes, p_anchor_ms, p_period_ms);
      count_ := r.d1;
    END IF;
    o_reset_at := win.o_reset;
    IF NOT (count_ + cost <= lim) OR p_peek THEN
      o_allowed := count_ + cost <= lim;
      o_remaining := GREATEST(0, {{t}}_floor_int(lim - count_));
      o_retry := CASE WHEN o_allowed THEN 0 ELSE
        {{t}}_ceil_int(win.o_reset::float8 - v_now::float8) END;
      RETURN;
    END IF;
    o_allowed := true;
    o_remaining := GREATEST(0, {{t}}_floor_int(lim - (count_ + cost)));
    o_retry := 0;
    IF {{t}}_store(id, p_key, r.key IS NOT NULL, 5::smallint, count_ + cost, 0,
                   win.o_start, 0, NULL, NULL, NULL, win.o_reset) THEN
      RETURN;
    END IF;
  END LOOP;
END
$$;
