-- Token bucket (docs/semantics.md, "Token bucket"): hash t (tokens), l (last
-- ms); ARGV[5..6] capacity, refill_per_sec.
local now = tk_now(ARGV[1])
local capacity = tonumber(ARGV[5])
local rate = tonumber(ARGV[6]) / 1000
local window = math.max(1, math.ceil(capacity / rate))

-- `at` = max(now, last): a stale now refills nothing and is decided at
-- last, which an allowed call keeps (docs/semantics.md, "A stale now").
local tokens = capacity
local at = now
local st = redis.call('HMGET', tk_key, 't', 'l')
if st[1] and st[2] then
  local last = tonumber(st[2])
  local elapsed = math.max(0, now - last)
  tokens = math.min(capacity, tonumber(st[1]) + elapsed * rate)
  at = math.max(now, last)
end

local function reset_at(x)
  return at + math.ceil((capacity - x) / rate)
end
local function units(x)
  return math.max(0, math.floor(x))
end

local cost = tk_peek and 1 or tk_cost
if tokens >= cost then
  if tk_peek then
    return {1, capacity, units(tokens), reset_at(tokens), 0}
  end
  local left = tokens - cost
  redis.call('HSET', tk_key, 't', tk_fmt(left), 'l', tk_fmt(at))
  tk_pexpire(tk_key, window + (at - now), tk_slack)
  return {1, capacity, units(left), reset_at(left), 0}
end
return {0, capacity, units(tokens), reset_at(tokens),
        (at - now) + math.ceil((cost - tokens) / rate)}
