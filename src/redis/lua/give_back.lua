-- Give back (coordinator/lease.h): return credits to the window they came
-- from; 0 once that window has rolled, or when `token` (non-empty) was
-- already applied to it. ARGV[1] window_start, ARGV[2] credits,
-- ARGV[3] token, ARGV[4] window_ms. Reply: the credits restored.
local window_start = tonumber(ARGV[1])
local credits = tonumber(ARGV[2])
local token = ARGV[3]
local window = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tk_floor_div(now, window) * window

-- The current window is the stored one when the clock is behind it.
local st = redis.call('HMGET', tk_key, 's', 'c')
if st[1] and tonumber(st[1]) > start then start = tonumber(st[1]) end
if window_start ~= start then return 0 end
if not st[1] or tonumber(st[1]) ~= start then return 0 end
if token ~= '' and redis.call('HSETNX', tk_key, 'r:' .. token, '1') == 0 then
  return 0
end
local count = tonumber(st[2])
local back = math.min(credits, count)
redis.call('HSET', tk_key, 'c', tk_fmt(count - back))
return back
