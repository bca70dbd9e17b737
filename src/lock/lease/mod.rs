//! A lock renewed in the background: [`Lock::keep_alive`] turns a [`Lock`]
//! into a [`Lease`], which the handle's renewal thread (see `renew`)
//! extends until it is released, lost, expired, or held for its `max_hold`.
//!
//! The holder reads the lease's state with one atomic load: the end of its
//! validity on the boot clock, which the renewer moves forward after each
//! successful round (counted from that round's start). Nothing the renewer
//! does can make that view optimistic: a holder paused past its validity
//! reads that it ran out when it resumes, before it can act, whether or not
//! the renewer ran.
//!
//! A lease that ended is over for good: once its validity ran out, or its
//! lock was found lost, nothing makes it valid again (another client may
//! have held the lock in between). The end of the validity and the mark
//! that the lease ended share one atomic word. Whoever first finds the
//! validity run out (the holder's `check` or `validity`, or the renewer)
//! sets the mark with a compare-and-swap against the end it read; the
//! renewer publishes a new end with a compare-and-swap against the old one,
//! which fails once the mark is set. So a renewal published first is seen
//! by every later reader, and once a reader was told the lease expired, no
//! renewal is ever published.

pub(crate) mod renew;

use crate::clock::BootInstant;
use crate::error::{Error, NodeReport};
use crate::lock::Lock;
use crate::os::fork_generation;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The lease is renewed.
const RENEWING: u8 = 0;
/// The renewer found the lock lost on the masters, or the lease is a forked
/// child's copy (`gone` says which).
const LOST: u8 = 1;
/// `max_hold` has passed: renewal stopped.
const HOLD_LIMIT: u8 = 2;
/// Unlocked, dropped or left to expire.
const RELEASED: u8 = 3;

/// The mark, in `LeaseInner::valid_until`, that the lease has ended (the
/// other bits keep the end of its validity, in nanoseconds: a boot clock
/// needs 292 years to reach this bit).
const ENDED: u64 = 1 << 63;

/// A lock that a background thread keeps renewing, for at most `max_hold`
/// (see [`Lock::keep_alive`]).
///
/// [`Lease::validity`] and [`Lease::check`] are one atomic read each, so a
/// worker can check the lease before every step, also from another thread
/// (`Lease` is `Send + Sync`). Dropping a `Lease` stops its renewal and then
/// releases the lock (best effort); [`Lease::unlock`] does the same and
/// says whether the release succeeded, and [`Lease::let_expire`] stops
/// renewal and keeps the key until its TTL.
///
/// Only `validity()` and `check()` are authoritative: they come from this
/// process's own clock, so a holder that was paused (GC, swap, SIGSTOP)
/// past the validity sees the lock gone when it resumes. A lease whose
/// validity ran out, or whose lock was found lost, is over for good:
/// `check()` never succeeds again, even if the masters answer again. A
/// holder paused between `check()` and its action can still act after the
/// lock passed to someone else; keep each step well inside the validity.
///
/// ```no_run
/// # use std::time::Duration;
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// # let steps: Vec<String> = Vec::new();
/// let lease = redlock
///     .lock("import:42", Duration::from_secs(10))?
///     .keep_alive(Duration::from_secs(600))?; // renewed for up to 10 minutes
/// for step in &steps {
///     lease.check()?; // Err: lost, expired, or held for 10 minutes: stop
///     println!("{step}");
/// }
/// lease.unlock()?;
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[must_use = "dropping a Lease releases the lock at once"]
pub struct Lease {
    inner: Arc<LeaseInner>,
}

/// What a lease shares with the renewal thread.
pub(crate) struct LeaseInner {
    /// The lock; `None` once released, or given up by the renewer. The
    /// renewer holds this mutex for the length of a renewal round (never
    /// longer), so a release waits for the round in flight and no extension
    /// is ever sent after the release.
    lock: Mutex<Option<Lock>>,
    /// The end of the validity on the boot clock, in nanoseconds, with
    /// [`ENDED`] once the lease is over (see the module docs).
    valid_until: AtomicU64,
    state: AtomicU8,
    /// Set by the release (or `let_expire`) before it waits for the lock:
    /// the renewer starts no round on the lease after it, so the release
    /// waits for the round in flight at most (a failed lease is due again
    /// at once, and the renewer would otherwise often take the mutex again
    /// before the waiting release).
    releasing: AtomicBool,
    /// Why the renewer gave the lock up, once the state is `LOST`.
    gone: Mutex<Option<Gone>>,
    /// What the masters answered to the last renewal that failed since the
    /// last that succeeded: why the lease expired, if it does.
    last_failure: Mutex<Option<NodeReport>>,
    /// When the renewer next renews it, on the boot clock (nanoseconds):
    /// kept by the renewer.
    pub(crate) renew_at: AtomicU64,
    /// Renewal stops here.
    pub(crate) hold_until: BootInstant,
    pub(crate) max_hold: Duration,
    /// The TTL each renewal sets.
    pub(crate) ttl: Duration,
    resource: Vec<u8>,
    /// The process generation the lease was made in (see
    /// `os::fork_generation`): a forked child's copy is its parent's.
    fork_generation: u64,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("resource", &self.inner.resource.escape_ascii().to_string())
            .field("validity", &self.validity())
            .field("max_hold", &self.inner.max_hold)
            .finish_non_exhaustive()
    }
}

impl Lock {
    /// Keeps renewing the lock in the background until the returned
    /// [`Lease`] is unlocked or dropped, the lock is found lost or its
    /// validity runs out, or `max_hold` has passed since the acquisition
    /// (then renewal stops and the lock runs out the validity of its last
    /// renewal).
    ///
    /// Each renewal sets the TTL the lock was last given (by its acquisition
    /// or [`Lock::extend`]) when about a third of it is left (and at least
    /// three node timeouts before the end, at most half-way through); a
    /// round that fails for want of a quorum is retried while validity
    /// remains, and counts only if it is confirmed before the validity ends
    /// (as for [`Lock::extend`]); a round that finds the lock gone, or a
    /// validity that runs out, ends the lease for good (validity zero) and
    /// deletes what is left of the key. Renewals do not count against
    /// [`Builder::max_extensions`](crate::Builder::max_extensions):
    /// `max_hold` bounds them.
    ///
    /// One thread per [`Redlock`](crate::Redlock) handle renews all its
    /// leases, started with the first and ended a second after the last;
    /// the leases due together are renewed in one round (their extensions
    /// pipelined to each master in one write).
    ///
    /// Fails with [`Error::Expired`] if the validity already ran out,
    /// [`Error::LockLost`] if an extension found the lock lost,
    /// [`Error::Forked`] in a forked child, or [`Error::System`] if the
    /// renewal thread cannot be started; the lock is released then.
    pub fn keep_alive(self, max_hold: Duration) -> Result<Lease, Error> {
        let valid_until = self.valid_until_boot();
        if let Some(error) = self.unusable() {
            return Err(error);
        }
        let shared = Arc::clone(self.shared());
        let inner = Arc::new(LeaseInner {
            valid_until: AtomicU64::new(valid_until.as_nanos() & !ENDED),
            state: AtomicU8::new(RENEWING),
            releasing: AtomicBool::new(false),
            gone: Mutex::new(None),
            last_failure: Mutex::new(None),
            renew_at: AtomicU64::new(0),
            hold_until: self.acquired_at().saturating_add(max_hold),
            max_hold,
            ttl: self.ttl(),
            resource: self.resource().to_vec(),
            fork_generation: fork_generation(),
            lock: Mutex::new(Some(self)),
        });
        shared.renewer.add(&shared, Arc::clone(&inner))?;
        Ok(Lease { inner })
    }
}

impl Lease {
    /// The locked resource name.
    pub fn resource(&self) -> &[u8] {
        &self.inner.resource
    }

    /// How much longer the lock is valid, now: zero once it is lost or
    /// expired (for good: see [`Lease::check`]), and in a forked child. One
    /// atomic read; measured on a clock that counts the time the host was
    /// suspended, as the masters' TTLs do.
    pub fn validity(&self) -> Duration {
        if self.inner.is_inherited() {
            return Duration::ZERO;
        }
        self.inner.validity_left()
    }

    /// The validity, if the lease still holds the lock, or why it does not:
    /// [`Error::LockLost`] (the renewer found the key gone on the masters),
    /// [`Error::Expired`] (the validity ran out: renewal failed for too
    /// long, and the error carries what the masters answered to the last
    /// renewal; or the process was paused), [`Error::HoldLimit`] (held for
    /// `max_hold`: renewal stopped; the lock still runs out the validity
    /// [`Lease::validity`] shows, but the holder should stop now), or
    /// [`Error::Forked`] in a forked child (the lease is its parent's).
    ///
    /// Once it returns `LockLost` or `Expired`, it never returns `Ok` again:
    /// a renewal that could not be confirmed before the validity ended
    /// never counts, whatever the masters answer later.
    pub fn check(&self) -> Result<Duration, Error> {
        let inner = &self.inner;
        if inner.is_inherited() {
            return Err(Error::Forked);
        }
        match inner.state.load(Ordering::Acquire) {
            LOST => return Err(inner.gone_error()),
            HOLD_LIMIT => {
                return Err(Error::HoldLimit {
                    max_hold: inner.max_hold,
                })
            }
            _ => {}
        }
        let now = BootInstant::now();
        let left = inner.left(now).map_err(|end| inner.ended_error(end))?;
        if now >= inner.hold_until {
            return Err(Error::HoldLimit {
                max_hold: inner.max_hold,
            });
        }
        Ok(left)
    }

    /// How long the lease may still be renewed: until `max_hold` after the
    /// acquisition.
    pub fn hold_left(&self) -> Duration {
        self.inner.hold_until.saturating_since(BootInstant::now())
    }

    /// Stops renewal (waiting for a renewal round in flight, at most one
    /// node timeout), then releases the lock, as [`Lock::unlock`] does.
    ///
    /// Returns the error [`Lease::check`] would have returned if the lease
    /// had ended before the call: [`Error::LockLost`] if the renewer found
    /// the lock lost, [`Error::Expired`] if its validity ran out (what was
    /// left of the key is deleted either way), [`Error::Forked`] in a
    /// forked child (which never releases its parent's lock); otherwise
    /// what the release found, as [`Lock::unlock`].
    pub fn unlock(self) -> Result<(), Error> {
        self.inner.release()
    }

    /// Stops renewal (waiting for a renewal round in flight, at most one
    /// node timeout) and leaves the key on the masters until its TTL runs
    /// out, as [`Lock::let_expire`] does; returns the validity that was
    /// left (zero if the lease had ended, and in a forked child).
    ///
    /// For work that must happen at most once per period and may take
    /// longer than the TTL (a cron job on several hosts): hold a lease
    /// while the work runs, then let it expire, so that a host that starts
    /// late in the period still finds the key.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// // Run at most once per hour, however long the job takes.
    /// if let Some(lock) = redlock.try_lock("report:2026-11-23T10", Duration::from_secs(3600))? {
    ///     let lease = lock.keep_alive(Duration::from_secs(4 * 3600))?;
    ///     // ... the job, checking lease.check()? between steps ...
    ///     lease.let_expire(); // the key stays for an hour after the last renewal
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn let_expire(self) -> Duration {
        let inner = &self.inner;
        if inner.is_inherited() {
            return Duration::ZERO;
        }
        let (was, lock) = inner.stop();
        let left = match was {
            LOST | RELEASED => Duration::ZERO,
            _ => inner.validity_left(),
        };
        inner.end();
        if let Some(lock) = lock {
            lock.let_expire();
        }
        left
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Best effort, as dropping a `Lock`.
        let _ = self.inner.release();
    }
}

impl fmt::Debug for LeaseInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseInner")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl LeaseInner {
    /// The validity left at `now`, or, once it has run out, when it ended.
    /// The first to find it run out marks the lease ended, for good.
    fn left(&self, now: BootInstant) -> Result<Duration, BootInstant> {
        let end = |word: u64| BootInstant::from_nanos(word & !ENDED);
        let ran_out = |word: u64| word & ENDED == 0 && now >= end(word);
        // One load while the validity lasts: the closure asks for no store.
        let mark = |word: u64| ran_out(word).then_some(word | ENDED);
        let (Ok(word) | Err(word)) =
            self.valid_until
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, mark);
        if word & ENDED != 0 || now >= end(word) {
            Err(end(word))
        } else {
            Ok(end(word).saturating_since(now))
        }
    }

    /// The validity left now (zero once the lease ended).
    pub(crate) fn validity_left(&self) -> Duration {
        self.left(BootInstant::now()).unwrap_or(Duration::ZERO)
    }

    /// Whether the lease has ended (its validity ran out, or the renewer
    /// gave it up).
    pub(crate) fn has_ended(&self) -> bool {
        self.left(BootInstant::now()).is_err()
    }

    /// Why the lease ended, its validity having ended at `end`.
    fn ended_error(&self, end: BootInstant) -> Error {
        if self.state.load(Ordering::Acquire) == LOST {
            return self.gone_error();
        }
        Error::Expired {
            overrun: BootInstant::now().saturating_since(end),
            last_extension: lock_ignoring_poison(&self.last_failure).clone(),
        }
    }

    /// Why the renewer gave the lock up (the state is `LOST`).
    fn gone_error(&self) -> Error {
        match lock_ignoring_poison(&self.gone).clone() {
            Some(Gone::Lost(report)) => Error::LockLost(report),
            Some(Gone::Forked) | None => Error::Forked,
        }
    }

    /// The lock, for a renewal round or the release (waits for a round in
    /// flight).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Lock>> {
        lock_ignoring_poison(&self.lock)
    }

    /// Whether the lease is still renewed (if it has not ended): neither
    /// lost, nor held for `max_hold`, nor released.
    pub(crate) fn is_renewing(&self) -> bool {
        self.state.load(Ordering::Acquire) == RENEWING
    }

    /// Whether the renewer should start a round on it: it is renewed, and
    /// not being released.
    pub(crate) fn wants_renewal(&self) -> bool {
        self.is_renewing() && !self.releasing.load(Ordering::Acquire)
    }

    /// Stops renewal: waits for a round in flight (no other starts), then
    /// takes the lock out of the lease, unless that was done before (or
    /// the renewer gave it up). Returns the state before, and the lock.
    fn stop(&self) -> (u8, Option<Lock>) {
        self.releasing.store(true, Ordering::Release);
        let lock = self.lock().take();
        (self.state.swap(RELEASED, Ordering::AcqRel), lock)
    }

    /// Whether this is a copy inherited through `fork` by a child process.
    pub(crate) fn is_inherited(&self) -> bool {
        self.fork_generation != fork_generation()
    }

    /// Moves the end of the validity to `valid_until` (a renewal's, counted
    /// from its round's start, or the earlier end a failed renewal leaves),
    /// unless the lease has ended or its validity has run out meanwhile:
    /// then it stays ended (see the module docs). Returns whether the lease
    /// goes on.
    pub(crate) fn publish(&self, valid_until: BootInstant) -> bool {
        let now = BootInstant::now();
        let new = valid_until.as_nanos() & !ENDED;
        let replace = |word: u64| match word {
            _ if word & ENDED != 0 => None,
            _ if now >= BootInstant::from_nanos(word) => Some(word | ENDED),
            _ => Some(new),
        };
        let published = self
            .valid_until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, replace);
        matches!(published, Ok(word) if now < BootInstant::from_nanos(word))
    }

    /// A renewal failed with `error`: remembers what the holder is to be
    /// told if the lease ends: the key found gone or a forked child's copy
    /// (the lease is lost then), or what the masters answered (no quorum,
    /// too slow, confirmed too late: the error's report, or, for an error
    /// without one, the round's, if there was a round).
    pub(crate) fn renewal_failed(&self, error: Error, round: impl FnOnce() -> Option<NodeReport>) {
        let gone = match error {
            Error::LockLost(report) => Gone::Lost(report),
            Error::Forked => Gone::Forked,
            other => {
                if let Some(report) = other.nodes().cloned().or_else(round) {
                    *lock_ignoring_poison(&self.last_failure) = Some(report);
                }
                return;
            }
        };
        *lock_ignoring_poison(&self.gone) = Some(gone);
        self.state.store(LOST, Ordering::Release);
    }

    /// A renewal succeeded: earlier failures explain nothing any more.
    pub(crate) fn renewed(&self) {
        let mut last_failure = lock_ignoring_poison(&self.last_failure);
        if last_failure.is_some() {
            *last_failure = None;
        }
    }

    /// The renewer gives the lease up: over for good, validity zero.
    pub(crate) fn end(&self) {
        self.valid_until.fetch_or(ENDED, Ordering::AcqRel);
    }

    /// `max_hold` passed: no more renewals.
    pub(crate) fn hold_limit_reached(&self) {
        let _ =
            self.state
                .compare_exchange(RENEWING, HOLD_LIMIT, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Stops renewal and releases the lock (once): the lease's own error if
    /// it had ended, else what the release found.
    fn release(&self) -> Result<(), Error> {
        if self.is_inherited() {
            // The parent's lock: never released here, and its mutex, copied
            // at the fork, may be held by a renewer that does not exist here.
            return Err(Error::Forked);
        }
        let (was, lock) = self.stop();
        let ended = match was {
            RELEASED => return Ok(()), // released before (`unlock`, then drop)
            LOST => Some(self.gone_error()),
            _ => self
                .left(BootInstant::now())
                .err()
                .map(|end| self.ended_error(end)),
        };
        self.end();
        let released = match lock {
            Some(lock) => lock.unlock(),
            // The renewer gave it up, and deleted what was left of the key.
            None => Ok(()),
        };
        match ended {
            Some(error) => Err(error),
            None => released,
        }
    }
}

/// Why the renewer gave a lock up for lost.
#[derive(Clone, Debug)]
enum Gone {
    /// An extension found it gone on the masters.
    Lost(NodeReport),
    /// A forked child's copy.
    Forked,
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each field is consistent after every update.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn shared_across_threads<T: Send + Sync + 'static>() {}
    shared_across_threads::<Lease>();
};
