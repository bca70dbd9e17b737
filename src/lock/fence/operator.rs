//! The operator's calls on a fence domain (docs/fencing.md, sections 8
//! and 9): [`init`] anchors a new domain on every master; [`repair`]
//! re-anchors masters that lost their state (or restarted since they were
//! anchored) from a quorum that kept it, behind a barrier. Neither is ever
//! run by the library on its own: a fresh deployment and one whose masters
//! all lost their state look alike, and only the operator can tell them
//! apart.

use crate::command::fence::FENCE_LIMIT;
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
    let all = NodeSet::all(shared.voters.len());
    let answered = round(shared, session, Command::FenceProbe { domain }, all);
    let mut anchored = NodeSet::EMPTY;
    for i in answered.iter() {
        if session.reading(i).state != 0 {
            anchored.insert(i);
        }
    }
    if answered.len() < shared.voters.len() || !anchored.is_empty() {
        // Said per master, so that the operator sees which are anchored.
        let mut steps = Steps::new(session.report(&shared.voters));
        steps.set(anchored, NodeOutcome::Declined);
        return Err(Error::FenceInitRefused(steps.report()));
    }
    let epoch = fresh_epoch()?;
    let anchor = Command::FenceAnchor {
        domain,
        counter: start,
        epoch,
    };
    let anchored = round(shared, session, anchor, all);
    let report = session.report(&shared.voters);
    if anchored.len() < shared.voters.len() {
        // The masters anchored now are sources for a repair of the rest.
        return Err(Error::NoQuorum(report));
    }
    Ok(report)
}

/// Re-anchors every master whose domain has no anchor or one from before
/// a restart, from the masters still anchored by their current run (the
/// sources): moves a quorum of sources to a fresh epoch (the barrier),
/// reading their counters in the same step, then anchors the others with
/// the largest. With no master to re-anchor, it only moves the reachable
/// masters to a fresh epoch. Fails with `Error::NoQuorum` if fewer than a
/// quorum of sources pass the barrier (nothing is anchored then). The
/// report says where each master ended: agreed (in the fresh epoch: a
/// source past the barrier, or a master re-anchored), not sent (still
/// without a valid anchor), or failed (the step it failed, or
/// `FenceFault::InfoRefused`).
pub(crate) fn repair(shared: &Shared) -> Result<NodeReport, Error> {
    let domain = domain(shared)?;
    let mut session = shared.pool.take();
    let result = repair_on(shared, &mut session, domain);
    shared.pool.give_back(session);
    result
}

fn repair_on(shared: &Shared, session: &mut Session, domain: &[u8]) -> Result<NodeReport, Error> {
    let all = NodeSet::all(shared.voters.len());
    let answered = round(shared, session, Command::FenceProbe { domain }, all);
    let (mut sources, mut targets, mut blind) = (NodeSet::EMPTY, NodeSet::EMPTY, NodeSet::EMPTY);
    for i in answered.iter() {
        match session.reading(i).state {
            1 => sources.insert(i),
            0 | 2 => targets.insert(i),
            _ => blind.insert(i), // INFO refused: neither counts nor can be anchored
        }
    }
    let mut steps = Steps::new(session.report(&shared.voters));
    steps.set(targets, NodeOutcome::NotSent);
    steps.set(
        blind,
        NodeOutcome::Failed(NodeError::Fence(FenceFault::InfoRefused)),
    );
    let epoch = fresh_epoch()?;
    let passed = round(
        shared,
        session,
        Command::FenceBarrier { domain, epoch },
        sources,
    );
    steps.record(&session.report(&shared.voters), sources);
    if passed.len() < quorum(shared.voters.len()) {
        return Err(Error::NoQuorum(steps.report()));
    }
    let counter = passed
        .iter()
        .map(|i| session.reading(i).counter)
        .max()
        .unwrap_or(0);
    if targets.is_empty() {
        return Ok(steps.report());
    }
    let anchor = Command::FenceAnchor {
        domain,
        counter,
        epoch,
    };
    let anchored = round(shared, session, anchor, targets);
    steps.record(&session.report(&shared.voters), targets);
    if anchored != targets {
        return Err(Error::NoQuorum(steps.report()));
    }
    Ok(steps.report())
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

/// A fresh epoch, at random in `1..2^53` (docs/fencing.md, A6).
fn fresh_epoch() -> Result<u64, Error> {
    let n = getrandom::u64().map_err(|e| Error::Entropy(io::Error::other(e.to_string())))?;
    Ok(n % (FENCE_LIMIT - 1) + 1)
}
