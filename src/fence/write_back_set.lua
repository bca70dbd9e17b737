-- Round 2 of a fenced set's acquisition (docs/fencing.md, "Sets"), on one master:
-- raise the counter to the token, only while this master holds EVERY key of the set
-- with our value, in our epoch, in the data set anchored. write_back.lua's checks,
-- order and reply, with its one key's check made for each key: a set whose key of
-- one resource expired here must not raise the counter that resource's next holder
-- counts on (docs/fencing.md, "Sets": Lemma 1 per resource).
-- KEYS[1..K] the set's keys; KEYS[K+1] the fence domain's hash.
-- ARGV[1] the lock value; ARGV[2] the token; ARGV[3] the epoch decided in round 1;
-- ARGV[4] the tag (tagged form only).
-- Reply: 2*tag + 1 if the counter here is now at least the token, 2*tag if some key
-- is not ours; errors NOANCHOR, FENCESTALE, FENCEEPOCH, ERR as write_back.lua's;
-- only the first reply writes.
-- Model: tests/fencing_model.rs, fn write_back_set_lua (same branches, same order).
local s = 0                                         -- 2 * tag: the untagged form's is 0
if ARGV[4] then s = tonumber(ARGV[4]) * 2 end       -- tags stay below 2^52: exact
if not string.match(ARGV[2], '^[1-9][0-9]*$')       -- canonical digits only: stored as sent
    or #ARGV[2] > 16 or (#ARGV[2] == 16 and ARGV[2] > '9007199254740992') then
  return redis.error_reply('ERR fence token out of range')
end
local d = KEYS[#KEYS]                               -- the domain's hash is the last key
local h = redis.call('hmget', d, 'e', 'c', 'p')     -- epoch, counter, replid
if not h[1] then                                    -- the anchor is gone: state was lost
  return redis.error_reply('NOANCHOR fence domain has no anchor on this master')
end
local info = redis.pcall('info', 'replication')     -- rolled back since round 1?
if type(info) ~= 'string' or not string.find(info, 'role:master', 1, true)
    or h[3] ~= string.match(info, 'master_replid:(%x+)') then
  return redis.error_reply('FENCESTALE fence anchor is not of this data set (replication id changed, a replica, or INFO refused)')
end
for i = 1, #KEYS - 1 do                             -- every key, not the first only
  if redis.call('get', KEYS[i]) ~= ARGV[1] then     -- our tenure of it is over here
    return s
  end
end
if h[1] ~= ARGV[3] then                             -- an epoch change (repair) came between
  return redis.error_reply('FENCEEPOCH fence epoch changed since round 1')
end
if tonumber(h[2] or '0') < tonumber(ARGV[2]) then   -- set if greater: never lowers it
  redis.call('hset', d, 'c', ARGV[2])               -- canonical digits, checked above
end
return s + 1                                        -- the counter here is at least the token
