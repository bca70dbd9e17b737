-- Repair step 1 (docs/fencing.md, "Repair"), on each master still anchored by its
-- current run: move it to the repair's fresh epoch and read its counter, atomically.
-- A write-back decided in the old epoch is refused here from now on (FENCEEPOCH).
-- KEYS[1] the fence domain's hash (fields c, e, r). ARGV[1] the new epoch.
-- Reply: the counter; error NOANCHOR, FENCESTALE (anchored by an earlier run, or INFO
-- refused so that cannot be told), ERR for an epoch that is not an integer in 1..2^53-1;
-- only the reply with the counter writes.
-- Model: tests/fencing_model.rs, fn barrier_lua (same branches, same order).
if not string.match(ARGV[1], '^[1-9][0-9]*$')          -- canonical digits: compared as text
    or tonumber(ARGV[1]) >= 9007199254740992 then       -- returned as an exact number
  return redis.error_reply('ERR fence epoch out of range')
end
local h = redis.call('hmget', KEYS[1], 'e', 'c', 'r')   -- epoch, counter, anchoring run
if not h[1] then                                        -- no anchor: a target, not a source
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'server')              -- this server run's id
local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') -- or false
if not run or h[3] ~= run then                          -- its counter may have rolled back
  return redis.error_reply('FENCESTALE fence anchor predates a restart')
end
redis.call('hset', KEYS[1], 'e', ARGV[1])               -- the barrier: old epoch ends here
return tonumber(h[2] or '0')                            -- the counter, read in the same step
