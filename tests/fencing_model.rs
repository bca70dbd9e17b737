//! A model check of the fencing protocol of docs/fencing.md, with the
//! `stateright` model checker (breadth-first, every reachable state).
//!
//! The model: 3 masters (quorum 2) and 2 or 3 clients, each making one
//! fenced acquisition of the same resource (or, in the runs of fenced
//! sets, docs/fencing.md section 18, one client of two resources at once
//! beside single locks of them, every invariant then per resource).
//! Every step is one of
//!
//! - a client sends round 1 to every master (one write per connection, as
//!   the library's fan-out does; a master that never runs it is one whose
//!   request is still in flight, so "held back" and "lagging" are covered);
//! - a master runs the oldest request of one connection, atomically, by the
//!   Rust twin of its Lua script (`acquire_lua` is `src/fence/acquire.lua`,
//!   and so on: same branches in the same order, each naming the other);
//! - a client decides round 1 from any subset of the replies that have
//!   arrived (a reply still on the wire when the round is decided is a
//!   subset without it), then round 2 from the write-backs that arrived;
//! - a client gives up (a timeout), its validity ends (it released, or
//!   paused past it), or it writes at the referee, a resource that accepts
//!   a token at least the largest it accepted (once final, at any later
//!   time: a paused holder's late write). A release is not a step of its
//!   own: it deletes only the holder's key, as expiry does, and may come
//!   late or be lost, so it is an expiry allowed once the holder's validity
//!   ended;
//! - faults: a key expires; a master restarts empty, or with its state
//!   rolled back to any earlier counter (with or without the key; a clean
//!   restart is a rollback by zero), dropping the requests in flight to it;
//!   a master *fails back*: its data set is replaced by an older copy (the
//!   counter rolled back) while its process, and so its run id and the
//!   connections to it, live on, as when it is made a replica of a server
//!   that copied it earlier and then promoted again (only its replication
//!   history changes); a client pauses past its validity; on a cluster
//!   voter, the slot's hash *moves* to another node (`MIGRATE` with its
//!   slot: the counter, the epoch and the lock key go along, and requests
//!   in flight follow the slot, redirected; the node it lands on has a run
//!   and a replication history of its own), and with more than one move
//!   allowed, back.
//! - the operator's repair (barrier on each master, then anchor), whose
//!   steps interleave with everything else.
//!
//! Time is abstracted. With [`Timing::Broken`] a key expires at any moment
//! and clients ignore their validity; with [`Timing::Honoured`] Redlock's
//! assumptions hold: a key expires only once its holder's validity is over
//! (it paused past it, or finished), a holder decides only within its
//! validity, and a master that lost keys in a restart is re-admitted only
//! once their holders' validity is over (Redlock's delayed restart).
//!
//! The invariants, checked on every state: final tokens are unique; they
//! follow the holders' tenures (the order their keys were set on each
//! master both hold); a token final before an acquisition started is below
//! its token; the referee never accepts a holder older than one it
//! accepted; and, claimed only with timing honoured, tokens become final in
//! increasing order (a holder whose lock passed to a newer one never gets a
//! final token after the newer one did). The broken variants of the
//! protocol are checked too: the checker must find their counterexamples.
//!
//! Run with `cargo test --release --test fencing_model -- --nocapture` to
//! see the states explored and the counterexamples.

use stateright::{Checker, HasDiscoveries, Model, Property};
use std::collections::BTreeSet;
use std::time::Instant;

const MASTERS: usize = 3;
/// The resources: every client takes resource 0 alone, but in the runs of
/// fenced sets (docs/fencing.md, "Sets"), where one client takes both.
const RESOURCES: usize = 2;
const QUORUM: u32 = 2;
/// The epoch every master is anchored with at the start.
const FIRST_EPOCH: u8 = 1;
/// The fresh epoch the one repair moves to.
const REPAIR_EPOCH: u8 = 2;

/// Which protocol the clients and masters run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Variant {
    /// docs/fencing.md as written.
    Protocol,
    /// "Max over the granting quorum": the token is final after round 1,
    /// with no write-back (next-capabilities.md, Claim A).
    NoWriteBack,
    /// The write-back raises the counter without checking that the master
    /// still holds the writer's key.
    NoKeyCheck,
    /// A set's write-back checks only its first key (the lowest resource),
    /// not every key (`src/fence/write_back_set.lua` checks every one).
    FirstKeyOnly,
    /// The repair reads the counters of a quorum without moving them to a
    /// new epoch (a plain read instead of the barrier).
    NoBarrier,
    /// The anchor records the server run only, not the replication
    /// history, and no script compares it: a fail-back goes unnoticed
    /// (the protocol before issue 31).
    NoReplicationCheck,
    /// docs/fencing.md on a cluster voter (issue 32): a cluster node's
    /// connection probes no hash (it serves many slots, each with its
    /// own), so a grant counts without the probe's check of the run that
    /// anchored it; round 1's data-set check on every call is all there
    /// is. Not a broken variant: every invariant must hold.
    NoRunProbe,
}

/// Whether Redlock's timing assumptions hold (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Timing {
    Honoured,
    Broken,
}

/// One configuration of the model.
#[derive(Clone, Debug)]
struct Fencing {
    clients: u8,
    timing: Timing,
    variant: Variant,
    /// How many master restarts may happen in a run.
    restarts: u8,
    /// Whether a restart may keep (or roll back) the master's state, or
    /// only lose it all.
    restarts_with_state: bool,
    /// How many fail-backs (a rollback that keeps the process) may happen
    /// in a run.
    failbacks: u8,
    /// How many times a master's hash may move to the other node and
    /// back (a cluster voter's slot, resharded).
    migrations: u8,
    /// Whether the operator repairs (after a restart, a fail-back or a
    /// move).
    repair: bool,
    /// The counter's limit (2^53 in the scripts; small here so that the
    /// branch is reachable).
    limit: u8,
    /// Whether final holders write at the referee.
    referee: bool,
    /// The counters to start from: all equal, or also one master ahead by
    /// one (as failed acquisitions that won only that master leave them).
    uneven_start: bool,
    /// The resources each client takes (bit sets): empty for resource 0
    /// alone, each client; `[0b11, 0b10]` for a set of both and a single
    /// lock of resource 1.
    holds: Vec<u8>,
}

/// The fence domain's hash on a master (fields `c`, `e`, `r`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Anchor {
    /// `c`: the counter.
    counter: u8,
    /// `e`: the epoch.
    epoch: u8,
    /// `r`: the server run (run_id) that anchored it.
    run: u8,
    /// `p`: the replication history (master_replid) it was anchored in.
    history: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Master {
    /// The server run: a new run_id at every restart.
    run: u8,
    /// The replication history: a new master_replid at every restart and
    /// every fail-back (and whenever a server is promoted).
    history: u8,
    anchor: Option<Anchor>,
    /// The lock keys, one per resource: which acquisition's value each
    /// holds.
    keys: [Option<u8>; RESOURCES],
    /// A cluster voter's slot: the run and the replication history of the
    /// other node the slot may move to (the one it moved from, once it
    /// has moved).
    elsewhere: (u8, u8),
}

/// A reply to round 1, as the client sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Round1 {
    /// Set: the counter after the increment, the epoch, and whether the
    /// connection's probe found the anchor made by this server run (a
    /// stale master's replies do not count).
    Granted {
        value: u8,
        epoch: u8,
        fresh: bool,
    },
    Held,
    /// NOANCHOR or FENCELIMIT.
    Refused,
}

/// A reply to the write-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Round2 {
    /// The counter is at least the token here.
    Counted,
    NotOurs,
    /// NOANCHOR or FENCEEPOCH.
    Refused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Request {
    Acquire,
    WriteBack { token: u8, epoch: u8 },
    Barrier { epoch: u8 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Phase {
    Idle,
    Round1,
    Round2,
    Final,
    Failed,
}

/// A client's acquisition. What only a phase needs is cleared when it
/// ends (late replies are dropped), so that states differing only in
/// forgotten details are one state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Client {
    /// The resources it takes (a bit set): two for a set.
    holds: u8,
    phase: Phase,
    /// Within its validity (only meaningful with timing honoured).
    valid: bool,
    /// Round 1's replies that arrived (round 1 only).
    round1: [Option<Round1>; MASTERS],
    token: u8,
    /// The epoch decided in round 1 (round 2 only).
    epoch: u8,
    /// The masters counted from round 1 (granted the token itself, in the
    /// decided epoch), as a bit set (round 2 only).
    counted: u8,
    /// The write-backs' replies that arrived (round 2 only).
    round2: [Option<Round2>; MASTERS],
    /// The write quorum the token was made final with (a bit set).
    quorum: u8,
    /// The resources whose referee accepted its write (`None`: not
    /// written).
    wrote: Option<u8>,
    /// Ghost: the clients whose tokens were final when this one started.
    finals_before: u8,
    /// Ghost: made final by a write-back.
    by_write_back: bool,
    /// Ghost: made final in the repair's epoch with a restarted master in
    /// its write quorum.
    through_repaired: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Repair {
    Idle,
    /// The barrier went out to the masters the operator's probe found
    /// anchored by their current run; the others are the `targets` (bit
    /// sets). The masters that ran it, the largest counter and (for
    /// `NoBarrier`) the epoch they reported.
    Barrier {
        targets: u8,
        acked: u8,
        counter: u8,
        epoch: u8,
    },
    /// The targets were anchored.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct State {
    masters: [Master; MASTERS],
    clients: Vec<Client>,
    /// Requests in flight, oldest first, per connection: client `c` to
    /// master `m` is `c * MASTERS + m`; the operator's come after.
    links: Vec<Vec<Request>>,
    /// Ghost: per master, the acquisitions in the order their keys were
    /// set there (across restarts), per resource: the order of their
    /// tenures of that resource.
    tenures: [[Vec<u8>; RESOURCES]; MASTERS],
    /// Ghost (timing honoured): per master, the acquisitions whose key a
    /// restart lost, until the master is anchored again.
    lost: [u8; MASTERS],
    restarts_left: u8,
    failbacks_left: u8,
    migrations_left: u8,
    repair: Repair,
    /// The largest token each resource's referee accepted.
    referee: [u8; RESOURCES],
    /// Set by a step that broke "the referee never accepts an older holder
    /// after a newer one".
    referee_broken: bool,
    /// Set by a step that made a token final below one already final.
    final_order_broken: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// Client sends round 1 to every master.
    Start(u8),
    /// The oldest request on a connection runs.
    Run(u8),
    /// Client decides round 1 from the granted replies in `heard` (a bit
    /// set), in `epoch`.
    Decide1 {
        client: u8,
        heard: u8,
        epoch: u8,
    },
    /// Client decides round 2: final with the write-backs that arrived.
    Decide2(u8),
    GiveUp(u8),
    /// Timing honoured: the client's validity ends (it released, or paused
    /// past its validity).
    End(u8),
    Write(u8),
    /// A key expires: master, resource.
    Expire(u8, u8),
    /// A master restarts: empty (`counter` None), or with its state, the
    /// counter rolled back to `counter`.
    Restart {
        master: u8,
        counter: Option<u8>,
    },
    /// A master fails back: same process (run id, connections), a new
    /// replication history, its counter rolled back to 0 (the copy it
    /// reloaded was taken before it counted).
    Failback(u8),
    /// A cluster voter's slot moves, with its keys, to the other node (or
    /// back): the hash and the key keep their state, the requests in
    /// flight follow it (a redirect sends them on), and the node it lands
    /// on has its own run and replication history.
    Migrate(u8),
    /// The operator probes every master and sends the barrier.
    RepairStart,
    /// Once a quorum ran the barrier, the operator anchors the targets.
    /// (One step: deciding has no effect of its own, and the anchor does
    /// not wait behind anything on its connection.)
    RepairAnchor,
}

fn bit(i: usize) -> u8 {
    1 << i
}

fn has(set: u8, i: usize) -> bool {
    set & bit(i) != 0
}

fn count(set: u8) -> u32 {
    set.count_ones()
}

// ---- The scripts, branch for branch ------------------------------------

/// `src/fence/acquire.lua` (`check` false only for the broken variant
/// `NoReplicationCheck`). `Refused` stands for the error replies
/// (NOANCHOR, FENCESTALE, then FENCELIMIT), which write nothing.
/// A set's round 1 (`src/fence/acquire_set.lua`) is the same over the
/// keys of `holds`: all set or none, the counter raised once.
fn acquire_lua(master: &mut Master, who: u8, holds: u8, limit: u8, check: bool) -> Round1 {
    let (run, history) = (master.run, master.history);
    // `if not h[1]`: no anchor.
    let Some(anchor) = master.anchor.as_mut() else {
        return Round1::Refused;
    };
    // `h[3] ~= id`: FENCESTALE, the data set is not the one anchored.
    if check && anchor.history != history {
        return Round1::Refused;
    }
    // `>= 9007199254740992`: at the limit.
    if anchor.counter >= limit {
        return Round1::Refused;
    }
    // `set ... NX PX` refused: held (a set's keys set before it are
    // deleted again: none was).
    let mine = (0..RESOURCES).filter(|&r| has(holds, r));
    if mine.clone().any(|r| master.keys[r].is_some()) {
        return Round1::Held;
    }
    for r in mine {
        master.keys[r] = Some(who);
    }
    // `hincrby c 1`, returned with the epoch.
    anchor.counter += 1;
    Round1::Granted {
        value: anchor.counter,
        epoch: anchor.epoch,
        // Not the script: the connection's probe (probe.lua, state 1).
        fresh: anchor.run == run,
    }
}

/// `src/fence/write_back.lua`, and for a set `write_back_set.lua`, which
/// checks every key of `checked` (the resources it holds; none only for
/// the broken variant `NoKeyCheck`, the first only for `FirstKeyOnly`);
/// `check` false only for `NoReplicationCheck`. The token's range check
/// cannot fail here.
fn write_back_lua(
    master: &mut Master,
    who: u8,
    (token, epoch): (u8, u8),
    checked: u8,
    check: bool,
) -> Round2 {
    let history = master.history;
    // `if not h[1]`: NOANCHOR.
    let Some(anchor) = master.anchor.as_mut() else {
        return Round2::Refused;
    };
    // `h[3] ~= id`: FENCESTALE.
    if check && anchor.history != history {
        return Round2::Refused;
    }
    // `get KEYS[i] ~= ARGV[1]`: not ours.
    if (0..RESOURCES).any(|r| has(checked, r) && master.keys[r] != Some(who)) {
        return Round2::NotOurs;
    }
    // `h[1] ~= ARGV[3]`: FENCEEPOCH.
    if anchor.epoch != epoch {
        return Round2::Refused;
    }
    // Set if greater.
    if anchor.counter < token {
        anchor.counter = token;
    }
    Round2::Counted
}

/// `src/fence/barrier.lua` (`move_epoch` false only for the broken
/// variant `NoBarrier`, `check` only for `NoReplicationCheck`): the
/// counter and the epoch it had, or `None` for NOANCHOR and FENCESTALE.
fn barrier_lua(master: &mut Master, epoch: u8, move_epoch: bool, check: bool) -> Option<(u8, u8)> {
    let (run, history) = (master.run, master.history);
    // `if not h[1]`: NOANCHOR.
    let anchor = master.anchor.as_mut()?;
    // `h[3] ~= run`, `h[4] ~= id`: FENCESTALE.
    if anchor.run != run || (check && anchor.history != history) {
        return None;
    }
    let old = anchor.epoch;
    // `hset e ARGV[1]`, then the counter.
    if move_epoch {
        anchor.epoch = epoch;
    }
    Some((anchor.counter, old))
}

/// `src/fence/anchor.lua`: whether it anchored (1) or found the master
/// anchored by its current run in its current replication history (0).
/// (INFO refused is not modelled: the library does not fence without it;
/// nor are the member slots, which no counter depends on.)
fn anchor_lua(master: &mut Master, counter: u8, epoch: u8, check: bool) -> bool {
    // `h[1] and h[3] == run and h[4] == id`: valid already.
    if let Some(anchor) = &master.anchor {
        if anchor.run == master.run && (!check || anchor.history == master.history) {
            return false;
        }
    }
    // Never lower a surviving counter.
    let counter = match &master.anchor {
        Some(anchor) if anchor.counter > counter => anchor.counter,
        _ => counter,
    };
    master.anchor = Some(Anchor {
        counter,
        epoch,
        run: master.run,
        history: master.history,
    });
    true
}

/// What probe.lua answers with state 1: anchored by the current run, in
/// the current replication history (unless `check` is off).
fn valid_anchor(master: &Master, check: bool) -> bool {
    matches!(&master.anchor, Some(anchor)
        if anchor.run == master.run && (!check || anchor.history == master.history))
}

// ---- Symmetry --------------------------------------------------------------

/// `set` (a bit set) with bit `i` moved to `map[i]`.
fn remap(set: u8, map: &[usize]) -> u8 {
    (0..map.len())
        .filter(|&i| has(set, i))
        .fold(0, |out, i| out | bit(map[i]))
}

/// `state` with master `m` renamed `masters[m]` and client `c` renamed
/// `clients[c]`.
fn permuted(state: &State, masters: &[usize; MASTERS], clients: &[usize]) -> State {
    let n = clients.len();
    let mut out = state.clone();
    for (m, &to) in masters.iter().enumerate() {
        let mut master = state.masters[m].clone();
        for key in &mut master.keys {
            *key = key.map(|c| clients[c as usize] as u8);
        }
        out.masters[to] = master;
        for r in 0..RESOURCES {
            out.tenures[to][r] = state.tenures[m][r]
                .iter()
                .map(|&c| clients[c as usize] as u8)
                .collect();
        }
        out.lost[to] = remap(state.lost[m], clients);
        out.links[n * MASTERS + to] = state.links[n * MASTERS + m].clone();
        for (c, &renamed) in clients.iter().enumerate() {
            out.links[renamed * MASTERS + to] = state.links[c * MASTERS + m].clone();
        }
    }
    for (old, &renamed) in state.clients.iter().zip(clients) {
        let mut client = old.clone();
        for (m, &to) in masters.iter().enumerate() {
            client.round1[to] = old.round1[m];
            client.round2[to] = old.round2[m];
        }
        client.counted = remap(old.counted, masters);
        client.quorum = remap(old.quorum, masters);
        client.finals_before = remap(old.finals_before, clients);
        out.clients[renamed] = client;
    }
    if let Repair::Barrier { targets, acked, .. } = &mut out.repair {
        *targets = remap(*targets, masters);
        *acked = remap(*acked, masters);
    }
    out
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..n {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out
}

/// The least of the states that differ from `state` only by the names of
/// masters and clients, which behave alike (every client sends to every
/// master; the properties name none): one state stands for them all.
fn representative(state: &State) -> State {
    let mut best: Option<State> = None;
    for masters in permutations(MASTERS) {
        let masters = [masters[0], masters[1], masters[2]];
        for clients in permutations(state.clients.len()) {
            let candidate = permuted(state, &masters, &clients);
            if best.as_ref().map_or(true, |b| candidate < *b) {
                best = Some(candidate);
            }
        }
    }
    best.expect("at least the identity")
}

// ---- Queries on a state -------------------------------------------------

/// Whether `newer`'s tenure of resource `r` came after `older`'s on some
/// master of both write quorums.
fn is_newer(state: &State, r: usize, newer: usize, older: usize) -> bool {
    let (a, b) = (&state.clients[older], &state.clients[newer]);
    (0..MASTERS).any(|m| {
        has(a.quorum & b.quorum, m) && {
            let order = &state.tenures[m][r];
            let pos = |who: usize| order.iter().position(|&x| x as usize == who);
            pos(newer) > pos(older)
        }
    })
}

fn finals(state: &State) -> impl Iterator<Item = (usize, &Client)> {
    state
        .clients
        .iter()
        .enumerate()
        .filter(|(_, c)| c.phase == Phase::Final)
}

/// The resources two clients both take (every invariant is per resource:
/// tokens of different resources may repeat, a set raises the shared
/// counter once).
fn shared(a: &Client, b: &Client) -> impl Iterator<Item = usize> {
    let both = a.holds & b.holds;
    (0..RESOURCES).filter(move |&r| has(both, r))
}

fn unique_tokens(_: &Fencing, state: &State) -> bool {
    finals(state).all(|(i, a)| {
        finals(state).all(|(j, b)| i == j || shared(a, b).next().is_none() || a.token != b.token)
    })
}

/// For any two final tokens of a resource, the lower one's tenure of it
/// came first on every master of both write quorums (and they share one).
fn tokens_follow_tenures(_: &Fencing, state: &State) -> bool {
    finals(state).all(|(i, a)| {
        finals(state).all(|(j, b)| {
            i == j
                || a.token > b.token
                || shared(a, b).all(|r| {
                    a.quorum & b.quorum != 0
                        && !is_newer(state, r, i, j)
                        && is_newer(state, r, j, i)
                })
        })
    })
}

fn real_time_order(_: &Fencing, state: &State) -> bool {
    finals(state).all(|(_, b)| {
        finals(state).all(|(j, a)| {
            !has(b.finals_before, j) || shared(a, b).next().is_none() || a.token < b.token
        })
    })
}

fn referee_order(_: &Fencing, state: &State) -> bool {
    !state.referee_broken
}

fn final_order(_: &Fencing, state: &State) -> bool {
    !state.final_order_broken
}

fn two_finals(_: &Fencing, state: &State) -> bool {
    finals(state).count() >= 2
}

fn final_by_write_back(_: &Fencing, state: &State) -> bool {
    finals(state).any(|(_, c)| c.by_write_back)
}

fn referee_refused(_: &Fencing, state: &State) -> bool {
    state
        .clients
        .iter()
        .any(|c| c.wrote.is_some_and(|accepted| accepted != c.holds))
}

/// A token made final with a master that restarted and was anchored again
/// by the repair in its write quorum.
fn final_through_repaired(_: &Fencing, state: &State) -> bool {
    finals(state).any(|(_, c)| c.through_repaired)
}

const UNIQUE: &str = "final tokens are unique";
const TENURES: &str = "final tokens follow the tenures";
const REAL_TIME: &str = "a token final before an acquisition began is below its token";
const REFEREE: &str = "the referee never accepts an older holder after a newer one";
const FINAL_ORDER: &str = "tokens become final in increasing order";
const TWO_FINALS: &str = "two holders get tokens";
const BY_WRITE_BACK: &str = "a write-back makes a token final";
const REFUSED: &str = "the referee turns a stale holder away";
const THROUGH_REPAIRED: &str = "a token is final with a repaired master in its quorum";

impl Fencing {
    fn operator_link(&self, master: usize) -> usize {
        self.clients as usize * MASTERS + master
    }

    /// Makes client `who` final with write quorum `quorum`, noting whether
    /// a token already final is above its own.
    fn make_final(&self, state: &mut State, who: usize, quorum: u8) {
        let token = state.clients[who].token;
        let me = &state.clients[who];
        if finals(state)
            .any(|(_, other)| shared(me, other).next().is_some() && other.token >= token)
        {
            state.final_order_broken = true;
        }
        let repaired = (0..MASTERS).any(|m| {
            let master = &state.masters[m];
            has(quorum, m) && (master.run > 0 || master.history > 0)
        });
        let client = &mut state.clients[who];
        client.phase = Phase::Final;
        client.quorum = quorum;
        client.by_write_back = quorum & !client.counted != 0;
        client.through_repaired = repaired && client.epoch == REPAIR_EPOCH;
        client.round1 = [None; MASTERS];
        client.round2 = [None; MASTERS];
        client.epoch = 0;
        client.counted = 0;
    }

    fn decide_round1(&self, state: &mut State, who: usize, heard: u8, epoch: u8) {
        let client = &state.clients[who];
        let granted = |m: usize| match client.round1[m] {
            Some(Round1::Granted { value, epoch, .. }) => (value, epoch),
            _ => unreachable!("only granted replies are heard"),
        };
        let token = (0..MASTERS)
            .filter(|&m| has(heard, m))
            .map(|m| granted(m).0)
            .max()
            .unwrap_or(0);
        let counted = (0..MASTERS)
            .filter(|&m| has(heard, m) && granted(m) == (token, epoch))
            .fold(0, |set, m| set | bit(m));
        let client = &mut state.clients[who];
        client.token = token;
        client.epoch = epoch;
        if self.variant == Variant::NoWriteBack {
            client.counted = heard;
            self.make_final(state, who, heard);
            return;
        }
        client.counted = counted;
        if count(counted) >= QUORUM {
            self.make_final(state, who, counted);
            return;
        }
        client.phase = Phase::Round2;
        client.round1 = [None; MASTERS];
        for m in (0..MASTERS).filter(|&m| has(heard & !counted, m)) {
            state.links[who * MASTERS + m].push(Request::WriteBack { token, epoch });
        }
    }

    fn run(&self, state: &mut State, link: usize) {
        let request = state.links[link].remove(0);
        let clients = self.clients as usize;
        if link >= clients * MASTERS {
            let m = link - clients * MASTERS;
            let master = &mut state.masters[m];
            let Request::Barrier { epoch } = request else {
                unreachable!("the operator sends only barriers")
            };
            let moved = self.variant != Variant::NoBarrier;
            if let Some((counter, old)) = barrier_lua(master, epoch, moved, self.checks()) {
                if let Repair::Barrier {
                    acked,
                    counter: top,
                    epoch: seen,
                    ..
                } = &mut state.repair
                {
                    *acked |= bit(m);
                    *top = (*top).max(counter);
                    *seen = (*seen).max(old);
                }
            }
            return;
        }
        let (who, m) = (link / MASTERS, link % MASTERS);
        let master = &mut state.masters[m];
        match request {
            Request::Acquire => {
                let holds = state.clients[who].holds;
                let reply = acquire_lua(master, who as u8, holds, self.limit, self.checks());
                if let Round1::Granted { .. } = reply {
                    for r in (0..RESOURCES).filter(|&r| has(holds, r)) {
                        state.tenures[m][r].push(who as u8);
                    }
                }
                // A reply after the round was decided is dropped; so is one
                // that cannot count (held, refused, or from a stale master).
                if state.clients[who].phase == Phase::Round1 && self.counts(reply) {
                    state.clients[who].round1[m] = Some(reply);
                }
            }
            Request::WriteBack { token, epoch } => {
                let holds = state.clients[who].holds;
                let checked = match self.variant {
                    Variant::NoKeyCheck => 0,
                    // The lowest resource only.
                    Variant::FirstKeyOnly => holds & holds.wrapping_neg(),
                    _ => holds,
                };
                let reply =
                    write_back_lua(master, who as u8, (token, epoch), checked, self.checks());
                if state.clients[who].phase == Phase::Round2 && reply == Round2::Counted {
                    state.clients[who].round2[m] = Some(reply);
                }
            }
            _ => unreachable!("clients send no repair steps"),
        }
    }

    /// Whether a round-1 reply counts on its connection: a grant, on a
    /// connection whose probe found the anchor made by this server run
    /// (a cluster node's connection has no such probe: `NoRunProbe`).
    fn counts(&self, reply: Round1) -> bool {
        match reply {
            Round1::Granted { fresh, .. } => fresh || self.variant == Variant::NoRunProbe,
            _ => false,
        }
    }

    /// Whether the scripts compare the anchor's replication history with
    /// the master's (all but the broken variant `NoReplicationCheck`).
    fn checks(&self) -> bool {
        self.variant != Variant::NoReplicationCheck
    }

    /// Whether the request at the head of `link` may run now.
    fn may_run(&self, state: &State, link: usize) -> bool {
        !state.links[link].is_empty()
    }

    /// Timing honoured: a master that lost keys of holders still within
    /// their validity is not re-admitted yet (Redlock's delayed restart).
    fn may_anchor(&self, state: &State, targets: u8) -> bool {
        self.timing == Timing::Broken
            || (0..MASTERS).filter(|&m| has(targets, m)).all(|m| {
                (0..self.clients as usize)
                    .all(|c| !has(state.lost[m], c) || !state.clients[c].valid)
            })
    }

    fn may_decide(&self, client: &Client) -> bool {
        self.timing == Timing::Broken || client.valid
    }
}

impl Model for Fencing {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let master = Master {
            run: 0,
            history: 0,
            anchor: Some(Anchor {
                counter: 0,
                epoch: FIRST_EPOCH,
                run: 0,
                history: 0,
            }),
            keys: [None; RESOURCES],
            // Another node of the cluster: its own run and history (no
            // restart makes as many).
            elsewhere: (100, 100),
        };
        let client = Client {
            holds: 1,
            phase: Phase::Idle,
            valid: true,
            round1: [None; MASTERS],
            token: 0,
            epoch: 0,
            counted: 0,
            round2: [None; MASTERS],
            quorum: 0,
            wrote: None,
            finals_before: 0,
            by_write_back: false,
            through_repaired: false,
        };
        let mut ahead = master.clone();
        if let Some(anchor) = ahead.anchor.as_mut() {
            anchor.counter = 1;
        }
        let mut starts = vec![[master.clone(), master.clone(), master.clone()]];
        if self.uneven_start {
            starts.push([ahead, master.clone(), master.clone()]);
        }
        starts
            .into_iter()
            .map(|masters| State {
                masters,
                clients: (0..self.clients as usize)
                    .map(|c| Client {
                        holds: self.holds.get(c).copied().unwrap_or(1),
                        ..client.clone()
                    })
                    .collect(),
                links: vec![Vec::new(); (self.clients as usize + 1) * MASTERS],
                tenures: Default::default(),
                lost: [0; MASTERS],
                restarts_left: self.restarts,
                failbacks_left: self.failbacks,
                migrations_left: self.migrations,
                repair: Repair::Idle,
                referee: [0; RESOURCES],
                referee_broken: false,
                final_order_broken: false,
            })
            .collect()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (i, client) in state.clients.iter().enumerate() {
            let who = i as u8;
            match client.phase {
                Phase::Idle => actions.push(Action::Start(who)),
                Phase::Round1 => {
                    let granted = (0..MASTERS)
                        .filter(|&m| client.round1[m].is_some_and(|r| self.counts(r)))
                        .fold(0u8, |set, m| set | bit(m));
                    // Every subset of the granted replies that makes a
                    // quorum: the others are still on the wire.
                    for heard in (1..=granted).filter(|&h| h & !granted == 0) {
                        if count(heard) < QUORUM {
                            continue;
                        }
                        let epochs: BTreeSet<u8> = (0..MASTERS)
                            .filter_map(|m| match client.round1[m] {
                                Some(Round1::Granted { epoch, .. }) if has(heard, m) => Some(epoch),
                                _ => None,
                            })
                            .collect();
                        let token = (0..MASTERS)
                            .filter_map(|m| match client.round1[m] {
                                Some(Round1::Granted { value, .. }) if has(heard, m) => Some(value),
                                _ => None,
                            })
                            .max()
                            .unwrap_or(0);
                        for epoch in epochs {
                            let agreeing = (0..MASTERS)
                                .filter(|&m| {
                                    has(heard, m)
                                        && matches!(client.round1[m],
                                            Some(Round1::Granted { value, epoch: e, .. })
                                                if value == token && e == epoch)
                                })
                                .count() as u32;
                            let final_at_once =
                                self.variant == Variant::NoWriteBack || agreeing >= QUORUM;
                            // Deciding final needs validity (when it counts).
                            if !final_at_once || self.may_decide(client) {
                                actions.push(Action::Decide1 {
                                    client: who,
                                    heard,
                                    epoch,
                                });
                            }
                            if self.variant == Variant::NoWriteBack {
                                break;
                            }
                        }
                    }
                    actions.push(Action::GiveUp(who));
                }
                Phase::Round2 => {
                    let counted = (0..MASTERS)
                        .filter(|&m| client.round2[m] == Some(Round2::Counted))
                        .count() as u32;
                    if count(client.counted) + counted >= QUORUM && self.may_decide(client) {
                        actions.push(Action::Decide2(who));
                    }
                    actions.push(Action::GiveUp(who));
                }
                Phase::Final => {
                    if self.referee && client.wrote.is_none() {
                        actions.push(Action::Write(who));
                    }
                }
                Phase::Failed => {}
            }
            if self.timing == Timing::Honoured
                && client.valid
                && matches!(client.phase, Phase::Round1 | Phase::Round2 | Phase::Final)
            {
                actions.push(Action::End(who));
            }
        }
        for link in 0..state.links.len() {
            if self.may_run(state, link) {
                actions.push(Action::Run(link as u8));
            }
        }
        for (m, master) in state.masters.iter().enumerate() {
            for (r, key) in master.keys.iter().enumerate() {
                if let Some(holder) = *key {
                    if self.timing == Timing::Broken || !state.clients[holder as usize].valid {
                        actions.push(Action::Expire(m as u8, r as u8));
                    }
                }
            }
            if state.restarts_left > 0 {
                let master_id = m as u8;
                actions.push(Action::Restart {
                    master: master_id,
                    counter: None,
                });
                // Or with its state: all of it (a clean restart), or rolled
                // back to a counter of 0 (a lost tail of writes), keeping
                // its key. A key lost as well is the same followed by an
                // expiry; a counter rolled back less acts in between (a
                // stale master's counter counts only through anchor.lua's
                // max).
                if let Some(anchor) = master.anchor.as_ref().filter(|_| self.restarts_with_state) {
                    for counter in [anchor.counter, 0] {
                        actions.push(Action::Restart {
                            master: master_id,
                            counter: Some(counter),
                        });
                        if anchor.counter == 0 {
                            break;
                        }
                    }
                }
            }
            // A fail-back rolls the counter back to 0, as a copy taken
            // before it counted; a master whose counter is 0 would only
            // change its history, which a run with a counter shows too.
            let counted = master.anchor.as_ref().is_some_and(|a| a.counter > 0);
            if state.failbacks_left > 0 && counted {
                actions.push(Action::Failback(m as u8));
            }
            if state.migrations_left > 0 {
                actions.push(Action::Migrate(m as u8));
            }
        }
        let faulted = state.restarts_left < self.restarts
            || state.failbacks_left < self.failbacks
            || state.migrations_left < self.migrations;
        match state.repair {
            Repair::Idle if self.repair && faulted => actions.push(Action::RepairStart),
            Repair::Barrier { targets, acked, .. }
                if count(acked) >= QUORUM && self.may_anchor(state, targets) =>
            {
                actions.push(Action::RepairAnchor)
            }
            _ => {}
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Start(who) => {
                let who = who as usize;
                let before = finals(&state).fold(0, |set, (j, _)| set | bit(j));
                let client = &mut state.clients[who];
                client.phase = Phase::Round1;
                client.finals_before = before;
                for m in 0..MASTERS {
                    state.links[who * MASTERS + m].push(Request::Acquire);
                }
            }
            Action::Run(link) => self.run(&mut state, link as usize),
            Action::Decide1 {
                client,
                heard,
                epoch,
            } => self.decide_round1(&mut state, client as usize, heard, epoch),
            Action::Decide2(who) => {
                let who = who as usize;
                let client = &state.clients[who];
                let acked = (0..MASTERS)
                    .filter(|&m| client.round2[m] == Some(Round2::Counted))
                    .fold(0, |set, m| set | bit(m));
                let quorum = client.counted | acked;
                self.make_final(&mut state, who, quorum);
            }
            Action::GiveUp(who) => {
                let client = &mut state.clients[who as usize];
                client.phase = Phase::Failed;
                client.valid = self.timing == Timing::Broken;
                client.round1 = [None; MASTERS];
                client.round2 = [None; MASTERS];
                client.token = 0;
                client.epoch = 0;
                client.counted = 0;
            }
            Action::End(who) => state.clients[who as usize].valid = false,
            Action::Write(who) => {
                let who = who as usize;
                // A write to each resource it holds, at that resource's
                // referee.
                let (token, holds) = (state.clients[who].token, state.clients[who].holds);
                let mut accepted = 0;
                for r in (0..RESOURCES).filter(|&r| has(holds, r)) {
                    if token < state.referee[r] {
                        continue;
                    }
                    accepted |= bit(r);
                    state.referee[r] = token;
                    let newer_accepted = (0..state.clients.len()).any(|other| {
                        other != who
                            && state.clients[other]
                                .wrote
                                .is_some_and(|theirs| has(theirs, r))
                            && is_newer(&state, r, other, who)
                    });
                    if newer_accepted {
                        state.referee_broken = true;
                    }
                }
                state.clients[who].wrote = Some(accepted);
            }
            Action::Expire(m, r) => state.masters[m as usize].keys[r as usize] = None,
            Action::Restart { master, counter } => {
                let m = master as usize;
                state.restarts_left -= 1;
                let master = &mut state.masters[m];
                master.run += 1;
                master.history += 1; // a new replid at every start
                match counter {
                    None => master.anchor = None,
                    Some(counter) => {
                        if let Some(anchor) = master.anchor.as_mut() {
                            anchor.counter = counter;
                        }
                    }
                }
                if counter.is_none() {
                    for key in &mut master.keys {
                        if let Some(holder) = key.take() {
                            if self.timing == Timing::Honoured {
                                state.lost[m] |= bit(holder as usize);
                            }
                        }
                    }
                }
                // The connections to it die with the requests in flight.
                for who in 0..self.clients as usize {
                    state.links[who * MASTERS + m].clear();
                }
                let operator = self.operator_link(m);
                state.links[operator].clear();
            }
            Action::Failback(m) => {
                // The same process reloads an older copy of its data: its
                // run id and the connections to it stay (requests in
                // flight then run on the copy), its replication id is new.
                state.failbacks_left -= 1;
                let master = &mut state.masters[m as usize];
                master.history += 1;
                if let Some(anchor) = master.anchor.as_mut() {
                    anchor.counter = 0;
                }
            }
            Action::Migrate(m) => {
                // `MIGRATE` moves the keys of the slot (the hash, the lock
                // key) as they are; the node they land on is another run
                // with another history. The connections to the slot's old
                // node answer `MOVED` or `ASK`, and the round sends the
                // request on to the new one (or gives up: a request that
                // never runs).
                state.migrations_left -= 1;
                let master = &mut state.masters[m as usize];
                let here = (master.run, master.history);
                (master.run, master.history) = master.elsewhere;
                master.elsewhere = here;
            }
            Action::RepairStart => {
                // The operator probes first (probe.lua): the barrier goes to
                // the masters anchored by their current run, the anchor
                // to the others.
                let targets = (0..MASTERS)
                    .filter(|&m| !valid_anchor(&state.masters[m], self.checks()))
                    .fold(0, |set, m| set | bit(m));
                state.repair = Repair::Barrier {
                    targets,
                    acked: 0,
                    counter: 0,
                    epoch: 0,
                };
                for m in (0..MASTERS).filter(|&m| !has(targets, m)) {
                    let link = self.operator_link(m);
                    state.links[link].push(Request::Barrier {
                        epoch: REPAIR_EPOCH,
                    });
                }
            }
            Action::RepairAnchor => {
                let Repair::Barrier {
                    targets,
                    counter,
                    epoch,
                    ..
                } = state.repair
                else {
                    unreachable!("anchoring follows the barrier")
                };
                // The broken variant keeps the epoch it read.
                let epoch = match self.variant {
                    Variant::NoBarrier => epoch,
                    _ => REPAIR_EPOCH,
                };
                for m in (0..MASTERS).filter(|&m| has(targets, m)) {
                    if anchor_lua(&mut state.masters[m], counter, epoch, self.checks()) {
                        state.lost[m] = 0;
                    }
                }
                state.repair = Repair::Done;
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(UNIQUE, unique_tokens),
            Property::always(TENURES, tokens_follow_tenures),
            Property::always(REAL_TIME, real_time_order),
            Property::always(REFEREE, referee_order),
            Property::always(FINAL_ORDER, final_order),
            Property::sometimes(TWO_FINALS, two_finals),
            Property::sometimes(REFUSED, referee_refused),
        ];
        if self.variant != Variant::NoWriteBack {
            properties.push(Property::sometimes(BY_WRITE_BACK, final_by_write_back));
        }
        if self.repair {
            properties.push(Property::sometimes(
                THROUGH_REPAIRED,
                final_through_repaired,
            ));
        }
        properties
    }
}

// ---- The checks -------------------------------------------------------------

/// Explores every reachable state of `model` (depth first, one state per
/// class of renamings, 2 threads) and returns the checker; prints what it
/// explored.
fn explore(name: &str, model: Fencing) -> impl Checker<Fencing> {
    let started = Instant::now();
    let checker = model
        .checker()
        .threads(2)
        .symmetry_fn(representative)
        .spawn_dfs()
        .join();
    println!(
        "{name}: {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    checker
}

/// Searches `model` until one of `properties` has a counterexample, and
/// returns it (printed).
fn counterexample(name: &str, model: Fencing, properties: &[&'static str]) -> String {
    let started = Instant::now();
    let wanted: BTreeSet<&'static str> = properties.iter().copied().collect();
    let checker = model
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(wanted))
        .spawn_bfs()
        .join();
    let found = properties
        .iter()
        .find_map(|p| checker.discovery(p).map(|path| (p, path)));
    let Some((property, path)) = found else {
        panic!(
            "{name}: no counterexample to any of {properties:?} in {} states",
            checker.unique_state_count()
        );
    };
    let text = format!("{property}: {path}");
    println!(
        "{name}: counterexample after {} states, {:.1} s\n{text}",
        checker.unique_state_count(),
        started.elapsed().as_secs_f64()
    );
    text
}

fn protocol(clients: u8, timing: Timing) -> Fencing {
    Fencing {
        clients,
        timing,
        variant: Variant::Protocol,
        restarts: 0,
        restarts_with_state: true,
        failbacks: 0,
        migrations: 0,
        repair: false,
        limit: 6,
        referee: true,
        uneven_start: true,
        holds: Vec::new(),
    }
}

/// `protocol(clients, timing)` with one master restart and the repair.
fn with_restart(clients: u8, timing: Timing, with_state: bool) -> Fencing {
    Fencing {
        restarts: 1,
        restarts_with_state: with_state,
        repair: true,
        // Implied by `TENURES` (the referee accepts by token alone), and
        // checked with writes in the runs without restarts.
        referee: false,
        // Uneven counters are checked in the runs without restarts; here
        // the restart and the repair make them.
        uneven_start: false,
        ..protocol(clients, timing)
    }
}

/// `protocol(clients, timing)` with one fail-back and the repair.
fn with_failback(clients: u8, timing: Timing) -> Fencing {
    Fencing {
        restarts: 0,
        failbacks: 1,
        ..with_restart(clients, timing, false)
    }
}

/// The invariants claimed whatever the timing (all but `FINAL_ORDER`).
const ALWAYS: [&str; 4] = [UNIQUE, TENURES, REAL_TIME, REFEREE];

#[test]
fn with_timing_honoured_every_invariant_holds() {
    let checker = explore("2 clients, timing honoured", protocol(2, Timing::Honoured));
    checker.assert_properties();
}

#[test]
fn with_timing_broken_tokens_stay_unique_and_ordered_like_tenures() {
    let checker = explore("2 clients, timing broken", protocol(2, Timing::Broken));
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    for property in [TWO_FINALS, BY_WRITE_BACK, REFUSED] {
        checker.assert_any_discovery(property);
    }
    // What timing buys: without it a holder whose key expired early can
    // still make its (lower) token final after a newer holder did. The
    // referee turns it away, which the invariants above check.
    let late = checker.assert_any_discovery(FINAL_ORDER);
    println!("{FINAL_ORDER}: counterexample without timing: {late}");
}

#[test]
fn a_master_restarted_empty_is_repaired_without_tokens_going_back() {
    let model = with_restart(2, Timing::Broken, false);
    let checker = explore("2 clients, timing broken, a restart (empty), repair", model);
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    for property in [TWO_FINALS, BY_WRITE_BACK, THROUGH_REPAIRED] {
        checker.assert_any_discovery(property);
    }
}

#[test]
fn a_master_that_failed_back_is_repaired_without_tokens_going_back() {
    let model = with_failback(2, Timing::Broken);
    let checker = explore("2 clients, timing broken, a fail-back, repair", model);
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    for property in [TWO_FINALS, BY_WRITE_BACK, THROUGH_REPAIRED] {
        checker.assert_any_discovery(property);
    }
}

// The larger runs: minutes to hours each, so they run on demand:
// `cargo test --release --test fencing_model -- --ignored --nocapture`.
// docs/fencing.md gives the figures of those that were run.

#[test]
#[ignore]
fn restarts_of_every_kind_with_timing_broken() {
    let model = with_restart(2, Timing::Broken, true);
    let checker = explore(
        "2 clients, timing broken, a restart of any kind, repair",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
}

#[test]
#[ignore]
fn restarts_of_every_kind_with_timing_honoured() {
    let model = with_restart(2, Timing::Honoured, true);
    let checker = explore(
        "2 clients, timing honoured, a restart of any kind, repair",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    checker.assert_no_discovery(FINAL_ORDER);
}

#[test]
#[ignore]
fn a_failback_with_timing_honoured() {
    let model = with_failback(2, Timing::Honoured);
    let checker = explore("2 clients, timing honoured, a fail-back, repair", model);
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    checker.assert_no_discovery(FINAL_ORDER);
}

/// Cluster voters (issue 32): no probe per connection checks the run
/// that anchored a slot's hash; round 1's data-set check (a restart renews
/// the replication id) must do, through restarts of every kind and the
/// repair. The fail-back keeps the run, so the probe's check never made a
/// difference there.
#[test]
#[ignore]
fn cluster_voters_without_a_probe_per_connection_with_timing_broken() {
    let model = Fencing {
        variant: Variant::NoRunProbe,
        ..with_restart(2, Timing::Broken, true)
    };
    let checker = explore(
        "2 clients, timing broken, no run probe (cluster voters), a restart of any kind, repair",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    checker.assert_any_discovery(THROUGH_REPAIRED);
}

/// A cluster voter (issue 32): its grants count with no probe per
/// connection of the run that anchored the slot's hash, and the slot's hash
/// may move to another node (`moves` times: 2 is there and back), with the
/// repair.
fn with_migration(clients: u8, timing: Timing, moves: u8) -> Fencing {
    Fencing {
        variant: Variant::NoRunProbe,
        restarts: 0,
        migrations: moves,
        ..with_restart(clients, timing, false)
    }
}

/// A slot's hash moved to another node counts nothing there (round 1 and
/// the write-back find another replication history) until the repair
/// anchors it on that node, and it never lets a token repeat or go back.
#[test]
fn a_cluster_slot_moved_to_another_node_keeps_tokens_rising() {
    let model = with_migration(2, Timing::Broken, 1);
    let checker = explore(
        "2 clients, timing broken, no run probe (cluster voters), a slot moved, repair",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    for property in [TWO_FINALS, BY_WRITE_BACK, THROUGH_REPAIRED] {
        checker.assert_any_discovery(property);
    }
}

#[test]
#[ignore]
fn a_cluster_slot_moved_with_timing_honoured() {
    let model = with_migration(2, Timing::Honoured, 1);
    let checker = explore(
        "2 clients, timing honoured, no run probe (cluster voters), a slot moved, repair",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    checker.assert_no_discovery(FINAL_ORDER);
}

/// Three clients: the referee's writes are left out (its invariant follows
/// from `TENURES`, and the two-client runs check it with writes), and the
/// counters start equal (three clients make them uneven themselves).
fn three_clients(timing: Timing) -> Fencing {
    Fencing {
        referee: false,
        uneven_start: false,
        ..protocol(3, timing)
    }
}

#[test]
#[ignore]
fn three_clients_with_timing_honoured() {
    let checker = explore(
        "3 clients, timing honoured",
        three_clients(Timing::Honoured),
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    checker.assert_no_discovery(FINAL_ORDER);
}

#[test]
#[ignore]
fn three_clients_with_timing_broken() {
    let checker = explore("3 clients, timing broken", three_clients(Timing::Broken));
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
}

#[test]
fn without_write_back_the_max_over_the_quorum_goes_back() {
    let model = Fencing {
        variant: Variant::NoWriteBack,
        ..protocol(2, Timing::Honoured)
    };
    counterexample("no write-back", model, &[UNIQUE, REAL_TIME]);
}

#[test]
fn without_the_key_check_a_stale_holder_gets_a_token_it_should_not() {
    let model = Fencing {
        variant: Variant::NoKeyCheck,
        ..protocol(2, Timing::Broken)
    };
    counterexample(
        "write-back without the key check",
        model,
        &[UNIQUE, TENURES],
    );
}

#[test]
fn a_repair_without_the_barrier_lets_tokens_go_back() {
    let model = Fencing {
        variant: Variant::NoBarrier,
        ..with_restart(2, Timing::Broken, false)
    };
    counterexample(
        "repair without the barrier",
        model,
        &[UNIQUE, TENURES, REAL_TIME],
    );
}

#[test]
fn without_the_replication_check_a_failback_lets_tokens_go_back() {
    // Issue 31: the anchor named the server run only, and a master made a
    // replica of an older copy of itself and promoted again keeps its run.
    let model = Fencing {
        variant: Variant::NoReplicationCheck,
        ..with_failback(2, Timing::Broken)
    };
    counterexample(
        "no replication check, a fail-back",
        model,
        &[UNIQUE, TENURES, REAL_TIME],
    );
}

// ---- Fenced sets (docs/fencing.md, "Sets") ---------------------------------

/// A client that takes resources 0 and 1 at once (a fenced set: one round
/// 1 over both keys, one count, the write-back checking both keys) beside
/// a single lock of resource 1, on the one counter of the domain.
fn a_set_and_a_single_lock(timing: Timing) -> Fencing {
    Fencing {
        holds: vec![0b11, 0b10],
        ..protocol(2, timing)
    }
}

#[test]
fn a_set_beside_a_single_lock_keeps_every_invariant_per_resource_with_timing_honoured() {
    let checker = explore(
        "a set {0, 1} and a lock of 1, timing honoured",
        a_set_and_a_single_lock(Timing::Honoured),
    );
    checker.assert_properties();
}

#[test]
fn a_set_beside_a_single_lock_keeps_tokens_unique_and_ordered_per_resource_with_timing_broken() {
    let checker = explore(
        "a set {0, 1} and a lock of 1, timing broken",
        a_set_and_a_single_lock(Timing::Broken),
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
    for property in [TWO_FINALS, BY_WRITE_BACK, REFUSED] {
        checker.assert_any_discovery(property);
    }
}

/// The check that makes the set's write-back safe: with only its first
/// key checked, a set whose key of resource 1 expired on a master raises
/// that master's counter after the next holder of resource 1 counted
/// there, and its token is final out of turn.
#[test]
fn a_sets_write_back_that_checks_only_its_first_key_breaks_the_order_of_the_other() {
    let model = Fencing {
        variant: Variant::FirstKeyOnly,
        ..a_set_and_a_single_lock(Timing::Broken)
    };
    counterexample(
        "a set's write-back checking its first key only",
        model,
        &[UNIQUE, TENURES],
    );
}

/// Three clients: a set of both resources and a single lock of each.
#[test]
#[ignore]
fn a_set_beside_single_locks_of_each_resource_with_timing_broken() {
    let model = Fencing {
        holds: vec![0b11, 0b01, 0b10],
        ..three_clients(Timing::Broken)
    };
    let checker = explore(
        "a set {0, 1}, a lock of 0, a lock of 1, timing broken",
        model,
    );
    for property in ALWAYS {
        checker.assert_no_discovery(property);
    }
}
