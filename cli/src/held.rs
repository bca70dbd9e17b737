//! What `run` holds: the lock on one key ([`Lock`], then [`Lease`]) or on
//! several keys at once ([`LockSet`], then [`LeaseSet`]), behind one
//! interface, so that the supervision and `--keep` treat both alike. One
//! key takes the library's single-resource calls exactly as before sets
//! existed; a set takes its set calls (one round per attempt, each master
//! setting every key or none, and renewals that count a master only when
//! every key got its new TTL).

use redlock_sync::{Error, KeyState, Lease, LeaseSet, Lock, LockSet};
use std::time::{Duration, Instant};

/// A lock just acquired.
#[derive(Debug)]
pub(crate) enum Taken {
    One(Lock),
    Set(LockSet),
}

impl Taken {
    pub(crate) fn validity(&self) -> Duration {
        match self {
            Taken::One(lock) => lock.validity(),
            Taken::Set(set) => set.validity(),
        }
    }

    pub(crate) fn valid_until(&self) -> Instant {
        match self {
            Taken::One(lock) => lock.valid_until(),
            Taken::Set(set) => set.valid_until(),
        }
    }

    /// How many masters hold it (for a set: every key of it).
    pub(crate) fn held_by(&self) -> usize {
        match self {
            Taken::One(lock) => lock.masters().filter(|(_, s)| *s == KeyState::Held).count(),
            Taken::Set(set) => set.masters().filter(|(_, s)| *s == KeyState::Held).count(),
        }
    }

    /// The fencing token (`--fence`; a set's one token for all its keys).
    pub(crate) fn fence_token(&self) -> Option<u64> {
        match self {
            Taken::One(lock) => lock.fence_token(),
            Taken::Set(set) => set.fence_token(),
        }
    }

    pub(crate) fn unlock(self) -> Result<(), Error> {
        match self {
            Taken::One(lock) => lock.unlock(),
            Taken::Set(set) => set.unlock(),
        }
    }

    /// Renewed in the background for at most `max_hold`.
    pub(crate) fn keep_alive(self, max_hold: Duration) -> Result<Held, Error> {
        Ok(match self {
            Taken::One(lock) => Held::One(lock.keep_alive(max_hold)?),
            Taken::Set(set) => Held::Set(set.keep_alive(max_hold)?),
        })
    }
}

/// A lock renewed in the background while the command runs.
#[derive(Debug)]
pub(crate) enum Held {
    One(Lease),
    Set(LeaseSet),
}

impl Held {
    pub(crate) fn validity(&self) -> Duration {
        match self {
            Held::One(lease) => lease.validity(),
            Held::Set(lease) => lease.validity(),
        }
    }

    pub(crate) fn check(&self) -> Result<Duration, Error> {
        match self {
            Held::One(lease) => lease.check(),
            Held::Set(lease) => lease.check(),
        }
    }

    pub(crate) fn hold_left(&self) -> Duration {
        match self {
            Held::One(lease) => lease.hold_left(),
            Held::Set(lease) => lease.hold_left(),
        }
    }

    pub(crate) fn fence_token(&self) -> Option<u64> {
        match self {
            Held::One(lease) => lease.fence_token(),
            Held::Set(lease) => lease.fence_token(),
        }
    }

    pub(crate) fn unlock(self) -> Result<(), Error> {
        match self {
            Held::One(lease) => lease.unlock(),
            Held::Set(lease) => lease.unlock(),
        }
    }

    pub(crate) fn let_expire(self) -> Duration {
        match self {
            Held::One(lease) => lease.let_expire(),
            Held::Set(lease) => lease.let_expire(),
        }
    }
}
