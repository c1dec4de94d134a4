-- Fixed window (docs/semantics.md, "Fixed window"): hash s (window start),
-- c (count); ARGV[5..6] limit, window_ms.
local now = tk_now(ARGV[1])
local limit = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
local start = math.floor(now / window) * window

-- A stale now (a stored window newer than now's) counts into the stored
-- window (docs/semantics.md, "A stale now").
local count = 0
local st = redis.call('HMGET', tk_key, 's', 'c')
if st[1] then
  local stored = tonumber(st[1])
  if stored > start then start = stored end
  if stored == start then count = tonumber(st[2]) end
end
local reset_at = start + window

local function remaining(x)
  return math.max(0, math.floor(limit - x))
end

local cost = tk_peek and 1 or tk_cost
if count + cost <= limit then
  if tk_peek then return {1, limit, remaining(count), reset_at, 0} end
  local projected = count + cost
  redis.call('HSET', tk_key, 's', tk_fmt(start), 'c', tk_fmt(projected))
  tk_pexpire(tk_key, math.ceil(reset_at - now), tk_slack)
  return {1, limit, remaining(projected), reset_at, 0}
end
return {0, limit, remaining(count), reset_at, math.ceil(reset_at - now)}
