-- Heartbeat (coordinator/heartbeat_core.h): one distributed-concurrency
-- coordinator step for one node's beat over the key's node table. A
-- transcription of `heartbeat_step`, held equal to it step for step by
-- tests/redis/redis_heartbeat_conformance_test.cc: change both together.
--
-- Layout: a hash, one field per node, `n:<node id>` ->
--   "<L_local> <inflight> <expiresAt> <share> <seq> <demand> <generation>
--    <acked share> <max unacked share>"
-- (docs/redis.md). A hash with any other field is another layout.
--
-- ARGV[1] now (epoch ms; 0 = the Redis clock), ARGV[2] node id,
-- ARGV[3] seq, ARGV[4] applied_gen, ARGV[5] inflight, ARGV[6] local limit,
-- ARGV[7] demand, ARGV[8] lease_ttl_ms, ARGV[9] aggregate ('m' min, 'l'
-- lower median), ARGV[10] handoff ('1'/'0'), ARGV[11] demand-proportional
-- ('1'/'0'), ARGV[12] ttl slack ms (validated by the caller).
-- Reply {share, generation, global_limit, live_nodes, lease_expires_at,
-- stale 0/1, now}.
local now = tk_now(ARGV[1])
local self_id = ARGV[2]
local seq = tonumber(ARGV[3])
local applied = tonumber(ARGV[4])
local ttl = tonumber(ARGV[8])
local handoff = ARGV[10] == '1'
local slack = tonumber(ARGV[12])

-- Byte-wise order, as std::string's (Lua's `<` follows the locale).
local function id_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function row_text(r)
  return table.concat({tk_int(r.local_limit), tk_int(r.inflight),
    tk_int(r.expires), tk_int(r.share), tk_int(r.seq), tk_int(r.demand),
    tk_int(r.generation), tk_int(r.acked), tk_int(r.max_unacked)}, ' ')
end

-- Load the table.
local rows = {}
local me = nil
local raw = redis.call('HGETALL', tk_key)
for i = 1, #raw, 2 do
  local field = raw[i]
  if string.sub(field, 1, 2) ~= 'n:' then
    return redis.error_reply(
      'WRONGTYPE the key holds another layout; asked for heartbeat')
  end
  local v = {}
  for x in string.gmatch(raw[i + 1], '%S+') do v[#v + 1] = tonumber(x) end
  local r = {id = string.sub(field, 3), local_limit = v[1], inflight = v[2],
    expires = v[3], share = v[4], seq = v[5], demand = v[6],
    generation = v[7], acked = v[8], max_unacked = v[9]}
  rows[#rows + 1] = r
  if r.id == self_id then me = r end
end

-- The table expires with its last lease (plus the slack), as the memory
-- coordinator's entry does: a beat after that starts a fresh table.
local last_stored = nil
for _, r in ipairs(rows) do
  if last_stored == nil or r.expires > last_stored then
    last_stored = r.expires
  end
end
if last_stored ~= nil and last_stored <= now - slack then
  redis.call('DEL', tk_key)
  rows = {}
  me = nil
end

-- 1. Upsert self.
local fresh = true
if me == nil then
  me = {id = self_id, local_limit = 0, inflight = 0, expires = 0, share = 0,
    seq = 0, demand = 0, generation = 0, acked = 0, max_unacked = 0}
  rows[#rows + 1] = me
elseif me.expires <= now then
  -- Its lease lapsed: the node re-joins as new; only its generation stays.
  me.local_limit, me.inflight, me.expires, me.share = 0, 0, 0, 0
  me.seq, me.demand, me.acked, me.max_unacked = 0, 0, 0, 0
elseif seq <= me.seq then
  return {me.share, me.generation, 0, 0, me.expires, 1, now}
else
  fresh = false
end
me.generation = math.max(me.generation, applied)
me.seq = seq
me.local_limit = tonumber(ARGV[6])
me.inflight = tonumber(ARGV[5])
me.demand = tonumber(ARGV[7])
me.expires = now + ttl
if applied >= me.generation then
  me.acked = me.share
  me.max_unacked = 0
end

-- 2. Evict expired peers (self was just renewed); ids in byte order.
local live = {}
for _, r in ipairs(rows) do
  if r == me or r.expires > now then
    live[#live + 1] = r
  else
    redis.call('HDEL', tk_key, 'n:' .. r.id)
  end
end
table.sort(live, function(a, b) return id_less(a.id, b.id) end)
local n = #live
local self = 0
for i, r in ipairs(live) do
  if r == me then self = i end
end

-- 3. The global limit: min, or the lower median (element floor((n-1)/2)
-- of the ascending locals, 0-based).
local locals = {}
for i, r in ipairs(live) do locals[i] = r.local_limit end
table.sort(locals)
local global
if ARGV[9] == 'm' then
  global = locals[1]
else
  global = locals[tk_floor_div(n - 1, 2) + 1]
end

-- 4. The target.
local target
if ARGV[11] == '1' then
  -- water_fill(global, {weight 1, demand max(1, demand)}) of
  -- core/water_filling.h with unit weights, in its arithmetic.
  local want = {}
  local total = 0
  for i, r in ipairs(live) do
    want[i] = math.max(1, r.demand)
    total = total + want[i]
  end
  local a = {}
  if total <= global then
    for i = 1, n do a[i] = want[i] end
  else
    local order = {}
    for i = 1, n do order[i] = i end
    table.sort(order, function(x, y)
      return want[x] < want[y] or (want[x] == want[y] and x < y)
    end)
    local suffix_w, suffix_d = {}, {}
    suffix_w[n + 1], suffix_d[n + 1] = 0, 0
    for k = n, 1, -1 do
      suffix_w[k] = suffix_w[k + 1] + 1
      suffix_d[k] = suffix_d[k + 1] + want[order[k]]
    end
    for i = 1, n do a[i] = 0 end
    local left = global
    local k = 1
    local done = false
    while k <= n do
      if suffix_d[k] <= left then
        for q = k, n do a[order[q]] = want[order[q]] end
        done = true
        break
      end
      local d = want[order[k]]
      if d > left or d * (suffix_w[k] / 1) > left then break end
      a[order[k]] = d
      left = left - d
      k = k + 1
    end
    if not done then
      local pool = left
      local fractions = {}
      for q = k, n do
        local i = order[q]
        local exact = pool * math.min(1.0, 1 / suffix_w[k])
        local capped = math.min(exact, want[i], left)
        a[i] = math.floor(capped)
        left = left - a[i]
        fractions[#fractions + 1] = {exact - a[i], i}
      end
      table.sort(fractions, function(x, y)
        return x[1] > y[1] or (x[1] == y[1] and x[2] < y[2])
      end)
      while left > 0 do
        local open = 0
        for _, f in ipairs(fractions) do
          if a[f[2]] < want[f[2]] then open = open + 1 end
        end
        if open == 0 then break end
        local each = math.max(1, tk_floor_div(left, open))
        for _, f in ipairs(fractions) do
          if left == 0 then break end
          local i = f[2]
          local give = math.min(each, want[i] - a[i], left)
          a[i] = a[i] + give
          left = left - give
        end
      end
    end
  end
  target = a[self]
else
  target = tk_floor_div(global, n)
  if self - 1 < global - target * n then target = target + 1 end
end

-- 5. The occupancy cap.
local reserved = 0
for i, r in ipairs(live) do
  if i ~= self then
    if handoff then
      reserved = reserved + math.max(r.acked, r.max_unacked, r.inflight)
    else
      reserved = reserved + math.max(r.share, r.inflight)
    end
  end
end
local share = math.max(0, math.min(target, global - reserved))

-- 6. A changed share is a new generation, and so is a fresh row's first
-- grant (the node may hold a share from a table since lost).
if fresh or share ~= me.share then
  me.share = share
  me.generation = me.generation + 1
  if me.generation > applied then
    me.max_unacked = math.max(me.max_unacked, share)
  end
end

redis.call('HSET', tk_key, 'n:' .. self_id, row_text(me))
local last = now
for _, r in ipairs(live) do last = math.max(last, r.expires) end
tk_pexpire(tk_key, last - now, slack)
return {me.share, me.generation, global, n, me.expires, 0, now}
