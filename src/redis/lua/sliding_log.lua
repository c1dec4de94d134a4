-- Sliding window log (docs/semantics.md, "Sliding window log (exact)"):
-- sorted set, score = admission ms, one member per unit, "<ms>:<i>" where i
-- counts the members at that ms (all members of one ms are pruned together,
-- so i never repeats);
-- ARGV[5..6] limit, window_ms. Charges ceil(cost) units.
local caller_now = tk_now(ARGV[1])
local limit = tonumber(ARGV[5])
local window = tonumber(ARGV[6])
-- A stale now (behind the newest unit) is decided at the newest unit and
-- stamped there; retries count from the caller's now (docs/semantics.md,
-- "A stale now").
local now = caller_now
local top = redis.call('ZRANGE', tk_key, -1, -1, 'WITHSCORES')
if top[2] and tonumber(top[2]) > now then now = tonumber(top[2]) end
local cutoff = now - window
local after = '(' .. tk_fmt(cutoff)

local count = redis.call('ZCOUNT', tk_key, after, '+inf')
local units = tk_peek and 1 or math.ceil(tk_cost)

-- The score of the k-th oldest surviving unit (1-based).
local function kth(k)
  local r = redis.call('ZRANGEBYSCORE', tk_key, after, '+inf', 'WITHSCORES',
                       'LIMIT', tk_int(k - 1), '1')
  return tonumber(r[2])
end

if units > limit - count then
  local oldest = now
  local retry = window
  if count > 0 then
    oldest = kth(1)
    local k = math.min(math.max(count + units - limit, 1), count)
    retry = math.max(1, math.ceil(kth(k) + window - caller_now))
  end
  return {0, limit, math.max(0, limit - count), math.ceil(oldest + window),
          retry}
end
if tk_peek then
  local oldest = now
  if count > 0 then oldest = kth(1) end
  return {1, limit, limit - count, math.ceil(oldest + window), 0}
end

redis.call('ZREMRANGEBYSCORE', tk_key, '-inf', tk_fmt(cutoff))
local score = tk_fmt(now)
local base = redis.call('ZCOUNT', tk_key, score, score)
local i = 1
while i <= units do
  local args = {}
  local last = math.min(units, i + 499)
  for j = i, last do
    args[#args + 1] = score
    args[#args + 1] = score .. ':' .. tk_int(base + j)
  end
  redis.call('ZADD', tk_key, unpack(args))
  i = last + 1
end
local first = redis.call('ZRANGE', tk_key, 0, 0, 'WITHSCORES')
local newest = redis.call('ZRANGE', tk_key, -1, -1, 'WITHSCORES')
tk_pexpire(tk_key, math.ceil(tonumber(newest[2]) + window) - caller_now,
           tk_slack)
return {1, limit, math.max(0, limit - count - units),
        math.ceil(tonumber(first[2]) + window), 0}
