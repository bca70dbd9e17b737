-- Repair step 2 and initialisation (docs/fencing.md, "Repair", "Initialisation"): anchor
-- a master that has no anchor, or one anchored by an earlier server run (stale), with a
-- counter at least ARGV[1] in epoch ARGV[2], recording this run.
-- KEYS[1] the fence domain's hash (fields c, e, r). ARGV[1] the counter; ARGV[2] the epoch.
-- Reply: 1 anchored now; 0 already anchored by this run (nothing written); error
-- FENCESTALE if INFO is refused (the run cannot be recorded), ERR for a counter not in
-- 0..2^53 or an epoch not in 1..2^53-1.
-- Model: tests/fencing_model.rs, fn anchor_lua (same branches, same order).
if not (ARGV[1] == '0' or string.match(ARGV[1], '^[1-9][0-9]*$')) -- canonical: stored as sent
    or #ARGV[1] > 16 or (#ARGV[1] == 16 and ARGV[1] > '9007199254740992') then -- as text: exact
  return redis.error_reply('ERR fence counter out of range')
end
if not string.match(ARGV[2], '^[1-9][0-9]*$')           -- canonical: compared as text
    or tonumber(ARGV[2]) >= 9007199254740992 then
  return redis.error_reply('ERR fence epoch out of range')
end
local info = redis.pcall('info', 'server')              -- this server run's id
local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') -- or false
if not run then                                         -- could not be checked later
  return redis.error_reply('FENCESTALE cannot read run_id (INFO refused)')
end
local h = redis.call('hmget', KEYS[1], 'e', 'c', 'r')   -- epoch, counter, anchoring run
if h[1] and h[3] == run then return 0 end               -- valid: the barrier's business
local c = ARGV[1]                                       -- never lower a surviving counter
if h[1] and tonumber(h[2] or '0') > tonumber(c) then c = h[2] end
redis.call('hset', KEYS[1], 'c', c, 'e', ARGV[2], 'r', run) -- one key: lost together
return 1
