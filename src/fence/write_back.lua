-- Round 2 of a fenced acquisition (docs/fencing.md, "Round 2"), on one master:
-- raise the counter to the token, only while this master holds our key, in our epoch,
-- in the data set anchored (its replication id).
-- KEYS[1] the lock key; KEYS[2] the fence domain's hash (fields c, e, r, p, d, n, m).
-- ARGV[1] the lock value; ARGV[2] the token; ARGV[3] the epoch decided in round 1;
-- ARGV[4] the tag (tagged form only).
-- Reply: 2*tag + 1 if the counter here is now at least the token, 2*tag if the key is
-- not ours (tag 0 when untagged); error NOANCHOR, FENCESTALE (as in acquire.lua),
-- FENCEEPOCH (the epoch changed), or ERR for a token that is not an integer in
-- 1..2^53 (compared as text: 2^53 + 1 would round to 2^53 as a Lua number); only the
-- first reply writes.
-- Model: tests/fencing_model.rs, fn write_back_lua (same branches, same order).
local s = 0                                         -- 2 * tag: the untagged form's is 0
if ARGV[4] then s = tonumber(ARGV[4]) * 2 end       -- tags stay below 2^52: exact
if not string.match(ARGV[2], '^[1-9][0-9]*$')       -- canonical digits only: stored as sent
    or #ARGV[2] > 16 or (#ARGV[2] == 16 and ARGV[2] > '9007199254740992') then
  return redis.error_reply('ERR fence token out of range')
end
local h = redis.call('hmget', KEYS[2], 'e', 'c', 'p') -- epoch, counter, replid
if not h[1] then                                    -- the anchor is gone: state was lost
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'replication')     -- rolled back since round 1?
if type(info) ~= 'string' or not string.find(info, 'role:master', 1, true)
    or h[3] ~= string.match(info, 'master_replid:(%x+)') then
  return redis.error_reply('FENCESTALE fence anchor is not of this data set (replication id changed, a replica, or INFO refused)')
end
if redis.call('get', KEYS[1]) ~= ARGV[1] then       -- our tenure here is over (or never was)
  return s
end
if h[1] ~= ARGV[3] then                             -- an epoch change (repair) came between
  return redis.error_reply('FENCEEPOCH fence epoch changed since round 1')
end
if tonumber(h[2] or '0') < tonumber(ARGV[2]) then   -- set if greater: never lowers it
  redis.call('hset', KEYS[2], 'c', ARGV[2])         -- canonical digits, checked above
end
return s + 1                                        -- the counter here is at least the token
