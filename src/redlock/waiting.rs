//! The `Redlock` calls that wait as the caller says ([`Wait`], a deadline,
//! no limit), and the shutdown that ends every wait of a handle.

use super::{none_if_held, Redlock};
use crate::error::Error;
use crate::lock::wait::{acquire_within, Wait};
use crate::lock::Lock;

use std::time::{Duration, Instant};

impl Redlock {
    /// Acquires `resource` for `ttl`, waiting while it is held by others
    /// until `deadline` at the latest (parking_lot's `try_lock_until`):
    /// `Ok(None)` if it is still held then. Otherwise as
    /// [`Redlock::try_lock_for`]; a deadline that has passed makes one
    /// attempt. One deadline can bound a whole request, whatever it waits
    /// for.
    #[must_use = "dropping the Lock releases it at once"]
    pub fn try_lock_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Option<Lock>, Error> {
        none_if_held(self.lock_waiting(resource, ttl, Wait::Until(deadline)))
    }

    /// Acquires `resource` for `ttl` as [`Redlock::lock`] does, but waits
    /// as `wait` says instead of the handle's configured wait: at most a
    /// duration, until an instant, or with no time limit
    /// ([`Wait::NoLimit`]: it returns only with the lock, with an error
    /// that retrying cannot fix, with [`Error::ShutDown`], or with
    /// [`Error::NoQuorum`] once masters were out of reach for
    /// [`Builder::unreachable_limit`](crate::Builder::unreachable_limit) in
    /// a row). Fails with [`Error::Contended`] if the lock is still held
    /// when the wait is over, its report saying how long it waited
    /// ([`Error::waited`]).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// use redlock_sync::Wait;
    /// let lock = redlock.lock_waiting("orders:42", Duration::from_secs(10), Wait::NoLimit)?;
    /// lock.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the Lock releases it at once"]
    pub fn lock_waiting(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Wait,
    ) -> Result<Lock, Error> {
        let shared = &self.shared;
        acquire_within(shared, resource.as_ref(), ttl, wait)
            .map(|acquired| Lock::new(shared, acquired))
    }

    /// Ends every wait for a lock on this handle and all its clones, from
    /// any thread, and refuses every later acquisition: for a program that
    /// is stopping. Threads waiting in [`Redlock::lock`],
    /// [`Redlock::try_lock_for`], [`Redlock::try_lock_until`],
    /// [`Redlock::lock_waiting`] (also with [`Wait::NoLimit`]) or
    /// [`Redlock::with_lock`] return [`Error::ShutDown`] (`with_lock`, as
    /// [`WithLockError::NotTaken`](crate::WithLockError::NotTaken)) within a few
    /// milliseconds (an acquisition round in flight finishes first, at
    /// most a node timeout; should it win the lock, the lock is
    /// returned). From then on every acquisition, [`Redlock::try_lock`]
    /// included, fails with [`Error::ShutDown`] before any I/O.
    ///
    /// Everything else goes on working, so that holders can finish
    /// cleanly: locks and leases already held keep their validity, leases
    /// keep being renewed, and `unlock`, `extend`, [`Redlock::inspect`],
    /// [`Redlock::ping`] and [`Redlock::health`] work as before. A shut
    /// down handle stays shut down; build a new one to lock again.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let r = redlock.clone();
    /// let waiter = std::thread::spawn(move || {
    ///     r.lock_waiting("jobs", Duration::from_secs(10), redlock_sync::Wait::NoLimit)
    /// });
    /// redlock.shutdown(); // on SIGTERM, say
    /// match waiter.join().expect("the waiter panicked") {
    ///     Ok(lock) => lock.unlock()?,      // taken before the shutdown
    ///     Err(e) if e.is_shut_down() => {} // the wait was ended
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn shutdown(&self) {
        self.shared.shut_down();
    }

    /// Whether [`Redlock::shutdown`] was called on this handle or a clone.
    pub fn is_shut_down(&self) -> bool {
        self.shared.stop.is_set()
    }
}
