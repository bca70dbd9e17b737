//! The operator's calls on a fence domain (docs/fencing.md, sections 8
//! and 9): [`init`] anchors a new domain on every master; [`repair`]
//! re-anchors masters that lost their state (or restarted, or rolled back,
//! since they were anchored) from a quorum that kept it, behind a barrier.
//! Neither is ever run by the library on its own: a fresh deployment and
//! one whose masters all lost their state look alike, and only the
//! operator can tell them apart.
//!
//! Each anchor records the domain's place (its id and how many members:
//! `members`) and which member it is: `init` numbers the masters in the
//! order the handle names them, and the repair gives a master that lost
//! its anchor the member nobody holds.

use super::members;
use crate::command::fence::{Reading, FENCE_LIMIT};
use crate::command::Command;
use crate::error::{
    ConfigError, Error, FenceFault, NodeError, NodeOutcome, NodeReport, NodeStatus,
};
use crate::handle::Shared;
use crate::quorum::{quorum, NodeSet};
use crate::round::{Plan, Session};
use std::io;
use std::time::Instant;

/// Anchors the handle's fence domain on every master with the counter
/// `start` in a fresh epoch, if every master answers and none is anchored
/// yet (`Error::FenceInitRefused` otherwise, writing nothing: its report
/// shows the anchored masters as declined).
pub(crate) fn init(shared: &Shared, start: u64) -> Result<NodeReport, Error> {
    let domain = domain(shared)?;
    if start > FENCE_LIMIT {
        return Err(ConfigError::FenceStartTooLarge(start).into());
    }
    let mut session = shared.pool.take();
    let result = init_on(shared, &mut session, domain, start);
    shared.pool.give_back(session);
    result
}

fn init_on(
    shared: &Shared,
    session: &mut Session,
    domain: &[u8],
    start: u64,
) -> Result<NodeReport, Error> {
    let named = shared.voters.len();
    let all = NodeSet::all(named);
    let answered = round(shared, session, Command::FenceProbe { domain }, all);
    let mut anchored = NodeSet::EMPTY;
    for i in answered.iter() {
        if session.reading(i).state != 0 {
            anchored.insert(i);
        }
    }
    if answered.len() < named || !anchored.is_empty() {
        // Said per master, so that the operator sees which are anchored.
        let mut steps = Steps::new(session.report(&shared.voters));
        steps.set(anchored, NodeOutcome::Declined);
        return Err(Error::FenceInitRefused(steps.report()));
    }
    let epoch = fresh()?;
    let place = (fresh()?, named as u32);
    let mut steps = Steps::new(session.report(&shared.voters));
    let mut done = NodeSet::EMPTY;
    for i in 0..named {
        let anchor = Command::FenceAnchor {
            domain,
            counter: start,
            epoch,
            place,
            member: i as u32 + 1,
        };
        done = done.union(round(shared, session, anchor, only(i)));
        steps.record(&session.report(&shared.voters), only(i));
    }
    counting(shared, done);
    if done.len() < named {
        // The masters anchored now are sources for a repair of the rest.
        return Err(Error::NoQuorum(steps.report()));
    }
    Ok(steps.report())
}

/// Re-anchors every master whose domain has no anchor or one that is not
/// valid (anchored before a restart or a change of its data set), from the
/// masters still validly anchored (the sources): moves a quorum of sources
/// to a fresh epoch (the barrier), reading their counters in the same
/// step, then anchors the others with the largest. With no master to
/// re-anchor, it only moves the reachable masters to a fresh epoch. An
/// anchor of the earlier format (anchored by the current run, but without
/// the data set recorded) is a source, upgraded by the barrier.
///
/// Fails with `Error::NoQuorum` if fewer than a quorum of sources pass the
/// barrier (nothing is anchored then), and with a configuration error if
/// the anchors show that the handle does not name the domain's members.
/// The report says where each master ended: agreed (in the fresh epoch: a
/// source past the barrier, or a master re-anchored), failed with the
/// [`FenceFault`] that leaves it out (no anchor, restarted, another data
/// set, ...), or with the error of the step it failed.
pub(crate) fn repair(shared: &Shared) -> Result<NodeReport, Error> {
    let domain = domain(shared)?;
    let mut session = shared.pool.take();
    let result = repair_on(shared, &mut session, domain);
    shared.pool.give_back(session);
    result
}

fn repair_on(shared: &Shared, session: &mut Session, domain: &[u8]) -> Result<NodeReport, Error> {
    let named = shared.voters.len();
    let answered = round(
        shared,
        session,
        Command::FenceProbe { domain },
        NodeSet::all(named),
    );
    let readings: Vec<Reading> = (0..named).map(|i| session.reading(i)).collect();
    let mut steps = Steps::new(session.report(&shared.voters));
    let (mut sources, mut targets) = (NodeSet::EMPTY, NodeSet::EMPTY);
    for i in answered.iter() {
        match readings[i].state {
            1 | 5 => sources.insert(i),
            0 | 2 | 4 => targets.insert(i),
            // INFO refused: neither counts nor can be anchored.
            _ => steps.set(only(i), left_out(FenceFault::InfoRefused)),
        }
    }
    for i in targets.iter() {
        steps.set(only(i), left_out(fault_of(readings[i].state)));
    }
    let place = match members::place(shared, &readings, answered)? {
        Some(place) => place,
        None => (fresh()?, named as u32), // the earlier format: upgraded now
    };
    let members = members::assign(&readings, answered, sources.union(targets), place.1);
    let epoch = fresh()?;
    // The barrier: sources with a member in one round; those of the
    // earlier format one by one, each given its member.
    let mut barred = sources;
    let mut passed = NodeSet::EMPTY;
    let mut recorded = NodeSet::EMPTY;
    for i in sources.iter().filter(|&i| readings[i].domain_id != 0) {
        recorded.insert(i);
    }
    let barrier = |member| Command::FenceBarrier {
        domain,
        epoch,
        place,
        member,
    };
    if !recorded.is_empty() {
        passed = round(shared, session, barrier(0), recorded);
        steps.record(&session.report(&shared.voters), recorded);
    }
    for i in sources.difference(recorded).iter() {
        match members[i] {
            0 => {
                // Its member cannot be told now (a master did not answer).
                barred.remove(i);
                steps.set(only(i), left_out(FenceFault::OldAnchor));
            }
            member => {
                passed = passed.union(round(shared, session, barrier(member), only(i)));
                steps.record(&session.report(&shared.voters), only(i));
            }
        }
    }
    if passed.len() < quorum(named) {
        return Err(Error::NoQuorum(steps.report()));
    }
    counting(shared, passed);
    let counter = passed
        .iter()
        .map(|i| session.reading(i).counter)
        .max()
        .unwrap_or(0);
    let mut anchored = NodeSet::EMPTY;
    for i in targets.iter() {
        let member = members[i];
        if member == 0 {
            continue; // its member cannot be told now: left out
        }
        let anchor = Command::FenceAnchor {
            domain,
            counter,
            epoch,
            place,
            member,
        };
        anchored = anchored.union(round(shared, session, anchor, only(i)));
        steps.record(&session.report(&shared.voters), only(i));
    }
    counting(shared, anchored);
    if anchored != targets || barred != sources {
        return Err(Error::NoQuorum(steps.report()));
    }
    Ok(steps.report())
}

/// The masters in `anchored` count for fencing now (the health view).
fn counting(shared: &Shared, anchored: NodeSet) {
    for i in anchored.iter() {
        shared.states[i].fence(|s| s.counts());
    }
}

/// The set of master `i` alone.
fn only(i: usize) -> NodeSet {
    let mut set = NodeSet::EMPTY;
    set.insert(i);
    set
}

/// The outcome of a master left out of fencing for `fault`.
fn left_out(fault: FenceFault) -> NodeOutcome {
    NodeOutcome::Failed(NodeError::Fence(fault))
}

/// Why a master whose probe answered `state` (0, 2 or 4) needs anchoring.
fn fault_of(state: u8) -> FenceFault {
    match state {
        0 => FenceFault::Unanchored,
        2 => FenceFault::Restarted,
        _ => FenceFault::ReplicationChanged,
    }
}

/// What each master did over an operation's steps: its outcome in the last
/// step that asked it something, so that a master that failed the probe
/// shows that failure rather than "not sent" by the later steps.
struct Steps(Vec<NodeStatus>);

impl Steps {
    fn new(first: NodeReport) -> Steps {
        Steps(first.iter().cloned().collect())
    }

    /// Takes `report`'s outcomes for the masters in `asked`.
    fn record(&mut self, report: &NodeReport, asked: NodeSet) {
        for (i, status) in report.iter().enumerate() {
            if asked.contains(i) {
                self.0[i].outcome = status.outcome.clone();
            }
        }
    }

    fn set(&mut self, masters: NodeSet, outcome: NodeOutcome) {
        for i in masters.iter() {
            self.0[i].outcome = outcome.clone();
        }
    }

    fn report(self) -> NodeReport {
        NodeReport::new(self.0)
    }
}

/// Sends `command` to the masters in `to` and waits for all their
/// answers (up to the node timeout); returns those that said yes.
fn round(shared: &Shared, session: &mut Session, command: Command<'_>, to: NodeSet) -> NodeSet {
    let plan = Plan::everyone(command, to, Instant::now() + shared.node_timeout);
    session.run(shared.masters(), plan);
    session.agreed()
}

fn domain(shared: &Shared) -> Result<&[u8], Error> {
    shared
        .fence
        .as_deref()
        .ok_or(Error::Config(ConfigError::FencingOff))
}

/// A fresh epoch or domain id, at random in `1..2^53` (docs/fencing.md, A6).
fn fresh() -> Result<u64, Error> {
    let n = getrandom::u64().map_err(|e| Error::Entropy(io::Error::other(e.to_string())))?;
    Ok(n % (FENCE_LIMIT - 1) + 1)
}
