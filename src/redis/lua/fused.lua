-- Fused admission (docs/admission.md, "The fused Redis path"): the rate
-- axis (GCRA, cost 1) on KEYS[1], then, if it admits, the cost axis (token
-- bucket, cost ARGV[2]) on KEYS[2], in one atomic script. The coordinator
-- prepends prelude.lua and wraps gcra.lua and token_bucket.lua, unchanged,
-- as tk_rate_axis and tk_cost_axis(tk_key, tk_cost, tk_peek, ARGV), so each
-- axis runs exactly its strict script's arithmetic and writes per its own
-- outcome (the rate axis counts a request the cost axis then denies, as
-- the two strict calls in sequence do).
--
-- ARGV[1] now (0 = the Redis clock, read once for both axes), ARGV[2]
-- cost, ARGV[3] 'c', ARGV[4] ttl slack ms, ARGV[5..7] GCRA limit,
-- period_ms, burst, ARGV[8..9] bucket capacity, refill_per_sec.
-- Reply, 13 integers: the combined decision {allowed, limit, remaining,
-- reset_at, retry_after} (AND, min, min, max, max), then the rate axis
-- {allowed, remaining, reset_at, retry_after}, then the cost axis the same
-- with allowed = -1 when it was not asked (the rate axis denied). Each
-- axis's limit is its own option (GCRA: burst; bucket: capacity).
local now = tk_int(tk_now(ARGV[1]))
local rate = tk_rate_axis(KEYS[1], 1, false,
                          {now, '1', 'c', ARGV[4], ARGV[5], ARGV[6], ARGV[7]})
if rate[1] == 0 then
  return {0, rate[2], rate[3], rate[4], rate[5],
          0, rate[3], rate[4], rate[5],
          -1, 0, 0, 0}
end
local cost = tk_cost_axis(KEYS[2], tonumber(ARGV[2]), false,
                          {now, ARGV[2], 'c', ARGV[4], ARGV[8], ARGV[9]})
return {cost[1], math.min(rate[2], cost[2]), math.min(rate[3], cost[3]),
        math.max(rate[4], cost[4]), math.max(rate[5], cost[5]),
        1, rate[3], rate[4], rate[5],
        cost[1], cost[3], cost[4], cost[5]}
