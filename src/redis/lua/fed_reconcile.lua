-- Federation's reconcile (coordinator/federation_core.h): give a window's
-- leftover back once per (window, token); the leftover of any window but
-- the current one is forfeited. ARGV[1] now (0 = Redis clock),
-- ARGV[2] window_start, ARGV[3] leftover, ARGV[4] token, ARGV[5] limit,
-- ARGV[6] window_ms. Reply: the credits restored.
local now = tk_now(ARGV[1])
local window = tonumber(ARGV[6])
local fed, err = tk_fed_load(tk_key, now, window)
if not fed then return err end
local start = tonumber(ARGV[2])
if start ~= fed.start or fed.stored ~= start + window then return 0 end
local marker = 'rec_' .. tk_int(start)
if ARGV[4] ~= '' then marker = marker .. ':' .. ARGV[4] end
if redis.call('HSETNX', tk_key, marker, '1') == 0 then return 0 end
local after = math.min(tonumber(ARGV[5]), fed.budget + tonumber(ARGV[3]))
redis.call('HSET', tk_key, 'budget', tk_int(after))
return after - fed.budget
