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
local stored, last
local st = redis.call('HMGET', tk_key, 't', 'l')
if st[1] and st[2] then
  stored = tonumber(st[1])
  last = tonumber(st[2])
  local elapsed = math.max(0, now - last)
  tokens = math.min(capacity, stored + elapsed * rate)
  at = math.max(now, last)
end

-- reset_at (TokenBucket::first_full_ms): the first whole ms >= at at which
-- the state {s, l} the call leaves is full, x being its tokens at `at`. The
-- closed form is the guess (and the answer from 2^53 - 1 on); the search
-- takes detail::first_ms's probes: forward from the guess until full, back
-- until not, then bisect.
local function reset_at(s, l, x)
  local limit = 9007199254740991
  local guess = at + math.ceil((capacity - x) / rate)
  if not (guess < limit) then return guess end
  if x >= capacity then return at end
  local function full(ms)
    return math.min(capacity, s + math.max(0, ms - l) * rate) >= capacity
  end
  local lo, hi, step = at, math.max(guess, at + 1), 1
  while not full(hi) do
    if hi >= limit then return hi end
    lo = hi
    hi = hi + step
    step = step * 2
  end
  step = 1
  while hi - lo > 1 do
    local probe = math.max(lo + 1, hi - step)
    if not full(probe) then
      lo = probe
      break
    end
    hi = probe
    step = step * 2
  end
  while hi - lo > 1 do
    local mid = math.floor(lo + (hi - lo) / 2)
    if full(mid) then hi = mid else lo = mid end
  end
  return hi
end
local function units(x)
  return math.max(0, math.floor(x))
end

local cost = tk_peek and 1 or tk_cost
if tokens >= cost then
  if tk_peek then
    return {1, capacity, units(tokens), reset_at(stored, last, tokens), 0}
  end
  local left = tokens - cost
  redis.call('HSET', tk_key, 't', tk_fmt(left), 'l', tk_fmt(at))
  tk_pexpire(tk_key, window + (at - now), tk_slack)
  return {1, capacity, units(left), reset_at(left, at, left), 0}
end
return {0, capacity, units(tokens), reset_at(stored, last, tokens),
        (at - now) + math.ceil((cost - tokens) / rate)}
