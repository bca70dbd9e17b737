//! How long one call waits for a held lock: [`Wait`], and the deadline it
//! comes to.

use std::time::{Duration, Instant};

/// How long a call waits while the lock is held by others (and retries
/// failures that may pass, such as a missing quorum), for
/// [`Redlock::lock_waiting`](crate::Redlock::lock_waiting) and
/// [`Redlock::with_lock_waiting`](crate::Redlock::with_lock_waiting).
///
/// A wait of its own type, not a bare `Duration`, so that it cannot be
/// swapped with the TTL beside it. Every wait ends early when the handle
/// is shut down ([`Redlock::shutdown`](crate::Redlock::shutdown)).
///
/// ```
/// use redlock_sync::Wait;
/// use std::time::{Duration, Instant};
/// let _at_most_2s = Wait::For(Duration::from_secs(2));
/// let _one_attempt = Wait::For(Duration::ZERO);
/// let _until_then = Wait::Until(Instant::now() + Duration::from_secs(5));
/// let _as_long_as_it_takes = Wait::NoLimit;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// At most this long from the call (`Duration::ZERO`: one attempt;
    /// a duration too long for the clock, such as `Duration::MAX`: no
    /// limit).
    For(Duration),
    /// Until this instant (one attempt if it has passed), as parking_lot's
    /// `try_lock_until`.
    Until(Instant),
    /// No time limit: until the lock is taken, an error that retrying
    /// cannot fix, or [`Redlock::shutdown`](crate::Redlock::shutdown).
    /// Masters that cannot be reached are retried until no quorum could
    /// be reached for
    /// [`Builder::unreachable_limit`](crate::Builder::unreachable_limit)
    /// in a row (10 s by default): the wait then ends with
    /// [`Error::NoQuorum`](crate::Error::NoQuorum). What
    /// [`Redlock::lock`](crate::Redlock::lock) does without
    /// [`Builder::lock_wait`](crate::Builder::lock_wait).
    NoLimit,
}

impl Wait {
    /// The instant the wait ends for a call made at `now`; `None`: never.
    pub(crate) fn deadline(self, now: Instant) -> Option<Instant> {
        match self {
            Wait::For(wait) => now.checked_add(wait),
            Wait::Until(deadline) => Some(deadline),
            Wait::NoLimit => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_comes_to_its_deadline() {
        let now = Instant::now();
        let later = now + Duration::from_secs(3);
        assert_eq!(Wait::For(Duration::from_secs(3)).deadline(now), Some(later));
        assert_eq!(Wait::For(Duration::ZERO).deadline(now), Some(now));
        assert_eq!(Wait::For(Duration::MAX).deadline(now), None);
        assert_eq!(Wait::Until(later).deadline(now), Some(later));
        assert_eq!(Wait::NoLimit.deadline(now), None);
    }
}
