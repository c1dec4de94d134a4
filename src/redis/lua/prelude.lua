-- ThrottleKit: helpers prepended to every script (src/redis/CMakeLists.txt
-- embeds prelude.lua + <script>.lua as one script). Arithmetic is IEEE
-- double in the order of docs/semantics.md, as in the C++ strategies.
--
-- Every check script takes KEYS[1] = the key and
--   ARGV[1] now (epoch ms; 0 = the Redis clock), ARGV[2] cost,
--   ARGV[3] mode ('c' check, 'p' peek), ARGV[4] ttl slack ms,
--   ARGV[5..] the strategy's options,
-- and replies {allowed 0/1, limit, remaining, reset_at, retry_after}.

-- `now`, reading the Redis clock for the sentinel 0.
local function tk_now(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- State and score text: %.17g round-trips every double exactly.
local function tk_fmt(x)
  return string.format('%.17g', x)
end

-- An integer argument (never Lua's default 14-digit number format).
local function tk_int(x)
  return string.format('%d', x)
end

-- floor(a / b) for integers a and b > 0 held exactly in doubles.
local function tk_floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- Physical TTL: at least 1 ms, plus the configured slack.
local function tk_pexpire(key, ms, slack)
  redis.call('PEXPIRE', key, tk_int(math.max(1, ms) + slack))
end

-- Federation (coordinator/federation_core.h): the key's budget left and
-- window end (nil for a cold key) and the current window's start at `now`
-- (the stored window when the clock is behind it); nil and an error reply
-- for a key of another layout.
local function tk_fed_load(key, now, window)
  local st = redis.call('HMGET', key, 'budget', 'expiresAt')
  local stored = st[2] and tonumber(st[2])
  if not stored and redis.call('EXISTS', key) == 1 then
    return nil, redis.error_reply(
      'WRONGTYPE the key holds another layout; asked for federation')
  end
  local start = tk_floor_div(now, window) * window
  if stored and stored - window > start then start = stored - window end
  return {budget = tonumber(st[1]), stored = stored, start = start}
end

local tk_key = KEYS[1]
local tk_cost = tonumber(ARGV[2])
local tk_peek = ARGV[3] == 'p'
local tk_slack = tonumber(ARGV[4])
