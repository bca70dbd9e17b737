//! The `Redlock` calls that run work while holding a set of resources:
//! `with_lock_many` (waiting as `lock_many` does), `with_lock_many_waiting`
//! (a wait of the call's own) and `try_with_lock_many` (one attempt), each
//! telling whether the set held until the work returned.

use super::work_error::WithLockError;
use super::Redlock;
use crate::error::Error;
use crate::lock::many::lease::LeaseSet;
use crate::lock::many::LockSet;
use crate::lock::wait::Wait;
use std::time::Duration;

impl Redlock {
    /// Runs `work` while holding every resource of `resources`: takes the
    /// set as [`Redlock::lock_many`] does, keeps it renewed for at most
    /// `max_hold` (see [`LockSet::keep_alive`]), and releases it when
    /// `work` returns or panics. As [`Redlock::with_lock`] for one
    /// resource, with the same results and errors.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(60));
    /// let moved = redlock.with_lock_many(["account:17", "account:42"], ttl, max_hold, |lease| {
    ///     lease.check().is_ok() // move the money while the set holds
    /// })?;
    /// # let _ = moved;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn with_lock_many<I, S, R>(
        &self,
        resources: I,
        ttl: Duration,
        max_hold: Duration,
        work: impl FnOnce(&LeaseSet) -> R,
    ) -> Result<R, WithLockError<R>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let wait = self.lock_wait();
        self.with_lock_many_waiting(resources, ttl, max_hold, wait, work)
    }

    /// [`Redlock::with_lock_many`] with a wait of this call's own (see
    /// [`Wait`]): [`WithLockError::NotTaken`] with [`Error::Contended`] if
    /// some resource is still held when the wait is over.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// use redlock_sync::Wait;
    /// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(60));
    /// let wait = Wait::For(Duration::from_secs(2));
    /// redlock.with_lock_many_waiting(["a", "b"], ttl, max_hold, wait, |_lease| ())?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn with_lock_many_waiting<I, S, R>(
        &self,
        resources: I,
        ttl: Duration,
        max_hold: Duration,
        wait: Wait,
        work: impl FnOnce(&LeaseSet) -> R,
    ) -> Result<R, WithLockError<R>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let set = self
            .lock_many_waiting(resources, ttl, wait)
            .map_err(WithLockError::NotTaken)?;
        run_set_locked(set, max_hold, work)
    }

    /// [`Redlock::with_lock_many`] with one attempt, as
    /// [`Redlock::try_lock_many`]: `Ok(None)` if some resource is held
    /// elsewhere (`work` did not run).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(60));
    /// match redlock.try_with_lock_many(["a", "b"], ttl, max_hold, |_lease| "done")? {
    ///     Some(outcome) => println!("ran: {outcome}"),
    ///     None => println!("a or b is busy"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn try_with_lock_many<I, S, R>(
        &self,
        resources: I,
        ttl: Duration,
        max_hold: Duration,
        work: impl FnOnce(&LeaseSet) -> R,
    ) -> Result<Option<R>, WithLockError<R>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        match self.try_lock_many(resources, ttl) {
            Ok(Some(set)) => run_set_locked(set, max_hold, work).map(Some),
            Ok(None) => Ok(None),
            Err(error) => Err(WithLockError::NotTaken(error)),
        }
    }
}

/// Runs `work` under `set`, renewed for at most `max_hold`, then releases
/// it: `work`'s result, or [`WithLockError::Lost`] with it if the set did
/// not hold until `work` returned (as `work::run_locked` for one lock).
fn run_set_locked<R>(
    set: LockSet,
    max_hold: Duration,
    work: impl FnOnce(&LeaseSet) -> R,
) -> Result<R, WithLockError<R>> {
    let lease = set.keep_alive(max_hold).map_err(WithLockError::NotTaken)?;
    // Dropped, and so released, also if `work` panics.
    let result = work(&lease);
    match lease.unlock() {
        Err(error @ (Error::LockLost(_) | Error::Expired { .. })) => {
            Err(WithLockError::Lost { result, error })
        }
        _ => Ok(result),
    }
}
