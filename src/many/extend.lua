-- A set's extension on one master (redlock-sync, issue 36): every key's
-- TTL set anew, or none. KEYS: the set's keys.
-- ARGV: mode ('p' for the plain reply, else the tag), value, ttl in ms,
-- repair ('1': an absent key is set with the value, as for a master the
-- acquisition left out; '0': an absent key refuses).
-- Reply: 1 if every key now holds the value with the new TTL; 0 if any
-- key holds another value (or, without repair, is absent): nothing is
-- written then. Tagged: 2 * tag + 1, or 2 * tag.
local yes, no = 1, 0
if ARGV[1] ~= 'p' then
  no = tonumber(ARGV[1]) * 2
  yes = no + 1
end
for i = 1, #KEYS do
  local held = redis.call('get', KEYS[i])
  if held ~= ARGV[2] and (held or ARGV[4] ~= '1') then
    return no
  end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[2], 'PX', ARGV[3])
end
return yes
