//! The `Redlock` calls that run work under a lock: `with_lock` (waiting
//! as `lock` does), `with_lock_waiting` (a wait of the call's own) and
//! `try_with_lock` (one attempt), each telling whether the lock held
//! until the work returned.

use super::work_error::WithLockError;
use super::Redlock;
use crate::error::Error;
use crate::lock::lease::Lease;
use crate::lock::wait::Wait;
use crate::lock::Lock;
use std::time::Duration;

impl Redlock {
    /// Runs `work` while holding `resource`: acquires it as
    /// [`Redlock::lock`] does (waiting until it gets it, unless
    /// [`Builder::lock_wait`](crate::Builder::lock_wait) bounds the wait),
    /// keeps it renewed for at most `max_hold` (see
    /// [`Lock::keep_alive`](crate::Lock::keep_alive)), and releases it when
    /// `work` returns or panics (the panic then continues). `work` gets the
    /// [`Lease`](crate::Lease): check it before each step that must happen
    /// under the lock.
    ///
    /// Returns what `work` returned if the lock held until it returned.
    /// Otherwise a [`WithLockError`]: [`WithLockError::NotTaken`] with the
    /// error that kept the lock from being taken (`work` did not run), or
    /// [`WithLockError::Lost`] when `work` ran but the lock did not hold to
    /// its end (the renewer found it lost, its validity ran out, or the
    /// release found the key gone from the masters), which carries `work`'s
    /// result. A release that fails for want of masters (the key then
    /// expires with its TTL) does not make the work's result lost: the
    /// lock's validity lasted until the work returned. `?` converts the
    /// error into an [`Error`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(300));
    /// let rows = redlock.with_lock("report:daily", ttl, max_hold, |lease| {
    ///     let mut rows = 0;
    ///     while rows < 1000 && lease.check().is_ok() {
    ///         rows += 1; // one step of the work
    ///     }
    ///     rows
    /// })?; // Err: not taken, or lost before the work returned
    /// println!("{rows} rows");
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn with_lock<R>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        max_hold: Duration,
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<R, WithLockError<R>> {
        let wait = self.lock_wait();
        self.with_lock_waiting(resource, ttl, max_hold, wait, work)
    }

    /// [`Redlock::with_lock`] with a wait of this call's own instead of the
    /// handle's configured one (see [`Wait`]):
    /// [`WithLockError::NotTaken`] with [`Error::Contended`] if the lock is
    /// still held when the wait is over.
    pub fn with_lock_waiting<R>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        max_hold: Duration,
        wait: Wait,
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<R, WithLockError<R>> {
        let lock = self
            .lock_waiting(resource, ttl, wait)
            .map_err(WithLockError::NotTaken)?;
        run_locked(lock, max_hold, work)
    }

    /// [`Redlock::with_lock`] with one attempt, as [`Redlock::try_lock`]:
    /// `Ok(None)` if another client holds the lock (`work` did not run),
    /// `Ok(Some(result))` if `work` ran and the lock held until it
    /// returned; errors as `with_lock`'s.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (period, max_hold) = (Duration::from_secs(3600), Duration::from_secs(600));
    /// match redlock.try_with_lock("report:hourly", period, max_hold, |_lease| "done")? {
    ///     Some(outcome) => println!("ran: {outcome}"),
    ///     None => println!("another host is running it"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn try_with_lock<R>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        max_hold: Duration,
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<Option<R>, WithLockError<R>> {
        match self.try_lock(resource, ttl) {
            Ok(Some(lock)) => run_locked(lock, max_hold, work).map(Some),
            Ok(None) => Ok(None),
            Err(error) => Err(WithLockError::NotTaken(error)),
        }
    }
}

/// Runs `work` under `lock`, renewed for at most `max_hold`, then
/// releases it: `work`'s result, or [`WithLockError::Lost`] with it if the
/// lock did not hold until `work` returned.
fn run_locked<R>(
    lock: Lock,
    max_hold: Duration,
    work: impl FnOnce(&Lease) -> R,
) -> Result<R, WithLockError<R>> {
    let lease = lock.keep_alive(max_hold).map_err(WithLockError::NotTaken)?;
    // Dropped, and so released, also if `work` panics.
    let result = work(&lease);
    // The release says whether the lock held until now: the renewer found
    // it lost, its validity ran out, or the masters no longer had its key
    // (`Lease::unlock`). Any other failure of the release (too few masters
    // answered) leaves the key to its TTL: the validity lasted.
    match lease.unlock() {
        Err(error @ (Error::LockLost(_) | Error::Expired { .. })) => {
            Err(WithLockError::Lost { result, error })
        }
        _ => Ok(result),
    }
}
