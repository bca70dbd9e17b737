//! Per-node reconnect backoff, shared by every connection to the node.
//!
//! When connecting to a node, or a connection to it, fails, new connections
//! to it wait a while before being tried again, doubling with each failure in
//! a row. An answer from the node ends the backoff. The state is shared by all
//! threads using one `Redlock`, so a node one thread found dead is not dialled
//! again by every other thread. Established connections are not affected.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The first failure allows an immediate reconnect (a single lost connection
/// is common and cheap to replace); later ones wait this long, doubled each
/// time up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The longest wait between attempts to reconnect to a failing node.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct Backoff {
    /// Failures in a row.
    failures: AtomicU32,
    /// When a new connection may next be tried, in nanoseconds after `epoch`.
    retry_at: AtomicU64,
    epoch: Instant,
}

impl Backoff {
    pub(crate) fn new(epoch: Instant) -> Backoff {
        Backoff {
            failures: AtomicU32::new(0),
            retry_at: AtomicU64::new(0),
            epoch,
        }
    }

    /// Whether a new connection may be tried at `now`.
    pub(crate) fn may_connect(&self, now: Instant) -> bool {
        self.nanos(now) >= self.retry_at.load(Ordering::Relaxed)
    }

    /// The node answered: connect freely again.
    pub(crate) fn succeeded(&self) {
        // Read first: the common case (no failures) then writes nothing, so
        // threads do not contend on the cache line.
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
            self.retry_at.store(0, Ordering::Relaxed);
        }
    }

    /// The node failed at `now`: push the next connect attempt back.
    pub(crate) fn failed(&self, now: Instant) {
        let failures = self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let wait = match failures {
            0 | 1 => Duration::ZERO,
            n => FIRST_BACKOFF
                .saturating_mul(1 << (n - 2).min(16))
                .min(MAX_BACKOFF),
        };
        self.retry_at.store(
            self.nanos(now).saturating_add(wait.as_nanos() as u64),
            Ordering::Relaxed,
        );
    }

    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_after_the_first_failure_and_resets_on_success() {
        let epoch = Instant::now();
        let b = Backoff::new(epoch);
        let at = |ms| epoch + Duration::from_millis(ms);
        assert!(b.may_connect(at(0)));
        b.failed(at(0));
        assert!(b.may_connect(at(0)), "first failure: reconnect at once");
        b.failed(at(0));
        assert!(!b.may_connect(at(49)) && b.may_connect(at(50)));
        b.failed(at(50));
        assert!(!b.may_connect(at(149)) && b.may_connect(at(150)));
        for _ in 0..40 {
            b.failed(at(150));
        }
        assert!(
            !b.may_connect(at(1149)) && b.may_connect(at(1150)),
            "capped"
        );
        b.succeeded();
        assert!(b.may_connect(at(150)));
    }
}
