//! A group's batch round (see `group`): the taken requests' `SET NX PX`
//! as the ops of one batch round (`round::batch`) on a pool session, each
//! decided on its own as a single acquisition is; the failed ones'
//! releases sent together, unawaited. The group posts the results.
//!
//! Allocates per batch: the ops, the values and names kept for the
//! round, the batch round's own vectors, and one name buffer per lock
//! taken (the lock carries it).

use crate::clock::BootInstant;
use crate::command::Command;
use crate::error::Error;
use crate::events::tell::Hook;
use crate::events::{Operation, Resources, RoundEvent, RoundOutcome};
use crate::handle::pool::{Pool, Ticket};
use crate::handle::stop::Stop;
use crate::holder::Label;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule};
use crate::round::{BatchOp, BatchResults, Masters, Voter};
use crate::value::Value;
use std::io;
use std::sync::Arc;
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

/// What a batch round needs of the handle (its `Shared`, which the
/// group cannot name: the handle is made of the group).
#[derive(Clone, Copy)]
pub(crate) struct Handle<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) masters: Masters<'a>,
    pub(crate) voters: &'a [Voter],
    pub(crate) holder_label: Option<&'a Label>,
    pub(crate) events: &'a Hook,
    pub(crate) node_timeout: Duration,
    /// Whether the handle was shut down.
    pub(crate) stop: &'a Stop,
}

/// One taken request's part in the round.
pub(super) struct Part {
    pub(super) resource: Vec<u8>,
    pub(super) ttl_ms: u64,
    pub(super) started: BootInstant,
    pub(super) deadline: Instant,
}

/// What a request's part came to: a grant, or the error and the name's
/// buffer (kept for the request's next use).
pub(super) type Came = Result<Granted, (Error, Vec<u8>)>;

/// Runs `parts` as one batch round, and gives `post` one result per
/// part, in order; then tells the hook of each part's round (after every
/// result was posted, so that a slow hook does not delay the owners).
pub(super) fn run(shared: Handle<'_>, parts: Vec<Part>, mut post: impl FnMut(Came)) {
    if parts.is_empty() {
        return;
    }
    let mut session = shared.pool.take();
    let mut values = Vec::with_capacity(parts.len());
    for _ in &parts {
        match session.values.next(shared.holder_label) {
            Ok(value) => values.push(value),
            Err(e) => {
                // No value, no round: every request fails alike.
                shared.pool.give_back(session);
                let message = e.to_string();
                for part in parts {
                    let error = Error::Entropy(io::Error::other(message.clone()));
                    post(Err((error, part.resource)));
                }
                return;
            }
        }
    }
    let masters = shared.masters;
    let all = NodeSet::all(shared.voters.len());
    let mut ops: Vec<BatchOp<'_>> = parts
        .iter()
        .zip(&values)
        .map(|(part, value)| BatchOp {
            command: Command::Acquire {
                resource: &part.resource,
                value: value.as_bytes(),
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
    // A lagging master is left out of the whole batch while the others
    // can make a quorum (see `Session::run_acquisition_batch`).
    let results = session.run_acquisition_batch(masters, &mut ops, deadline);
    let now = BootInstant::now();
    // Each op decided as `acquire_on` decides its round.
    let mut outcomes: Vec<Result<(), Error>> = Vec::with_capacity(parts.len());
    // What the hook is told once the results are posted (only if it wants
    // rounds: the name is copied, its buffer going to the request).
    let mut told: Vec<Told> = Vec::new();
    let mut releases: Vec<BatchOp<'_>> = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let ttl = Duration::from_millis(part.ttl_ms);
        let elapsed = now.saturating_since(part.started);
        let tally = results.tally(k);
        let decided = match tally.decision(Rule::Acquire) {
            Decision::Reached if validity(ttl, elapsed).is_some() => Ok(()),
            Decision::Reached => Err(Error::TooSlow { elapsed, ttl }),
            _ if tally.failures_prevent_quorum() => {
                Err(Error::NoQuorum(results.report(k, shared.voters)))
            }
            _ => Err(Error::Contended(results.report(k, shared.voters))),
        };
        if shared.events.wants_rounds() {
            told.push(Told {
                k,
                resource: part.resource.clone(),
                outcome: RoundOutcome::of_result(&decided),
                elapsed,
                validity: decided
                    .as_ref()
                    .ok()
                    .map(|_| validity(ttl, elapsed).unwrap_or_default()),
            });
        }
        if decided.is_err() {
            // A master that refused the SET did not set our key.
            let to = results.sent(k).difference(results.declined(k));
            if !to.is_empty() {
                releases.push(BatchOp {
                    command: Command::Release {
                        resource: &part.resource,
                        value: values[k].as_bytes(),
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
    let came = parts.into_iter().zip(values).zip(outcomes).enumerate().map(
        |(k, ((part, value), decided))| {
            let ttl = Duration::from_millis(part.ttl_ms);
            match decided {
                Err(error) => Err((error, part.resource)),
                Ok(()) => {
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
            }
        },
    );
    for result in came {
        post(result);
    }
    for told in &told {
        tell(shared, &results, told);
    }
}

/// What the hook is told of one op's round.
struct Told {
    /// The op's index in the batch.
    k: usize,
    resource: Vec<u8>,
    outcome: RoundOutcome,
    elapsed: Duration,
    validity: Option<Duration>,
}

/// Tells the hook of an op's round, as `acquire_on` does of its own.
fn tell(shared: Handle<'_>, results: &BatchResults, told: &Told) {
    let answers = results.answers(told.k, shared.voters);
    shared.events.round(RoundEvent {
        operation: Operation::Acquire,
        resources: Resources::one(&told.resource),
        outcome: told.outcome,
        elapsed: told.elapsed,
        validity: told.validity,
        fence_token: None,
        answers: &answers,
    });
}
