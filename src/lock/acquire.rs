//! One acquisition attempt: `SET NX PX` on every master at once, decided
//! by a quorum within the validity the TTL leaves; on failure, the release
//! of whatever it may have set.

use crate::clock::BootInstant;
use crate::command::Command;
use crate::error::{Error, NodeReport};
use crate::events::{Operation, RoundEvent, RoundOutcome};
use crate::handle::pool::Ticket;
use crate::handle::Shared;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule, Tally};
use crate::round::{Dial, Plan};
use crate::value::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An acquisition that succeeded, before it is wrapped in a [`Lock`](super::Lock).
pub(crate) struct Acquired {
    pub(crate) resource: Vec<u8>,
    pub(crate) value: Value,
    /// When the acquisition started, and the TTL it set.
    pub(crate) started: BootInstant,
    pub(crate) ttl: Duration,
    pub(crate) valid_until: BootInstant,
    /// The masters that were sent the SET.
    pub(crate) holders: NodeSet,
    /// The masters that answered yes.
    pub(crate) agreed: NodeSet,
    pub(crate) ticket: Ticket,
}

/// One acquisition attempt: SET NX PX on the masters at once; on failure,
/// release on every master that was sent the SET (it may have landed where
/// the answer was late, or a refusal we did not wait for).
pub(crate) fn acquire(shared: &Shared, resource: &[u8], ttl: Duration) -> Result<Acquired, Error> {
    let ttl_ms = shared.ttl_millis(ttl)?;
    let ttl = Duration::from_millis(ttl_ms); // what the servers were told
    let mut session = shared.pool.take();
    let value = match session.values.next() {
        Ok(value) => value,
        Err(e) => {
            shared.pool.give_back(session);
            return Err(e);
        }
    };
    let masters = shared.masters();
    let boot_start = BootInstant::now();
    let plan = Plan {
        command: Command::Acquire {
            resource,
            value: value.as_bytes(),
            ttl_ms,
        },
        to: NodeSet::all(shared.nodes.len()),
        others: None,
        rule: Rule::Acquire,
        deadline: Instant::now() + shared.round_budget(ttl),
        dial: Dial::OutsideBackoff,
        skip: NodeSet::EMPTY,
        unawaited: false,
    };
    let round_deadline = plan.deadline;
    let tally = session.run(masters, plan);
    let elapsed = BootInstant::now().saturating_since(boot_start);
    let left = validity(ttl, elapsed);
    let failure = match tally.decision(Rule::Acquire) {
        // Keys were set no earlier than the start, so a quorum of them
        // lives until at least `start + ttl`, less the drift.
        Decision::Reached if left.is_some() => None,
        Decision::Reached => Some(Error::TooSlow { elapsed, ttl }),
        _ => Some(classify_failure(&tally, &session.report(&shared.nodes))),
    };
    if shared.events.wants_rounds() {
        let answers = session.answers(&shared.nodes);
        shared.events.round(RoundEvent {
            operation: Operation::Acquire,
            resource,
            outcome: failure
                .as_ref()
                .map_or(RoundOutcome::Succeeded, RoundOutcome::of),
            elapsed,
            validity: left.filter(|_| failure.is_none()),
            answers: &answers,
        });
    }
    let error = match failure {
        Some(error) => error,
        None => {
            let mut name = std::mem::take(&mut session.name);
            name.extend_from_slice(resource);
            let holders = session.sent();
            let acquired = Acquired {
                resource: name,
                value,
                started: boot_start,
                ttl,
                valid_until: boot_start.saturating_add(ttl.saturating_sub(drift(ttl))),
                holders,
                agreed: session.agreed(),
                ticket: Ticket {
                    progress: Arc::clone(session.progress()),
                    tag: session.last_tags().0,
                    masters: holders,
                },
            };
            shared.pool.give_back(session);
            return Ok(acquired);
        }
    };
    let release = Plan {
        command: Command::Release {
            resource,
            value: value.as_bytes(),
            notify: None,
        },
        // A master that refused the SET did not set our key.
        to: session.sent().difference(session.declined()),
        others: None,
        rule: Rule::Release,
        deadline: Instant::now() + shared.node_timeout,
        dial: Dial::UnlessFailingForGood,
        skip: NodeSet::EMPTY,
        unawaited: true,
    };
    session.send_only(masters, release, round_deadline);
    shared.pool.give_back(session);
    Err(error)
}

/// The error for an acquisition round that could not reach a quorum.
fn classify_failure(tally: &Tally, report: &NodeReport) -> Error {
    if tally.failures_prevent_quorum() {
        Error::NoQuorum(report.clone())
    } else {
        Error::Contended(report.clone())
    }
}
