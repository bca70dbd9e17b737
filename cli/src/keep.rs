//! `--keep`: when the command ends, leave the key on the masters instead of
//! releasing it, so that a job that cron starts on several hosts runs at
//! most once per period (the TTL).
//!
//! The period is one TTL from the acquisition: the key the lock was taken
//! with lives that long on the masters. When the command ends within it,
//! the key stays until it runs out ([`Lease::let_expire`](redlock_sync::Lease::let_expire)); when the
//! command ran past it (renewed all along), the key is released at its
//! end: the period it marked is over, and keeping it on would only make
//! the next period's run find it and skip.
//!
//! What the key does after a command that ended within the period depends
//! on whether it was renewed, which happens when a third of the TTL is left
//! (about two thirds of the TTL after the acquisition, see
//! `redlock_sync::Lock::keep_alive`):
//! - a command that ended before that leaves the key exactly to the end of
//!   the period;
//! - one that ended after it leaves the key for the rest of the TTL its
//!   last renewal set: up to a TTL after the command's end, so up to about
//!   five thirds of the TTL after the acquisition. (The library can only
//!   let a lease run out the TTL it was last given, not shorten it.)
//!
//! The key is kept whatever the command's status, a signal included: the
//! tool cannot tell whether a command that failed did part of its work, so
//! it keeps to "at most once". It is released when the command never ran
//! (it could not be started) and when the lock was lost (nothing is left
//! to keep; what remains of the key goes).

use crate::held::{Held, Taken};
use redlock_sync::Error;
use std::time::{Duration, Instant};

/// The period a kept key marks: from the acquisition to the end of the
/// lock's first validity (the TTL less the acquisition's time and the
/// drift allowance: at most a few milliseconds before the masters expire
/// the key).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Period {
    ends: Instant,
}

impl Period {
    /// The period of a lock just acquired.
    pub(crate) fn of(lock: &Taken) -> Period {
        Period {
            ends: lock.valid_until(),
        }
    }
}

/// What became of the key when the hold ended.
#[derive(Debug)]
pub(crate) enum LetGo {
    /// Left on the masters until its TTL runs out: the validity that was
    /// left (zero if the lease had ended meanwhile: nothing was kept).
    Kept(Duration),
    /// Released, with what the release found.
    Released {
        result: Result<(), Error>,
        /// `--keep` was given, but the command outlived the period.
        period_over: bool,
    },
}

/// Ends the hold of `lease` once the command has ended: with `--keep`
/// (`period` is `Some`), leaves the key to its TTL if the period has not
/// ended; otherwise releases it.
pub(crate) fn let_go(lease: Held, period: Option<Period>) -> LetGo {
    match period {
        Some(period) if Instant::now() < period.ends => LetGo::Kept(lease.let_expire()),
        _ => LetGo::Released {
            result: lease.unlock(),
            period_over: period.is_some(),
        },
    }
}
