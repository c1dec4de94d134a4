-- Lease (coordinator/lease.h): take up to `want` credits from the current
-- window of a fixed-window budget, the window read on the Redis clock.
-- Fixed-window layout (hash s, c) plus give-back tokens `r:<token>`.
-- ARGV[1] want, ARGV[2] limit, ARGV[3] window_ms, ARGV[4] ttl slack.
-- Reply {granted, window_remaining, window_start, expires_at, now}.
local want = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local slack = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = tk_floor_div(now, window) * window

-- A clock behind the stored window draws from that newer window
-- (docs/semantics.md, "A stale now").
local st = redis.call('HMGET', tk_key, 's', 'c')
if st[1] and tonumber(st[1]) > start then start = tonumber(st[1]) end
local stop = start + window
local used = 0
local same = st[1] and tonumber(st[1]) == start
if same then used = tonumber(st[2]) end
local granted = math.min(math.max(limit - used, 0), want)
if granted > 0 then
  if st[1] and not same then redis.call('DEL', tk_key) end
  redis.call('HSET', tk_key, 's', tk_fmt(start), 'c', tk_fmt(used + granted))
  tk_pexpire(tk_key, stop - now, slack)
end
return {granted, math.max(0, limit - used - granted), start, stop, now}
