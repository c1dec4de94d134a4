-- Quota, calendar windows (docs/semantics.md, "Quota"): hash s (period
-- start ms), c (count); ARGV[5..10] limit, period (0 day, 1 week, 2 month,
-- 3 fixed), week_starts_on, offset_minutes, anchor_ms, period_ms. Civil
-- dates by days_from_civil / civil_from_days with floor division, as in C++.
local now = tk_now(ARGV[1])
local limit = tonumber(ARGV[5])
local period = tonumber(ARGV[6])
local week_starts_on = tonumber(ARGV[7])
local offset_ms = tonumber(ARGV[8]) * 60000
local anchor = tonumber(ARGV[9])
local period_ms = tonumber(ARGV[10])
local day_ms = 86400000

local function floor_mod(a, b)
  return a - b * tk_floor_div(a, b)
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = tk_floor_div(y, 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + (d - 1)
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function civil_from_days(days)
  local z = days + 719468
  local era = tk_floor_div(z, 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) +
                          math.floor(doe / 36524) -
                          math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end

-- The period [start, reset) containing `t`.
local function period_at(t)
  if period == 3 then
    local start = anchor + tk_floor_div(t - anchor, period_ms) * period_ms
    return start, start + period_ms
  end
  local today = tk_floor_div(t + offset_ms, day_ms)
  local first, next_day = today, today + 1
  if period == 1 then
    first = today - floor_mod(floor_mod(today + 4, 7) - week_starts_on, 7)
    next_day = first + 7
  elseif period == 2 then
    local y, m = civil_from_days(today)
    first = days_from_civil(y, m, 1)
    if m == 12 then
      next_day = days_from_civil(y + 1, 1, 1)
    else
      next_day = days_from_civil(y, m + 1, 1)
    end
  end
  return first * day_ms - offset_ms, next_day * day_ms - offset_ms
end

local start, reset = period_at(now)
local count = 0
local st = redis.call('HMGET', tk_key, 's', 'c')
if st[1] then
  local stored = tonumber(st[1])
  if stored == start then
    count = tonumber(st[2])
  elseif stored > start then
    -- The clock went back across a boundary: the newer period holds.
    start, reset = period_at(stored)
    count = tonumber(st[2])
  end
end

local function remaining(x)
  return math.max(0, math.floor(limit - x))
end

local cost = tk_peek and 1 or tk_cost
if count + cost <= limit then
  if tk_peek then return {1, limit, remaining(count), reset, 0} end
  redis.call('HSET', tk_key, 's', tk_int(start), 'c', tk_fmt(count + cost))
  tk_pexpire(tk_key, reset - now, tk_slack)
  return {1, limit, remaining(count + cost), reset, 0}
end
return {0, limit, remaining(count), reset, math.ceil(reset - now)}
