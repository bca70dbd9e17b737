//! The arithmetic of Redlock: quorum, clock drift, validity, and when a round
//! is decided. Pure functions of their arguments; no clock is read here.

use std::time::Duration;

/// Votes needed out of `n` masters: a strict majority.
pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Allowance for clock drift between processes (1% of the TTL) plus 2 ms for
/// the millisecond granularity of Redis expiry, as the Redlock spec gives it.
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The validity left after a round that took `elapsed` to set keys with a TTL
/// of `ttl`: `ttl - elapsed - drift`, or `None` if nothing is left. Never
/// wraps: a round longer than the TTL gives `None`.
pub(crate) fn validity(ttl: Duration, elapsed: Duration) -> Option<Duration> {
    ttl.checked_sub(elapsed)?
        .checked_sub(drift(ttl))
        .filter(|left| !left.is_zero())
}

/// How far a round has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Nodes that answered as hoped.
    pub(crate) yes: usize,
    /// Nodes that answered "no" (held by another value, or not ours).
    pub(crate) no: usize,
    /// Nodes that failed or were not contacted.
    pub(crate) failed: usize,
    /// Nodes whose answer is still awaited.
    pub(crate) waiting: usize,
    /// Nodes not yet sent the command, that may still be (busy with earlier
    /// commands, they are held in reserve).
    pub(crate) held_back: usize,
}

/// Whether waiting longer can change a round's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A quorum may still be reached.
    Open,
    /// A quorum said yes.
    Reached,
    /// Too many nodes said no or failed for a quorum to be possible.
    Impossible,
}

impl Tally {
    pub(crate) fn total(&self) -> usize {
        self.yes + self.no + self.failed + self.waiting + self.held_back
    }

    /// Decides as early as possible: once a quorum said yes, or once the
    /// nodes that can still say yes (awaited or held in reserve) are too few.
    pub(crate) fn decision(&self) -> Decision {
        let quorum = quorum(self.total());
        if self.yes >= quorum {
            Decision::Reached
        } else if self.yes + self.waiting + self.held_back < quorum {
            Decision::Impossible
        } else {
            Decision::Open
        }
    }

    /// Whether failures alone (not "no" answers) made a quorum impossible:
    /// the difference between "unavailable" and "held by someone else".
    pub(crate) fn failures_prevent_quorum(&self) -> bool {
        self.failed > self.total() - quorum(self.total())
    }

    /// Whether "no" answers alone made a quorum impossible.
    pub(crate) fn refusals_prevent_quorum(&self) -> bool {
        self.no > self.total() - quorum(self.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn quorum_is_a_strict_majority() {
        let expected = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)];
        for (n, q) in expected {
            assert_eq!(quorum(n), q, "n = {n}");
        }
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift_without_wrapping() {
        // drift(10 s) = 100 ms + 2 ms
        assert_eq!(validity(ms(10_000), ms(5)), Some(ms(10_000 - 5 - 102)));
        assert_eq!(validity(ms(10_000), ms(9_898)), None); // exactly used up
        assert_eq!(validity(ms(10_000), ms(9_897)), Some(ms(1)));
        assert_eq!(validity(ms(10_000), ms(20_000)), None); // longer than the TTL
        assert_eq!(validity(ms(1), Duration::ZERO), None); // drift exceeds TTL
        assert_eq!(validity(Duration::MAX, Duration::MAX), None);
        assert!(validity(Duration::MAX, Duration::ZERO).is_some());
    }

    #[test]
    fn decides_as_soon_as_the_outcome_is_known() {
        let t = |yes, no, failed, waiting| Tally {
            yes,
            no,
            failed,
            waiting,
            held_back: 0,
        };
        let held = |yes, no, waiting, held_back| Tally {
            yes,
            no,
            failed: 0,
            waiting,
            held_back,
        };
        assert_eq!(t(3, 0, 0, 2).decision(), Decision::Reached);
        assert_eq!(t(2, 0, 0, 3).decision(), Decision::Open);
        assert_eq!(t(2, 2, 0, 1).decision(), Decision::Open);
        assert_eq!(t(2, 2, 1, 0).decision(), Decision::Impossible);
        assert_eq!(t(0, 3, 0, 2).decision(), Decision::Impossible);
        assert_eq!(t(0, 1, 2, 2).decision(), Decision::Impossible);
        assert_eq!(t(1, 0, 0, 0).decision(), Decision::Reached);
        assert_eq!(t(0, 1, 0, 0).decision(), Decision::Impossible);
        // Masters held in reserve keep a round open, but do not count as yes.
        assert_eq!(held(2, 1, 0, 2).decision(), Decision::Open);
        assert_eq!(held(3, 0, 0, 2).decision(), Decision::Reached);
        assert_eq!(held(0, 3, 0, 2).decision(), Decision::Impossible);
        assert_eq!(held(1, 2, 1, 1).decision(), Decision::Open);
        assert_eq!(held(1, 3, 0, 1).decision(), Decision::Impossible);

        assert!(t(0, 0, 3, 2).failures_prevent_quorum());
        assert!(!t(0, 2, 2, 1).failures_prevent_quorum());
        assert!(t(1, 3, 1, 0).refusals_prevent_quorum());
        assert!(!t(1, 2, 2, 0).refusals_prevent_quorum());
    }
}
