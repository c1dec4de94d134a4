-- Heartbeats (coordinator/heartbeat_core.h): the node table of one key,
-- stepped in the database by `{{t}}_heartbeat`, a transcription of
-- `heartbeat_step` held equal to it step for step by
-- tests/postgres/heartbeat_test.cc (as src/redis/lua/heartbeat.lua is on
-- Redis): change the three together. One round trip per beat; the key's
-- row lock is held only while the function runs
-- (docs/distributed_concurrency.md, "Postgres").
-- State (kind 8): tokens = the node ids, sorted; ticks = nine integers per
-- node in the same order (L_local, inflight, expires_at, share, seq,
-- demand, generation, acked share, max unacked share), as Redis's layout;
-- expires_at_ms = the last node's lease expiry.

-- The node ids as comma-separated hex, in their stored order ('' for none).
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_ids(p_ids bytea[])
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_to_string(
    ARRAY(SELECT encode(x, 'hex') FROM unnest(p_ids) WITH ORDINALITY
          AS u(x, i) ORDER BY i), ','), '')
$$;

-- One coordinator step for one node's beat (heartbeat_step). Arguments:
-- the key; now (epoch ms; 0 = the database clock); the table's ttl slack;
-- the report (node id, seq, applied generation, in-flight, local limit,
-- demand, validated by the caller); the options (lease ttl, lower median
-- instead of min, handoff, demand-proportional targets). Returns the grant
-- {share, generation, global limit, live nodes, lease expiry, stale} and
-- the store time used. A table whose last lease lapsed (plus the slack)
-- starts afresh, as the memory coordinator's entry does; a stale beat
-- writes nothing.
CREATE OR REPLACE FUNCTION {{t}}_heartbeat(
    p_key bytea, p_now bigint, p_slack_ms bigint, p_node bytea,
    p_seq bigint, p_applied bigint, p_inflight bigint, p_local bigint,
    p_demand bigint, p_ttl bigint, p_median boolean, p_handoff boolean,
    p_demand_proportional boolean,
    OUT o_share bigint, OUT o_generation bigint, OUT o_global bigint,
    OUT o_nodes bigint, OUT o_expires_at_ms bigint, OUT o_stale boolean,
    OUT o_now_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_id bytea := sha256(p_key);
  r {{t}};
  -- The table, one array per field, unsorted while it is edited.
  a_id bytea[] := '{}';
  a_ll bigint[] := '{}';   -- local limit
  a_inf bigint[] := '{}';  -- in-flight
  a_exp bigint[] := '{}';  -- lease expiry
  a_sh bigint[] := '{}';   -- share
  a_seq bigint[] := '{}';
  a_dem bigint[] := '{}';  -- demand
  a_gen bigint[] := '{}';  -- generation
  a_ack bigint[] := '{}';  -- acknowledged share
  a_mu bigint[] := '{}';   -- highest unacknowledged share
  n_all int;
  me int;                  -- self's index in the arrays
  fresh boolean := true;
  ord int[];               -- the live rows' indexes, ids in byte order
  n int;
  pos int;                 -- self's place in `ord` (1-based)
  v_global bigint;
  v_target bigint;
  v_reserved bigint := 0;
  v_share bigint;
  v_last bigint;
  -- water_fill with unit weights (core/water_filling.h, as
  -- heartbeat.lua transcribes it), over places 1 .. n of `ord`.
  want bigint[];
  alloc bigint[];
  w_order int[];
  suffix_d bigint[];
  v_total bigint := 0;
  v_left bigint;
  v_pool bigint;
  k int;
  q int;
  i int;
  v_d bigint;
  done boolean;
  v_exact double precision;
  f_idx int[] := '{}';
  f_frac double precision[] := '{}';
  f_order int[];
  v_open int;
  v_each bigint;
  v_give bigint;
  v_ticks bigint[];
BEGIN
  o_now_ms := {{t}}_now(p_now);
  r := {{t}}_load(v_id, false, 8::smallint, 'heartbeat');
  IF r.key IS NULL THEN
    INSERT INTO {{t}} (id, key, kind, expires_at_ms)
      VALUES (v_id, p_key, 8, 0) ON CONFLICT (id) DO NOTHING;
    r := {{t}}_load(v_id, false, 8::smallint, 'heartbeat');
  END IF;
  IF r.expires_at_ms > o_now_ms - p_slack_ms AND r.tokens IS NOT NULL THEN
    a_id := r.tokens;
    n_all := coalesce(array_length(a_id, 1), 0);
    FOR i IN 1 .. n_all LOOP
      a_ll[i] := r.ticks[9 * (i - 1) + 1];
      a_inf[i] := r.ticks[9 * (i - 1) + 2];
      a_exp[i] := r.ticks[9 * (i - 1) + 3];
      a_sh[i] := r.ticks[9 * (i - 1) + 4];
      a_seq[i] := r.ticks[9 * (i - 1) + 5];
      a_dem[i] := r.ticks[9 * (i - 1) + 6];
      a_gen[i] := r.ticks[9 * (i - 1) + 7];
      a_ack[i] := r.ticks[9 * (i - 1) + 8];
      a_mu[i] := r.ticks[9 * (i - 1) + 9];
    END LOOP;
  END IF;
  n_all := coalesce(array_length(a_id, 1), 0);

  -- 1. Upsert self.
  me := array_position(a_id, p_node);
  IF me IS NULL THEN
    me := n_all + 1;
    a_id[me] := p_node;
    a_gen[me] := 0;
  ELSIF a_exp[me] <= o_now_ms THEN
    NULL;  -- lapsed: re-joins as new, only its generation kept (below)
  ELSIF p_seq <= a_seq[me] THEN
    o_share := a_sh[me];
    o_generation := a_gen[me];
    o_global := 0;
    o_nodes := 0;
    o_expires_at_ms := a_exp[me];
    o_stale := true;
    RETURN;
  ELSE
    fresh := false;
  END IF;
  IF fresh THEN
    a_ll[me] := 0; a_inf[me] := 0; a_exp[me] := 0; a_sh[me] := 0;
    a_seq[me] := 0; a_dem[me] := 0; a_ack[me] := 0; a_mu[me] := 0;
  END IF;
  a_gen[me] := greatest(a_gen[me], p_applied);
  a_seq[me] := p_seq;
  a_ll[me] := p_local;
  a_inf[me] := p_inflight;
  a_dem[me] := p_demand;
  a_exp[me] := o_now_ms + p_ttl;
  IF p_applied >= a_gen[me] THEN
    a_ack[me] := a_sh[me];
    a_mu[me] := 0;
  END IF;

  -- 2. Evict expired peers (self was just renewed); ids in byte order.
  SELECT array_agg(x ORDER BY a_id[x]) INTO ord
    FROM generate_series(1, array_length(a_id, 1)) AS x
    WHERE x = me OR a_exp[x] > o_now_ms;
  n := array_length(ord, 1);
  pos := array_position(ord, me);

  -- 3. The global limit: min, or the lower median (element
  -- floor((n - 1) / 2) of the ascending locals, 0-based).
  IF p_median THEN
    SELECT a_ll[x] INTO v_global FROM unnest(ord) AS x
      ORDER BY a_ll[x] OFFSET (n - 1) / 2 LIMIT 1;
  ELSE
    SELECT min(a_ll[x]) INTO v_global FROM unnest(ord) AS x;
  END IF;

  -- 4. The target.
  IF p_demand_proportional THEN
    want := array_fill(0::bigint, ARRAY[n]);
    alloc := array_fill(0::bigint, ARRAY[n]);
    FOR k IN 1 .. n LOOP
      want[k] := greatest(1, a_dem[ord[k]]);
      v_total := v_total + want[k];
    END LOOP;
    IF v_total <= v_global THEN
      alloc := want;
    ELSE
      SELECT array_agg(x ORDER BY want[x], x) INTO w_order
        FROM generate_series(1, n) AS x;
      suffix_d := array_fill(0::bigint, ARRAY[n + 1]);
      FOR k IN REVERSE n .. 1 LOOP
        suffix_d[k] := suffix_d[k + 1] + want[w_order[k]];
      END LOOP;
      v_left := v_global;
      k := 1;
      done := false;
      WHILE k <= n LOOP
        IF suffix_d[k] <= v_left THEN
          FOR q IN k .. n LOOP
            alloc[w_order[q]] := want[w_order[q]];
          END LOOP;
          done := true;
          EXIT;
        END IF;
        v_d := want[w_order[k]];
        -- suffix weight: n - k + 1 unit claims
        EXIT WHEN v_d > v_left
          OR v_d::float8 * (n - k + 1)::float8 > v_left::float8;
        alloc[w_order[k]] := v_d;
        v_left := v_left - v_d;
        k := k + 1;
      END LOOP;
      IF NOT done THEN
        v_pool := v_left;
        FOR q IN k .. n LOOP
          i := w_order[q];
          v_exact := v_pool::float8
                     * least(1.0::float8, 1.0::float8 / (n - k + 1)::float8);
          alloc[i] := floor(least(v_exact, want[i]::float8,
                                  v_left::float8))::bigint;
          v_left := v_left - alloc[i];
          f_idx := f_idx || i;
          f_frac := f_frac || (v_exact - alloc[i]::float8);
        END LOOP;
        SELECT array_agg(f_idx[x] ORDER BY f_frac[x] DESC, f_idx[x])
          INTO f_order FROM generate_series(1, array_length(f_idx, 1)) AS x;
        WHILE v_left > 0 LOOP
          SELECT count(*) INTO v_open FROM unnest(f_order) AS x
            WHERE alloc[x] < want[x];
          EXIT WHEN v_open = 0;
          v_each := greatest(1, v_left / v_open);
          FOREACH i IN ARRAY f_order LOOP
            EXIT WHEN v_left = 0;
            v_give := least(v_each, want[i] - alloc[i], v_left);
            alloc[i] := alloc[i] + v_give;
            v_left := v_left - v_give;
          END LOOP;
        END LOOP;
      END IF;
    END IF;
    v_target := alloc[pos];
  ELSE
    v_target := v_global / n;
    IF pos - 1 < v_global - v_target * n THEN
      v_target := v_target + 1;
    END IF;
  END IF;

  -- 5. The occupancy cap.
  FOR k IN 1 .. n LOOP
    CONTINUE WHEN k = pos;
    i := ord[k];
    IF p_handoff THEN
      v_reserved := v_reserved + greatest(a_ack[i], a_mu[i], a_inf[i]);
    ELSE
      v_reserved := v_reserved + greatest(a_sh[i], a_inf[i]);
    END IF;
  END LOOP;
  v_share := greatest(0, least(v_target, v_global - v_reserved));

  -- 6. A changed share is a new generation, and so is a fresh row's first
  -- grant (the node may hold a share from a table since lost).
  IF fresh OR v_share <> a_sh[me] THEN
    a_sh[me] := v_share;
    a_gen[me] := a_gen[me] + 1;
    IF a_gen[me] > p_applied THEN
      a_mu[me] := greatest(a_mu[me], v_share);
    END IF;
  END IF;

  -- Store the live rows in id order.
  v_ticks := '{}';
  v_last := o_now_ms;
  FOREACH i IN ARRAY ord LOOP
    v_ticks := v_ticks || ARRAY[a_ll[i], a_inf[i], a_exp[i], a_sh[i], a_seq[i],
                            a_dem[i], a_gen[i], a_ack[i], a_mu[i]];
    v_last := greatest(v_last, a_exp[i]);
  END LOOP;
  UPDATE {{t}} SET
      tokens = ARRAY(SELECT a_id[x] FROM unnest(ord) WITH ORDINALITY
                     AS u(x, j) ORDER BY j),
      ticks = v_ticks, expires_at_ms = v_last
    WHERE id = v_id;
  o_share := a_sh[me];
  o_generation := a_gen[me];
  o_global := v_global;
  o_nodes := n;
  o_expires_at_ms := a_exp[me];
  o_stale := false;
END
$$;

-- The table as stored (also one whose last lease lapsed and that no beat
-- has replaced yet), without locking or writing (heartbeat_nodes).
CREATE OR REPLACE FUNCTION {{t}}_heartbeat_read(
    p_key bytea,
    OUT o_kind smallint, OUT o_ids text, OUT o_values text)
LANGUAGE plpgsql AS $$
DECLARE
  r {{t}};
BEGIN
  SELECT * INTO r FROM {{t}} WHERE id = sha256(p_key);
  o_kind := r.kind;
  IF r.key IS NULL OR r.kind <> 8 THEN
    r.tokens := NULL;
    r.ticks := NULL;
  END IF;
  o_ids := {{t}}_heartbeat_ids(r.tokens);
  o_values := coalesce(array_to_string(r.ticks, ','), '');
END
$$;
