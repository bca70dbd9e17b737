-- A set's acquisition on one master (redlock-sync, issue 36): all of its
-- keys set, or none. KEYS: the set's keys (sorted, distinct).
-- ARGV: mode ('p' for the plain reply, else the tag), value, ttl in ms.
-- Reply: 1 if every key was absent and is now set with the value and the
-- TTL; 0 if any key exists (then the keys this run set are deleted again
-- before it ends: nobody sees them, and nothing is left). Tagged: 2 * tag +
-- 1, or 2 * tag. KEYS is walked with a loop, never unpack (Lua's C stack
-- limit would refuse a large set). Each key is set with NX at once, not
-- looked at first: a granted set (the case to be fast) costs K calls, not
-- 2K; SET NX on a key of another type does nothing, so it exists. The
-- rights used are SET and DEL, as the single lock's and the release's.
local yes, no = 1, 0
if ARGV[1] ~= 'p' then
  no = tonumber(ARGV[1]) * 2
  yes = no + 1
end
for i = 1, #KEYS do
  if not redis.call('set', KEYS[i], ARGV[2], 'NX', 'PX', ARGV[3]) then
    for j = 1, i - 1 do
      redis.call('del', KEYS[j])
    end
    return no
  end
end
return yes
