//! The `Redlock` calls that lock several resources at once (`_many`): a
//! set, all of its resources or none, decided by one round.

use super::Redlock;
use crate::error::Error;
use crate::events::call::{Call, CallName};
use crate::lock::many::acquire::acquire_set;
use crate::lock::many::LockSet;
use std::time::Duration;

impl Redlock {
    /// Tries once to lock every resource of `resources` together for
    /// `ttl`: `Ok(None)` if some of them is held elsewhere (nothing is held
    /// then), else the held [`LockSet`].
    ///
    /// The names are read, checked (each as for [`Redlock::try_lock`]),
    /// sorted and deduplicated: `[b, a, b]` locks `{a, b}`, the same set
    /// as `[a, b]`. One round: every master is sent one script over all the
    /// keys, which sets them all (if none exists there) or none; the set is
    /// held when a quorum set them all, with one validity, computed as for
    /// one lock. A failed attempt releases whatever it may have set, so it
    /// holds nothing: callers of overlapping sets cannot deadlock, in any
    /// order they name them. A set of one resource is a lock on it (the
    /// same key and command as [`Redlock::try_lock`]).
    ///
    /// Before any I/O, fails with [`Error::Config`] for an empty set
    /// ([`ConfigError::ResourceSetEmpty`](crate::ConfigError::ResourceSetEmpty)),
    /// more than [`MAX_SET_LEN`](crate::MAX_SET_LEN) names or
    /// [`MAX_SET_BYTES`](crate::MAX_SET_BYTES) bytes of names (counted as
    /// given, duplicates included), a bad name or TTL, and a handle that
    /// cannot take sets yet
    /// ([`ConfigError::ResourceSetUnsupported`](crate::ConfigError::ResourceSetUnsupported):
    /// a cluster voter, fencing, scripts off); with [`Error::ShutDown`]
    /// after [`Redlock::shutdown`]. Otherwise with the errors of
    /// [`Redlock::try_lock`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder()
    /// #     .nodes(["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"]).build()?;
    /// let (from, to) = ("account:42", "account:17");
    /// match redlock.try_lock_many([from, to], Duration::from_secs(5))? {
    ///     Some(set) => {
    ///         // both accounts are ours until set.validity() runs out
    ///         set.unlock()?;
    ///     }
    ///     None => { /* one of them is busy: nothing is held, try later */ }
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the LockSet releases it at once"]
    pub fn try_lock_many<I, R>(&self, resources: I, ttl: Duration) -> Result<Option<LockSet>, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let call = Call::start_on_masters(CallName::TryLockMany);
        let result = acquire_set(&self.shared, resources, ttl)
            .map(|acquired| LockSet::new(&self.shared, acquired));
        match call.end(result) {
            Ok(set) => Ok(Some(set)),
            Err(Error::Contended(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
