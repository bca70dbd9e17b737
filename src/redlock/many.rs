//! The `Redlock` calls that lock several resources at once (`_many`): a
//! set, all of its resources or none, decided by one round.

use super::Redlock;
use crate::error::Error;
use crate::events::call::{Call, CallName};
use crate::lock::many::acquire::acquire_set;
use crate::lock::many::inspect::{inspect_many, SetInspection};
use crate::lock::many::LockSet;
use crate::lock::wait::many::acquire_set_within;
use crate::lock::wait::Wait;
use std::time::{Duration, Instant};

impl Redlock {
    /// Tries once to lock every resource of `resources` together for
    /// `ttl`: `Ok(None)` if some of them is held elsewhere (nothing is held
    /// then), else the held [`LockSet`].
    ///
    /// The names are read, checked (each as for [`Redlock::try_lock`]),
    /// sorted and deduplicated: `[b, a, b]` locks `{a, b}`, the same set
    /// as `[a, b]`. One round: every master is sent one command over all
    /// the keys (`MSETEX … NX PX` where the server has it, else a script),
    /// which sets them all (if none exists there) or none; the set is held
    /// when a quorum set them all, with one validity, computed as for one
    /// lock. A failed attempt releases whatever it may have set, so it
    /// holds nothing: callers of overlapping sets cannot deadlock, in any
    /// order they name them. A set of one resource is a lock on it (the
    /// same key and command as [`Redlock::try_lock`]).
    ///
    /// Before any I/O, fails with [`Error::Config`] for an empty set
    /// ([`ConfigError::ResourceSetEmpty`](crate::ConfigError::ResourceSetEmpty)),
    /// more than [`MAX_SET_LEN`](crate::MAX_SET_LEN) names or
    /// [`MAX_SET_BYTES`](crate::MAX_SET_BYTES) bytes of names (counted as
    /// given, duplicates included), a bad name or TTL, and a set this
    /// handle cannot take yet
    /// ([`ConfigError::ResourceSetUnsupported`](crate::ConfigError::ResourceSetUnsupported):
    /// a fenced set whose keys span hash slots on a cluster voter); with [`Error::ShutDown`]
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
        none_if_held(call.end(result))
    }

    /// Looks at the locks of every resource of `resources` without taking
    /// them: one round (each master asked `PTTL` and the holder label of
    /// every key, pipelined), each resource decided as
    /// [`Redlock::inspect`] decides one. The names are checked, sorted and
    /// deduplicated as [`Redlock::try_lock_many`]'s, before any I/O; on
    /// any kind of voter (each key is asked on its own). Fails with
    /// [`Error::NoQuorum`] if fewer than a quorum of masters answered for
    /// some resource.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let seen = redlock.inspect_many(["account:17", "account:42"])?;
    /// println!("both free: {}", seen.is_free());
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn inspect_many<I, R>(&self, resources: I) -> Result<SetInspection, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let call = Call::start_on_masters(CallName::Inspect);
        call.end(inspect_many(&self.shared, resources))
    }

    /// Locks every resource of `resources` together for `ttl`, waiting
    /// while some of them are held, as [`Redlock::lock`] waits for one: at
    /// most the handle's [`lock_wait`](crate::Builder::lock_wait) if set,
    /// else until the set is taken (or masters stay out of reach for
    /// [`unreachable_limit`](crate::Builder::unreachable_limit)).
    ///
    /// Each try is [`Redlock::try_lock_many`]'s: all or none, holding
    /// nothing between tries, so waiters of overlapping sets cannot
    /// deadlock. Between tries the call sleeps until a release of any
    /// resource of the set is heard (it subscribes to each one's channel),
    /// or the fallback pause runs out. It tries on every release of one of
    /// its resources; with [`fair_waiting`](crate::Builder::fair_waiting)
    /// (the default) it also queues on each of them and holds its turn
    /// where it is first, so that callers of its single resources do not
    /// starve it (a waiter of one resource defers to that turn at most 1 s
    /// in a row: docs/guide/sets.md). A set of one waits as a lock does.
    /// The errors of [`Redlock::lock`], and those of
    /// [`Redlock::try_lock_many`] before any I/O.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let set = redlock.lock_many(["account:17", "account:42"], Duration::from_secs(5))?;
    /// set.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn lock_many<I, R>(&self, resources: I, ttl: Duration) -> Result<LockSet, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        self.lock_many_waiting(resources, ttl, self.lock_wait())
    }

    /// Locks the set `resources` for `ttl`, waiting while some of them are
    /// held for at most `wait`: `Ok(None)` if some is still held then. As
    /// [`Redlock::lock_many`] otherwise.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (ttl, wait) = (Duration::from_secs(5), Duration::from_secs(2));
    /// match redlock.try_lock_many_for(["a", "b"], ttl, wait)? {
    ///     Some(set) => set.unlock()?,
    ///     None => println!("a or b still held after 2 s"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the LockSet releases it at once"]
    pub fn try_lock_many_for<I, R>(
        &self,
        resources: I,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<LockSet>, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        none_if_held(self.lock_many_waiting(resources, ttl, Wait::For(wait)))
    }

    /// Locks the set `resources` for `ttl`, waiting while some of them are
    /// held until `deadline` at the latest: `Ok(None)` if some is still
    /// held then. As [`Redlock::lock_many`] otherwise.
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let deadline = Instant::now() + Duration::from_secs(2);
    /// if let Some(set) = redlock.try_lock_many_until(["a", "b"], Duration::from_secs(5), deadline)? {
    ///     set.unlock()?;
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the LockSet releases it at once"]
    pub fn try_lock_many_until<I, R>(
        &self,
        resources: I,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Option<LockSet>, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        none_if_held(self.lock_many_waiting(resources, ttl, Wait::Until(deadline)))
    }

    /// Locks the set `resources` for `ttl`, waiting as `wait` says while
    /// some of them are held. As [`Redlock::lock_many`] otherwise; the
    /// error after a wait that ran out is [`Error::Contended`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// use redlock_sync::Wait;
    /// let set = redlock.lock_many_waiting(["a", "b"], Duration::from_secs(5), Wait::NoLimit)?;
    /// set.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn lock_many_waiting<I, R>(
        &self,
        resources: I,
        ttl: Duration,
        wait: Wait,
    ) -> Result<LockSet, Error>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let call = Call::start_on_masters(CallName::LockMany);
        call.end(
            acquire_set_within(&self.shared, resources, ttl, wait)
                .map(|acquired| LockSet::new(&self.shared, acquired)),
        )
    }
}

/// `Ok(None)` for a set held elsewhere (when the wait, if any, ran out).
fn none_if_held(result: Result<LockSet, Error>) -> Result<Option<LockSet>, Error> {
    match result {
        Ok(set) => Ok(Some(set)),
        Err(Error::Contended(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
