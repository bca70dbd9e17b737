//! The fence domain's hashes a handle's voters hold, and one command run on
//! each of them (docs/fencing.md, "Fencing on cluster voters"): a
//! standalone master, and a voter of the single-cluster mode, hold one; a
//! cluster voter holds one per slot, 16384, each in its slot beside the
//! lock keys it counts for. The operator's calls (`operator`) look at every
//! one: the one-hash voters in a round per distinct command (as before
//! cluster voters existed), a cluster voter's hashes in batch rounds of at
//! most [`CHUNK`] slots, each op routed to its slot's owner.
//!
//! A *column* is what one resource's acquisition counts on: with no
//! cluster voter there is one, every voter's hash; with one, there is a
//! column per slot, made of the cluster voters' hashes of that slot and the
//! one-hash voters' hashes (which are in every column).

use crate::cluster::SLOTS;
use crate::command::fence::Reading;
use crate::command::Command;
use crate::error::{FenceFault, NodeError, NodeOutcome};
use crate::handle::Shared;
use crate::quorum::{NodeSet, Rule};
use crate::round::{BatchOp, Plan, Session};
use std::thread;
use std::time::{Duration, Instant};

/// The most slots one batch round asks about. A node runs the scripts a
/// connection pipelined to it one after another without serving anything
/// else, its cluster bus included, and each reads `INFO`: a cluster
/// master's share of 256 slots (85, on three masters) keeps it a few
/// milliseconds, where 1024 kept a test cluster's node (its node timeout 1
/// s) from its bus long enough, on a loaded machine, for the others to
/// fail it (`CLUSTERDOWN`). Each slot owes the connection two replies,
/// well within what it may owe (`conn::MAX_OWED`).
const CHUNK: usize = 256;

/// The least time a batch round of the operator's is given: its scripts
/// read `INFO` (a probe about 60 µs of a server's time, measured on Redis
/// 7.0), so hundreds of them per node take far longer than a lock round's
/// node timeout, and several times longer on a loaded machine. A cluster
/// voter that misses it is asked once more after a refresh of its map,
/// then not again (see [`run`]): a frozen one costs this twice.
const BATCH_FLOOR: Duration = Duration::from_secs(10);

/// Which of a handle's voters keep a hash per slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grid {
    voters: usize,
    per_slot: NodeSet,
}

impl Grid {
    pub(crate) fn of(shared: &Shared) -> Grid {
        let mut per_slot = NodeSet::EMPTY;
        for (i, voter) in shared.voters.iter().enumerate() {
            if voter.fences_per_slot() {
                per_slot.insert(i);
            }
        }
        Grid {
            voters: shared.voters.len(),
            per_slot,
        }
    }

    pub(crate) fn voters(&self) -> usize {
        self.voters
    }

    /// How many columns: 1 without a cluster voter, else one per slot.
    pub(crate) fn columns(&self) -> usize {
        if self.per_slot.is_empty() {
            1
        } else {
            SLOTS
        }
    }

    /// Whether voter `i` keeps a hash per slot.
    pub(crate) fn per_slot(&self, i: usize) -> bool {
        self.per_slot.contains(i)
    }

    /// How many hashes voter `i` holds.
    pub(crate) fn hashes(&self, i: usize) -> usize {
        if self.per_slot(i) {
            SLOTS
        } else {
            1
        }
    }

    /// Voter `i`'s hash in `column`.
    pub(crate) fn hash(&self, i: usize, column: usize) -> usize {
        if self.per_slot(i) {
            column
        } else {
            0
        }
    }
}

/// What one hash answered a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Not asked this step.
    #[default]
    NotAsked,
    /// Yes, with the numbers of a script that reads (the probe's, the
    /// barrier's; the default for the anchor).
    Yes(Reading),
    /// No (the anchor: anchored already by this run, in this data set).
    No,
    /// Failed: left out of fencing for this fault, or (`None`) no answer
    /// or another error (the voter's [`Step::failure`]).
    Failed(Option<FenceFault>),
}

/// What every hash answered one step.
#[derive(Debug)]
pub(crate) struct Step {
    /// Per voter, per hash.
    answers: Vec<Vec<Answer>>,
    /// Per voter: its first failure that is not a fence fault.
    failures: Vec<Option<NodeError>>,
    /// One-hash voters: what the round that asked them said of them.
    outcomes: Vec<Option<NodeOutcome>>,
}

impl Step {
    /// What voter `i`'s hash `hash` answered.
    pub(crate) fn answer(&self, i: usize, hash: usize) -> Answer {
        self.answers[i][hash]
    }

    /// What each of voter `i`'s hashes answered.
    pub(crate) fn answers(&self, i: usize) -> &[Answer] {
        &self.answers[i]
    }

    /// Voter `i`'s first failure that is not a fence fault.
    pub(crate) fn failure(&self, i: usize) -> Option<&NodeError> {
        self.failures[i].as_ref()
    }

    /// What voter `i` did in this step, as a report says it (`None` if it
    /// was not asked): a one-hash voter's answer; for a cluster voter,
    /// agreed if every hash asked said yes, else its first failure that
    /// is not a fence fault, else how many slots are left out of fencing,
    /// else declined.
    pub(crate) fn outcome(&self, i: usize) -> Option<NodeOutcome> {
        if let Some(outcome) = &self.outcomes[i] {
            return Some(outcome.clone());
        }
        let asked = self.answers[i].iter().filter(|a| **a != Answer::NotAsked);
        let mut outcome = None;
        let (mut left_out, mut first) = (0u16, None);
        for answer in asked {
            match answer {
                Answer::Failed(None) => {
                    let error = self.failures[i].clone().unwrap_or(NodeError::Backlogged);
                    return Some(NodeOutcome::Failed(error));
                }
                Answer::Failed(Some(fault)) => {
                    left_out += 1;
                    first.get_or_insert(*fault);
                }
                Answer::No => outcome = Some(NodeOutcome::Declined),
                _ => {
                    outcome.get_or_insert(NodeOutcome::Agreed);
                }
            }
        }
        match first {
            Some(fault) => Some(NodeOutcome::Failed(NodeError::FenceSlots {
                fault,
                slots: left_out,
            })),
            None => outcome,
        }
    }
}

/// Runs on every hash of the handle's voters the command `command(i,
/// slot)` gives (`None`: that hash is not asked), where `slot` is the
/// hash's slot on a cluster voter (0 for the one hash of another voter),
/// and returns what each answered: one round per distinct command for the
/// one-hash voters, batch rounds of [`CHUNK`] slots for the cluster voters,
/// their slot maps brought up to date first ([`refresh_maps`]). What a
/// cluster voter failed for a reason other than fencing is asked once more
/// after another refresh; one that then fails for want of an answer (down,
/// too slow) is not asked again by the later batches.
pub(crate) fn run<'d>(
    shared: &Shared,
    session: &mut Session,
    grid: &Grid,
    command: impl Fn(usize, u16) -> Option<Command<'d>>,
) -> Step {
    let n = grid.voters();
    let mut step = Step {
        answers: (0..n)
            .map(|i| vec![Answer::NotAsked; grid.hashes(i)])
            .collect(),
        failures: vec![None; n],
        outcomes: vec![None; n],
    };
    // The one-hash voters: a round per distinct command.
    let mut asked = NodeSet::EMPTY;
    for i in (0..n).filter(|&i| !grid.per_slot(i)) {
        let Some(first) = command(i, 0).filter(|_| !asked.contains(i)) else {
            continue;
        };
        let mut to = NodeSet::EMPTY;
        for j in (i..n).filter(|&j| !grid.per_slot(j)) {
            if command(j, 0) == Some(first) {
                to.insert(j);
            }
        }
        asked = asked.union(to);
        let plan = Plan::everyone(first, to, Instant::now() + shared.node_timeout);
        session.run(shared.masters(), plan);
        let report = session.report(&shared.voters);
        for j in to.iter() {
            let outcome = report.iter().nth(j).map(|s| s.outcome().clone());
            let outcome = outcome.unwrap_or(NodeOutcome::NotSent);
            step.record(j, 0, &outcome, session.reading(j));
            step.outcomes[j] = Some(outcome);
        }
    }
    // The cluster voters: batches of slots.
    let per_slot = grid.per_slot.len();
    if per_slot == 0 {
        return step;
    }
    let chunk = CHUNK.min(usize::from(u16::MAX) / per_slot);
    refresh_maps(shared, session, grid.per_slot);
    let mut gone = NodeSet::EMPTY;
    let mut ops: Vec<BatchOp<'d>> = Vec::new();
    let mut again: Vec<BatchOp<'d>> = Vec::new();
    for first in (0..SLOTS).step_by(chunk) {
        ops.clear();
        for slot in first..(first + chunk).min(SLOTS) {
            let slot = slot as u16;
            let mut done = gone;
            for i in grid.per_slot.iter() {
                let Some(mine) = command(i, slot).filter(|_| !done.contains(i)) else {
                    continue;
                };
                let mut to = NodeSet::EMPTY;
                for j in grid.per_slot.difference(done).iter() {
                    if command(j, slot) == Some(mine) {
                        to.insert(j);
                    }
                }
                done = done.union(to);
                ops.push(BatchOp {
                    command: mine,
                    to,
                    others: None,
                    skip: NodeSet::EMPTY,
                });
            }
        }
        if ops.is_empty() {
            continue;
        }
        // Asked once; what failed for a reason other than fencing (a node
        // gone, a redirect too many, a cluster down for a moment) is asked
        // once more, after the maps are brought up to date.
        let (failed, _) = batch(shared, session, &ops, &mut step);
        if failed.is_empty() {
            continue;
        }
        refresh_maps(shared, session, failed);
        again.clear();
        again.extend(ops.iter().filter_map(|op| {
            let to = op.to.intersection(failed);
            (!to.is_empty()).then_some(BatchOp { to, ..*op })
        }));
        // A voter that still gives no answer is not asked again.
        let (_, silent) = batch(shared, session, &again, &mut step);
        gone = gone.union(silent);
    }
    step
}

/// Runs `ops` in one batch round and records each answer in `step`;
/// returns the voters that failed some op for a reason other than fencing,
/// and those of them that gave no answer at all (not even an error).
fn batch(
    shared: &Shared,
    session: &mut Session,
    ops: &[BatchOp<'_>],
    step: &mut Step,
) -> (NodeSet, NodeSet) {
    let deadline = Instant::now() + shared.node_timeout.max(BATCH_FLOOR);
    let results = session.run_batch(shared.masters(), ops, Rule::Everyone, deadline);
    let (mut failed, mut silent) = (NodeSet::EMPTY, NodeSet::EMPTY);
    for (k, op) in ops.iter().enumerate() {
        let slot = usize::from(op.command.slot().unwrap_or(0));
        for i in op.to.iter() {
            let outcome = results.outcome(k, i);
            if let NodeOutcome::Failed(e) = &outcome {
                if e.fence_fault().is_none() {
                    failed.insert(i);
                    if !matches!(e, NodeError::Server(_)) {
                        silent.insert(i);
                    }
                }
            }
            step.record(i, slot, &outcome, results.reading(k, i));
        }
    }
    (failed, silent)
}

/// Brings the slot maps of the cluster voters `voters` up to date before
/// a batch routes slots by them. A map learns of a failover or a
/// resharding on the lock path, one `MOVED` or one failed node at a time,
/// and a refresh asked for there is installed by the next round that
/// reads its answer: a batch that followed a stale map would send a whole
/// master's share of slots to a node that is gone. A round of `PING` to
/// the stale voters carries the topology request (at most one per 100 ms
/// per voter) and installs its answer; tried for about a node timeout.
fn refresh_maps(shared: &Shared, session: &mut Session, voters: NodeSet) {
    let until = Instant::now() + shared.node_timeout.max(Duration::from_secs(1));
    loop {
        let mut stale = NodeSet::EMPTY;
        for i in voters.iter() {
            if shared.voters[i].cluster().is_some_and(|c| c.is_stale()) {
                stale.insert(i);
            }
        }
        let now = Instant::now();
        if stale.is_empty() || now >= until {
            return;
        }
        let plan = Plan::everyone(Command::Ping, stale, now + shared.node_timeout);
        session.run(shared.masters(), plan);
        thread::sleep(Duration::from_millis(20));
    }
}

impl Step {
    /// Records what voter `i`'s hash `hash` did.
    fn record(&mut self, i: usize, hash: usize, outcome: &NodeOutcome, reading: Reading) {
        self.answers[i][hash] = match outcome {
            NodeOutcome::Agreed => Answer::Yes(reading),
            NodeOutcome::Declined => Answer::No,
            NodeOutcome::Failed(e) => match e.fence_fault() {
                Some(fault) => Answer::Failed(Some(fault)),
                None => {
                    self.failures[i].get_or_insert_with(|| e.clone());
                    Answer::Failed(None)
                }
            },
            _ => {
                self.failures[i].get_or_insert(NodeError::Backlogged);
                Answer::Failed(None)
            }
        };
    }
}
