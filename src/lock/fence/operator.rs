//! The operator's calls on a fence domain (docs/fencing.md, sections 8
//! and 9): [`init`] anchors a new domain on every master; the repair
//! (`repair`) re-anchors masters that lost their state (or restarted, or
//! rolled back, since they were anchored) from a quorum that kept it,
//! behind a barrier. Neither is ever run by the library on its own: a
//! fresh deployment and one whose masters all lost their state look alike,
//! and only the operator can tell them apart.
//!
//! Each anchor records the domain's place (its id and how many members:
//! `members`) and which member it is: `init` numbers the masters in the
//! order the handle names them, and the repair gives a master that lost
//! its anchor the member nobody holds. On a cluster voter every slot's hash
//! is anchored, and repaired, like a master's (`hashes`); here are also
//! what the two calls share: each voter's outcome for the report, and
//! what they found of each hash for the health view.

use super::hashes::{self, Answer, Grid, Step};
use crate::command::fence::FENCE_LIMIT;
use crate::command::Command;
use crate::error::{
    ConfigError, Error, FenceFault, NodeError, NodeOutcome, NodeReport, NodeStatus,
};
use crate::handle::Shared;
use crate::round::Session;
use std::io;

/// Anchors the handle's fence domain on every master with the counter
/// `start` in a fresh epoch, if every master answers and none is anchored
/// yet (`Error::FenceInitRefused` otherwise, writing nothing: its report
/// shows the anchored masters as declined). A cluster voter answers for
/// every slot's hash, and is anchored in each.
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
    let grid = Grid::of(shared);
    let named = grid.voters();
    let probe = probe(shared, session, &grid, domain);
    let mut report = Outcomes::of(shared, &probe);
    let mut refused = false;
    for i in 0..named {
        let answers = probe.answers(i);
        let anchored = answers
            .iter()
            .any(|a| matches!(a, Answer::Yes(r) if r.state != 0));
        if anchored {
            // Said per master, so that the operator sees which are anchored.
            report.set(i, NodeOutcome::Declined);
        }
        refused |= anchored || !answers.iter().all(|a| matches!(a, Answer::Yes(_)));
    }
    if refused {
        return Err(Error::FenceInitRefused(report.done()));
    }
    let epoch = fresh()?;
    let place = (fresh()?, named as u32);
    let anchors = hashes::run(shared, session, &grid, |i, slot| {
        Some(Command::FenceAnchor {
            domain,
            slot,
            counter: start,
            epoch,
            place,
            member: i as u32 + 1,
        })
    });
    let mut all = true;
    for i in 0..named {
        report.take(i, &anchors);
        let ends: Vec<End> = anchors
            .answers(i)
            .iter()
            .map(|a| match a {
                Answer::Yes(_) => End::Counts,
                Answer::Failed(None) => End::Unknown,
                _ => End::LeftOut(FenceFault::Unanchored),
            })
            .collect();
        all &= ends.iter().all(|e| *e == End::Counts);
        found(shared, &grid, i, &ends);
    }
    if !all {
        // The masters anchored now are sources for a repair of the rest.
        return Err(Error::NoQuorum(report.done()));
    }
    Ok(report.done())
}

/// Probes every hash of the domain.
pub(super) fn probe(shared: &Shared, session: &mut Session, grid: &Grid, domain: &[u8]) -> Step {
    hashes::run(shared, session, grid, |_, slot| {
        Some(Command::FenceProbe { domain, slot })
    })
}

/// Where one hash ended, for the health view and a cluster voter's line
/// in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// It counts (anchored, or past the repair's barrier).
    Counts,
    /// It is left out, for this fault.
    LeftOut(FenceFault),
    /// Not known (no answer).
    Unknown,
}

/// Records what the operator found of voter `i`'s hashes (`ends`, one per
/// hash) in the health view: a one-hash voter counts if its hash does (as
/// before cluster voters, a left-out one is told by the next probe or
/// acquisition); a cluster voter's slots, each as found.
pub(super) fn found(shared: &Shared, grid: &Grid, i: usize, ends: &[End]) {
    let state = &shared.states[i];
    if !grid.per_slot(i) {
        if ends.first() == Some(&End::Counts) {
            state.fence(|s| s.counts(None));
        }
        return;
    }
    let left_out: Vec<(u16, FenceFault)> = ends
        .iter()
        .enumerate()
        .filter_map(|(slot, end)| match end {
            End::LeftOut(fault) => Some((slot as u16, *fault)),
            _ => None,
        })
        .collect();
    if !ends.contains(&End::Unknown) {
        state.fence(|s| s.slots_found(&left_out));
        return;
    }
    for (slot, end) in ends.iter().enumerate() {
        match end {
            End::Counts => state.fence(|s| s.counts(Some(slot as u16))),
            End::LeftOut(fault) => state.fence(|s| s.left_out(Some(slot as u16), *fault)),
            End::Unknown => {}
        }
    }
}

/// What each voter did over an operation's steps, for the report: a
/// one-hash voter's outcome in the last step that asked it something (so
/// that a master that failed the probe shows that failure rather than "not
/// sent" by the later steps), or what it was left out for; a cluster
/// voter's, from where its hashes ended ([`Outcomes::ended`]).
pub(super) struct Outcomes(Vec<NodeStatus>);

impl Outcomes {
    /// The outcomes of `first`, the first step.
    pub(super) fn of(shared: &Shared, first: &Step) -> Outcomes {
        Outcomes(
            shared
                .voters
                .iter()
                .enumerate()
                .map(|(i, voter)| NodeStatus {
                    node: voter.name().to_string(),
                    outcome: first.outcome(i).unwrap_or(NodeOutcome::NotSent),
                })
                .collect(),
        )
    }

    /// Takes voter `i`'s outcome in `step`, if it was asked.
    pub(super) fn take(&mut self, i: usize, step: &Step) {
        if let Some(outcome) = step.outcome(i) {
            self.0[i].outcome = outcome;
        }
    }

    pub(super) fn set(&mut self, i: usize, outcome: NodeOutcome) {
        self.0[i].outcome = outcome;
    }

    /// A cluster voter's outcome from where its hashes ended: agreed if
    /// all count, its first failure (`failure`) if some did not answer,
    /// else in how many slots it is left out of fencing, and why.
    pub(super) fn ended(&mut self, i: usize, ends: &[End], failure: Option<&NodeError>) {
        let mut left_out = ends.iter().filter_map(|e| match e {
            End::LeftOut(fault) => Some(*fault),
            _ => None,
        });
        self.0[i].outcome = if ends.contains(&End::Unknown) {
            NodeOutcome::Failed(failure.cloned().unwrap_or(NodeError::Backlogged))
        } else if let Some(fault) = left_out.next() {
            NodeOutcome::Failed(NodeError::FenceSlots {
                fault,
                slots: (left_out.count() + 1) as u16,
            })
        } else {
            NodeOutcome::Agreed
        };
    }

    pub(super) fn done(self) -> NodeReport {
        NodeReport::new(self.0)
    }
}

/// The outcome of a master left out of fencing for `fault`.
pub(super) fn left_out(fault: FenceFault) -> NodeOutcome {
    NodeOutcome::Failed(NodeError::Fence(fault))
}

/// Why a master whose probe answered `state` (0, 2 or 4) needs anchoring.
pub(super) fn fault_of(state: u8) -> FenceFault {
    match state {
        0 => FenceFault::Unanchored,
        2 => FenceFault::Restarted,
        _ => FenceFault::ReplicationChanged,
    }
}

pub(super) fn domain(shared: &Shared) -> Result<&[u8], Error> {
    shared
        .fence
        .as_deref()
        .ok_or(Error::Config(ConfigError::FencingOff))
}

/// A fresh epoch or domain id, at random in `1..2^53` (docs/fencing.md, A6).
pub(super) fn fresh() -> Result<u64, Error> {
    let n = getrandom::u64().map_err(|e| Error::Entropy(io::Error::other(e.to_string())))?;
    Ok(n % (FENCE_LIMIT - 1) + 1)
}
