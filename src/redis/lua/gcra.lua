-- GCRA (docs/semantics.md, "GCRA"): string key holding tat; ARGV[5..7]
-- limit, period_ms, burst (0 = limit).
local now = tk_now(ARGV[1])
local limit = tonumber(ARGV[5])
local burst = tonumber(ARGV[7])
if burst == 0 then burst = limit end
local t = tonumber(ARGV[6]) / limit
local tau = t * burst

local tat = now
local stored = redis.call('GET', tk_key)
if stored then tat = math.max(tonumber(stored), now) end

local function remaining(x)
  return math.max(0, math.floor((tau - (x - now)) / t))
end

if tk_peek then
  local allow_at = tat + t - tau
  if now < allow_at then
    return {0, burst, remaining(tat), math.ceil(tat), math.ceil(allow_at - now)}
  end
  return {1, burst, remaining(tat), math.ceil(tat), 0}
end

local new_tat = tat + t * tk_cost
local allow_at = new_tat - tau
if now < allow_at then
  return {0, burst, remaining(tat), math.ceil(tat), math.ceil(allow_at - now)}
end
redis.call('SET', tk_key, tk_fmt(new_tat), 'PX',
           tk_int(math.max(1, math.ceil(new_tat - now)) + tk_slack))
return {1, burst, remaining(new_tat), math.ceil(new_tat), 0}
