//! The arithmetic of Redlock: quorum, clock drift, validity, sets of
//! masters, and when a round is decided. Pure functions of their arguments;
//! no clock is read here.

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

/// A set of nodes, by index: bit `i` is node `i` (at most
/// [`MAX_NODES`](crate::MAX_NODES)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeSet(u64);

impl NodeSet {
    /// No node.
    pub(crate) const EMPTY: NodeSet = NodeSet(0);

    /// The first `n` nodes.
    pub(crate) fn all(n: usize) -> NodeSet {
        NodeSet(if n >= 64 { u64::MAX } else { (1 << n) - 1 })
    }

    pub(crate) fn contains(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }

    pub(crate) fn insert(&mut self, i: usize) {
        self.0 |= 1 << i;
    }

    pub(crate) fn remove(&mut self, i: usize) {
        self.0 &= !(1 << i);
    }

    /// How many nodes are in the set.
    pub(crate) fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    pub(crate) fn union(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 | other.0)
    }

    pub(crate) fn intersection(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 & other.0)
    }

    pub(crate) fn difference(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 & !other.0)
    }

    /// The nodes among the first `n` that are not in this set.
    pub(crate) fn complement(self, n: usize) -> NodeSet {
        NodeSet(!self.0 & NodeSet::all(n).0)
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The nodes in the set, in order.
    pub(crate) fn iter(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |&i| self.contains(i))
    }
}

/// How a round's answers decide it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A quorum of masters set the key. Lagging masters may be held back.
    Acquire,
    /// A quorum of masters hold the key with its new TTL: refreshed where
    /// it was, set where it was missing.
    Extend,
    /// Release: a quorum of masters no longer holds the key (see
    /// [`Tally::release_decision`]).
    Release,
    /// Every master answers or fails (a health check).
    Everyone,
}

/// How far a round has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Nodes that answered as hoped.
    pub(crate) yes: usize,
    /// Nodes that answered "no" (held by another value, or not ours), or,
    /// except in a release, were not sent the command.
    pub(crate) no: usize,
    /// Nodes that failed or were not contacted.
    pub(crate) failed: usize,
    /// Nodes whose answer is still awaited.
    pub(crate) waiting: usize,
    /// Nodes not yet sent the command, that may still be (lagging behind
    /// earlier commands, they are held in reserve).
    pub(crate) held_back: usize,
    /// In a release: nodes that were never sent the lock's SET, so cannot
    /// hold its key.
    pub(crate) not_sent: usize,
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
        self.yes + self.no + self.failed + self.waiting + self.held_back + self.not_sent
    }

    /// The decision under `rule`.
    pub(crate) fn decision(&self, rule: Rule) -> Decision {
        match rule {
            Rule::Acquire | Rule::Extend => self.quorum_decision(),
            Rule::Release => self.release_decision(),
            Rule::Everyone if self.waiting + self.held_back > 0 => Decision::Open,
            Rule::Everyone if self.yes >= quorum(self.total()) => Decision::Reached,
            Rule::Everyone => Decision::Impossible,
        }
    }

    /// Decides as early as possible: once a quorum said yes, or once the
    /// nodes that can still say yes (awaited or held in reserve) are too few.
    fn quorum_decision(&self) -> Decision {
        let quorum = quorum(self.total());
        if self.yes >= quorum {
            Decision::Reached
        } else if self.yes + self.waiting + self.held_back < quorum {
            Decision::Impossible
        } else {
            Decision::Open
        }
    }

    /// A release succeeds once a quorum of masters is known not to hold the
    /// key: they deleted it (`yes`), or were never sent it (`not_sent`),
    /// *and* the answers cannot show that the lock had been lost: even if
    /// every master still awaited answered "not ours", the masters that
    /// deleted the key or could not say (failed) would be a quorum.
    ///
    /// It fails as lost once the masters that may still have held the key
    /// (deleted, failed or awaited) are fewer than a quorum, and for want of
    /// a quorum once deleted, never-sent and awaited masters are.
    ///
    /// With every master sent the SET, this is the plain rule: a quorum of
    /// deletes. With some left out of the acquisition, it lets a release
    /// succeed while a majority of masters answers, as an acquisition can.
    pub(crate) fn release_decision(&self) -> Decision {
        let quorum = quorum(self.total());
        if self.yes + self.failed + self.waiting < quorum {
            Decision::Impossible
        } else if self.yes + self.not_sent >= quorum && self.yes + self.failed >= quorum {
            Decision::Reached
        } else if self.yes + self.not_sent + self.waiting < quorum {
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

    /// Whether "no" answers alone made a quorum impossible: for an
    /// extension, the lock is lost.
    pub(crate) fn refusals_prevent_quorum(&self) -> bool {
        self.no > self.total() - quorum(self.total())
    }

    /// For a release that failed: whether the answers show the lock had
    /// been lost (too few masters may still have held the key).
    pub(crate) fn release_found_lock_lost(&self) -> bool {
        self.yes + self.failed + self.waiting < quorum(self.total())
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
            not_sent: 0,
        };
        let held = |yes, no, waiting, held_back| Tally {
            yes,
            no,
            failed: 0,
            waiting,
            held_back,
            not_sent: 0,
        };
        assert_eq!(t(3, 0, 0, 2).decision(Rule::Acquire), Decision::Reached);
        assert_eq!(t(2, 0, 0, 3).decision(Rule::Acquire), Decision::Open);
        assert_eq!(t(2, 2, 0, 1).decision(Rule::Acquire), Decision::Open);
        assert_eq!(t(2, 2, 1, 0).decision(Rule::Acquire), Decision::Impossible);
        assert_eq!(t(0, 3, 0, 2).decision(Rule::Acquire), Decision::Impossible);
        assert_eq!(t(0, 1, 2, 2).decision(Rule::Acquire), Decision::Impossible);
        assert_eq!(t(1, 0, 0, 0).decision(Rule::Acquire), Decision::Reached);
        assert_eq!(t(0, 1, 0, 0).decision(Rule::Acquire), Decision::Impossible);
        // Masters held in reserve keep a round open, but do not count as yes.
        assert_eq!(held(2, 1, 0, 2).decision(Rule::Acquire), Decision::Open);
        assert_eq!(held(3, 0, 0, 2).decision(Rule::Acquire), Decision::Reached);
        assert_eq!(
            held(0, 3, 0, 2).decision(Rule::Acquire),
            Decision::Impossible
        );
        assert_eq!(held(1, 2, 1, 1).decision(Rule::Acquire), Decision::Open);
        assert_eq!(
            held(1, 3, 0, 1).decision(Rule::Acquire),
            Decision::Impossible
        );

        assert!(t(0, 0, 3, 2).failures_prevent_quorum());
        assert!(!t(0, 2, 2, 1).failures_prevent_quorum());
        assert!(t(1, 3, 1, 0).refusals_prevent_quorum());
        assert!(!t(1, 2, 2, 0).refusals_prevent_quorum());
    }

    #[test]
    fn a_release_counts_masters_never_sent_the_set_as_free() {
        // yes = deleted, no = not ours, failed, waiting, not_sent.
        let r = |yes, no, failed, waiting, not_sent| Tally {
            yes,
            no,
            failed,
            waiting,
            held_back: 0,
            not_sent,
        };
        // Every master held the key: a quorum of deletes.
        assert_eq!(r(3, 0, 0, 2, 0).release_decision(), Decision::Reached);
        assert_eq!(r(2, 0, 0, 3, 0).release_decision(), Decision::Open);
        assert_eq!(r(2, 0, 3, 0, 0).release_decision(), Decision::Impossible);
        assert!(!r(2, 0, 3, 0, 0).release_found_lock_lost());
        assert_eq!(r(2, 3, 0, 0, 0).release_decision(), Decision::Impossible);
        assert!(r(2, 3, 0, 0, 0).release_found_lock_lost());
        // Held on exactly a quorum (3 of 5), 2 never sent: one holder down
        // still releases (4 of 5 masters are free of the key)...
        assert_eq!(r(2, 0, 1, 0, 2).release_decision(), Decision::Reached);
        assert_eq!(r(3, 0, 0, 0, 2).release_decision(), Decision::Reached);
        // ...but not before the holders answered: one might say "not ours".
        assert_eq!(r(1, 0, 0, 2, 2).release_decision(), Decision::Open);
        assert_eq!(r(2, 0, 0, 1, 2).release_decision(), Decision::Open);
        // A holder that no longer had the key: the lock was lost.
        assert_eq!(r(2, 1, 0, 0, 2).release_decision(), Decision::Impossible);
        assert!(r(2, 1, 0, 0, 2).release_found_lock_lost());
        // Two holders down: the deleted one and the two never sent are a
        // quorum of free masters.
        assert_eq!(r(1, 0, 2, 0, 2).release_decision(), Decision::Reached);
        // Held on 4 of 5, three holders down: only 2 masters known free.
        assert_eq!(r(1, 0, 3, 0, 1).release_decision(), Decision::Impossible);
        assert!(!r(1, 0, 3, 0, 1).release_found_lock_lost());
    }

    #[test]
    fn everyone_waits_for_every_answer() {
        let t = Tally {
            yes: 4,
            waiting: 1,
            ..Tally::default()
        };
        assert_eq!(t.decision(Rule::Everyone), Decision::Open);
        let t = Tally {
            yes: 4,
            failed: 1,
            ..Tally::default()
        };
        assert_eq!(t.decision(Rule::Everyone), Decision::Reached);
    }
}
