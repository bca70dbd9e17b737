//! The names the features `metrics` and `tracing` give what the events
//! carry: one snake_case word per operation, outcome, waking cause, lease
//! ending and master failure, the same in a metric's label and a span's
//! field, written once here. (A resource name is shown escaped by
//! `Resources`' `Display`.)

use super::{LeaseChange, MasterChange, Operation, RoundOutcome, WokenBy};
use crate::error::Error;
#[cfg(feature = "metrics")]
use crate::error::NodeError;

/// Every operation, in the order of [`operation_index`].
pub(crate) const OPERATIONS: [&str; 3] = ["acquire", "release", "extend"];

/// The place of `operation` in [`OPERATIONS`].
pub(crate) fn operation_index(operation: Operation) -> usize {
    match operation {
        Operation::Acquire => 0,
        Operation::Release => 1,
        Operation::Extend => 2,
    }
}

/// Every outcome of a round (and of a call), in the order of
/// [`outcome_index`].
pub(crate) const OUTCOMES: [&str; 7] = [
    "succeeded",
    "contended",
    "no_quorum",
    "too_slow",
    "lost",
    "expired",
    "failed",
];

/// The place of `outcome` in [`OUTCOMES`].
pub(crate) fn outcome_index(outcome: RoundOutcome) -> usize {
    match outcome {
        RoundOutcome::Succeeded => 0,
        RoundOutcome::Contended => 1,
        RoundOutcome::NoQuorum => 2,
        RoundOutcome::TooSlow => 3,
        RoundOutcome::Lost => 4,
        RoundOutcome::Expired => 5,
        RoundOutcome::Failed => 6,
    }
}

/// The name of `outcome`.
#[cfg(feature = "tracing")]
pub(crate) fn outcome_name(outcome: RoundOutcome) -> &'static str {
    OUTCOMES[outcome_index(outcome)]
}

/// What woke a waiting call, in the order of [`woken_index`].
pub(crate) const WOKEN_BY: [&str; 3] = ["notice", "timer", "subscribed"];

/// The place of `by` in [`WOKEN_BY`].
pub(crate) fn woken_index(by: WokenBy) -> usize {
    match by {
        WokenBy::Notice => 0,
        WokenBy::Timer => 1,
        WokenBy::Subscribed => 2,
    }
}

/// Why a lease ended (or stopped being renewed), in the order of
/// [`lease_end_index`].
pub(crate) const LEASE_ENDS: [&str; 4] = ["lost", "expired", "forked", "hold_limit"];

/// The place in [`LEASE_ENDS`] of the end `change` tells (`None`: the
/// lease goes on, renewed or to be tried again).
pub(crate) fn lease_end_index(change: &LeaseChange<'_>) -> Option<usize> {
    match change {
        LeaseChange::Renewed { .. } | LeaseChange::RenewalFailed(_) => None,
        LeaseChange::Lost(Error::Expired { .. }) => Some(1),
        LeaseChange::Lost(Error::Forked) => Some(2),
        // `LockLost`, and whatever else ends a lease for good.
        LeaseChange::Lost(_) => Some(0),
        LeaseChange::HoldLimit => Some(3),
    }
}

/// How a master failed in a round, in the order of [`failure_index`]:
/// one word per kind of [`NodeError`].
#[cfg(feature = "metrics")]
pub(crate) const FAILURES: [&str; 23] = [
    "refused",
    "timed_out",
    "unresolved",
    "closed",
    "protocol",
    "server_error",
    "handshake",
    "io",
    "backoff",
    "backlogged",
    "shares_master",
    "tls",
    "cannot_release",
    "identity_changed",
    "role_refused",
    "no_master",
    "replicas_behind",
    "not_fsynced",
    "replica_ack_refused",
    "fence",
    "fence_slots",
    "not_a_voter",
    "cannot_lock_sets",
];

/// The place of `error`'s kind in [`FAILURES`].
#[cfg(feature = "metrics")]
pub(crate) fn failure_index(error: &NodeError) -> usize {
    match error {
        NodeError::Refused => 0,
        NodeError::TimedOut(_) => 1,
        NodeError::Unresolved => 2,
        NodeError::Closed => 3,
        NodeError::Protocol(_) => 4,
        NodeError::Server(_) => 5,
        NodeError::Handshake(_) => 6,
        NodeError::Io(_) => 7,
        NodeError::Backoff { .. } => 8,
        NodeError::Backlogged => 9,
        NodeError::SharesMaster(_) => 10,
        NodeError::Tls(_) => 11,
        NodeError::CannotRelease(_) => 12,
        NodeError::IdentityChanged => 13,
        NodeError::RoleRefused(_) => 14,
        NodeError::NoMaster(_) => 15,
        NodeError::ReplicasBehind { .. } => 16,
        NodeError::NotFsynced => 17,
        NodeError::ReplicaAckRefused { .. } => 18,
        NodeError::Fence(_) => 19,
        NodeError::FenceSlots { .. } => 20,
        NodeError::NotAVoter(_) => 21,
        NodeError::CannotLockSets(_) => 22,
    }
}

/// The name of a master's change of state, and whether it is up after it
/// (`None`: the change says nothing of that).
pub(crate) fn master_change(change: &MasterChange<'_>) -> (&'static str, Option<bool>) {
    match change {
        MasterChange::Down(_) => ("down", Some(false)),
        MasterChange::Back => ("back", Some(true)),
        MasterChange::MissingRight(_) => ("missing_right", Some(false)),
        MasterChange::NotAVoter(_) => ("not_a_voter", Some(false)),
        MasterChange::NoticesRefused(_) => ("notices_refused", None),
        MasterChange::FenceLeftOut(_) => ("fence_left_out", None),
        MasterChange::FenceBack => ("fence_back", None),
        MasterChange::Readdressed { .. } => ("readdressed", None),
        MasterChange::Unresolved { .. } => ("unresolved", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_distinct_snake_case_word() {
        for names in [
            &OPERATIONS[..],
            &OUTCOMES[..],
            &WOKEN_BY[..],
            &LEASE_ENDS[..],
            #[cfg(feature = "metrics")]
            &FAILURES[..],
        ] {
            for (i, name) in names.iter().enumerate() {
                assert!(
                    name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{name}"
                );
                assert!(!names[..i].contains(name), "{name} twice");
            }
        }
    }

    #[test]
    fn each_outcome_has_its_own_place() {
        let all = [
            RoundOutcome::Succeeded,
            RoundOutcome::Contended,
            RoundOutcome::NoQuorum,
            RoundOutcome::TooSlow,
            RoundOutcome::Lost,
            RoundOutcome::Expired,
            RoundOutcome::Failed,
        ];
        let places: Vec<usize> = all.iter().map(|o| outcome_index(*o)).collect();
        assert_eq!(places, (0..OUTCOMES.len()).collect::<Vec<_>>());
        assert_eq!(OUTCOMES[outcome_index(RoundOutcome::NoQuorum)], "no_quorum");
    }
}
