//! The clock that lock validity runs on.
//!
//! The masters expire keys on their own clocks, which keep running while
//! this host is suspended. `Instant` (CLOCK_MONOTONIC on Linux) stops during
//! a suspend, so a validity kept on it would overstate the time left by the
//! length of the suspension. Validity is therefore kept on the boot clock
//! ([`os::boot_clock`]), which counts suspended time. Deadlines for waiting
//! on sockets stay on `Instant`: they bound how long a call blocks, and a
//! suspended host blocks nobody.

use crate::os;
use std::time::Duration;

/// A reading of the boot clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BootInstant(Duration);

impl BootInstant {
    /// Now.
    pub(crate) fn now() -> BootInstant {
        let now = BootInstant(os::boot_clock());
        #[cfg(test)]
        let now = now.saturating_add(tests::SUSPENDED.with(std::cell::Cell::get));
        now
    }

    /// The instant `d` after this one (saturating: a far future stays far).
    pub(crate) fn saturating_add(self, d: Duration) -> BootInstant {
        BootInstant(self.0.saturating_add(d))
    }

    /// How long after `earlier` this is, or zero if it is not later.
    pub(crate) fn saturating_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// How long after `earlier` this is, or `None` if it is not later.
    pub(crate) fn checked_since(self, earlier: BootInstant) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    /// The reading as nanoseconds, to keep in an atomic (saturating: a
    /// boot clock would need 584 years to overflow).
    pub(crate) fn as_nanos(self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The reading [`BootInstant::as_nanos`] gave.
    pub(crate) fn from_nanos(nanos: u64) -> BootInstant {
        BootInstant(Duration::from_nanos(nanos))
    }

    /// The earliest possible reading: a deadline that has always passed.
    pub(crate) const ZERO: BootInstant = BootInstant(Duration::ZERO);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Time this thread's boot clock pretends the host spent suspended.
        pub(crate) static SUSPENDED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    /// Pretends, for this thread, that the host was suspended for `d`: the
    /// boot clock jumps ahead by `d`, `Instant` does not.
    pub(crate) fn simulate_suspend(d: Duration) {
        SUSPENDED.with(|s| s.set(s.get() + d));
    }

    #[test]
    fn arithmetic_saturates() {
        let a = BootInstant(Duration::from_secs(5));
        let b = a.saturating_add(Duration::from_millis(1500));
        assert_eq!(b.saturating_since(a), Duration::from_millis(1500));
        assert_eq!(a.saturating_since(b), Duration::ZERO);
        assert_eq!(a.checked_since(b), None);
        assert_eq!(
            BootInstant(Duration::MAX).saturating_add(Duration::MAX),
            BootInstant(Duration::MAX)
        );
        assert!(BootInstant::now() > BootInstant::ZERO);
    }
}
