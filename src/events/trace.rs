//! The feature `tracing`: what the handle tells, as `tracing` events
//! (target `redlock_sync`, at the levels of the `log` feature's lines);
//! and how many masters agreed in the last round a thread told, for the
//! span of the call that ran it (`call`).
//!
//! Each event names its fields (`operation`, `resource`, `outcome`,
//! `elapsed_us`, `masters_agreed`, `master`, `error`, ...) with the words
//! of `labels`. A resource is shown escaped (a set's as `{a, b}`, bounded:
//! `Resources`); no event carries a lock value
//! or a password, so none shows one. Nothing is allocated here: fields
//! are recorded by reference, and formatted, if at all, by the subscriber.

use super::labels::{
    lease_end_index, master_change, operation_index, outcome_name, LEASE_ENDS, OPERATIONS, WOKEN_BY,
};
use super::{
    LeaseChange, LeaseEvent, MasterAnswer, MasterEvent, RoundEvent, WaitChange, WaitEvent,
};
use crate::events::labels::woken_index;
use std::cell::Cell;
use std::time::Duration;

/// The target of the crate's spans and events.
pub(super) const TARGET: &str = "redlock_sync";

thread_local! {
    /// How many masters agreed in the last round told on this thread:
    /// what the span of the call that ran it records as `masters_agreed`.
    static AGREED: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Whether an event at `warn` (else debug) level would be recorded.
pub(super) fn enabled(warn: bool) -> bool {
    if warn {
        tracing::enabled!(target: TARGET, tracing::Level::WARN)
    } else {
        tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn round(event: &RoundEvent<'_>) {
    let agreed = event
        .masters()
        .filter(|(_, answer)| *answer == MasterAnswer::Agreed)
        .count();
    AGREED.with(|last| last.set(Some(agreed)));
    tracing::debug!(
        target: TARGET,
        operation = OPERATIONS[operation_index(event.operation)],
        resource = %event.resources,
        outcome = outcome_name(event.outcome),
        elapsed_us = micros(event.elapsed),
        masters_agreed = agreed,
        validity_ms = event.validity.map(millis),
        fence_token = event.fence_token,
        "round ended"
    );
}

pub(super) fn wait(event: &WaitEvent<'_>) {
    let change = match event.change {
        WaitChange::Contended => "contended",
        WaitChange::Woken(_) => "woken",
        WaitChange::Acquired => "acquired",
        WaitChange::GaveUp => "gave_up",
    };
    let woken_by = match event.change {
        WaitChange::Woken(by) => Some(WOKEN_BY[woken_index(by)]),
        _ => None,
    };
    tracing::debug!(
        target: TARGET,
        resource = %event.resources,
        change,
        woken_by,
        waited_us = micros(event.waited),
        "waiting"
    );
}

pub(super) fn lease(event: &LeaseEvent<'_>) {
    let resource = event.resources;
    let end = lease_end_index(&event.change).map(|end| LEASE_ENDS[end]);
    match event.change {
        LeaseChange::Renewed { validity } => tracing::debug!(
            target: TARGET,
            resource = %resource,
            validity_ms = millis(validity),
            "lease renewed"
        ),
        LeaseChange::RenewalFailed(error) => tracing::warn!(
            target: TARGET,
            resource = %resource,
            error = %error,
            "lease renewal failed"
        ),
        LeaseChange::Lost(error) => tracing::warn!(
            target: TARGET,
            resource = %resource,
            reason = end,
            error = %error,
            "lease lost"
        ),
        LeaseChange::HoldLimit => tracing::info!(
            target: TARGET,
            resource = %resource,
            reason = end,
            "lease held for its max_hold: renewal stopped"
        ),
    }
}

pub(super) fn master(event: &MasterEvent<'_>) {
    let (change, _) = master_change(&event.change);
    let master = event.node;
    match event.change {
        super::MasterChange::Down(error) => tracing::warn!(
            target: TARGET,
            master,
            change,
            error = %error,
            "master down"
        ),
        super::MasterChange::MissingRight(missing) => tracing::warn!(
            target: TARGET,
            master,
            change,
            error = %missing,
            "master lacks a right"
        ),
        super::MasterChange::NotAVoter(why) => tracing::error!(
            target: TARGET,
            master,
            change,
            error = %why,
            "master refused as a voter"
        ),
        super::MasterChange::NoticesRefused(error) => tracing::warn!(
            target: TARGET,
            master,
            change,
            error = %error,
            "master refused release notices, so waiters poll; grant the ACL user the channels: \
             ACL SETUSER <user> &redlock-sync:released:*"
        ),
        super::MasterChange::FenceLeftOut(fault) => tracing::warn!(
            target: TARGET,
            master,
            change,
            error = %fault,
            "master left out of fenced locks"
        ),
        super::MasterChange::Back | super::MasterChange::FenceBack => {
            tracing::info!(target: TARGET, master, change, "master back")
        }
        super::MasterChange::Readdressed { node, from, to } => tracing::info!(
            target: TARGET,
            master,
            change,
            node,
            from = %from,
            to = %to,
            "master's node readdressed: new connections dial the new address"
        ),
        super::MasterChange::Unresolved { node, reason, kept } => tracing::warn!(
            target: TARGET,
            master,
            change,
            node,
            error = reason,
            kept = kept.map(tracing::field::display),
            "master's node did not resolve"
        ),
    }
}

/// Forgets the last round's count of masters that agreed, as a call
/// starts on this thread.
pub(super) fn forget_agreed() {
    AGREED.with(|last| last.set(None));
}

/// How many masters agreed in the last round told on this thread since
/// [`forget_agreed`].
pub(super) fn agreed() -> Option<usize> {
    AGREED.with(Cell::get)
}
