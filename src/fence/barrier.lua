-- Repair step 1 (docs/fencing.md, "Repair"), on each master still anchored by its
-- current run in its current data set: move it to the repair's fresh epoch and read
-- its counter, atomically. A write-back decided in the old epoch is refused here from
-- now on (FENCEEPOCH). An anchor in the format of an earlier version (no replication
-- id, no member) is upgraded: it records them now.
-- KEYS[1] the fence domain's hash (fields c, e, r, p, d, n, m). ARGV[1] the new epoch;
-- ARGV[2] the domain id; ARGV[3] the members; ARGV[4] this master's member, for an
-- anchor that has none (0 otherwise).
-- Reply: the counter; error NOANCHOR, FENCESTALE (anchored by an earlier run or in
-- another data set, a replica, or INFO refused so that cannot be told), ERR for an
-- argument out of range or an anchor of another domain id; only the counter writes.
-- Model: tests/fencing_model.rs, fn barrier_lua (same branches, same order).
local function id(x) return string.match(x, '^[1-9][0-9]*$') and tonumber(x) < 9007199254740992 end
if not id(ARGV[1]) or not id(ARGV[2]) or not id(ARGV[3])  -- canonical digits, exact numbers
    or not (ARGV[4] == '0' or id(ARGV[4]) and tonumber(ARGV[4]) <= tonumber(ARGV[3])) then
  return redis.error_reply('ERR fence epoch, domain id or member out of range')
end
local h = redis.call('hmget', KEYS[1], 'e', 'c', 'r', 'p', 'm', 'n', 'd')
if not h[1] then                                        -- no anchor: a target, not a source
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'server', 'replication') -- this run, this data set
local run, rid, master = false, false, false
if type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)')
  rid = string.match(info, 'master_replid:(%x+)')
  master = string.find(info, 'role:master', 1, true) ~= nil
end
if not run or h[3] ~= run or not rid or not master    -- its counter may have rolled back
    or (h[4] and h[4] ~= rid) then                      -- (no replid: the old format)
  return redis.error_reply('FENCESTALE fence anchor predates a restart or a change of data set')
end
if h[7] and (h[7] ~= ARGV[2] or h[6] ~= ARGV[3]) then   -- another fence_init's anchor
  return redis.error_reply('ERR fence anchor of another domain id')
end
if not h[5] then                                        -- the old format: gets a member
  if ARGV[4] == '0' then return redis.error_reply('ERR fence member missing') end
  redis.call('hset', KEYS[1], 'd', ARGV[2], 'n', ARGV[3], 'm', ARGV[4])
end
redis.call('hset', KEYS[1], 'e', ARGV[1], 'p', rid)      -- the barrier: old epoch ends here
return tonumber(h[2] or '0')                            -- the counter, read in the same step
