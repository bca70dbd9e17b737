-- A set's release on a cluster node (redlock-sync, issue 36): release.lua
-- with its notices by SPUBLISH, which a cluster's waiters subscribe to
-- (sharded channels; each key's channel shares its slot). Every key that
-- still holds the value is deleted. KEYS: the set's keys.
-- ARGV: mode ('p' for the plain reply, else the tag), value, then, if the
-- release notice is sent, the notice and one channel per key (an empty
-- channel: none for that key). Channels are arguments, never keys.
-- Reply: 1 if every key held the value (all deleted), 0 if some did not
-- (the others are deleted all the same). Tagged: 2 * tag + 1, or 2 * tag.
-- The publish is a pcall: a user who may not publish must not turn a done
-- release into an error after the keys are gone.
local yes, no = 1, 0
if ARGV[1] ~= 'p' then
  no = tonumber(ARGV[1]) * 2
  yes = no + 1
end
local all = true
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[2] then
    redis.call('del', KEYS[i])
    local channel = ARGV[3 + i]
    if channel and channel ~= '' then
      redis.pcall('spublish', channel, ARGV[3])
    end
  else
    all = false
  end
end
if all then
  return yes
end
return no
