//! One acquisition attempt: `SET NX PX` on every master at once (with
//! fencing, `acquire.lua`, which also counts), decided by a quorum within
//! the validity the TTL leaves, and with fencing its token made final (see
//! `fence`); on failure, the release of whatever it may have set.

use super::fence::{self, Granted};
use crate::clock::BootInstant;
use crate::command::{Command, SetCommand};
use crate::error::{Error, NodeReport};
use crate::events::{Operation, Resources, RoundEvent, RoundOutcome};
use crate::handle::group::{self, Done, Entry, Group};
use crate::handle::pool::Ticket;
use crate::handle::Shared;
use crate::names::Names;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule, Tally};
use crate::round::{Dial, Plan, Session};
use crate::value::Value;
use std::io;
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
    /// The masters that answered that they did not set it (held by
    /// another value, or an error reply such as `NOANCHOR`).
    pub(crate) refused: NodeSet,
    pub(crate) ticket: Ticket,
    /// The final fence token, if the handle fences.
    pub(crate) fence_token: Option<u64>,
    /// A set's names (two or more); empty for a lock on one resource.
    pub(crate) set: Names,
}

/// One acquisition attempt: SET NX PX on the masters at once (with
/// fencing, round 1 and, when needed, the write-back); on failure, release
/// on every master that was sent the SET (it may have landed where the
/// answer was late, or a refusal we did not wait for).
///
/// Before any I/O: fails with `Error::ShutDown` once the handle was shut
/// down, and with `Error::Config` for an empty resource name or a TTL out
/// of range.
pub(crate) fn acquire(shared: &Shared, resource: &[u8], ttl: Duration) -> Result<Acquired, Error> {
    if shared.stop.is_set() {
        return Err(Error::ShutDown);
    }
    Shared::check_resource(resource)?;
    let ttl_ms = shared.ttl_millis(ttl)?;
    if let Some(group) = &shared.group {
        return acquire_grouped(shared, group, resource, ttl_ms);
    }
    acquire_on(
        shared,
        shared.pool.take(),
        resource,
        Names::default(),
        ttl_ms,
    )
}

/// One acquisition attempt through the handle's group commit (see
/// `handle::group`): the caller's own round if none is in flight, else a
/// request in the next batch round.
fn acquire_grouped(
    shared: &Shared,
    group: &Group,
    resource: &[u8],
    ttl_ms: u64,
) -> Result<Acquired, Error> {
    let budget = shared.round_budget(Duration::from_millis(ttl_ms));
    match group.enter(resource, ttl_ms, Instant::now() + budget) {
        Entry::Lead(lead) => {
            let result = acquire_on(
                shared,
                shared.pool.take(),
                resource,
                Names::default(),
                ttl_ms,
            );
            drop(lead); // handed on before the result is returned
            result
        }
        Entry::Queued(request) => match group.wait(grouped_handle(shared), request)? {
            Done::Granted(granted) => Ok(Acquired {
                resource: granted.resource,
                value: granted.value,
                started: granted.started,
                ttl: granted.ttl,
                valid_until: granted.valid_until,
                holders: granted.holders,
                agreed: granted.agreed,
                refused: granted.refused,
                ticket: granted.ticket,
                fence_token: None,
                set: Names::default(),
            }),
            // Unreachable: only a release is released or left unbatched.
            Done::Released | Done::Unbatched => Err(Error::System(io::Error::other(
                "the group commit answered an acquisition as a release",
            ))),
        },
    }
}

/// What a group's batch round needs of the handle.
pub(super) fn grouped_handle(shared: &Shared) -> group::Handle<'_> {
    group::Handle {
        pool: &shared.pool,
        masters: shared.masters(),
        voters: &shared.voters,
        holder_label: shared.holder_label.as_ref(),
        events: &shared.events,
        node_timeout: shared.node_timeout,
        stop: &shared.stop,
    }
}

/// One acquisition attempt on `session`, with the TTL `ttl_ms` checked: of
/// the names in `set` if it has any (with two or more, one script per
/// master, all the keys or none: see `many`; one is a single lock's), else
/// of `single`. A set's names end in the lock, or back in the session.
pub(crate) fn acquire_on(
    shared: &Shared,
    mut session: Box<Session>,
    single: &[u8],
    set: Names,
    ttl_ms: u64,
) -> Result<Acquired, Error> {
    // The name events and the lock's `resource` show: a set's first.
    let resource = set.first().unwrap_or(single);
    let ttl = Duration::from_millis(ttl_ms); // what the servers were told
    let value = match session.values.next(shared.holder_label.as_ref()) {
        Ok(value) => value,
        Err(e) => {
            session.names = set;
            shared.pool.give_back(session);
            return Err(e);
        }
    };
    let masters = shared.masters();
    let boot_start = BootInstant::now();
    let is_set = set.len() > 1;
    let command = match shared.fence.as_deref() {
        // A fenced set: all its keys or none, and the counter raised once
        // (docs/fencing.md, "Sets").
        Some(domain) if is_set => Command::Set(SetCommand::FenceAcquire {
            keys: set.keys(),
            domain,
            value: value.as_bytes(),
            ttl_ms,
        }),
        _ if is_set => Command::Set(SetCommand::Acquire {
            keys: set.keys(),
            value: value.as_bytes(),
            ttl_ms,
        }),
        Some(domain) => Command::FenceAcquire {
            resource,
            domain,
            value: value.as_bytes(),
            ttl_ms,
        },
        None => Command::Acquire {
            resource,
            value: value.as_bytes(),
            ttl_ms,
        },
    };
    let plan = Plan {
        command,
        to: NodeSet::all(shared.voters.len()),
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
    // What round 1 did, before a write-back round replaces it.
    let (holders, agreed) = (session.sent(), session.agreed());
    // A cluster voter's no to a set may come from one slot's part while
    // another's set its keys: it is released too.
    let declined = session.declined_in_full();
    // Such a voter holds some of the set's keys: not refused (for
    // `masters`, it may hold the set).
    let refused = session.refused_in_full();
    let ticket = Ticket {
        progress: Arc::clone(session.progress()),
        tag: session.last_tags().0,
        masters: holders,
    };
    let failure = match tally.decision(Rule::Acquire) {
        // Keys were set no earlier than the start, so a quorum of them
        // lives until at least `start + ttl`, less the drift.
        Decision::Reached if left.is_some() => None,
        Decision::Reached => Some(Error::TooSlow { elapsed, ttl }),
        _ => Some(classify_failure(
            shared,
            &session,
            &tally,
            &session.report(&shared.voters),
        )),
    };
    // With fencing, round 1's token made final (a write-back round if
    // needed).
    let fenced = shared.fence.as_deref();
    let decided = match (failure, fenced) {
        (Some(error), _) => Err(error),
        (None, None) => Ok(None),
        (None, Some(domain)) => {
            let granted = Granted {
                resource,
                set: set.keys(),
                domain,
                value: value.as_bytes(),
                agreed,
                started: boot_start,
                ttl,
            };
            fence::make_final(shared, &mut session, granted).map(Some)
        }
    };
    if shared.events.wants_rounds() {
        // Told once, with the acquisition's final outcome: the write-back
        // round is part of it (its answers replace round 1's when it ran,
        // as in the error's report), and the validity is what is left
        // after it.
        let elapsed = match fenced {
            Some(_) => BootInstant::now().saturating_since(boot_start),
            None => elapsed,
        };
        let answers = session.answers(&shared.voters);
        shared.events.round(RoundEvent {
            operation: Operation::Acquire,
            resources: match is_set {
                true => Resources::set(set.keys()),
                false => Resources::one(resource),
            },
            outcome: RoundOutcome::of_result(&decided),
            elapsed,
            validity: decided
                .as_ref()
                .ok()
                .map(|_| validity(ttl, elapsed).unwrap_or_default()),
            fence_token: decided.as_ref().ok().copied().flatten(),
            answers: &answers,
        });
    }
    let error = match decided {
        Ok(fence_token) => {
            let mut name = std::mem::take(&mut session.name);
            if name.capacity() == 0 {
                // A group commit's queued releases give their buffers to
                // the group (see `Group::give_name`).
                if let Some(spare) = shared.group.as_ref().and_then(Group::take_name) {
                    name = spare;
                }
            }
            name.extend_from_slice(resource);
            let acquired = Acquired {
                resource: name,
                value,
                started: boot_start,
                ttl,
                valid_until: boot_start.saturating_add(ttl.saturating_sub(drift(ttl))),
                holders,
                agreed,
                refused,
                ticket,
                fence_token,
                set,
            };
            shared.pool.give_back(session);
            return Ok(acquired);
        }
        Err(error) => error,
    };
    let command = if is_set {
        Command::Set(SetCommand::Release {
            keys: set.keys(),
            value: value.as_bytes(),
            notify: None,
        })
    } else {
        Command::Release {
            resource,
            value: value.as_bytes(),
            notify: None,
        }
    };
    let release = Plan {
        command,
        // A master that refused the SET did not set our key.
        to: holders.difference(declined),
        others: None,
        rule: Rule::Release,
        deadline: Instant::now() + shared.node_timeout,
        dial: Dial::UnlessFailingForGood,
        skip: NodeSet::EMPTY,
        unawaited: true,
    };
    session.send_only(masters, release, round_deadline);
    session.names = set;
    shared.pool.give_back(session);
    Err(error)
}

/// The error for an acquisition round that could not reach a quorum
/// (with fencing, the operator's first: masters that are not the domain's
/// members, or left out of it).
fn classify_failure(
    shared: &Shared,
    session: &Session,
    tally: &Tally,
    report: &NodeReport,
) -> Error {
    if shared.fence.is_some() {
        let operators = fence::misnamed(shared, session).or_else(|| fence::unanchored(report));
        if let Some(error) = operators {
            return error;
        }
    }
    if tally.failures_prevent_quorum() {
        Error::NoQuorum(report.clone())
    } else {
        Error::Contended(report.clone())
    }
}
