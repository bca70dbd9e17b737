//! Fenced handles: whether a master counts for fencing, or why it is left
//! out, as its connections' probes and the acquisitions' decisions found,
//! kept for the health view; and which changes of it are worth telling
//! (see `health`, which tells them).

use crate::command::fence::FenceCheck;
use crate::error::FenceFault;
use std::sync::atomic::{AtomicU8, Ordering};

/// Nothing is known of the master's fencing yet.
const UNKNOWN: u8 = 0;
/// The master counts for fencing.
const COUNTS: u8 = 1;

/// What a change of standing tells the hook: the start of an episode of
/// being left out, its end, or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Told {
    Nothing,
    LeftOut(FenceFault),
    Back,
}

/// A master's standing for fencing: not known, counting, or left out for
/// a [`FenceFault`] (its `code`). One atomic, read on every acquisition
/// and written only when it changes.
#[derive(Debug, Default)]
pub(crate) struct FenceStanding(AtomicU8);

impl FenceStanding {
    /// Why the master is left out, if it is.
    pub(crate) fn fault(&self) -> Option<FenceFault> {
        FenceFault::from_code(self.0.load(Ordering::Relaxed))
    }

    /// The master is left out for `fault`: told if that starts an
    /// episode (it counted, or nothing was known), once; a change of reason
    /// within one is only recorded.
    pub(crate) fn left_out(&self, fault: FenceFault) -> Told {
        let code = fault.code();
        // Read first: a master left out answers so on every acquisition.
        if self.0.load(Ordering::Relaxed) == code {
            return Told::Nothing;
        }
        match self.0.swap(code, Ordering::Relaxed) {
            UNKNOWN | COUNTS => Told::LeftOut(fault),
            _ => Told::Nothing,
        }
    }

    /// The master counts (its grant counted toward a token): told if it
    /// was left out before.
    pub(crate) fn counts(&self) -> Told {
        // Read first: this runs for every master of every acquisition.
        if self.0.load(Ordering::Relaxed) == COUNTS {
            return Told::Nothing;
        }
        match self.0.swap(COUNTS, Ordering::Relaxed) {
            UNKNOWN | COUNTS => Told::Nothing,
            _ => Told::Back,
        }
    }

    /// A new connection's probe found `check`: left out for what it
    /// found, or counting if it found the domain valid, unless the master
    /// is left out for being in another epoch, which only a token's
    /// decision can tell.
    pub(crate) fn probed(&self, check: FenceCheck) -> Told {
        match check.fault() {
            Some(fault) => self.left_out(fault),
            None if self.fault() == Some(FenceFault::OtherEpoch) => Told::Nothing,
            None => self.counts(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_is_told_once_when_it_starts_and_once_when_it_ends() {
        let standing = FenceStanding::default();
        assert_eq!(standing.counts(), Told::Nothing, "not known, then counts");
        let unanchored = Told::LeftOut(FenceFault::Unanchored);
        assert_eq!(standing.left_out(FenceFault::Unanchored), unanchored);
        assert_eq!(standing.left_out(FenceFault::Unanchored), Told::Nothing);
        let other = standing.left_out(FenceFault::Restarted);
        assert_eq!(other, Told::Nothing, "another reason, the same episode");
        assert_eq!(standing.fault(), Some(FenceFault::Restarted));
        assert_eq!(standing.counts(), Told::Back);
        assert_eq!(standing.counts(), Told::Nothing);
        assert_eq!(standing.fault(), None);
        let fresh = FenceStanding::default();
        let old = fresh.left_out(FenceFault::OldAnchor);
        assert_eq!(old, Told::LeftOut(FenceFault::OldAnchor), "first known");
    }

    #[test]
    fn a_valid_probe_does_not_end_another_epoch_which_only_a_decision_tells() {
        let standing = FenceStanding::default();
        standing.left_out(FenceFault::OtherEpoch);
        assert_eq!(standing.probed(FenceCheck::Valid(None)), Told::Nothing);
        assert_eq!(standing.fault(), Some(FenceFault::OtherEpoch));
        assert_eq!(standing.counts(), Told::Back);
        let unanchored = standing.probed(FenceCheck::Unanchored);
        assert_eq!(unanchored, Told::LeftOut(FenceFault::Unanchored));
        assert_eq!(standing.probed(FenceCheck::Valid(None)), Told::Back);
    }
}
