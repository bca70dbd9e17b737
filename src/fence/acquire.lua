-- Round 1 of a fenced acquisition (docs/fencing.md, "Round 1"), on one master:
-- SET NX PX and, if it set the key, raise the fence domain's counter, atomically,
-- only while the master's data set is the one anchored (its replication id).
-- KEYS[1] the lock key; KEYS[2] the fence domain's hash (fields c, e, r, p, d, n, m).
-- ARGV[1] the lock value; ARGV[2] the TTL in ms; ARGV[3] the tag (tagged form only).
-- Reply: {2*tag + 1, counter, epoch, domain id, members, member} if set (the place the
-- anchor records, so that the hash that counts names its domain: docs/fencing.md,
-- "Members"), {2*tag} if held (tag 0 when untagged); error NOANCHOR (no anchor here),
-- FENCESTALE (another data set than the one anchored, a replica, or INFO refused),
-- FENCELIMIT (counter at 2^53); none writes.
-- Model: tests/fencing_model.rs, fn acquire_lua (same branches, same order).
local s = 0                                         -- 2 * tag: the untagged form's is 0
if ARGV[3] then s = tonumber(ARGV[3]) * 2 end       -- tags stay below 2^52: exact
local h = redis.call('hmget', KEYS[2], 'e', 'c', 'p', 'd', 'n', 'm') -- e, c, p, place
if not h[1] then                                    -- no epoch: never anchored, or lost
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'replication')     -- checked on every call: connections
if type(info) ~= 'string'                           -- outlive REPLICAOF, so a probe per
    or not string.find(info, 'role:master', 1, true) -- connection cannot see a fail-back
    or h[3] ~= string.match(info, 'master_replid:(%x+)') then -- new at every promotion
  return redis.error_reply('FENCESTALE fence anchor is not of this data set (replication id changed, a replica, or INFO refused)')
end
if tonumber(h[2] or '0') >= 9007199254740992 then   -- one more would pass 2^53
  return redis.error_reply('FENCELIMIT fence counter reached 2^53')
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {s}                                        -- held by another value: nothing written
end
local function n(x) return tonumber(x or '0') end    -- below 2^53: exact
return {s + 1, redis.call('hincrby', KEYS[2], 'c', 1), n(h[1]), n(h[4]), n(h[5]), n(h[6])}
