//! Waiting for a held lock: try; between tries, sleep until it is this
//! waiter's turn after a release, or until a fallback timer runs out; until
//! the lock is ours or the wait is over.
//!
//! After a first try fails (the lock held, or no quorum), the waiter
//! subscribes to the resource's channel (see `handle::notify`), tries once more (a
//! release before the subscription would otherwise go unheard), and
//! announces itself on the queue's master. Should a quorum of masters
//! confirm the subscription only after that try began, it tries again
//! then, for the same reason. From then on:
//!
//! - When a release is heard, the first waiter in the queue tries at once.
//!   The others hold back: the one ahead of them will take the lock and say
//!   so, and they wait for the next release. Should it stay silent for a
//!   grace period (it crashed, or its attempt failed), they try too. So a
//!   handoff costs one acquisition round, not one per waiter.
//! - When the first in the queue is a waiter of a set of resources that
//!   is alive (`set_turn`: it says `s` every 500 ms), the others hold
//!   back on a release, their fallback pause included, with no grace
//!   period: it holds its turn until it takes its set or gives up, or has
//!   been silent for 1 s.
//! - Without a queue (the queue's master is down, refused the subscription,
//!   or the other clients do not announce themselves), each release lets
//!   one thread per handle try.
//! - A try that won some masters but not a quorum (votes split between
//!   waiters, or a SET that reached a master before the release did) is
//!   retried after a short random pause, twice at most.
//! - A try refused by a master that had not yet been heard to run the
//!   release may have beaten the release there: that master's copy of the
//!   notice (it counts as no new release) starts another try, and so does
//!   a short pause (doubling each time) in case the copy never comes.
//! - A waiter that found the lock held and that nothing woke within the
//!   drift allowance (at most a node timeout) reads the key's `PTTL` on
//!   the masters (`Waiter::expiry`: one round, on this failing path only)
//!   and sleeps no later than a quorum of them will have let it expire,
//!   plus the drift allowance: an expiry publishes nothing, and a holder
//!   that crashed is replaced then, whatever the fallback pause. In a
//!   quick handoff the release's notice comes first, and nothing is read.
//! - A try that found no quorum (masters down, frozen or slow) waits for
//!   the next release or the fallback timer, like one that found the lock
//!   held; a wait without a time limit gives up once tries have found no
//!   quorum for the handle's `unreachable_limit` in a row.
//! - The fallback timer (`retry_delay` plus random `retry_jitter`) keeps
//!   waiting correct when no message comes: one lost, a master down or
//!   frozen, an ACL that refuses `SUBSCRIBE`.
//!
//! A thread that comes back for a lock its handle waited on lately, while
//! others are queued for it, takes its place in the queue instead of
//! barging in: handoffs go to those who waited. Tries started by releases
//! that only a minority of the masters was heard to run, and that won no
//! master, are spaced out more and more (a flood of forged notices costs
//! bounded work); a release heard from a quorum is real and is always
//! tried at once, also while such tries are spaced out. Messages never
//! grant anything: every try is a full acquisition round.
//!
//! Waiters are served in the order they announced themselves as long as
//! everyone hears the queue; nothing more is promised (see the guide's
//! known limits, docs/guide/limits.md, "Fairness").

mod limit;
pub(crate) mod many;
mod set_turn;
mod turn;
mod waiter;

pub use limit::Wait;

use super::acquire::{acquire, Acquired};
use crate::error::{Error, Waited};
use crate::events::{Resources, WaitChange, WaitEvent};
use crate::handle::notify::message::notice_of;
use crate::handle::Shared;
use std::time::{Duration, Instant};
use waiter::{declined, won_nothing, Failed, Waiter};

/// Tries to acquire `resource` for `ttl` until it succeeds or `wait` is
/// over. Contention is waited out; a failure that may pass (no quorum,
/// too slow) is retried on the next release heard or after the fallback
/// pause; any other error ends the wait at once, and so does the handle's
/// shutdown (`Error::ShutDown`, from the next try). A wait without a time
/// limit also ends once tries have found no quorum for the handle's
/// `unreachable_limit` in a row. When the wait is over, returns the last
/// attempt's error (`Error::Contended` if the lock was still held), its
/// report saying how long the call waited.
///
/// A call that takes the lock (or fails for good) on its first try tells
/// the hook nothing: it did not wait.
pub(crate) fn acquire_within(
    shared: &Shared,
    resource: &[u8],
    ttl: Duration,
    wait: Wait,
) -> Result<Acquired, Error> {
    // Before the waiter looks at the resource's channel.
    Shared::check_resource(resource)?;
    let start = Instant::now();
    let deadline = wait.deadline(start);
    // Without a time limit, how long tries may find no quorum in a row.
    let patience = match deadline {
        None => Some(shared.unreachable_limit),
        Some(_) => None,
    };
    let mut waiter = Waiter::new(shared, resource, ttl, deadline);
    let tell = |change| {
        shared.events.wait(|| WaitEvent {
            resources: Resources::one(resource),
            change,
            waited: start.elapsed(),
        });
    };
    let mut waited = waiter.queue_up_if_others_wait();
    let mut tries = 0u32;
    // When the tries that found no quorum in a row began.
    let mut unreachable_since: Option<Instant> = None;
    loop {
        let seen = waiter.seen();
        let attempt_start = Instant::now();
        tries = tries.saturating_add(1);
        let error = match acquire(shared, resource, ttl) {
            Ok(acquired) => {
                waiter.finish(Some(notice_of(acquired.value.as_bytes())));
                if waited {
                    tell(WaitChange::Acquired);
                }
                return Ok(acquired);
            }
            Err(e) if e.is_retryable() => e,
            Err(e) => {
                waiter.finish(None);
                if waited {
                    tell(WaitChange::GaveUp);
                }
                return Err(e);
            }
        };
        let now = Instant::now();
        let unreachable = matches!(
            error,
            Error::NoQuorum(_) | Error::TooSlow { .. } | Error::QueueTimeout { .. }
        );
        let since = match unreachable {
            true => *unreachable_since.get_or_insert(attempt_start),
            false => {
                unreachable_since = None;
                now
            }
        };
        // The time limit, or masters out of reach for too long.
        let out_of_reach = patience
            .filter(|limit| unreachable && now.saturating_duration_since(since) >= *limit)
            .map(|_| now.saturating_duration_since(since));
        if out_of_reach.is_some() || deadline.is_some_and(|deadline| now >= deadline) {
            let error = waiter.explain(error);
            waiter.finish(None);
            if waited {
                tell(WaitChange::GaveUp);
            }
            if !waited && out_of_reach.is_none() {
                // One attempt: no wait to tell of.
                return Err(error);
            }
            return Err(error.with_waited(Waited {
                waited: now.saturating_duration_since(start),
                tries,
                unreachable_for: out_of_reach,
            }));
        }
        waited = true;
        if error.is_contention() {
            tell(WaitChange::Contended);
        }
        // Whatever the failure, a release heard from now on is worth a try.
        if waiter.subscribe() {
            continue;
        }
        let (failed, wake_by) = if error.is_contention() {
            let elapsed = now.saturating_duration_since(attempt_start);
            if waiter.quick_retry(&error, elapsed) {
                continue;
            }
            let failed = Failed::Contended {
                won_nothing: won_nothing(&error),
                declined: declined(&error),
            };
            // No later than the holder's key expires: the waiter asks
            // when, if nothing wakes it soon (see `wait_for_turn`).
            (failed, None)
        } else {
            // No quorum, or too slow: no message tells when that passes.
            // No later than masters out of reach would end the wait.
            let give_up = match (unreachable, patience) {
                (true, Some(limit)) => since.checked_add(limit),
                _ => None,
            };
            (Failed::Unreachable, give_up)
        };
        let woken = waiter.wait_for_turn(seen, failed, wake_by);
        tell(WaitChange::Woken(woken));
    }
}
