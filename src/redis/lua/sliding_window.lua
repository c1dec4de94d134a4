-- Sliding window, sub-bucketed (docs/semantics.md, "Sliding window"): hash
-- field `tick mod (S+1)` -> "<tick>:<count>"; ARGV[5..7] limit, window_ms,
-- buckets S.
local now = tk_now(ARGV[1])
local limit = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
local s = tonumber(ARGV[7])
local ring = s + 1
local w = window / s

local c = math.floor(now / w)
local elapsed = math.max(0, now - c * w)
local weight = (w - elapsed) / w
if weight < 0 then weight = 0 elseif weight > 1 then weight = 1 end
local lag = 0

-- tick -> count for the S + 1 ticks c-S .. c; `top` is the latest tick
-- any slot counts (it may be ahead of c after a backward clock).
local slots = {}
local top = c
local raw = redis.call('HGETALL', tk_key)
for i = 2, #raw, 2 do
  local sep = string.find(raw[i], ':', 1, true)
  local tick = tonumber(string.sub(raw[i], 1, sep - 1))
  local n = tonumber(string.sub(raw[i], sep + 1))
  slots[tick] = n
  if n > 0 and tick > top then top = tick end
end
local function count_at(tick)
  return slots[tick] or 0
end
-- A stale now (a stored tick later than now's) is decided at the start of
-- the latest tick and counts into it (docs/semantics.md, "A stale now").
if top > c then
  c = top
  weight = 1
  lag = c * w - now
end

local oldest = count_at(c - s)
local full = 0
for k = c - s + 1, c do full = full + count_at(k) end
local estimate = full + oldest * weight
local reset_at = math.ceil((c + 1) * w + window)

local function units(x)
  return math.max(0, math.floor(x))
end

local cost = tk_peek and 1 or tk_cost
local projected = estimate + cost
if projected <= limit then
  if tk_peek then return {1, limit, units(limit - estimate), reset_at, 0} end
  local n = count_at(c) + cost
  if slots[c] == nil then n = cost end
  local field = tk_int(c - math.floor(c / ring) * ring)
  redis.call('HSET', tk_key, field, tk_int(c) .. ':' .. tk_fmt(n))
  tk_pexpire(tk_key, math.ceil((top + s + 1) * w) + 1 - now, tk_slack)
  return {1, limit, units(limit - projected), reset_at, 0}
end
local d = estimate + cost - limit
local r
if oldest > 0 and d <= oldest * weight then
  r = math.ceil(lag + d * w / oldest)
else
  r = math.ceil((c + 1) * w - now)
end
return {0, limit, units(limit - estimate), reset_at, math.max(1, r)}
