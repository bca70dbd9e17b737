//! The lock's life: a held lock ([`Lock`], here: its validity and its
//! release), taken by one acquisition attempt (`acquire`) or by waiting
//! for it (`wait`), extended (`extension`), and kept alive by the handle's
//! renewer (`lease`); and a resource's lock looked at without taking it
//! (`inspect`).

pub(crate) mod acquire;
mod extension;
pub(crate) mod fence;
pub(crate) mod inspect;
pub(crate) mod lease;
pub(crate) mod many;
pub(crate) mod wait;

use crate::clock::BootInstant;
use crate::command::{Command, SetCommand};
use crate::error::{Error, NodeReport};
use crate::events::call::{Call, CallName};
use crate::events::{Operation, Resources, RoundEvent, RoundOutcome};
use crate::handle::group::{Done, Entry, Group, Release};
use crate::handle::notify::message::{notice_of, release_notice};
use crate::handle::notify::{can_subscribe, channel_of};
use crate::handle::pool::{Taken, Ticket};
use crate::handle::Shared;
use crate::names::Names;
use crate::os::fork_generation;
use crate::quorum::{Decision, NodeSet, Rule};
use crate::round::{Dial, Plan};
use crate::value::Value;
use acquire::Acquired;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::round::KEPT_NAME_CAPACITY;

/// The same for a set's names and channels: the bytes of names kept.
const KEPT_SET_CAPACITY: usize = 64 * 1024;

/// A held lock.
///
/// It is valid for [`Lock::validity`]; act on it only while that is
/// comfortably above zero. Dropping a `Lock` releases it (best effort,
/// blocking for at most the node timeout, about twice that with
/// [`Builder::group_commit`](crate::Builder::group_commit)), also while unwinding from a
/// panic: unlike `std::sync::Mutex` there is no poisoning, and the next
/// holder may find the protected resource half-updated. Call
/// [`Lock::unlock`] to learn whether the release succeeded, or
/// [`Lock::let_expire`] to keep the key on the masters until its TTL runs
/// out (a job that must run at most once per period).
///
/// A held lock uses no connection: the ones its acquisition used go back to
/// the handle's pool at once. Its release and extensions still follow its
/// SET in order on every master that had not yet answered the SET (see
/// `docs/design.md`).
///
/// A `Lock` that is not kept is released at once. rustc warns where it can:
///
/// ```compile_fail
/// # #![deny(unused_must_use)]
/// # fn f(redlock: &redlock_sync::Redlock) -> Result<(), redlock_sync::Error> {
/// redlock.lock("job", std::time::Duration::from_secs(10))?; // error: unused `Lock`
/// # Ok(()) }
/// ```
///
/// but not for `redlock.try_lock(..)?;` nor `let _ = ...`, which drop an
/// `Option<Lock>`: bind the lock (`let Some(lock) = ... else { .. };`).
#[must_use = "dropping a Lock releases it at once"]
pub struct Lock {
    shared: Arc<Shared>,
    /// The resource; a set's first name.
    resource: Vec<u8>,
    /// A set's names (see `many`): with two or more, every command is the
    /// set's; empty (or one name) for a lock on one resource.
    set: Names,
    value: Value,
    /// When the validity ends, on the boot clock (`BootInstant::ZERO` once
    /// the lock is known lost).
    valid_until: BootInstant,
    /// When the acquisition started, and the TTL last set (by the
    /// acquisition or an extension): what a lease renews with.
    acquired_at: BootInstant,
    ttl: Duration,
    /// Once an extension found the lock lost: what the masters answered
    /// then. Later calls report that loss again, rather than an expiry
    /// measured from `valid_until`, which is then no real instant.
    lost: Option<NodeReport>,
    /// The masters that were sent the SET: they may hold the key, so they
    /// are sent the release; the others cannot.
    holders: NodeSet,
    /// The masters that confirmed holding the key in the last round that
    /// set or extended it.
    agreed: NodeSet,
    /// The masters that answered the acquisition that they did not set the
    /// key: they do not hold it (for [`Lock::masters`]).
    refused: NodeSet,
    /// Holders that said no to an extension (the key gone there: a
    /// restart, or a SET the master never ran), until one says yes: the
    /// next extension that may repair sends them the repair, not the
    /// refresh (see `extension_targets`).
    declined: NodeSet,
    /// Where the most recent SET went, for ordering (see `handle::pool`).
    ticket: Option<Ticket>,
    extensions: u32,
    /// The final fence token, if the handle fences.
    fence_token: Option<u64>,
    /// False once released or left to expire.
    live: bool,
    /// The process generation the lock was taken in (see
    /// `os::fork_generation`).
    fork_generation: u64,
}

impl fmt::Debug for Lock {
    // The value is left out: knowing it lets anyone release the lock.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.resource.escape_ascii().to_string())
            .field("validity", &self.validity())
            .field("extensions", &self.extensions)
            .field("fence_token", &self.fence_token)
            .finish_non_exhaustive()
    }
}

impl Lock {
    pub(crate) fn new(shared: &Arc<Shared>, acquired: Acquired) -> Lock {
        Lock {
            shared: Arc::clone(shared),
            resource: acquired.resource,
            set: acquired.set,
            value: acquired.value,
            valid_until: acquired.valid_until,
            acquired_at: acquired.started,
            ttl: acquired.ttl,
            lost: None,
            holders: acquired.holders,
            agreed: acquired.agreed,
            refused: acquired.refused,
            declined: NodeSet::EMPTY,
            ticket: Some(acquired.ticket),
            extensions: 0,
            fence_token: acquired.fence_token,
            live: true,
            fork_generation: fork_generation(),
        }
    }

    /// The locked resource name.
    pub fn resource(&self) -> &[u8] {
        &self.resource
    }

    /// The lock's fence token, if the handle fences
    /// ([`Builder::fencing`](crate::Builder::fencing)); `None` otherwise.
    ///
    /// Pass it with every write to the protected resource, which accepts a
    /// write only if its token is at least the largest it accepted (see
    /// [`REFEREE_LUA`](crate::REFEREE_LUA) and the guide's "Fencing
    /// tokens", docs/guide/fencing.md): a holder that paused past its validity is then turned away
    /// once a newer holder wrote. Tokens of one resource are unique and
    /// rise with the holders' turns, even when clocks and pauses break the
    /// lock's timing; extending or renewing the lock keeps the token.
    ///
    /// A token is an integer from 1 to at most 2^53: it fits an SQL
    /// `BIGINT` (signed 64 bits) and is exact as a JavaScript number (every
    /// integer up to 2^53 is), so a resource in a database or a Node.js
    /// service compares tokens without loss.
    pub fn fence_token(&self) -> Option<u64> {
        self.fence_token
    }

    /// How much longer the lock is valid, now. Zero once it has expired,
    /// once an extension found it lost, and in a forked child.
    ///
    /// Measured on a clock that keeps counting while the host is suspended
    /// (`CLOCK_BOOTTIME` on Linux), as the masters' TTLs do.
    pub fn validity(&self) -> Duration {
        if self.is_inherited() {
            return Duration::ZERO;
        }
        self.valid_until.saturating_since(BootInstant::now())
    }

    /// The monotonic instant at which the lock stops being valid: now plus
    /// [`Lock::validity`]. (The lock keeps its validity on a clock that
    /// counts suspended time and `Instant` does not, so after a suspend the
    /// instant this returns moves earlier; call it again rather than keep
    /// it.)
    pub fn valid_until(&self) -> Instant {
        Instant::now() + self.validity()
    }

    /// Why the lock cannot be used any more, if it cannot: a forked child's
    /// copy, found lost, or expired.
    pub(crate) fn unusable(&self) -> Option<Error> {
        if self.is_inherited() {
            return Some(Error::Forked);
        }
        if let Some(report) = &self.lost {
            return Some(Error::LockLost(report.clone()));
        }
        BootInstant::now()
            .checked_since(self.valid_until)
            .map(|overrun| Error::Expired {
                overrun,
                last_extension: None,
            })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// When the acquisition started.
    pub(crate) fn acquired_at(&self) -> BootInstant {
        self.acquired_at
    }

    /// The TTL last set on the masters.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the validity ends, on the boot clock.
    pub(crate) fn valid_until_boot(&self) -> BootInstant {
        if self.is_inherited() {
            return BootInstant::ZERO;
        }
        self.valid_until
    }

    /// Releases the lock on every master that may hold it (compare-and-
    /// delete: only where the key still holds this lock's value), in one
    /// round, without retries.
    ///
    /// Succeeds once a quorum of masters is known not to hold the key:
    /// they deleted it, or were never sent it by the acquisition; and the
    /// answers do not show that the lock had been lost (the masters that
    /// deleted the key or could not answer are a quorum). Masters that did
    /// not answer keep their copy of the key until its TTL. A release that
    /// cannot succeed any more still waits (up to the node timeout) for the
    /// masters it can reach, so that they delete their copy before the
    /// error is returned. With [`Builder::group_commit`](crate::Builder::group_commit),
    /// a release may first wait in the group's queue, up to about one more
    /// node timeout.
    ///
    /// Returns [`Error::Expired`] if the validity had already run out (the
    /// release is still sent), [`Error::LockLost`] if too few masters still
    /// held the key, or if an earlier [`Lock::extend`] found the lock lost
    /// (that extension's error again; the release is still sent, to delete
    /// the key where it remains), [`Error::NoQuorum`] if too many could not
    /// be reached (their keys expire with the TTL), or [`Error::Forked`] in
    /// a forked child (which never releases its parent's lock).
    pub fn unlock(mut self) -> Result<(), Error> {
        let call = Call::start_on(CallName::Unlock, self.resources());
        if self.is_inherited() {
            self.live = false;
            return call.end(Err(Error::Forked));
        }
        let expired = BootInstant::now().checked_since(self.valid_until);
        let released = self.release();
        if let Some(report) = self.lost.take() {
            return call.end(Err(Error::LockLost(report)));
        }
        call.end(match expired {
            Some(overrun) => Err(Error::Expired {
                overrun,
                last_extension: None,
            }),
            None => released,
        })
    }

    /// Where the key is, master by master (in the configured order), as far
    /// as this client knows: confirmed by the last round that set or
    /// extended it, sent but not confirmed (the answer was not awaited, or
    /// the master failed without saying), or not there (never sent, or the
    /// master answered the acquisition that it did not set it). A lock held on fewer masters than
    /// configured tolerates fewer later failures; [`Lock::extend`] sets the
    /// key on the masters left out.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// use redlock_sync::KeyState;
    /// let lock = redlock.lock("job", Duration::from_secs(10))?;
    /// for (master, state) in lock.masters() {
    ///     if state != KeyState::Held {
    ///         eprintln!("lock job is not confirmed on {master}: {state:?}");
    ///     }
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn masters(&self) -> impl Iterator<Item = (&str, KeyState)> + '_ {
        self.shared.voters.iter().enumerate().map(|(i, node)| {
            let state = if self.agreed.contains(i) {
                KeyState::Held
            } else if self.holders.contains(i) && !self.refused.contains(i) {
                KeyState::Unconfirmed
            } else {
                KeyState::Absent
            };
            (node.name(), state)
        })
    }

    /// Lets the lock run out its TTL on the masters instead of releasing
    /// it, and returns the validity it had left. Nothing leaks: the lock
    /// holds no connection, and its memory is freed now. For work that
    /// must happen at most once per period (a cron job on several hosts):
    /// the key stays until the TTL ends, so a host that starts late does
    /// not run the job again.
    pub fn let_expire(mut self) -> Duration {
        let left = self.validity();
        self.live = false;
        left
    }

    /// Whether the lock is on a set of two resources or more, whose
    /// commands are the set's (see `many`).
    pub(crate) fn is_set(&self) -> bool {
        self.set.len() > 1
    }

    /// What the events tell of the lock: its one name, or a set's names.
    pub(crate) fn resources(&self) -> Resources<'_> {
        match self.is_set() {
            true => Resources::set(self.set.keys()),
            false => Resources::one(&self.resource),
        }
    }

    /// A set's names, in order (a lock taken as a set always has them,
    /// one at least); empty for a lock taken on one resource.
    pub(crate) fn set_names(&self) -> &Names {
        &self.set
    }

    /// The masters that may lack the key: left out by the acquisition, or
    /// that said no to an extension since. An extension repairs them, given
    /// time.
    pub(crate) fn left_out(&self) -> NodeSet {
        self.holders
            .complement(self.shared.voters.len())
            .union(self.declined)
    }

    /// Whether some master may lack the key (see `left_out`).
    pub(crate) fn has_left_out(&self) -> bool {
        !self.left_out().is_empty()
    }

    /// Whether this is a copy inherited through `fork` by a child process.
    fn is_inherited(&self) -> bool {
        self.fork_generation != fork_generation()
    }

    /// A session for a call on this lock, following its last SET.
    fn take_session(&self, deadline: Instant) -> Taken {
        match &self.ticket {
            Some(ticket) => self.shared.pool.take_following(ticket, deadline),
            None => Taken {
                session: self.shared.pool.take(),
                unordered: NodeSet::EMPTY,
            },
        }
    }

    /// Releases on the masters that may hold the key. Does nothing if
    /// already released.
    fn release(&mut self) -> Result<(), Error> {
        if !self.live {
            return Ok(());
        }
        self.live = false;
        let shared = Arc::clone(&self.shared);
        if let Some(group) = shared.group.as_ref().filter(|_| !self.is_set()) {
            if let Some(result) = self.release_grouped(&shared, group) {
                return result;
            }
        }
        self.release_round(&shared)
    }

    /// The release through the handle's group commit (see
    /// `handle::group`): this thread's own round if no round of the group
    /// is in flight, else a request in the next batch. `None` if the
    /// batch did not send it (its `SET` was unsettled on another session,
    /// its deadline passed in the queue, the handle was shut down): the
    /// caller then runs its own round, as without the group.
    fn release_grouped(&mut self, shared: &Shared, group: &Group) -> Option<Result<(), Error>> {
        let deadline = Instant::now() + shared.node_timeout;
        let notify = shared.release_notices && can_subscribe(&self.resource);
        let release = Release {
            value: self.value,
            holders: self.holders,
            ticket: self.ticket.clone(),
            notify,
        };
        match group.enter_release(&self.resource, release, deadline) {
            Entry::Lead(lead) => {
                // A release whose SET is unsettled somewhere may wait for
                // that SET's session (`Pool::take_following`): the group's
                // queued calls do not wait with it.
                let unsettled = self
                    .ticket
                    .as_ref()
                    .is_some_and(|t| !t.unsettled().is_empty());
                let lead = (!unsettled).then_some(lead);
                let result = self.release_round(shared);
                drop(lead); // handed on before the result is returned
                Some(result)
            }
            Entry::Queued(request) => {
                let result = match group.wait(acquire::grouped_handle(shared), request) {
                    Ok(Done::Released) => {
                        // As `release_round`: this handle's own waiters need
                        // not wait for the notice to come back from a master.
                        if notify {
                            shared
                                .notices
                                .released_here(&self.resource, notice_of(self.value.as_bytes()));
                        }
                        Ok(())
                    }
                    Ok(Done::Unbatched) => return None,
                    Ok(Done::Granted(_)) => Err(Error::System(std::io::Error::other(
                        "the group commit answered a release as an acquisition",
                    ))),
                    Err(error) => Err(error),
                };
                // The name buffer goes to the group, for its next queued
                // acquisition.
                group.give_name(std::mem::take(&mut self.resource));
                Some(result)
            }
        }
    }

    /// Releases in a round of this thread's own (see [`Lock::release`]).
    fn release_round(&mut self, shared: &Shared) -> Result<(), Error> {
        let deadline = Instant::now() + shared.node_timeout;
        let Taken {
            mut session,
            unordered,
        } = self.take_session(deadline);
        // Waiting clients hear of the release on its channel (see `handle::notify`);
        // the notice tells one release from another. Nobody can listen on
        // the channel of a name too long for it.
        let notify = shared.release_notices && can_subscribe(&self.resource);
        let mut channel = std::mem::take(&mut session.channel);
        channel.clear();
        if notify {
            channel_of(&self.resource, &mut channel);
        }
        let mut channels = std::mem::take(&mut session.channels);
        let notice = release_notice(self.value.as_bytes());
        let command = if self.is_set() {
            channels.clear();
            if shared.release_notices {
                for key in self.set.keys().iter() {
                    channels.push_with(|out| {
                        if can_subscribe(key) {
                            channel_of(key, out);
                        }
                    });
                }
            }
            Command::Set(SetCommand::Release {
                keys: self.set.keys(),
                value: self.value.as_bytes(),
                notify: shared
                    .release_notices
                    .then_some((&notice[..], channels.keys())),
            })
        } else {
            Command::Release {
                resource: &self.resource,
                value: self.value.as_bytes(),
                notify: notify.then_some((&channel[..], &notice[..])),
            }
        };
        let plan = Plan {
            command,
            to: self.holders,
            others: None,
            rule: Rule::Release,
            deadline,
            dial: Dial::OutsideBackoff,
            skip: unordered,
            unawaited: false,
        };
        let started = Instant::now();
        let tally = session.run(shared.masters(), plan);
        let elapsed = started.elapsed();
        let result = match tally.decision(Rule::Release) {
            Decision::Reached => {
                // This handle's own waiters need not wait for the notice to
                // come back from a master.
                if self.is_set() && shared.release_notices {
                    for key in self.set.keys().iter().filter(|key| can_subscribe(key)) {
                        shared
                            .notices
                            .released_here(key, notice_of(self.value.as_bytes()));
                    }
                } else if notify {
                    shared
                        .notices
                        .released_here(&self.resource, notice_of(self.value.as_bytes()));
                }
                Ok(())
            }
            _ if tally.release_found_lock_lost() => {
                Err(Error::LockLost(session.report(&shared.voters)))
            }
            _ => Err(Error::NoQuorum(session.report(&shared.voters))),
        };
        if shared.events.wants_rounds() {
            let answers = session.answers(&shared.voters);
            shared.events.round(RoundEvent {
                operation: Operation::Release,
                resources: self.resources(),
                outcome: RoundOutcome::of_result(&result),
                elapsed,
                validity: None,
                fence_token: None,
                answers: &answers,
            });
        }
        channel.shrink_to(KEPT_NAME_CAPACITY);
        session.channel = channel;
        channels.shrink_to(KEPT_SET_CAPACITY);
        session.channels = channels;
        if self.set.len() > 0 {
            let mut set = std::mem::take(&mut self.set);
            set.clear();
            set.shrink_to(KEPT_SET_CAPACITY);
            session.names = set;
        }
        // The name buffer goes to the session, for its next lock; or, if
        // the session has one, to the group, for a queued acquisition
        // (whose lock may come to be released here).
        let mut name = std::mem::take(&mut self.resource);
        name.clear();
        name.shrink_to(KEPT_NAME_CAPACITY);
        match &shared.group {
            Some(group) if session.name.capacity() > 0 => group.give_name(name),
            _ => session.name = name,
        }
        shared.pool.give_back(session);
        result
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.live && !self.is_inherited() {
            // Best effort: the keys expire with the TTL anyway.
            let call = Call::start_on(CallName::Drop, self.resources());
            let _ = call.end(self.release());
        }
    }
}

/// Where a lock's key is on one master, as far as its holder knows (see
/// [`Lock::masters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyState {
    /// The master confirmed it set or extended the key in the lock's last
    /// round that did.
    Held,
    /// The master was sent the key, but its answer was not awaited (the
    /// round was decided first) or it failed: it may hold the key. Also a
    /// cluster voter that set some keys of a set and said no to others
    /// (see [`LockSet::masters`](crate::LockSet::masters)).
    Unconfirmed,
    /// The master does not hold the key: it was never sent it (it was down
    /// or lagging when the lock was taken), or it answered the acquisition
    /// that it did not set it (the key held by another value there, or an
    /// error reply such as a fenced acquisition's `NOANCHOR`).
    Absent,
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn sent_across_threads<T: Send + 'static>() {}
    sent_across_threads::<Lock>();
};

#[cfg(test)]
mod tests;
