-- A set's acquisition on one master (redlock-sync, issue 36): all of its
-- keys set, or none. KEYS: the set's keys (sorted, distinct).
-- ARGV: mode ('p' for the plain reply, else the tag), value, ttl in ms.
-- Reply: 1 if every key was absent and is now set with the value and the
-- TTL; 0 if any key exists (nothing is written). Tagged: 2 * tag + 1, or
-- 2 * tag. KEYS is walked with a loop, never unpack (Lua's C stack limit
-- would refuse a large set). A key is looked at with GET, a right the
-- release needs anyway (EXISTS would be one more for an ACL user to
-- grant); a key of another type answers GET with an error, which pcall
-- turns into a value: it exists.
local yes, no = 1, 0
if ARGV[1] ~= 'p' then
  no = tonumber(ARGV[1]) * 2
  yes = no + 1
end
for i = 1, #KEYS do
  if redis.pcall('get', KEYS[i]) then
    return no
  end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[2], 'PX', ARGV[3])
end
return yes
