-- The resource's half (docs/fencing.md, "The resource's half"), for a resource kept in
-- Redis: write only if the token is at least the largest accepted, atomically. A holder
-- may write several times with its token; tokens of one resource are unique.
-- KEYS[1] the largest token accepted; KEYS[2] the data. ARGV[1] the token; ARGV[2] the data.
-- Reply: 1 written; 0 refused (a newer holder wrote first); ERR for a token that is not
-- an integer in 1..2^53. Model: tests/fencing_model.rs, Action::Write.
if not string.match(ARGV[1], '^[1-9][0-9]*$')           -- canonical digits only
    or #ARGV[1] > 16 or (#ARGV[1] == 16 and ARGV[1] > '9007199254740992') then -- as text: exact
  return redis.error_reply('ERR fence token out of range')
end
if tonumber(ARGV[1]) < tonumber(redis.call('get', KEYS[1]) or '0') then
  return 0                                              -- a newer holder already wrote
end
redis.call('set', KEYS[1], ARGV[1])                     -- the largest token accepted
redis.call('set', KEYS[2], ARGV[2])                     -- the protected write itself
return 1
