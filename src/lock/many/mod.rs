//! A lock on several resources at once ([`LockSet`]): taken all or none on
//! each master, by one command over all the set's keys (`MSETEX … NX PX`
//! where the server has it, else a script), decided by a quorum
//! with one validity for the set (`acquire`); then the lock's whole life
//! (extension, release, letting it expire) by the single lock's code, whose
//! commands are the set's once it holds two names or more.
//!
//! No hold-and-wait: a master grants the whole set or nothing of it, and a
//! failed attempt releases whatever it may have won, so callers of
//! overlapping sets, in any order, cannot deadlock.

pub(crate) mod acquire;
pub(crate) mod inspect;
pub(crate) mod lease;

use super::acquire::Acquired;
use super::{KeyState, Lock};
use crate::error::Error;
use crate::handle::Shared;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A held lock on several resources at once (see
/// [`Redlock::try_lock_many`](crate::Redlock::try_lock_many)).
///
/// On every master that counts, all of its keys were set by one atomic
/// command (`MSETEX … NX PX` or a script), with one value and one TTL; it is valid for
/// [`LockSet::validity`], one validity for the whole set. It lives as a
/// [`Lock`] does: [`extend`](LockSet::extend) (a master counts only when
/// every key of the set got its new TTL), [`unlock`](LockSet::unlock),
/// released when dropped, or left to expire
/// ([`let_expire`](LockSet::let_expire)).
///
/// A set of one resource is a [`Lock`] on that resource in all but its
/// type: the same key, command and cost, so it excludes, and is excluded
/// by, a `Lock` on the same name. Any set excludes a `Lock` on any of its
/// resources, and any other set sharing one of them.
///
/// ```no_run
/// # use std::time::Duration;
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// let Some(set) = redlock.try_lock_many(["account:17", "account:42"], Duration::from_secs(5))?
/// else {
///     return Ok(()); // one of them is held elsewhere; nothing is held here
/// };
/// assert_eq!(set.resources().collect::<Vec<_>>(), [&b"account:17"[..], b"account:42"]);
/// // ... move the money, while set.validity() lasts ...
/// set.unlock()?;
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[must_use = "dropping a LockSet releases it at once"]
pub struct LockSet {
    lock: Lock,
}

impl fmt::Debug for LockSet {
    // The value is left out, as for `Lock`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.lock.resource().escape_ascii().to_string();
        f.debug_struct("LockSet")
            .field("first", &first)
            .field("resources", &self.resources().len())
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}

impl LockSet {
    pub(crate) fn new(shared: &Arc<Shared>, acquired: Acquired) -> LockSet {
        LockSet {
            lock: Lock::new(shared, acquired),
        }
    }

    /// The locked resources: sorted by their bytes, each once (as given,
    /// less duplicates).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// if let Some(set) = redlock.try_lock_many(["b", "a", "b"], Duration::from_secs(5))? {
    ///     assert_eq!(set.resources().collect::<Vec<_>>(), [&b"a"[..], b"b"]);
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn resources(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        self.lock.set_names().keys().iter()
    }

    /// The set's fence token, if the handle fences
    /// ([`Builder::fencing`](crate::Builder::fencing)); `None` otherwise.
    ///
    /// One token for the whole set, from the handle's fence domain (the
    /// one its single locks use): for each resource of the set it is above
    /// the token of every earlier holder of that resource (a [`Lock`] or
    /// another set) and below every later one's, so pass it with every
    /// write to any of the set's resources, as [`Lock::fence_token`] says
    /// (docs/fencing.md, "Sets"). Tokens are not unique across resources:
    /// a set raises the domain's counter once, not once per resource.
    /// Extending or renewing the set keeps the token.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .nodes(["redis://a", "redis://b", "redis://c"])
    ///     .fencing(true)
    ///     .build()?;
    /// let set = redlock.lock_many(["account:17", "account:42"], Duration::from_secs(5))?;
    /// let token = set.fence_token().expect("a fenced handle's set has a token");
    /// // ... write to both accounts, each write carrying `token` ...
    /// # let _ = token;
    /// set.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn fence_token(&self) -> Option<u64> {
        self.lock.fence_token()
    }

    /// How much longer the set is valid, now: one validity for all its
    /// resources. Zero once it has expired, once an extension found it
    /// lost, and in a forked child. As [`Lock::validity`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let set = redlock.try_lock_many(["a", "b"], Duration::from_secs(5))?.unwrap();
    /// if set.validity() > Duration::from_secs(1) {
    ///     // still comfortably ours
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn validity(&self) -> Duration {
        self.lock.validity()
    }

    /// The monotonic instant at which the set stops being valid, as
    /// [`Lock::valid_until`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let set = redlock.try_lock_many(["a", "b"], Duration::from_secs(5))?.unwrap();
    /// let deadline = set.valid_until();
    /// # let _ = deadline;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.lock.valid_until()
    }

    /// Sets the TTL of every key of the set to `ttl` from now, as
    /// [`Lock::extend`] does for one key, with the same rules and errors:
    /// a master counts only when every key of the set held this set's value
    /// and got the new TTL (one script per master, all keys or none; where
    /// scripts are off or refused, a `SET … IFEQ` per key, not atomic: see
    /// docs/guide/native-commands.md); a
    /// master where some key is gone or held by another value does not
    /// count, and if too few can, the set is [`Error::LockLost`]. Masters
    /// the acquisition left out get every key set if every key is free or
    /// ours there (the set's repair), in a round that ends within the
    /// validity.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let mut set = redlock.try_lock_many(["a", "b"], Duration::from_secs(5))?.unwrap();
    /// set.extend(Duration::from_secs(5))?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn extend(&mut self, ttl: Duration) -> Result<(), Error> {
        self.lock.extend(ttl)
    }

    /// Extends the set to `ttl` (as [`LockSet::extend`]) only if less than
    /// `min_left` of its validity remains; returns whether it extended. As
    /// [`Lock::renew_if_below`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let ttl = Duration::from_secs(10);
    /// let mut set = redlock.try_lock_many(["a", "b"], ttl)?.unwrap();
    /// for step in 0..3 {
    ///     set.renew_if_below(ttl / 3, ttl)?;
    ///     println!("step {step}");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn renew_if_below(&mut self, min_left: Duration, ttl: Duration) -> Result<bool, Error> {
        self.lock.renew_if_below(min_left, ttl)
    }

    /// Releases the set on every master that may hold it, in one round:
    /// on each, every key that still holds this set's value is deleted (and
    /// its waiters told, on each key's channel). As [`Lock::unlock`], with
    /// the same errors; the release counts a master as done when every key
    /// of the set was still ours there.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let set = redlock.try_lock_many(["a", "b"], Duration::from_secs(5))?.unwrap();
    /// set.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn unlock(self) -> Result<(), Error> {
        self.lock.unlock()
    }

    /// Lets the set run out its TTL on the masters instead of releasing
    /// it, and returns the validity it had left, as [`Lock::let_expire`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let set = redlock.try_lock_many(["a", "b"], Duration::from_secs(60))?.unwrap();
    /// let left = set.let_expire(); // nobody takes a or b for the next minute
    /// # let _ = left;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn let_expire(self) -> Duration {
        self.lock.let_expire()
    }

    /// Where the set is, master by master, as [`Lock::masters`]: a master
    /// [`KeyState::Held`] confirmed every key of the set in the last round
    /// that set or extended them; a cluster voter that set the keys of
    /// some slots and said no to another's is [`KeyState::Unconfirmed`]
    /// (it holds some of the set's keys; the release deletes them).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let set = redlock.try_lock_many(["a", "b"], Duration::from_secs(5))?.unwrap();
    /// for (master, state) in set.masters() {
    ///     println!("{master}: {state:?}");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn masters(&self) -> impl Iterator<Item = (&str, KeyState)> + '_ {
        self.lock.masters()
    }
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn sent_across_threads<T: Send + 'static>() {}
    sent_across_threads::<LockSet>();
};
