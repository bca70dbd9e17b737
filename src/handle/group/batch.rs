//! A group's batch round (see `group`): the taken requests' `SET NX PX`
//! and releases as the ops of one batch round (`round::batch`) on a pool
//! session, each decided on its own as a single acquisition or release
//! is; the failed acquisitions' releases sent together, unawaited. The
//! group posts the results.
//!
//! A release goes in the batch only if it cannot overtake its lock's
//! `SET`: the `SET` went out on the batch's session, or every master has
//! answered it. The batch takes the session of the first release's `SET`
//! when it is idle, so that releases of locks granted by the batch before
//! are sent (a session is given back before its results are posted, and
//! the next batch's leader finds it idle). Any other release is
//! [`Done::Unbatched`]: its owner runs its own round.
//!
//! Allocates per batch: the ops, the values and names kept for the
//! round, the release notices' channels, the batch round's own vectors,
//! and one name buffer per lock taken (the lock carries it).

use crate::clock::BootInstant;
use crate::command::Command;
use crate::error::Error;
use crate::events::tell::Hook;
use crate::events::{Operation, Resources, RoundEvent, RoundOutcome};
use crate::handle::notify::message::release_notice;
use crate::handle::notify::{can_subscribe, channel_of};
use crate::handle::pool::{Pool, Ticket};
use crate::handle::stop::Stop;
use crate::holder::Label;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule};
use crate::round::{BatchOp, BatchResults, Masters, Session, Voter};
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

/// A lock's release, queued (see `Group::enter_release`).
#[derive(Debug)]
pub(crate) struct Release {
    pub(crate) value: Value,
    /// The masters that may hold the key.
    pub(crate) holders: NodeSet,
    /// Where the lock's `SET` went (none for a lock that needs no order).
    pub(crate) ticket: Option<Ticket>,
    /// Whether the release publishes its notice (see `handle::notify`).
    pub(crate) notify: bool,
}

/// What a request came to.
// Not boxed: a result is stored once in its request (kept for reuse) and
// moved once to its owner; a box would be an allocation per grant.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Done {
    /// The acquisition succeeded.
    Granted(Granted),
    /// The release reached its quorum.
    Released,
    /// The release was not sent: its owner runs its own round.
    Unbatched,
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
    /// A release's; `None` for an acquisition.
    pub(super) release: Option<Release>,
    pub(super) started: BootInstant,
    pub(super) deadline: Instant,
}

/// What a request's part came to, or the error and the name's buffer
/// (kept for the request's next use).
pub(super) type Came = Result<Done, (Error, Vec<u8>)>;

/// Runs `parts` as one batch round, and gives `post` one result per
/// part, in order; then tells the hook of each part's round (after every
/// result was posted, so that a slow hook does not delay the owners).
pub(super) fn run(shared: Handle<'_>, parts: Vec<Part>, mut post: impl FnMut(Came)) {
    if parts.is_empty() {
        return;
    }
    let mut session = take_session(shared.pool, &parts);
    // Which parts go in the round: every acquisition, and each release
    // that cannot overtake its lock's SET there.
    let sent: Vec<bool> = parts
        .iter()
        .map(|part| match &part.release {
            None => true,
            Some(release) => release
                .ticket
                .as_ref()
                .map_or(true, |t| t.is_on(&session) || t.unsettled().is_empty()),
        })
        .collect();
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        if let Some(release) = &part.release {
            values.push(release.value);
            continue;
        }
        match session.values.next(shared.holder_label) {
            Ok(value) => values.push(value),
            Err(e) => {
                // No value, no round: every acquisition fails alike, and
                // every release is left to its owner.
                shared.pool.give_back(session);
                let message = e.to_string();
                for part in parts {
                    match part.release {
                        Some(_) => post(Ok(Done::Unbatched)),
                        None => {
                            let error = Error::Entropy(io::Error::other(message.clone()));
                            post(Err((error, part.resource)));
                        }
                    }
                }
                return;
            }
        }
    }
    // A release's notice, and the channel it goes to (see `handle::notify`).
    let notices: Vec<_> = parts
        .iter()
        .zip(&values)
        .map(|(part, value)| {
            let release = part.release.as_ref()?;
            if !release.notify || !can_subscribe(&part.resource) {
                return None;
            }
            let mut channel = Vec::new();
            channel_of(&part.resource, &mut channel);
            Some((channel, release_notice(value.as_bytes())))
        })
        .collect();
    let masters = shared.masters;
    let all = NodeSet::all(shared.voters.len());
    // The round's ops, and which part each is.
    let mut ops: Vec<BatchOp<'_>> = Vec::with_capacity(parts.len());
    let mut op_of: Vec<Option<usize>> = Vec::with_capacity(parts.len());
    for (k, part) in parts.iter().enumerate() {
        if !sent[k] {
            op_of.push(None);
            continue;
        }
        op_of.push(Some(ops.len()));
        let (command, to) = match &part.release {
            None => (
                Command::Acquire {
                    resource: &part.resource,
                    value: values[k].as_bytes(),
                    ttl_ms: part.ttl_ms,
                },
                all,
            ),
            Some(release) => (
                Command::Release {
                    resource: &part.resource,
                    value: values[k].as_bytes(),
                    notify: notices[k]
                        .as_ref()
                        .map(|(channel, notice)| (&channel[..], &notice[..])),
                },
                release.holders,
            ),
        };
        ops.push(BatchOp {
            command,
            to,
            others: None,
            skip: NodeSet::EMPTY,
        });
    }
    if ops.is_empty() {
        shared.pool.give_back(session);
        for _ in parts {
            post(Ok(Done::Unbatched));
        }
        return;
    }
    // Every taken part's deadline, the unsent releases' too: their owners
    // wait for the batch before running their own rounds.
    let deadline = parts
        .iter()
        .map(|p| p.deadline)
        .min()
        .unwrap_or_else(Instant::now);
    // A lagging master is left out of the batch's acquisitions while the
    // others can make a quorum (see `Session::run_group_batch`).
    let results = session.run_group_batch(masters, &mut ops, deadline);
    let now = BootInstant::now();
    // Each op decided as a single acquisition or release decides its round.
    let mut outcomes: Vec<Result<(), Error>> = Vec::with_capacity(parts.len());
    // What the hook is told once the results are posted (only if it wants
    // rounds: the name is copied, its buffer going to the request).
    let mut told: Vec<Told> = Vec::new();
    let mut releases: Vec<BatchOp<'_>> = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let Some(op) = op_of[k] else {
            outcomes.push(Ok(()));
            continue;
        };
        let ttl = Duration::from_millis(part.ttl_ms);
        let elapsed = now.saturating_since(part.started);
        let tally = results.tally(op);
        let decided = match (&part.release, tally.decision(Rule::Acquire)) {
            (Some(_), _) => match tally.decision(Rule::Release) {
                Decision::Reached => Ok(()),
                _ if tally.release_found_lock_lost() => {
                    Err(Error::LockLost(results.report(op, shared.voters)))
                }
                _ => Err(Error::NoQuorum(results.report(op, shared.voters))),
            },
            (None, Decision::Reached) if validity(ttl, elapsed).is_some() => Ok(()),
            (None, Decision::Reached) => Err(Error::TooSlow { elapsed, ttl }),
            _ if tally.failures_prevent_quorum() => {
                Err(Error::NoQuorum(results.report(op, shared.voters)))
            }
            _ => Err(Error::Contended(results.report(op, shared.voters))),
        };
        if shared.events.wants_rounds() {
            let acquired = part.release.is_none() && decided.is_ok();
            told.push(Told {
                op,
                operation: match part.release {
                    Some(_) => Operation::Release,
                    None => Operation::Acquire,
                },
                resource: part.resource.clone(),
                outcome: RoundOutcome::of_result(&decided),
                elapsed,
                validity: acquired.then(|| validity(ttl, elapsed).unwrap_or_default()),
            });
        }
        if decided.is_err() && part.release.is_none() {
            // A master that refused the SET did not set our key.
            let to = results.sent(op).difference(results.declined(op));
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
            let Some(op) = op_of[k] else {
                return Ok(Done::Unbatched);
            };
            match (decided, part.release) {
                (Err(error), _) => Err((error, part.resource)),
                (Ok(()), Some(_)) => Ok(Done::Released),
                (Ok(()), None) => {
                    let holders = results.sent(op);
                    Ok(Done::Granted(Granted {
                        resource: part.resource,
                        value,
                        started: part.started,
                        ttl,
                        valid_until: part.started.saturating_add(ttl.saturating_sub(drift(ttl))),
                        holders,
                        agreed: results.agreed(op),
                        refused: results.refused(op),
                        ticket: Ticket {
                            progress: Arc::clone(&progress),
                            tag,
                            masters: holders,
                        },
                    }))
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

/// A session for the batch: the one the first queued release's `SET`
/// went out on, if it is idle and no call waits for it, else any (never
/// waits: see `Pool::take_for_batch`).
fn take_session(pool: &Pool, parts: &[Part]) -> Box<Session> {
    let first = parts
        .iter()
        .find_map(|part| part.release.as_ref()?.ticket.as_ref());
    match first {
        Some(ticket) => pool.take_for_batch(ticket),
        None => pool.take(),
    }
}

/// What the hook is told of one op's round.
struct Told {
    /// The op's index in the batch.
    op: usize,
    operation: Operation,
    resource: Vec<u8>,
    outcome: RoundOutcome,
    elapsed: Duration,
    validity: Option<Duration>,
}

/// Tells the hook of an op's round, as a single acquisition or release
/// does of its own.
fn tell(shared: Handle<'_>, results: &BatchResults, told: &Told) {
    let answers = results.answers(told.op, shared.voters);
    shared.events.round(RoundEvent {
        operation: told.operation,
        resources: Resources::one(&told.resource),
        outcome: told.outcome,
        elapsed: told.elapsed,
        validity: told.validity,
        fence_token: None,
        answers: &answers,
    });
}
