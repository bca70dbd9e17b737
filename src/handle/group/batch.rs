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
//! Allocates nothing in steady state: the batch's vectors and the batch
//! round's are the group's, kept from batch to batch ([`Scratch`]), and a
//! granted lock carries its request's name buffer,
//! which the group gets back when the lock is released (see
//! `Group::give_name`). A hook that wants rounds is told of each op, after
//! the results are posted, with a copy of its name in a buffer the
//! scratch keeps too.

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
use crate::round::{
    BatchOp, BatchResults, BatchScratch, Masters, Session, Voter, KEPT_NAME_CAPACITY,
};
use crate::value::Value;
use std::io;
use std::ops::Range;
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

/// What a request's part came to, and its name's buffer unless a granted
/// lock carries it (empty then), kept for the request's next use.
pub(super) type Came = (Result<Done, Error>, Vec<u8>);

/// A batch's buffers, kept by the group from batch to batch (one runs at a
/// time) with their capacity, so that a batch allocates nothing in steady
/// state.
pub(super) struct Scratch {
    /// Per part: whether it goes in the round.
    sent: Vec<bool>,
    /// Per part: its lock's value.
    values: Vec<Value>,
    /// Per part: a release's notice channel (empty for none), and its
    /// notice.
    channels: Vec<Vec<u8>>,
    notices: Vec<Option<[u8; NOTICE_LEN]>>,
    /// Per part: its op in the round, if sent.
    op_of: Vec<Option<usize>>,
    /// Per part: how its op was decided, with the masters a granted
    /// lock keeps.
    outcomes: Vec<Result<Votes, Error>>,
    told: Vec<Told>,
    /// The names of the ops in `told`, one after another (each part's
    /// own buffer goes to its request or lock before the hook is told).
    told_names: Vec<u8>,
    /// The round's ops, and the failed acquisitions' releases: empty
    /// between batches, kept for their buffers (see `reuse`).
    ops: Vec<BatchOp<'static>>,
    releases: Vec<BatchOp<'static>>,
    /// The batch round's own (the group's, not the session's: one batch
    /// runs at a time, on whichever session, so they reach their largest
    /// size once for all the sessions).
    round: BatchScratch,
}

impl Scratch {
    /// Buffers for batches of up to `ops` requests, kept whole.
    pub(super) fn keeping(ops: usize) -> Scratch {
        Scratch {
            sent: Vec::new(),
            values: Vec::new(),
            channels: Vec::new(),
            notices: Vec::new(),
            op_of: Vec::new(),
            outcomes: Vec::new(),
            told: Vec::new(),
            told_names: Vec::new(),
            ops: Vec::new(),
            releases: Vec::new(),
            round: BatchScratch::keeping(ops),
        }
    }
}

/// The length of a release notice (see `handle::notify`).
const NOTICE_LEN: usize = 1 + crate::handle::notify::message::ID_LEN;

/// An empty vector of ops in the buffer of `ops`, for borrows of another
/// lifetime: a vector's own `into_iter` collected into a vector of an
/// element of the same layout keeps its buffer (std collects in place:
/// not a documented guarantee, but `tests/allocations.rs` would see a
/// change), so the scratch's buffer serves every batch.
// `filter_map`, not `filter`: it makes ops of the other lifetime (none,
// the vector being empty).
#[allow(clippy::unnecessary_filter_map)]
fn reuse<'b>(mut ops: Vec<BatchOp<'_>>) -> Vec<BatchOp<'b>> {
    ops.clear();
    ops.into_iter().filter_map(|_| None).collect()
}

/// Runs the taken `parts` (drained) as one batch round, and gives `post`
/// one result per part, in order; then tells the hook of each part's round
/// (after every result was posted, so that a slow hook does not delay the
/// owners).
pub(super) fn run(
    shared: Handle<'_>,
    parts: &mut Vec<Part>,
    scratch: &mut Scratch,
    mut post: impl FnMut(Came),
) {
    if parts.is_empty() {
        return;
    }
    let mut session = take_session(shared.pool, parts);
    let Scratch {
        sent,
        values,
        channels,
        notices,
        op_of,
        outcomes,
        told,
        told_names,
        ops: kept_ops,
        releases: kept_releases,
        round,
    } = scratch;
    // Which parts go in the round: every acquisition, and each release
    // that cannot overtake its lock's SET there.
    sent.clear();
    sent.extend(parts.iter().map(|part| {
        match &part.release {
            None => true,
            Some(release) => release
                .ticket
                .as_ref()
                .map_or(true, |t| t.is_on(&session) || t.unsettled().is_empty()),
        }
    }));
    values.clear();
    for part in parts.iter() {
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
                for part in parts.drain(..) {
                    match part.release {
                        Some(_) => post((Ok(Done::Unbatched), part.resource)),
                        None => {
                            let error = Error::Entropy(io::Error::other(message.clone()));
                            post((Err(error), part.resource));
                        }
                    }
                }
                return;
            }
        }
    }
    // A release's notice, and the channel it goes to (see `handle::notify`).
    if channels.len() < parts.len() {
        channels.resize_with(parts.len(), Vec::new);
    }
    notices.clear();
    for ((part, value), channel) in parts.iter().zip(values.iter()).zip(channels.iter_mut()) {
        channel.clear();
        let notice = match &part.release {
            Some(release) if release.notify && can_subscribe(&part.resource) => {
                channel_of(&part.resource, channel);
                Some(release_notice(value.as_bytes()))
            }
            _ => None,
        };
        notices.push(notice);
    }
    let masters = shared.masters;
    let all = NodeSet::all(shared.voters.len());
    // The round's ops, and which part each is.
    let mut ops: Vec<BatchOp<'_>> = reuse(std::mem::take(kept_ops));
    op_of.clear();
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
                        .map(|notice| (&channels[k][..], &notice[..])),
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
        *kept_ops = reuse(ops);
        shared.pool.give_back(session);
        for part in parts.drain(..) {
            post((Ok(Done::Unbatched), part.resource));
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
    let results = session.run_group_batch(masters, &mut ops, deadline, round);
    let now = BootInstant::now();
    // Each op decided as a single acquisition or release decides its round.
    outcomes.clear();
    // What the hook is told once the results are posted (only if it wants
    // rounds: the name is copied, its buffer going to the request).
    told.clear();
    told_names.clear();
    let mut releases: Vec<BatchOp<'_>> = reuse(std::mem::take(kept_releases));
    for (k, part) in parts.iter().enumerate() {
        let Some(op) = op_of[k] else {
            outcomes.push(Ok(Votes::default()));
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
                name: {
                    let start = told_names.len();
                    told_names.extend_from_slice(&part.resource);
                    start..told_names.len()
                },
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
        outcomes.push(decided.map(|()| Votes {
            holders: results.sent(op),
            agreed: results.agreed(op),
            refused: results.refused(op),
        }));
    }
    if !releases.is_empty() {
        let release_deadline = Instant::now() + shared.node_timeout;
        session.send_only_batch(masters, &releases, release_deadline, deadline, round);
    }
    *kept_releases = reuse(releases);
    *kept_ops = reuse(ops);
    for channel in channels.iter_mut().take(parts.len()) {
        channel.shrink_to(KEPT_NAME_CAPACITY);
    }
    let progress = Arc::clone(session.progress());
    let tag = results.newest_tag();
    shared.pool.give_back(session);
    for (k, (part, decided)) in parts.drain(..).zip(outcomes.drain(..)).enumerate() {
        if op_of[k].is_none() {
            post((Ok(Done::Unbatched), part.resource));
            continue;
        }
        let came = match (decided, part.release) {
            (Err(error), _) => (Err(error), part.resource),
            (Ok(_), Some(_)) => (Ok(Done::Released), part.resource),
            (Ok(votes), None) => {
                let ttl = Duration::from_millis(part.ttl_ms);
                let granted = Granted {
                    resource: part.resource,
                    value: values[k],
                    started: part.started,
                    ttl,
                    valid_until: part.started.saturating_add(ttl.saturating_sub(drift(ttl))),
                    holders: votes.holders,
                    agreed: votes.agreed,
                    refused: votes.refused,
                    ticket: Ticket {
                        progress: Arc::clone(&progress),
                        tag,
                        masters: votes.holders,
                    },
                };
                (Ok(Done::Granted(granted)), Vec::new())
            }
        };
        post(came);
    }
    for told in told.iter() {
        tell(shared, &results, told, &told_names[told.name.clone()]);
    }
    // Back to the scratch, whose next batch reuses their vectors.
    round.keep(results);
    if told_names.capacity() > KEPT_TOLD_NAMES {
        told_names.clear();
        told_names.shrink_to(KEPT_TOLD_NAMES);
    }
}

/// The bytes of names kept for telling the hook from batch to batch (a
/// batch of long names grows the buffer; it is shrunk back to this).
const KEPT_TOLD_NAMES: usize = 64 * 1024;

/// The masters a granted lock keeps of its op.
#[derive(Clone, Copy, Default)]
struct Votes {
    holders: NodeSet,
    agreed: NodeSet,
    refused: NodeSet,
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
    /// Its name's place in `Scratch::told_names`.
    name: Range<usize>,
    outcome: RoundOutcome,
    elapsed: Duration,
    validity: Option<Duration>,
}

/// Tells the hook of an op's round, as a single acquisition or release
/// does of its own.
fn tell(shared: Handle<'_>, results: &BatchResults, told: &Told, name: &[u8]) {
    let answers = results.answers(told.op, shared.voters);
    shared.events.round(RoundEvent {
        operation: told.operation,
        resources: Resources::one(name),
        outcome: told.outcome,
        elapsed: told.elapsed,
        validity: told.validity,
        fence_token: None,
        answers: &answers,
    });
}
