//! A group's batch round (see `group`): the taken requests' `SET NX PX`
//! as the ops of one batch round (`round::batch`) on a pool session, each
//! decided on its own as a single acquisition is; each request's result
//! posted; the failed ones' releases sent together, unawaited.
//!
//! Allocates per batch: the ops, the values and names kept for the
//! round, the batch round's own vectors, and one name buffer per lock
//! taken (the lock carries it).

use super::{lock, post, Inner, Request};
use crate::clock::BootInstant;
use crate::command::Command;
use crate::error::Error;
use crate::events::{Operation, Resources, RoundEvent, RoundOutcome};
use crate::handle::pool::Ticket;
use crate::handle::Shared;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule};
use crate::round::{BatchOp, BatchResults};
use crate::value::Value;
use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// A request's acquisition that succeeded, for the lock layer to make a
/// lock of (as `lock::acquire::acquire_on`'s own).
#[derive(Debug)]
pub(crate) struct Granted {
    /// The resource's name (the lock carries the buffer).
    pub(crate) resource: Vec<u8>,
    pub(crate) value: Value,
    /// When the request was queued: its keys were set no earlier.
    pub(crate) started: BootInstant,
    pub(crate) ttl: Duration,
    pub(crate) valid_until: BootInstant,
    pub(crate) holders: NodeSet,
    pub(crate) agreed: NodeSet,
    pub(crate) refused: NodeSet,
    pub(crate) ticket: Ticket,
}

/// One taken request's part in the round.
struct Part {
    resource: Vec<u8>,
    value: Option<Value>,
    ttl_ms: u64,
    started: BootInstant,
    deadline: Instant,
}

/// Posts an error to every request not yet done when the batch ends
/// early (a panic): no caller waits for a leader that is gone.
struct Posting<'a> {
    taken: &'a [Arc<Request>],
    done: usize,
}

impl Drop for Posting<'_> {
    fn drop(&mut self) {
        for request in &self.taken[self.done..] {
            let mut inner = lock(&request.inner);
            if inner.result.is_none() {
                inner.result = Some(Err(Error::System(io::Error::other(
                    "the group commit's leader failed",
                ))));
            }
            post(inner);
        }
    }
}

/// Runs `taken` (every one of them `Stage::Taken`) as one batch round,
/// and posts each one's result.
pub(super) fn run(shared: &Shared, taken: &[Arc<Request>]) {
    let mut posting = Posting { taken, done: 0 };
    if taken.is_empty() {
        return;
    }
    let mut session = shared.pool.take();
    let mut parts: Vec<Part> = taken
        .iter()
        .map(|request| {
            let mut inner = lock(&request.inner);
            let inner: &mut Inner = &mut inner;
            Part {
                resource: std::mem::take(&mut inner.resource),
                value: None,
                ttl_ms: inner.ttl_ms,
                started: inner.started.unwrap_or_else(BootInstant::now),
                deadline: inner.deadline.unwrap_or_else(Instant::now),
            }
        })
        .collect();
    for part in &mut parts {
        match session.values.next(shared.holder_label.as_ref()) {
            Ok(value) => part.value = Some(value),
            Err(e) => {
                // No value, no round: every request fails alike.
                drop(parts);
                shared.pool.give_back(session);
                let message = e.to_string();
                for request in taken {
                    let mut inner = lock(&request.inner);
                    inner.result = Some(Err(Error::System(io::Error::other(message.clone()))));
                    post(inner);
                }
                posting.done = taken.len();
                return;
            }
        }
    }
    let masters = shared.masters();
    let all = NodeSet::all(shared.voters.len());
    let ops: Vec<BatchOp<'_>> = parts
        .iter()
        .map(|part| BatchOp {
            command: Command::Acquire {
                resource: &part.resource,
                value: part.value.as_ref().map_or(&[][..], Value::as_bytes),
                ttl_ms: part.ttl_ms,
            },
            to: all,
            others: None,
            skip: NodeSet::EMPTY,
        })
        .collect();
    let deadline = parts
        .iter()
        .map(|p| p.deadline)
        .min()
        .unwrap_or_else(Instant::now);
    let results = session.run_batch(masters, &ops, Rule::Acquire, deadline);
    let now = BootInstant::now();
    // Each op decided as `acquire_on` decides its round.
    let mut outcomes: Vec<Result<(), Error>> = Vec::with_capacity(parts.len());
    let mut releases: Vec<BatchOp<'_>> = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let ttl = Duration::from_millis(part.ttl_ms);
        let elapsed = now.saturating_since(part.started);
        let tally = results.tally(k);
        let decided = match tally.decision(Rule::Acquire) {
            Decision::Reached if validity(ttl, elapsed).is_some() => Ok(()),
            Decision::Reached => Err(Error::TooSlow { elapsed, ttl }),
            _ if tally.failures_prevent_quorum() => {
                Err(Error::NoQuorum(results.report(k, &shared.voters)))
            }
            _ => Err(Error::Contended(results.report(k, &shared.voters))),
        };
        tell(shared, &results, k, part, &decided, elapsed);
        if decided.is_err() {
            // A master that refused the SET did not set our key.
            let to = results.sent(k).difference(results.declined(k));
            if !to.is_empty() {
                releases.push(BatchOp {
                    command: Command::Release {
                        resource: &part.resource,
                        value: part.value.as_ref().map_or(&[][..], Value::as_bytes),
                        notify: None,
                    },
                    to,
                    others: None,
                    skip: NodeSet::EMPTY,
                });
            }
        }
        outcomes.push(decided);
    }
    if !releases.is_empty() {
        let release_deadline = Instant::now() + shared.node_timeout;
        session.send_only_batch(masters, &releases, release_deadline, deadline);
    }
    drop(releases);
    drop(ops);
    let progress = Arc::clone(session.progress());
    let tag = results.newest_tag();
    shared.pool.give_back(session);
    for (k, (part, decided)) in parts.into_iter().zip(outcomes).enumerate() {
        let request = &taken[k];
        let mut inner: MutexGuard<'_, Inner> = lock(&request.inner);
        let ttl = Duration::from_millis(part.ttl_ms);
        inner.result = Some(match (decided, part.value) {
            (Ok(()), Some(value)) => {
                let holders = results.sent(k);
                Ok(Granted {
                    resource: part.resource,
                    value,
                    started: part.started,
                    ttl,
                    valid_until: part.started.saturating_add(ttl.saturating_sub(drift(ttl))),
                    holders,
                    agreed: results.agreed(k),
                    refused: results.refused(k),
                    ticket: Ticket {
                        progress: Arc::clone(&progress),
                        tag,
                        masters: holders,
                    },
                })
            }
            (Ok(()), None) => Err(Error::ShutDown), // every part has a value
            (Err(error), _) => {
                inner.resource = part.resource; // kept for its next use
                Err(error)
            }
        });
        post(inner);
        posting.done = k + 1;
    }
}

/// Tells the hook of op `k`'s round, as `acquire_on` does of its own.
fn tell(
    shared: &Shared,
    results: &BatchResults,
    k: usize,
    part: &Part,
    decided: &Result<(), Error>,
    elapsed: Duration,
) {
    if !shared.events.wants_rounds() {
        return;
    }
    let ttl = Duration::from_millis(part.ttl_ms);
    let answers = results.answers(k, &shared.voters);
    shared.events.round(RoundEvent {
        operation: Operation::Acquire,
        resources: Resources::one(&part.resource),
        outcome: RoundOutcome::of_result(decided),
        elapsed,
        validity: decided
            .as_ref()
            .ok()
            .map(|_| validity(ttl, elapsed).unwrap_or_default()),
        fence_token: None,
        answers: &answers,
    });
}
