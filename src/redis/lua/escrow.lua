-- Regional escrow, federation's L2 (coordinator/escrow_core.h): one
-- region's balance of a key. Layout of the original: hash `balance`,
-- `expiresAt`, `source` (the granting window's start); the key lives as
-- long as its window (plus the slack).
-- ARGV[1] now (0 = Redis clock), ARGV[2] op: 't' take (ARGV[3] want),
-- 'r' refill (ARGV[3] granted, ARGV[4] window start, ARGV[5] window end),
-- 'x' release (ARGV[3] window start); ARGV[6] ttl slack.
-- Reply: take {granted, balance left, window start, window end, now};
-- refill the balance after; release the credits released.
local now = tk_now(ARGV[1])
local op = ARGV[2]
local st = redis.call('HMGET', tk_key, 'balance', 'expiresAt', 'source')
local balance, stop, source = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
if not stop then
  if redis.call('EXISTS', tk_key) == 1 then
    return redis.error_reply(
      'WRONGTYPE the key holds another layout; asked for escrow')
  end
  balance, stop, source = 0, 0, 0
end
local live = stop ~= 0 and now < stop

if op == 't' then
  if not live then return {0, 0, source, stop, now} end
  local granted = math.min(tonumber(ARGV[3]), balance)
  if granted > 0 then
    redis.call('HSET', tk_key, 'balance', tk_int(balance - granted))
  end
  return {granted, balance - granted, source, stop, now}
elseif op == 'r' then
  local granted = tonumber(ARGV[3])
  local ws, we = tonumber(ARGV[4]), tonumber(ARGV[5])
  if now >= we or (live and we < stop) then
    if live then return balance end
    return 0
  end
  if stop ~= we or source ~= ws then
    redis.call('DEL', tk_key)
    balance = granted
  else
    balance = balance + granted
  end
  redis.call('HSET', tk_key, 'balance', tk_int(balance), 'expiresAt',
             tk_int(we), 'source', tk_int(ws))
  tk_pexpire(tk_key, we - now, tonumber(ARGV[6]))
  return balance
else
  if not live or source ~= tonumber(ARGV[3]) then return 0 end
  redis.call('DEL', tk_key)
  return balance
end
