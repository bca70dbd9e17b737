//! A lock renewed in the background: [`Lock::keep_alive`] turns a [`Lock`]
//! into a [`Lease`], which the handle's renewal thread (see `renew`)
//! extends until it is released, lost, expired, or held for its `max_hold`.
//!
//! The lease's state, shared with the renewer, is in `state`; the renewer,
//! one thread per handle, in `renew`.

mod renew;
mod state;

use crate::clock::BootInstant;
use crate::error::Error;
use crate::lock::Lock;
use renew::Renewer;
use state::LeaseInner;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
    /// three node timeouts before the end, at most half-way through; while
    /// a master lacks the key, early enough to set it there again); a
    /// round that fails for want of a quorum is retried while validity
    /// remains (after a pause: a quarter of the renewal margin, at least two
    /// node timeouts, and not before a master in its reconnect backoff may
    /// be dialled again), and counts only if it is confirmed before the validity ends
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
        let inner = Arc::new(LeaseInner::new(self, valid_until, max_hold));
        Renewer::of(&shared).add(&shared, Arc::clone(&inner))?;
        Ok(Lease { inner })
    }
}

impl Lease {
    /// The locked resource name.
    pub fn resource(&self) -> &[u8] {
        &self.inner.resource
    }

    /// The lock's fence token (see [`Lock::fence_token`]): the same for the
    /// whole lease, renewals keep it. `None` when the handle does not fence.
    pub fn fence_token(&self) -> Option<u64> {
        self.inner.fence_token
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
    /// The validity decides first: past it, the answer is `Expired` (or
    /// `LockLost`), never `HoldLimit`.
    ///
    /// Once it returns `LockLost` or `Expired`, it never returns `Ok` again:
    /// a renewal that could not be confirmed before the validity ended
    /// never counts, whatever the masters answer later.
    pub fn check(&self) -> Result<Duration, Error> {
        self.inner.check()
    }

    /// Waits until the lease ends, or at most `timeout`: `Some(why)` as
    /// soon as it has ended (the error [`Lease::check`] returns from then
    /// on), `None` if it still holds when `timeout` has passed.
    /// `Duration::MAX` waits as long as it takes.
    ///
    /// No polling: the thread sleeps until the renewer finds the lock lost
    /// (it wakes the thread at the end of the renewal round that found it,
    /// also when that round fails until the validity runs out), or until
    /// the validity or the hold limit runs out by the clock, whichever is
    /// first. For a thread that watches the lease while others work:
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let lease = redlock
    ///     .lock("import:42", Duration::from_secs(10))?
    ///     .keep_alive(Duration::from_secs(600))?;
    /// let (stop, done) = (AtomicBool::new(false), AtomicBool::new(false));
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         // Wakes at once on a loss; looks at `done` once a second.
    ///         while !done.load(Ordering::Relaxed) {
    ///             if let Some(why) = lease.wait_ended(Duration::from_secs(1)) {
    ///                 eprintln!("stopping: {why}");
    ///                 stop.store(true, Ordering::Relaxed);
    ///                 return;
    ///             }
    ///         }
    ///     });
    ///     while !stop.load(Ordering::Relaxed) {
    ///         // ... one step of the work ...
    /// #       break;
    ///     }
    ///     done.store(true, Ordering::Relaxed);
    /// });
    /// lease.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    ///
    /// To be called instead (on the renewal thread, for every lease of the
    /// handle), install a hook: [`Builder::events`](crate::Builder::events)
    /// and [`LeaseChange::Lost`](crate::LeaseChange::Lost).
    pub fn wait_ended(&self, timeout: Duration) -> Option<Error> {
        self.inner.wait_ended(timeout)
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
        self.inner.let_expire()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Best effort, as dropping a `Lock`.
        let _ = self.inner.release();
    }
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn shared_across_threads<T: Send + Sync + 'static>() {}
    shared_across_threads::<Lease>();
};
