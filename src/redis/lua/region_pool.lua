-- The federated fair escrow's region pool (federation/redis_region_pool.h),
-- after the prelude (tk_now, tk_floor_div, tk_int, tk_pexpire, tk_key =
-- KEYS[1]). ARGV follows the prelude's order where it can: [1] now (0 = the
-- Redis clock), [2] want, [3] region, [4] ttl slack, then [5] limit, [6]
-- window ms, [7] weight, [8] the most regions a window holds.
-- Region pool (federation/region_pool.h): hash `ws` (window start),
-- `w:<region>` (weight), `g:<region>` (grant); TTL to the window end plus
-- the slack. Reply {granted, previous, fair share, total weight, ws}.
local now = tk_now(ARGV[1])
local want, region = tonumber(ARGV[2]), ARGV[3]
local limit, window = tonumber(ARGV[5]), tonumber(ARGV[6])
local weight, most = tonumber(ARGV[7]), tonumber(ARGV[8])

-- floor(x * y / d), exactly, for integers 0 <= x <= d <= 2^42 and
-- 0 <= y < 2^53: y = a d + b, then floor(x b / d) by binary long division,
-- keeping q d + r = (bits of x so far) * b with r < d (all below 2^44).
local function mul_div(x, y, d)
  local a = tk_floor_div(y, d)
  local b = y - a * d
  local q, r, rest, bit = 0, 0, x, 2 ^ 42
  while bit >= 1 do
    q, r = q * 2, r * 2
    if r >= d then q, r = q + 1, r - d end
    if rest >= bit then
      rest = rest - bit
      r = r + b
      if r >= d then q, r = q + 1, r - d end
    end
    bit = bit / 2
  end
  return x * a + q
end

local flat = redis.call('HGETALL', tk_key)
local ws, weights, grants, n = nil, {}, {}, 0
for i = 1, #flat, 2 do
  local f, v = flat[i], flat[i + 1]
  local kind = string.sub(f, 1, 2)
  if f == 'ws' then
    ws = tonumber(v)
  elseif kind == 'w:' then
    weights[string.sub(f, 3)] = tonumber(v)
    n = n + 1
  elseif kind == 'g:' then
    grants[string.sub(f, 3)] = tonumber(v)
  else
    ws = nil
    break
  end
end
if #flat > 0 and not ws then
  return redis.error_reply(
    'WRONGTYPE the key holds another layout; asked for a region pool')
end
local rolls = (not ws) or now >= ws + window
if not rolls and not weights[region] and n >= most then
  return redis.error_reply('TKFULL the window already holds ' ..
    tk_int(most) .. ' regions; a new region is refused')
end
if rolls then
  if #flat > 0 then redis.call('DEL', tk_key) end
  ws = tk_floor_div(now, window) * window
  weights, grants = {}, {}
end
weights[region] = weight
local previous = grants[region] or 0
local total = 0
for _, w in pairs(weights) do total = total + w end
local granted = previous
if want > previous then
  -- ceiling = max(g_r, L - sum_{j != r} max(g_j, fair_j)), term by term.
  local ceiling = limit
  for name, w in pairs(weights) do
    if name ~= region then
      ceiling = ceiling - math.max(grants[name] or 0, mul_div(w, limit, total))
    end
  end
  ceiling = math.max(previous, ceiling)
  granted = math.max(previous, math.max(0, math.min(want, ceiling)))
end
redis.call('HSET', tk_key, 'ws', tk_int(ws), 'w:' .. region, tk_int(weight),
           'g:' .. region, tk_int(granted))
tk_pexpire(tk_key, ws + window - now, tk_slack)
return {granted, previous, mul_div(weight, limit, total), total, ws}
