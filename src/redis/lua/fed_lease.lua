-- Federation's windowed lease (coordinator/federation_core.h): take up to
-- `want` credits from the current window of a per-key budget, the window
-- read on the Redis clock unless a caller time is given. Layout of the
-- original: hash `budget`, `expiresAt`, `rec_<window start>[:<token>]`.
-- ARGV[1] now (0 = Redis clock), ARGV[2] want, ARGV[3] limit,
-- ARGV[4] window_ms, ARGV[5] ttl slack.
-- Reply {granted, budget left, window_start, expires_at, now}.
local now = tk_now(ARGV[1])
local want = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local fed, err = tk_fed_load(tk_key, now, window)
if not fed then return err end
local stop = fed.start + window
local left = limit
if fed.stored == stop then left = fed.budget end
local granted = math.min(want, left)
left = left - granted
if granted > 0 then
  if fed.stored ~= stop then redis.call('DEL', tk_key) end
  redis.call('HSET', tk_key, 'budget', tk_int(left), 'expiresAt',
             tk_int(stop))
  tk_pexpire(tk_key, stop - now, tonumber(ARGV[5]))
end
return {granted, left, fed.start, stop, now}
