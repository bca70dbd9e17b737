//! Fencing's client side (docs/fencing.md): the token an acquisition
//! carries. Round 1 (`acquire.lua`, sent by `acquire` in place of `SET
//! NX`) reports each granting master's counter and epoch; here they are
//! made a token, final at once when a quorum agrees, or after the
//! write-back round (`write_back.lua`) otherwise ([`make_final`]); and
//! the operator's calls that anchor a fence domain (`operator`).
//!
//! Only the masters whose grant was heard before round 1 was decided,
//! on connections whose probe found the domain valid, count (the others'
//! grants fail at the connection: `command::fence::FenceCheck`). The token
//! is the largest counter among them; it is final once a quorum holds a
//! counter at least the token from within our tenure, in one epoch.
//!
//! Before a token is made, the masters' anchors must show that this handle
//! names the masters the domain was initialised on (`members`), and after
//! it, each master's standing for fencing (counting, or left out in
//! another epoch) goes to the health view. When no epoch has a quorum of
//! masters the failure is the operator's to fix (`split`).
//!
//! The operator's calls (`operator`: `fence_init`; `repair`) look at every
//! hash of the domain (`hashes`): one per standalone master, one per slot
//! on a cluster voter.

mod hashes;
mod members;
pub(crate) use members::misnamed;
pub(crate) mod operator;
pub(crate) mod repair;
mod split;

use crate::clock::BootInstant;
use crate::command::fence::Reading;
use crate::command::{Command, SetCommand};
use crate::error::{Error, FenceFault, NodeError, NodeOutcome, NodeReport};
use crate::handle::Shared;
use crate::names::Keys;
use crate::quorum::{quorum, validity, Decision, NodeSet, Rule};
use crate::resp::ServerErrorKind;
use crate::round::{Dial, Plan, Session};
use std::time::{Duration, Instant};

/// What round 1 decided, before the token is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decided {
    /// The largest counter the granting masters reported.
    pub(crate) token: u64,
    /// The epoch most of them reported (ties: one reported with the token).
    pub(crate) epoch: u64,
    /// The masters that reported exactly the token in that epoch.
    pub(crate) agreeing: NodeSet,
    /// The granting masters in that epoch, and those in another.
    pub(crate) in_epoch: NodeSet,
    pub(crate) other_epochs: NodeSet,
}

/// The token, epoch and agreeing masters of the grants `agreed`, whose
/// answers `reading` gives (docs/fencing.md, "Round 1", steps 1 to 3).
pub(crate) fn decide(agreed: NodeSet, reading: impl Fn(usize) -> Reading) -> Decided {
    let token = agreed.iter().map(|i| reading(i).counter).max().unwrap_or(0);
    let mut best = (0, false, 0);
    for i in agreed.iter() {
        let epoch = reading(i).epoch;
        let same = |j: usize| reading(j).epoch == epoch;
        let count = agreed.iter().filter(|&j| same(j)).count();
        let with_token = agreed
            .iter()
            .any(|j| same(j) && reading(j).counter == token);
        if (count, with_token) > (best.0, best.1) {
            best = (count, with_token, epoch);
        }
    }
    let epoch = best.2;
    let (mut agreeing, mut in_epoch, mut other_epochs) =
        (NodeSet::EMPTY, NodeSet::EMPTY, NodeSet::EMPTY);
    for i in agreed.iter() {
        let r = reading(i);
        if r.epoch != epoch {
            other_epochs.insert(i);
            continue;
        }
        in_epoch.insert(i);
        if r.counter == token {
            agreeing.insert(i);
        }
    }
    Decided {
        token,
        epoch,
        agreeing,
        in_epoch,
        other_epochs,
    }
}

/// A granted round 1, whose token is to be made final.
pub(crate) struct Granted<'a> {
    pub(crate) resource: &'a [u8],
    /// A set's keys (two or more), whose write-back checks every one;
    /// empty for a lock on `resource` alone.
    pub(crate) set: Keys<'a>,
    pub(crate) domain: &'a [u8],
    pub(crate) value: &'a [u8],
    /// The masters whose grant was heard (and counts).
    pub(crate) agreed: NodeSet,
    /// When round 1 started, and the TTL it set.
    pub(crate) started: BootInstant,
    pub(crate) ttl: Duration,
}

/// Makes round 1's token final (docs/fencing.md, "An acquisition"): at
/// once when a quorum of the granting masters agree on it; otherwise after
/// one write-back round to every master that granted (those that agree
/// answer yes at once: it re-checks that our key is still there), decided
/// by a quorum within what is left of the validity. `Err` when it cannot
/// be: the caller releases what round 1 set.
pub(crate) fn make_final(
    shared: &Shared,
    session: &mut Session,
    granted: Granted<'_>,
) -> Result<u64, Error> {
    if let Some(error) = members::misnamed(shared, session) {
        return Err(error);
    }
    let decided = decide(granted.agreed, |i| session.reading(i));
    let needed = quorum(shared.voters.len());
    let write_back = if granted.set.len() > 1 {
        Command::Set(SetCommand::WriteBack {
            keys: granted.set,
            domain: granted.domain,
            value: granted.value,
            token: decided.token,
            epoch: decided.epoch,
        })
    } else {
        Command::WriteBack {
            resource: granted.resource,
            domain: granted.domain,
            value: granted.value,
            token: decided.token,
            epoch: decided.epoch,
        }
    };
    if decided.agreeing.len() >= needed {
        standing(shared, &decided, &write_back);
        return Ok(decided.token);
    }
    let left = |now: BootInstant| validity(granted.ttl, now.saturating_since(granted.started));
    let Some(left_now) = left(BootInstant::now()) else {
        return Err(too_slow(&granted));
    };
    let plan = Plan {
        command: write_back,
        to: granted.agreed,
        others: None,
        rule: Rule::Extend,
        // A token made final after the validity ended is not one.
        deadline: Instant::now() + shared.node_timeout.min(left_now),
        dial: Dial::OutsideBackoff,
        skip: NodeSet::EMPTY,
        unawaited: false,
    };
    let tally = session.run(shared.masters(), plan);
    match tally.decision(Rule::Extend) {
        Decision::Reached if left(BootInstant::now()).is_some() => {
            standing(shared, &decided, &write_back);
            Ok(decided.token)
        }
        Decision::Reached => Err(too_slow(&granted)),
        _ => {
            let report = session.report(&shared.voters);
            if let Some(error) = unanchored(&report) {
                return Err(error);
            }
            // Epochs that disagree: a repair under way (try again), or one
            // that missed masters, after which no epoch may have a quorum
            // (the operator's to fix).
            let epochs_differ = !decided.other_epochs.is_empty() || refused_epoch(&report);
            if let Some(error) = epochs_differ
                .then(|| split::check(shared, session, &write_back))
                .flatten()
            {
                return Err(error);
            }
            Err(Error::FenceUnavailable {
                counted: tally.yes,
                needed,
                report,
            })
        }
    }
}

/// After a token was made final in `decided`'s epoch: the granting
/// masters of that epoch count for fencing, those in another are left out
/// (they missed a repair's barrier), as the health view shows; a cluster
/// voter in the slot of the hash it counted (that of `command`).
fn standing(shared: &Shared, decided: &Decided, command: &Command<'_>) {
    let slot = |i: usize| shared.voters[i].fence_slot(command);
    for i in decided.in_epoch.iter() {
        shared.states[i].fence(|s| s.counts(slot(i)));
    }
    for i in decided.other_epochs.iter() {
        shared.states[i].fence(|s| s.left_out(slot(i), FenceFault::OtherEpoch));
    }
}

/// Whether some master refused the write-back because its epoch changed.
fn refused_epoch(report: &NodeReport) -> bool {
    report.iter().any(|s| {
        matches!(s.outcome(), NodeOutcome::Failed(e)
            if e.server_error().map(|e| e.kind()) == Some(ServerErrorKind::FenceEpoch))
    })
}

fn too_slow(granted: &Granted<'_>) -> Error {
    Error::TooSlow {
        elapsed: BootInstant::now().saturating_since(granted.started),
        ttl: granted.ttl,
    }
}

/// The error for a fenced round whose failures need the operator: a
/// counter at its limit, or too few masters with a valid anchor for a
/// quorum. `None` when neither explains the failure.
pub(crate) fn unanchored(report: &NodeReport) -> Option<Error> {
    let kind = |e: &NodeError| e.server_error().map(|s| s.kind());
    let failed = || {
        report.iter().filter_map(|s| match s.outcome() {
            NodeOutcome::Failed(e) => Some(e),
            _ => None,
        })
    };
    if failed().any(|e| kind(e) == Some(ServerErrorKind::FenceLimit)) {
        return Some(Error::FenceExhausted(report.clone()));
    }
    let unanchored = failed()
        .filter(|e| {
            matches!(e, NodeError::Fence(_))
                || matches!(
                    kind(e),
                    Some(ServerErrorKind::NoAnchor | ServerErrorKind::FenceStale)
                )
        })
        .count();
    // A quorum is out of reach without the unanchored masters.
    let others = report.len() - unanchored;
    (unanchored > 0 && others < quorum(report.len()))
        .then(|| Error::FenceUnanchored(report.clone()))
}

#[cfg(test)]
mod tests;
