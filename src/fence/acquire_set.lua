-- Round 1 of a fenced set's acquisition (docs/fencing.md, "Sets"), on one master:
-- every key of the set SET NX PX, or none, and, if all were set, the fence domain's
-- counter raised ONCE, atomically, only while the master's data set is the one
-- anchored (its replication id). acquire.lua's checks, order and reply, over K keys.
-- KEYS[1..K] the set's keys (sorted, distinct); KEYS[K+1] the fence domain's hash.
-- ARGV[1] the lock value; ARGV[2] the TTL in ms; ARGV[3] the tag (tagged form only).
-- Reply: {2*tag + 1, counter, epoch, domain id, members, member} if set, {2*tag} if
-- any key exists (the keys this run set are deleted again before it ends: nothing
-- is left, and the counter does not move); errors NOANCHOR, FENCESTALE, FENCELIMIT
-- as acquire.lua's, none writes.
-- Model: tests/fencing_model.rs, fn acquire_set_lua (same branches, same order).
local s = 0                                         -- 2 * tag: the untagged form's is 0
if ARGV[3] then s = tonumber(ARGV[3]) * 2 end       -- tags stay below 2^52: exact
local d = KEYS[#KEYS]                               -- the domain's hash is the last key
local h = redis.call('hmget', d, 'e', 'c', 'p', 'd', 'n', 'm') -- e, c, p, place
if not h[1] then                                    -- no epoch: never anchored, or lost
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'replication')     -- checked on every call (acquire.lua)
if type(info) ~= 'string'
    or not string.find(info, 'role:master', 1, true)
    or h[3] ~= string.match(info, 'master_replid:(%x+)') then
  return redis.error_reply('FENCESTALE fence anchor is not of this data set (replication id changed, a replica, or INFO refused)')
end
if tonumber(h[2] or '0') >= 9007199254740992 then   -- one more would pass 2^53
  return redis.error_reply('FENCELIMIT fence counter reached 2^53')
end
for i = 1, #KEYS - 1 do                             -- a loop, never unpack (large sets)
  if not redis.call('set', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    for j = 1, i - 1 do
      redis.call('del', KEYS[j])                    -- ours, set by this run
    end
    return {s}                                      -- held: nothing left, no count
  end
end
local function n(x) return tonumber(x or '0') end    -- below 2^53: exact
return {s + 1, redis.call('hincrby', d, 'c', 1), n(h[1]), n(h[4]), n(h[5]), n(h[6])}
