-- Repair step 2 and initialisation (docs/fencing.md, "Repair", "Initialisation"): anchor
-- a master that has no anchor, or one that is not valid (anchored by an earlier server
-- run or in another data set), with a counter at least ARGV[1] in epoch ARGV[2],
-- recording this run and this data set (its replication id), and its place in the
-- domain: the domain id, how many members, and which one it is.
-- KEYS[1] the fence domain's hash (fields c, e, r, p, d, n, m). ARGV[1] the counter;
-- ARGV[2] the epoch; ARGV[3] the domain id; ARGV[4] the members; ARGV[5] its member.
-- Reply: 1 anchored now; 0 already anchored by this run in this data set (nothing
-- written); error FENCESTALE if INFO is refused (the run cannot be recorded) or the
-- server is not a master, ERR for a counter not in 0..2^53 or another argument out of
-- range.
-- Model: tests/fencing_model.rs, fn anchor_lua (same branches, same order).
if not (ARGV[1] == '0' or string.match(ARGV[1], '^[1-9][0-9]*$')) -- canonical: stored as sent
    or #ARGV[1] > 16 or (#ARGV[1] == 16 and ARGV[1] > '9007199254740992') then -- as text: exact
  return redis.error_reply('ERR fence counter out of range')
end
local function id(x) return string.match(x, '^[1-9][0-9]*$') and tonumber(x) < 9007199254740992 end
if not id(ARGV[2]) or not id(ARGV[3]) or not id(ARGV[4]) -- canonical: compared as text
    or not id(ARGV[5]) or tonumber(ARGV[5]) > tonumber(ARGV[4]) then
  return redis.error_reply('ERR fence epoch, domain id or member out of range')
end
local info = redis.pcall('info', 'server', 'replication') -- this server run, this data set
local run, rid = false, false
if type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)')
  rid = string.match(info, 'master_replid:(%x+)')
end
if not run or not rid then                              -- could not be checked later
  return redis.error_reply('FENCESTALE cannot read run_id (INFO refused)')
end
if not string.find(info, 'role:master', 1, true) then   -- its writes are not its own
  return redis.error_reply('FENCESTALE this server is a replica')
end
local h = redis.call('hmget', KEYS[1], 'e', 'c', 'r', 'p') -- epoch, counter, run, replid
if h[1] and h[3] == run and h[4] == rid then return 0 end -- valid: the barrier's business
local c = ARGV[1]                                       -- never lower a surviving counter
if h[1] and tonumber(h[2] or '0') > tonumber(c) then c = h[2] end
redis.call('hset', KEYS[1], 'c', c, 'e', ARGV[2], 'r', run, 'p', rid, -- one key: lost
  'd', ARGV[3], 'n', ARGV[4], 'm', ARGV[5])             -- together
return 1
