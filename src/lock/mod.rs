//! A held lock: its validity, extension and release.

pub(crate) mod acquire;
pub(crate) mod lease;
pub(crate) mod wait;

use crate::clock::BootInstant;
use crate::command::Command;
use crate::error::{Error, NodeReport};
use crate::handle::notify::message::{notice_of, release_notice};
use crate::handle::notify::{can_subscribe, channel_of};
use crate::handle::pool::{Taken, Ticket};
use crate::handle::Shared;
use crate::os::fork_generation;
use crate::quorum::{drift, validity, Decision, NodeSet, Rule, Tally};
use crate::round::{Plan, Progress};
use crate::value::Value;
use acquire::Acquired;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A released lock gives its resource-name buffer to the session that
/// released it, for that session's next lock, so that steady-state locking
/// does not allocate; a buffer larger than this is shrunk first.
const KEPT_NAME_CAPACITY: usize = 1024;

/// A held lock.
///
/// It is valid for [`Lock::validity`]; act on it only while that is
/// comfortably above zero. Dropping a `Lock` releases it (best effort,
/// blocking for at most the node timeout), also while unwinding from a
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
    resource: Vec<u8>,
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
    /// Where the most recent SET went, for ordering (see `pool`).
    ticket: Option<Ticket>,
    extensions: u32,
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
            .finish_non_exhaustive()
    }
}

impl Lock {
    pub(crate) fn new(shared: &Arc<Shared>, acquired: Acquired) -> Lock {
        Lock {
            shared: Arc::clone(shared),
            resource: acquired.resource,
            value: acquired.value,
            valid_until: acquired.valid_until,
            acquired_at: acquired.started,
            ttl: acquired.ttl,
            lost: None,
            holders: acquired.holders,
            agreed: acquired.agreed,
            ticket: Some(acquired.ticket),
            extensions: 0,
            live: true,
            fork_generation: fork_generation(),
        }
    }

    /// The locked resource name.
    pub fn resource(&self) -> &[u8] {
        &self.resource
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

    /// Sets the lock's TTL to `ttl` from now on every master where it is
    /// still ours, and sets it, if the resource is free there, on the
    /// masters its acquisition left out (down or lagging then), so that an
    /// extended lock survives the loss of any minority of masters.
    ///
    /// Succeeds only if a quorum holds the key afterwards, confirmed within
    /// the new validity, computed from the instant the call started, as for
    /// acquisition, and before the old validity ran out: a lock whose
    /// validity ended is never valid again (another client may have held
    /// it in between), so an extension confirmed too late fails with
    /// [`Error::Expired`], and one called too late fails without contacting
    /// the masters. The round lasts at most the validity left. On failure
    /// the key is never deleted, and the validity may only shrink: it
    /// becomes the earlier of the old one and the new one (a master that
    /// did apply the new TTL may now expire sooner), and zero on
    /// [`Error::LockLost`] (another client may hold the lock now).
    ///
    /// Fails with [`Error::Expired`] if the validity ran out before the
    /// call (without contacting the masters) or before the extension was
    /// confirmed (carrying what the masters answered), [`Error::LockLost`] if the lock is gone on
    /// enough masters (and, without contacting them, once an earlier
    /// extension found it so: the same error again), [`Error::NoQuorum`],
    /// [`Error::TooSlow`],
    /// [`Error::ExtensionLimit`], [`Error::Forked`] in a forked child, or
    /// [`Error::Config`] for an invalid TTL.
    pub fn extend(&mut self, ttl: Duration) -> Result<(), Error> {
        let extension = self.begin_extension(ttl, true)?;
        let shared = Arc::clone(&self.shared);
        let budget = shared.round_budget(extension.ttl);
        let deadline = Instant::now() + budget;
        let Taken {
            mut session,
            unordered,
        } = self.take_session(deadline);
        let (to, others) = self.extension_targets(&extension, unordered, budget);
        let plan = Plan {
            command: extension.command(&self.resource, &self.value),
            to,
            others: others
                .map(|masters| (extension.set_command(&self.resource, &self.value), masters)),
            rule: Rule::Extend,
            deadline,
            despite_backoff: false,
            skip: unordered,
            unawaited: false,
        };
        let tally = session.run(shared.masters(), plan);
        let round = ExtensionRound {
            tally,
            sent: session.sent(),
            agreed: session.agreed(),
            set_tag: session.last_tags().1,
            progress: Arc::clone(session.progress()),
        };
        let result = self.end_extension(extension, round, || session.report(&shared.nodes));
        shared.pool.give_back(session);
        result
    }

    /// Checks what an extension needs before any I/O, and notes when it
    /// starts. `limited`: counts against `max_extensions` (the renewal of a
    /// [`Lease`](crate::Lease) is bounded by its own `max_hold` instead).
    pub(crate) fn begin_extension(
        &mut self,
        ttl: Duration,
        limited: bool,
    ) -> Result<Extension, Error> {
        if self.is_inherited() {
            return Err(Error::Forked);
        }
        let ttl_ms = self.shared.ttl_millis(ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        if let Some(report) = &self.lost {
            return Err(Error::LockLost(report.clone()));
        }
        if limited && self.extensions >= self.shared.max_extensions {
            return Err(Error::ExtensionLimit(self.shared.max_extensions));
        }
        let start = BootInstant::now();
        if let Some(overrun) = start.checked_since(self.valid_until) {
            return Err(Error::Expired {
                overrun,
                last_extension: None,
            });
        }
        Ok(Extension {
            ttl,
            ttl_ms,
            start,
            left: self.valid_until.saturating_since(start),
            left_out: self.holders.complement(self.shared.nodes.len()),
        })
    }

    /// Where an extension whose round may last `round` goes:
    /// compare-and-pexpire to the masters that may hold the key, and `SET
    /// NX` to those the acquisition left out, unless some master's order
    /// behind the last SET cannot be kept (`unordered`: a lock follows one
    /// SET session at a time), or the round could outlast the validity.
    ///
    /// That is, the `SET NX` (the repair) goes out only in a round that
    /// ends while the validity lasts, so that this client never writes one
    /// for a lock whose validity has ended (a round may write a command
    /// late in the round, on a connection it had to open). A repair written
    /// in time may still run later on a stalled master: it then counts for
    /// nothing (see `end_extension`), and the release, which follows it on
    /// the same connection, deletes the key it made.
    pub(crate) fn extension_targets(
        &self,
        extension: &Extension,
        unordered: NodeSet,
        round: Duration,
    ) -> (NodeSet, Option<NodeSet>) {
        let left_out = extension.left_out;
        let repair = !left_out.is_empty() && unordered.is_empty() && extension.left > round;
        (self.holders, repair.then_some(left_out))
    }

    /// The masters whose order behind this lock's last SET a round on
    /// `session` cannot keep (they have not settled it, and it went out on
    /// another session).
    pub(crate) fn unordered_on(&self, session: &crate::round::Session) -> NodeSet {
        match &self.ticket {
            Some(ticket) if !ticket.is_on(session) => ticket.unsettled(),
            _ => NodeSet::EMPTY,
        }
    }

    /// The resource and value, for the commands of an extension.
    pub(crate) fn key(&self) -> (&[u8], &Value) {
        (&self.resource, &self.value)
    }

    /// Takes in the result of an extension's round: the new validity (from
    /// the round's start) on success; zero, for good, once the lock is
    /// found lost; otherwise the earlier of the old and the new end. A
    /// result that comes in after the old validity ended is
    /// [`Error::Expired`], whatever the masters said (unless they said the
    /// lock is lost).
    pub(crate) fn end_extension(
        &mut self,
        extension: Extension,
        round: ExtensionRound,
        report: impl FnOnce() -> NodeReport,
    ) -> Result<(), Error> {
        let Extension {
            ttl,
            start,
            left_out,
            ..
        } = extension;
        let now = BootInstant::now();
        let elapsed = now.saturating_since(start);
        // An extension keeps the lock only if its quorum is confirmed
        // before the old validity ends; `late` is by how much it was not.
        //
        // Why. Until that end, the masters that last agreed hold the key
        // (their TTLs outlast the validity), so no other client can hold
        // the lock, and every yes read before the end continues ours: a
        // compare-and-pexpire that found our value, or a `SET NX` that
        // found the key free on a master the acquisition left out. Each of
        // those masters ran its command after the round started, so its key
        // lasts at least `ttl` from that start: the new validity counts
        // from there. A yes read after the end proves no such thing: the
        // key may have expired on a majority in between, been taken and
        // released by another client, and our `SET NX` then re-creates it
        // (and a compare-and-pexpire's yes speaks for its own master only).
        // So a round that started in time but whose answers land after the
        // end must not count: its holder would claim to have held the lock
        // throughout when nobody can know it did. We read a yes only after
        // the master ran it, so a result in before the end had all its
        // yeses before it; a result in later is refused even if some yeses
        // came in time (when each came is not kept: this costs at most an
        // extension tried at its last moment). The round itself keeps its
        // usual deadline (a master that answers in its usual time is not
        // to be reported late for a deadline cut short); only a round that
        // ends before the validity does sends the `SET NX` repair (see
        // `extension_targets`). A repair written in time may still run
        // after the end on a stalled master: it counts for nothing then,
        // the lock is over, and its release, which follows that SET on the
        // same connection (see `follow`), deletes the key.
        let late = now.checked_since(self.valid_until);
        let expired = |overrun, report: NodeReport| Error::Expired {
            overrun,
            last_extension: Some(report),
        };
        let result = match round.tally.decision(Rule::Extend) {
            Decision::Reached => match late {
                Some(overrun) => Err(expired(overrun, report())),
                None if validity(ttl, elapsed).is_some() => Ok(()),
                None => Err(Error::TooSlow { elapsed, ttl }),
            },
            _ if round.tally.refusals_prevent_quorum() => Err(Error::LockLost(report())),
            _ => match late {
                Some(overrun) => Err(expired(overrun, report())),
                None => Err(Error::NoQuorum(report())),
            },
        };
        // The masters sent the SET now may hold the key from now on.
        let newly_set = round.sent.intersection(left_out);
        if !newly_set.is_empty() {
            self.follow(&round.progress, round.set_tag, newly_set);
        }
        self.agreed = round.agreed;
        let new_end = start.saturating_add(ttl.saturating_sub(drift(ttl)));
        match &result {
            Ok(()) => {
                self.valid_until = new_end;
                self.ttl = ttl;
                self.extensions += 1;
            }
            Err(Error::LockLost(report)) => {
                self.valid_until = BootInstant::ZERO;
                self.lost = Some(report.clone());
            }
            Err(_) => self.valid_until = self.valid_until.min(new_end),
        }
        result
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

    /// Extends the lock to `ttl` (as [`Lock::extend`]) only if less than
    /// `min_left` of its validity remains; returns whether it extended. The
    /// cooperative form of renewal, for loops over work items: no thread,
    /// and no round while enough validity is left.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let items: Vec<u32> = Vec::new();
    /// let ttl = Duration::from_secs(10);
    /// let mut lock = redlock.lock("batch:7", ttl)?;
    /// for item in items {
    ///     lock.renew_if_below(ttl / 3, ttl)?; // Err(LockLost): stop
    ///     println!("{item}");
    /// }
    /// lock.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn renew_if_below(&mut self, min_left: Duration, ttl: Duration) -> Result<bool, Error> {
        if let Some(error) = self.unusable() {
            return Err(error);
        }
        if self.validity() >= min_left {
            return Ok(false);
        }
        self.extend(ttl).map(|()| true)
    }

    /// Releases the lock on every master that may hold it (compare-and-
    /// delete: only where the key still holds this lock's value), in one
    /// round, without retries.
    ///
    /// Succeeds once a quorum of masters is known not to hold the key:
    /// they deleted it, or were never sent it by the acquisition; and the
    /// answers do not show that the lock had been lost (the masters that
    /// deleted the key or could not answer are a quorum). Masters that did
    /// not answer keep their copy of the key until its TTL.
    ///
    /// Returns [`Error::Expired`] if the validity had already run out (the
    /// release is still sent), [`Error::LockLost`] if too few masters still
    /// held the key, or if an earlier [`Lock::extend`] found the lock lost
    /// (that extension's error again; the release is still sent, to delete
    /// the key where it remains), [`Error::NoQuorum`] if too many could not
    /// be reached (their keys expire with the TTL), or [`Error::Forked`] in
    /// a forked child (which never releases its parent's lock).
    pub fn unlock(mut self) -> Result<(), Error> {
        if self.is_inherited() {
            self.live = false;
            return Err(Error::Forked);
        }
        let expired = BootInstant::now().checked_since(self.valid_until);
        let released = self.release();
        if let Some(report) = self.lost.take() {
            return Err(Error::LockLost(report));
        }
        match expired {
            Some(overrun) => Err(Error::Expired {
                overrun,
                last_extension: None,
            }),
            None => released,
        }
    }

    /// Where the key is, master by master (in the configured order), as far
    /// as this client knows: confirmed by the last round that set or
    /// extended it, sent but not confirmed (the answer was not awaited, or
    /// the master failed), or never sent. A lock held on fewer masters than
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
        self.shared.nodes.iter().enumerate().map(|(i, node)| {
            let state = if self.agreed.contains(i) {
                KeyState::Held
            } else if self.holders.contains(i) {
                KeyState::Unconfirmed
            } else {
                KeyState::Absent
            };
            (node.name.as_str(), state)
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

    /// Records that `masters` were just sent this lock's SET with `tag` on
    /// the session whose progress is `progress`.
    fn follow(&mut self, progress: &Arc<Progress>, tag: u64, masters: NodeSet) {
        self.holders = self.holders.union(masters);
        self.ticket = Some(match self.ticket.take() {
            // Same session: the new tag comes after the old SET on every
            // connection, so settling it settles both.
            Some(old) if Arc::ptr_eq(&old.progress, progress) => Ticket {
                tag,
                masters: old.masters.union(masters),
                progress: old.progress,
            },
            // Another session: the old SET had settled everywhere (that is
            // when another session is used), so only the new one counts.
            _ => Ticket {
                progress: Arc::clone(progress),
                tag,
                masters,
            },
        });
    }

    /// Releases on the masters that may hold the key. Does nothing if
    /// already released.
    fn release(&mut self) -> Result<(), Error> {
        if !self.live {
            return Ok(());
        }
        self.live = false;
        let shared = Arc::clone(&self.shared);
        let deadline = Instant::now() + shared.node_timeout;
        let Taken {
            mut session,
            unordered,
        } = self.take_session(deadline);
        // Waiting clients hear of the release on its channel (see `notify`);
        // the notice tells one release from another. Nobody can listen on
        // the channel of a name too long for it.
        let notify = shared.release_notices && can_subscribe(&self.resource);
        let mut channel = std::mem::take(&mut session.channel);
        channel.clear();
        if notify {
            channel_of(&self.resource, &mut channel);
        }
        let notice = release_notice(self.value.as_bytes());
        let plan = Plan {
            command: Command::Release {
                resource: &self.resource,
                value: self.value.as_bytes(),
                notify: notify.then_some((&channel[..], &notice[..])),
            },
            to: self.holders,
            others: None,
            rule: Rule::Release,
            deadline,
            despite_backoff: false,
            skip: unordered,
            unawaited: false,
        };
        let tally = session.run(shared.masters(), plan);
        let result = match tally.decision(Rule::Release) {
            Decision::Reached => {
                // This handle's own waiters need not wait for the notice to
                // come back from a master.
                if notify {
                    shared
                        .notices
                        .released_here(&self.resource, notice_of(self.value.as_bytes()));
                }
                Ok(())
            }
            _ if tally.release_found_lock_lost() => {
                Err(Error::LockLost(session.report(&shared.nodes)))
            }
            _ => Err(Error::NoQuorum(session.report(&shared.nodes))),
        };
        channel.shrink_to(KEPT_NAME_CAPACITY);
        session.channel = channel;
        // The name buffer goes to the session, for its next lock.
        let mut name = std::mem::take(&mut self.resource);
        name.clear();
        name.shrink_to(KEPT_NAME_CAPACITY);
        session.name = name;
        shared.pool.give_back(session);
        result
    }
}

/// An extension under way: what [`Lock::begin_extension`] checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extension {
    pub(crate) ttl: Duration,
    ttl_ms: u64,
    /// When the extension started (its validity counts from here).
    start: BootInstant,
    /// The validity left then.
    left: Duration,
    /// The masters the lock's key was never sent to.
    left_out: NodeSet,
}

impl Extension {
    /// The compare-and-pexpire for the masters that may hold the key.
    pub(crate) fn command<'a>(&self, resource: &'a [u8], value: &'a Value) -> Command<'a> {
        Command::Extend {
            resource,
            value: value.as_bytes(),
            ttl_ms: self.ttl_ms,
        }
    }

    /// The `SET NX` for the masters the acquisition left out.
    pub(crate) fn set_command<'a>(&self, resource: &'a [u8], value: &'a Value) -> Command<'a> {
        Command::Acquire {
            resource,
            value: value.as_bytes(),
            ttl_ms: self.ttl_ms,
        }
    }
}

/// What an extension's round did.
pub(crate) struct ExtensionRound {
    pub(crate) tally: Tally,
    /// The masters sent the round's commands.
    pub(crate) sent: NodeSet,
    /// The masters that said yes.
    pub(crate) agreed: NodeSet,
    /// The tag of the `SET NX` to the left-out masters.
    pub(crate) set_tag: u64,
    /// The progress of the session the round ran on.
    pub(crate) progress: Arc<Progress>,
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.live && !self.is_inherited() {
            // Best effort: the keys expire with the TTL anyway.
            let _ = self.release();
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
    /// round was decided first) or it failed: it may hold the key.
    Unconfirmed,
    /// The master was never sent the key (it was down or lagging when the
    /// lock was taken): it does not hold it.
    Absent,
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn sent_across_threads<T: Send + 'static>() {}
    sent_across_threads::<Lock>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::tests::simulate_suspend;
    use crate::round::Session;
    use crate::Redlock;

    #[test]
    fn validity_counts_the_time_the_host_was_suspended() {
        // No server is contacted: the lock is made by hand.
        let redlock = Redlock::builder()
            .nodes(["redis://127.0.0.1:1"])
            .build()
            .unwrap();
        let session = Session::new(1);
        let lock = Lock::new(
            &redlock.shared,
            Acquired {
                resource: b"r".to_vec(),
                value: Value::random().unwrap(),
                started: BootInstant::now(),
                ttl: Duration::from_secs(10),
                valid_until: BootInstant::now().saturating_add(Duration::from_secs(10)),
                holders: NodeSet::all(1),
                agreed: NodeSet::all(1),
                ticket: Ticket {
                    progress: Arc::clone(session.progress()),
                    tag: 1,
                    masters: NodeSet::all(1),
                },
            },
        );
        let before = lock.validity();
        assert!(before > Duration::from_secs(9));
        // The masters' TTLs ran on while the host slept: so must validity.
        simulate_suspend(Duration::from_secs(4));
        let after = lock.validity();
        assert!(after <= before - Duration::from_secs(4), "{after:?}");
        assert!(lock.valid_until() <= Instant::now() + Duration::from_secs(6));
        simulate_suspend(Duration::from_secs(7));
        assert_eq!(lock.validity(), Duration::ZERO);
        lock.let_expire();
    }
}
