-- Token bucket (SEMANTICS.md): hash t (tokens), l (last ms); ARGV[5..6]
-- capacity, refill_per_sec.
local now = tk_now(ARGV[1])
local capacity = tonumber(ARGV[5])
local rate = tonumber(ARGV[6]) / 1000
local window = math.max(1, math.ceil(capacity / rate))

local tokens = capacity
local st = redis.call('HMGET', tk_key, 't', 'l')
if st[1] and st[2] then
  local elapsed = math.max(0, now - tonumber(st[2]))
  tokens = math.min(capacity, tonumber(st[1]) + elapsed * rate)
end

local function reset_at(x)
  return now + math.ceil((capacity - x) / rate)
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
  redis.call('HSET', tk_key, 't', tk_fmt(left), 'l', tk_fmt(now))
  tk_pexpire(tk_key, window, tk_slack)
  return {1, capacity, units(left), reset_at(left), 0}
end
return {0, capacity, units(tokens), reset_at(tokens),
        math.ceil((cost - tokens) / rate)}
