-- The fence domain's state on one master, asked once per connection before its
-- fenced replies count (docs/fencing.md, "Counter loss"), and by the repair.
-- KEYS[1] the fence domain's hash (fields c, e, r, p, d, n, m), or no key: a cluster
-- node's handshake, which cannot name a hash of every slot it serves, learns only the
-- node's (INFO and its policy: state 1, or 3 if INFO is refused; the scripts check the
-- slot's hash on every call). ARGV[1] '1' for the operator's calls (fence_init, the
-- repair), which ask every hash and need no policy (each connection's own probe reads
-- it): an absent hash answers at once, and INFO is asked without its memory section
-- (the costliest part; policy ''). Writes nothing.
-- Reply: {state, counter, epoch, maxmemory-policy, member, members, domain id}:
-- state 0 no anchor; 1 anchored by this server run in its current data set (the
-- replication id it recorded) and a master; 2 anchored by an earlier run (restarted
-- since: stale); 3 anchored, but INFO is refused (restarts cannot be told); 4 anchored
-- by this run, but its data set changed since (a new replication id: promoted, made a
-- replica and promoted back) or it is a replica now: stale; 5 anchored by this run by
-- a version of redlock-sync that recorded no replication id: to be repaired.
-- Counter, epoch, member (this master's place, 1..members), members (how many
-- masters the domain was initialised on) and domain id (drawn by fence_init) are 0
-- where not recorded; the policy '' when INFO is refused.
-- Model: tests/fencing_model.rs, fn valid_anchor and the `fresh` of acquire_lua's reply.
local h = KEYS[1] and redis.call('hmget', KEYS[1], 'e', 'c', 'r', 'p', 'm', 'n', 'd') or {}
local lean = ARGV[1] == '1'                             -- the operator's: no policy
if lean and not h[1] then return {0, 0, 0, '', 0, 0, 0} end -- no anchor: nothing to read
local info                                              -- an ACL may refuse INFO
if lean then info = redis.pcall('info', 'server', 'replication')
else info = redis.pcall('info', 'server', 'replication', 'memory') end
local run, id, master, policy = nil, nil, false, ''    -- unknown until INFO answers
if type(info) == 'string' then                          -- refused: an error table instead
  run = string.match(info, 'run_id:(%x+)')              -- new at every server start
  id = string.match(info, 'master_replid:(%x+)')        -- new at every promotion
  master = string.find(info, 'role:master', 1, true) ~= nil
  policy = string.match(info, 'maxmemory_policy:([%w-]+)') or '' -- may evict the hash?
end
if not KEYS[1] then return {run and 1 or 3, 0, 0, policy, 0, 0, 0} end -- the node only
if not h[1] then return {0, 0, 0, policy, 0, 0, 0} end -- no anchor: never, or lost
local state = 1                                         -- anchored by this run, this data
if not run then state = 3                               -- cannot tell
elseif h[3] ~= run then state = 2                       -- anchored before a restart
elseif not h[4] then state = 5                          -- the old format: no replid
elseif h[4] ~= id or not master then state = 4 end      -- rolled back, or a replica
local function n(x) return tonumber(x or '0') end
return {state, n(h[2]), n(h[1]), policy, n(h[5]), n(h[6]), n(h[7])}
