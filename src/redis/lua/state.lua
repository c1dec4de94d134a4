-- The key's stored state, read without writing (forecast): the C++
-- strategy computes the forecast from it, so it agrees with the scripts.
-- ARGV[1] now (0 = the Redis clock), ARGV[2] the layout: 's' string,
-- 'h' hash, 'z' sorted set. Reply {now, raw...}: the string; the hash's
-- field/value pairs; the sorted set's member/score pairs, oldest first.
local now = tk_now(ARGV[1])
local layout = ARGV[2]
local out = {now}
if layout == 's' then
  local v = redis.call('GET', tk_key)
  if v then out[2] = v end
  return out
end
local raw
if layout == 'h' then
  raw = redis.call('HGETALL', tk_key)
else
  raw = redis.call('ZRANGE', tk_key, 0, -1, 'WITHSCORES')
end
for i = 1, #raw do out[i + 1] = raw[i] end
return out
