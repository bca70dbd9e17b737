//! A set renewed in the background: [`LockSet::keep_alive`] turns a
//! [`LockSet`] into a [`LeaseSet`], a [`Lease`] whose renewals are the
//! set's extensions (every key's TTL on a master, or none).

use super::LockSet;
use crate::error::Error;
use crate::lock::lease::Lease;
use crate::names::Names;
use std::fmt;
use std::time::Duration;

/// A set that the handle's renewal thread keeps renewing, for at most
/// `max_hold` (see [`LockSet::keep_alive`]): a [`Lease`] on several
/// resources, with its rules. Each renewal is the set's extension (a
/// master counts only when every key of the set got its new TTL).
///
/// ```no_run
/// # use std::time::Duration;
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// let lease = redlock
///     .lock_many(["import:a", "import:b"], Duration::from_secs(10))?
///     .keep_alive(Duration::from_secs(600))?;
/// lease.check()?; // Err: lost, expired, or held for 10 minutes: stop
/// lease.unlock()?;
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[must_use = "dropping a LeaseSet releases the set at once"]
pub struct LeaseSet {
    lease: Lease,
    /// A copy of the set's names (the lock itself is the renewer's).
    names: Names,
}

impl fmt::Debug for LeaseSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseSet")
            .field("resources", &self.names.len())
            .field("lease", &self.lease)
            .finish()
    }
}

impl LockSet {
    /// Keeps renewing the set in the background until the returned
    /// [`LeaseSet`] is unlocked or dropped, the set is found lost or its
    /// validity runs out, or `max_hold` has passed since the acquisition,
    /// as [`Lock::keep_alive`](crate::Lock::keep_alive) does for one
    /// resource, with the same errors. (On a handle with a cluster voter,
    /// a set whose keys fall in several hash slots is renewed in a round
    /// of its own, in per-slot parts, not in the batch of the others.)
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let set = redlock.lock_many(["a", "b"], Duration::from_secs(10))?;
    /// let lease = set.keep_alive(Duration::from_secs(60))?;
    /// # drop(lease);
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn keep_alive(self, max_hold: Duration) -> Result<LeaseSet, Error> {
        let mut names = Names::default();
        names.copy_from(self.lock.set_names());
        let lease = self.lock.keep_alive(max_hold)?;
        Ok(LeaseSet { lease, names })
    }
}

impl LeaseSet {
    /// The locked resources, sorted, each once (see
    /// [`LockSet::resources`]).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// assert_eq!(lease.resources().count(), 2);
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn resources(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        self.names.keys().iter()
    }

    /// How much longer the set is valid, now, as [`Lease::validity`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// println!("{:?} left", lease.validity());
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn validity(&self) -> Duration {
        self.lease.validity()
    }

    /// The set's fence token (see [`LockSet::fence_token`]): the same for
    /// the whole lease, renewals keep it. `None` when the handle does not
    /// fence.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).fencing(true).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// let token = lease.fence_token();
    /// # let _ = token;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn fence_token(&self) -> Option<u64> {
        self.lease.fence_token()
    }

    /// The validity, if the lease still holds the set, or why it does not,
    /// as [`Lease::check`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// lease.check()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn check(&self) -> Result<Duration, Error> {
        self.lease.check()
    }

    /// Waits up to `timeout` for the lease to end, as
    /// [`Lease::wait_ended`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// if let Some(why) = lease.wait_ended(Duration::from_millis(100)) {
    ///     eprintln!("the set is gone: {why}");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn wait_ended(&self, timeout: Duration) -> Option<Error> {
        self.lease.wait_ended(timeout)
    }

    /// How much longer the lease may be renewed (its `max_hold` left), as
    /// [`Lease::hold_left`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// println!("{:?} of renewals left", lease.hold_left());
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn hold_left(&self) -> Duration {
        self.lease.hold_left()
    }

    /// Stops renewal and releases the set, as [`Lease::unlock`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// lease.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn unlock(self) -> Result<(), Error> {
        self.lease.unlock()
    }

    /// Stops renewal and lets the set run out its TTL, as
    /// [`Lease::let_expire`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let lease = redlock.lock_many(["a", "b"], Duration::from_secs(10))?.keep_alive(Duration::from_secs(60))?;
    /// let left = lease.let_expire();
    /// # let _ = left;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn let_expire(self) -> Duration {
        self.lease.let_expire()
    }
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn shared_across_threads<T: Send + Sync + 'static>() {}
    shared_across_threads::<LeaseSet>();
};
