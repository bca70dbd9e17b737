-- The fence domain's state on one master, asked once per connection before its
-- fenced replies count (docs/fencing.md, "Counter loss"), and by the repair.
-- KEYS[1] the fence domain's hash (fields c, e, r). No ARGV. Writes nothing.
-- Reply: {state, counter, epoch, maxmemory-policy}: state 0 no anchor, 1 anchored by
-- this server run, 2 anchored by an earlier run (restarted since: stale), 3 anchored
-- but INFO is refused (restarts cannot be told); counter and epoch 0 without anchor;
-- the policy '' when INFO is refused.
-- Model: tests/fencing_model.rs, fn valid_anchor and the `fresh` of acquire_lua's reply.
local h = redis.call('hmget', KEYS[1], 'e', 'c', 'r')  -- epoch, counter, anchoring run
local info = redis.pcall('info', 'server', 'memory')   -- an ACL may refuse INFO
local run, policy = nil, ''                            -- unknown until INFO answers
if type(info) == 'string' then                          -- refused: an error table instead
  run = string.match(info, 'run_id:(%x+)')              -- new at every server start
  policy = string.match(info, 'maxmemory_policy:([%w-]+)') or '' -- may evict the hash?
end
if not h[1] then return {0, 0, 0, policy} end           -- no anchor: never, or lost
local state = 1                                         -- anchored by this run
if not run then state = 3                               -- cannot tell
elseif h[3] ~= run then state = 2 end                   -- anchored before a restart
return {state, tonumber(h[2] or '0'), tonumber(h[1]), policy}
