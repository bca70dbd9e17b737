//! A lock renewed in the background: [`Lock::keep_alive`] turns a [`Lock`]
//! into a [`Lease`], which the handle's renewal thread (see `renew`)
//! extends until it is released, lost, or held for its `max_hold`.
//!
//! The holder reads the lease's state with one atomic load: the end of its
//! validity on the boot clock, which the renewer moves forward after each
//! successful round (counted from that round's start) and to zero once the
//! lock is lost. Nothing the renewer does can make that view optimistic: a
//! holder paused past its validity reads zero when it resumes, before it can
//! act, whether or not the renewer ran.

use crate::clock::BootInstant;
use crate::error::{Error, NodeReport};
use crate::lock::Lock;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The lease is renewed.
const RENEWING: u8 = 0;
/// The renewer found the lock lost on the masters.
const LOST: u8 = 1;
/// `max_hold` has passed: renewal stopped.
const HOLD_LIMIT: u8 = 2;
/// Unlocked or dropped.
const RELEASED: u8 = 3;

/// A lock that a background thread keeps renewing, for at most `max_hold`
/// (see [`Lock::keep_alive`]).
///
/// [`Lease::validity`] and [`Lease::check`] are one atomic read each, so a
/// worker can check the lease before every step, also from another thread
/// (`Lease` is `Send + Sync`). Dropping a `Lease` stops its renewal and then
/// releases the lock (best effort); [`Lease::unlock`] does the same and
/// says whether the release succeeded.
///
/// Only `validity()` and `check()` are authoritative: they come from this
/// process's own clock, so a holder that was paused (GC, swap, SIGSTOP)
/// past the validity sees the lock gone when it resumes. A holder paused
/// between `check()` and its action can still act after the lock passed to
/// someone else; keep each step well inside the validity.
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
    /// The lock; `None` once released. The renewer holds this mutex for the
    /// length of a renewal round, so a release waits for the round in
    /// flight and no extension is ever sent after the release.
    lock: Mutex<Option<Lock>>,
    /// The end of the validity on the boot clock, in nanoseconds (0: the
    /// lock is lost).
    valid_until: AtomicU64,
    state: AtomicU8,
    /// Why the renewer gave the lock up.
    lost: Mutex<Option<Gone>>,
    /// When the renewer next renews it, on the boot clock (nanoseconds):
    /// kept by the renewer.
    pub(crate) renew_at: AtomicU64,
    /// Renewal stops here.
    pub(crate) hold_until: BootInstant,
    pub(crate) max_hold: Duration,
    /// The TTL each renewal sets.
    pub(crate) ttl: Duration,
    resource: Vec<u8>,
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
    /// [`Lease`] is unlocked or dropped, the lock is found lost, or
    /// `max_hold` has passed since the acquisition (then renewal stops and
    /// the lock runs out the validity of its last renewal).
    ///
    /// Each renewal sets the TTL the lock was last given (by its acquisition
    /// or [`Lock::extend`]) when about a third of it is left (and at least
    /// three node timeouts before the end, at most half-way through); a
    /// round that fails for want of a quorum is retried while validity
    /// remains; a round that finds the lock gone ends the lease at once
    /// (validity zero) and deletes what is left of the key. Renewals do not
    /// count against [`Builder::max_extensions`](crate::Builder::max_extensions):
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
            valid_until: AtomicU64::new(valid_until.as_nanos()),
            state: AtomicU8::new(RENEWING),
            lost: Mutex::new(None),
            renew_at: AtomicU64::new(0),
            hold_until: self.acquired_at().saturating_add(max_hold),
            max_hold,
            ttl: self.ttl(),
            resource: self.resource().to_vec(),
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
    /// expired. One atomic read; measured on a clock that counts the time
    /// the host was suspended, as the masters' TTLs do.
    pub fn validity(&self) -> Duration {
        self.inner.validity_left()
    }

    /// The validity, if the lease still holds the lock, or why it does not:
    /// [`Error::LockLost`] (the renewer found the key gone on the masters),
    /// [`Error::Expired`] (the validity ran out: renewal failed for too
    /// long, or the process was paused), or [`Error::HoldLimit`] (held for
    /// `max_hold`: renewal stopped; the lock still runs out the validity
    /// [`Lease::validity`] shows, but the holder should stop now).
    pub fn check(&self) -> Result<Duration, Error> {
        let inner = &self.inner;
        match inner.state.load(Ordering::Acquire) {
            LOST => return Err(inner.lost_error()),
            HOLD_LIMIT => {
                return Err(Error::HoldLimit {
                    max_hold: inner.max_hold,
                })
            }
            _ => {}
        }
        let now = BootInstant::now();
        let valid_until = BootInstant::from_nanos(inner.valid_until.load(Ordering::Acquire));
        if let Some(overrun) = now.checked_since(valid_until) {
            return Err(Error::Expired { overrun });
        }
        if now >= inner.hold_until {
            return Err(Error::HoldLimit {
                max_hold: inner.max_hold,
            });
        }
        Ok(valid_until.saturating_since(now))
    }

    /// How long the lease may still be renewed: until `max_hold` after the
    /// acquisition.
    pub fn hold_left(&self) -> Duration {
        self.inner.hold_until.saturating_since(BootInstant::now())
    }

    /// Stops renewal (waiting for a renewal round in flight, at most one
    /// node timeout), then releases the lock, as [`Lock::unlock`] does.
    /// Returns [`Error::LockLost`] if the renewer had found the lock lost
    /// (what was left of the key was deleted then).
    pub fn unlock(self) -> Result<(), Error> {
        self.inner.release()
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
    /// The validity left now.
    pub(crate) fn validity_left(&self) -> Duration {
        let valid_until = BootInstant::from_nanos(self.valid_until.load(Ordering::Acquire));
        valid_until.saturating_since(BootInstant::now())
    }

    fn lost_error(&self) -> Error {
        let gone = lock_ignoring_poison(&self.lost).clone();
        match gone {
            Some(Gone::Lost(report)) => Error::LockLost(report),
            Some(Gone::Expired(at)) => Error::Expired {
                overrun: BootInstant::now().saturating_since(at),
            },
            Some(Gone::Forked) => Error::Forked,
            None => Error::Expired {
                overrun: Duration::ZERO,
            },
        }
    }

    /// The lock, for a renewal round or the release (waits for a round in
    /// flight).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Lock>> {
        lock_ignoring_poison(&self.lock)
    }

    /// Whether the renewer should still renew it.
    pub(crate) fn is_renewing(&self) -> bool {
        self.state.load(Ordering::Acquire) == RENEWING
    }

    /// A renewal succeeded, or failed without losing the lock: the holder
    /// now sees `valid_until` (from the lock, which never lets it grow on a
    /// failure).
    pub(crate) fn publish(&self, valid_until: BootInstant) {
        self.valid_until
            .store(valid_until.as_nanos(), Ordering::Release);
    }

    /// The renewer gave the lock up (`error` says why): validity zero at
    /// once, for good.
    pub(crate) fn lost(&self, error: Error) {
        let valid_until = BootInstant::from_nanos(self.valid_until.load(Ordering::Acquire));
        let gone = match error {
            Error::LockLost(report) => Gone::Lost(report),
            Error::Forked => Gone::Forked,
            // Expired (the validity ran out before the renewal could start).
            _ => Gone::Expired(valid_until),
        };
        *lock_ignoring_poison(&self.lost) = Some(gone);
        self.valid_until.store(0, Ordering::Release);
        self.state.store(LOST, Ordering::Release);
    }

    /// `max_hold` passed: no more renewals.
    pub(crate) fn hold_limit_reached(&self) {
        let _ =
            self.state
                .compare_exchange(RENEWING, HOLD_LIMIT, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Stops renewal and releases the lock (once).
    fn release(&self) -> Result<(), Error> {
        let lock = self.lock().take();
        let was = self.state.swap(RELEASED, Ordering::AcqRel);
        self.valid_until.store(0, Ordering::Release);
        let Some(lock) = lock else {
            // Already released: by an earlier call, or by the renewer after
            // it found the lock lost.
            return match was {
                LOST => Err(self.lost_error()),
                _ => Ok(()),
            };
        };
        lock.unlock()
    }
}

/// Why the renewer gave a lock up.
#[derive(Clone, Debug)]
enum Gone {
    /// An extension found it gone on the masters.
    Lost(NodeReport),
    /// Its validity ran out (at this instant) before it could be renewed.
    Expired(BootInstant),
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
