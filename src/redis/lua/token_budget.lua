-- Token budget (docs/semantics.md, "Token budget"): hash s (served), w
-- (window start ms); ARGV[5..6] budget, window_ms. Debits ceil(cost)
-- tokens; the crossing debit counts in full.
local now = tk_now(ARGV[1])
local budget = tonumber(ARGV[5])
local window = tonumber(ARGV[6])

local served = 0
local start = nil
local st = redis.call('HMGET', tk_key, 's', 'w')
if st[1] and st[2] then
  served = tonumber(st[1])
  start = tonumber(st[2])
end
if start == nil or now >= start + window then
  served = 0
  start = math.floor(now / window) * window
end
local reset = start + window

if served >= budget then
  return {0, budget, 0, reset, math.max(0, math.ceil(reset - now))}
end
if tk_peek then return {1, budget, budget - served, reset, 0} end
served = served + math.ceil(tk_cost)
redis.call('HSET', tk_key, 's', tk_int(served), 'w', tk_int(start))
tk_pexpire(tk_key, reset - now, tk_slack)
return {1, budget, math.max(0, budget - served), reset, 0}
