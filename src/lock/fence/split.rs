//! Masters left in different fence epochs (docs/fencing.md, "Epochs that
//! split"): after a repair whose barrier missed a master, or two repairs at
//! once, no epoch may hold a quorum of the validly anchored masters, and
//! then no token can be made final until the operator repairs again. That
//! is told apart from a repair under way (whose barrier moves a quorum to
//! its epoch within one round) by probing every master once more.

use crate::command::{Command, SetCommand};
use crate::error::{Error, FenceFault, NodeError, NodeOutcome, NodeReport, NodeStatus};
use crate::handle::Shared;
use crate::quorum::{quorum, NodeSet};
use crate::round::{Plan, Session};
use std::time::Instant;

/// Probes every master's hash that `write_back` (a failed write-back)
/// named (a cluster voter's, of the resource's slot) and returns
/// [`Error::FenceEpochsSplit`] if a quorum of them is validly anchored but
/// no epoch holds a quorum of those (each master left out is told to the
/// health view, and said in the report); `None` otherwise (the failure was
/// something else, or passed).
pub(crate) fn check(
    shared: &Shared,
    session: &mut Session,
    write_back: &Command<'_>,
) -> Option<Error> {
    let named = shared.voters.len();
    let domain = match *write_back {
        Command::WriteBack { domain, .. } | Command::Set(SetCommand::WriteBack { domain, .. }) => {
            domain
        }
        _ => return None,
    };
    let slot = write_back.slot()?;
    let probe = Command::FenceProbe { domain, slot };
    let plan = Plan::everyone(
        probe,
        NodeSet::all(named),
        Instant::now() + shared.node_timeout,
    );
    session.run(shared.masters(), plan);
    let (answered, mut valid) = (session.agreed(), NodeSet::EMPTY);
    for i in answered.iter() {
        if session.reading(i).state == 1 {
            valid.insert(i);
        }
    }
    let epoch = |i: usize| session.reading(i).epoch;
    let largest = valid
        .iter()
        .map(|i| valid.iter().filter(|&j| epoch(j) == epoch(i)).count())
        .max()
        .unwrap_or(0);
    let needed = quorum(named);
    if valid.len() < needed || largest >= needed {
        return None;
    }
    let mut statuses: Vec<NodeStatus> = session.report(&shared.voters).iter().cloned().collect();
    for (i, status) in statuses.iter_mut().enumerate() {
        let fault = if valid.contains(i) {
            Some(FenceFault::OtherEpoch)
        } else if answered.contains(i) {
            left_out(session.reading(i).state)
        } else {
            None
        };
        if let Some(fault) = fault {
            let slot = shared.voters[i].fence_slot(&probe);
            shared.states[i].fence(|s| s.left_out(slot, fault));
            status.outcome = NodeOutcome::Failed(NodeError::Fence(fault));
        }
    }
    Some(Error::FenceEpochsSplit(NodeReport::new(statuses)))
}

/// Why a master whose probe answered `state` is left out (none for a
/// master that did not answer: its report says why).
fn left_out(state: u8) -> Option<FenceFault> {
    match state {
        0 => Some(FenceFault::Unanchored),
        2 => Some(FenceFault::Restarted),
        3 => Some(FenceFault::InfoRefused),
        4 => Some(FenceFault::ReplicationChanged),
        5 => Some(FenceFault::OldAnchor),
        _ => None,
    }
}
