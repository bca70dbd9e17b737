//! Fenced handles: whether a master counts for fencing, or why it is left
//! out, as its connections' probes and the acquisitions' decisions found,
//! kept for the health view; and which changes of it are worth telling
//! (see `health`, which tells them).
//!
//! A cluster voter keeps a fence domain's hash per slot (docs/fencing.md,
//! "Fencing on cluster voters"), each of which may be left out on its own
//! (its slot moved, its shard failed over): its standing is the set of
//! slots left out, and it is left out while that set is not empty.

use crate::cluster::SLOTS;
use crate::command::fence::FenceCheck;
use crate::error::FenceFault;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// Nothing is known of the master's fencing yet.
const UNKNOWN: u8 = 0;
/// The master counts for fencing.
const COUNTS: u8 = 1;

/// What a change of standing tells the hook: the start of an episode of
/// being left out (for a cluster voter, in its first slot), its end, or
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Told {
    Nothing,
    LeftOut(FenceFault),
    Back,
}

/// A master's standing for fencing: not known, counting, or left out for
/// a [`FenceFault`] (its `code`); for a cluster voter, per slot. Atomics,
/// read on every acquisition and written only when something changes.
#[derive(Debug, Default)]
pub(crate) struct FenceStanding {
    /// One-hash voters: the standing. Cluster voters: the last fault a
    /// slot was left out for.
    code: AtomicU8,
    /// Cluster voters: the slots left out, made by the first one.
    slots: OnceLock<Box<SlotsLeftOut>>,
}

/// A bit per slot, and how many are set.
#[derive(Debug)]
struct SlotsLeftOut {
    bits: [AtomicU64; SLOTS / 64],
    count: AtomicU32,
}

impl SlotsLeftOut {
    fn word(&self, slot: u16) -> (&AtomicU64, u64) {
        let slot = usize::from(slot) % SLOTS;
        (&self.bits[slot / 64], 1 << (slot % 64))
    }

    /// Marks `slot` left out; returns whether it is the first.
    fn set(&self, slot: u16) -> bool {
        let (word, bit) = self.word(slot);
        word.fetch_or(bit, Ordering::Relaxed) & bit == 0
            && self.count.fetch_add(1, Ordering::Relaxed) == 0
    }

    /// Marks `slot` counting; returns whether it was the last left out.
    fn clear(&self, slot: u16) -> bool {
        let (word, bit) = self.word(slot);
        // Read first: this runs for every acquisition on the voter.
        word.load(Ordering::Relaxed) & bit != 0
            && word.fetch_and(!bit, Ordering::Relaxed) & bit != 0
            && self.count.fetch_sub(1, Ordering::Relaxed) == 1
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed) as usize
    }
}

impl FenceStanding {
    /// Why the master is left out, if it is (for a cluster voter: in some
    /// slot; the last fault found).
    pub(crate) fn fault(&self) -> Option<FenceFault> {
        if self.slots.get().is_some_and(|s| s.count() == 0) {
            return None;
        }
        FenceFault::from_code(self.code.load(Ordering::Relaxed))
    }

    /// A cluster voter: in how many slots it is left out (`None` for
    /// another voter, or one never left out in a slot).
    pub(crate) fn slots_left_out(&self) -> Option<usize> {
        self.slots.get().map(|s| s.count())
    }

    /// The master is left out for `fault` (a cluster voter: in `slot`):
    /// told if that starts an episode (it counted, or nothing was known),
    /// once; a change of reason within one is only recorded.
    pub(crate) fn left_out(&self, slot: Option<u16>, fault: FenceFault) -> Told {
        let code = fault.code();
        if let Some(slot) = slot {
            if self.code.load(Ordering::Relaxed) != code {
                self.code.store(code, Ordering::Relaxed);
            }
            let slots = self.slots();
            return match slots.set(slot) {
                true => Told::LeftOut(fault),
                false => Told::Nothing,
            };
        }
        // Read first: a master left out answers so on every acquisition.
        if self.code.load(Ordering::Relaxed) == code {
            return Told::Nothing;
        }
        match self.code.swap(code, Ordering::Relaxed) {
            UNKNOWN | COUNTS => Told::LeftOut(fault),
            _ => Told::Nothing,
        }
    }

    /// The master counts (its grant counted toward a token; a cluster
    /// voter: in `slot`): told if it was left out before (a cluster voter:
    /// in this slot alone).
    pub(crate) fn counts(&self, slot: Option<u16>) -> Told {
        if let Some(slot) = slot {
            return match self.slots.get() {
                Some(slots) if slots.clear(slot) => Told::Back,
                _ => Told::Nothing,
            };
        }
        // Read first: this runs for every master of every acquisition.
        if self.code.load(Ordering::Relaxed) == COUNTS {
            return Told::Nothing;
        }
        match self.code.swap(COUNTS, Ordering::Relaxed) {
            UNKNOWN | COUNTS => Told::Nothing,
            _ => Told::Back,
        }
    }

    /// A cluster voter whose every slot's hash was looked at (the
    /// operator's repair): the slots of `left_out` are left out, each for
    /// its fault, all others count. Told as one change: an episode that
    /// starts (with its count) or ends. (An acquisition that records a
    /// slot meanwhile may be overwritten: the view is the repair's.)
    pub(crate) fn slots_found(&self, left_out: &[(u16, FenceFault)]) -> Told {
        let slots = self.slots();
        let before = slots.count();
        let mut found = [0u64; SLOTS / 64];
        for &(slot, fault) in left_out {
            let slot = usize::from(slot) % SLOTS;
            found[slot / 64] |= 1 << (slot % 64);
            self.code.store(fault.code(), Ordering::Relaxed);
        }
        let mut count = 0;
        for (word, found) in slots.bits.iter().zip(found) {
            word.store(found, Ordering::Relaxed);
            count += found.count_ones();
        }
        slots.count.store(count, Ordering::Relaxed);
        match (before, count as usize, self.fault()) {
            (0, 1.., Some(fault)) => Told::LeftOut(fault),
            (1.., 0, _) => Told::Back,
            _ => Told::Nothing,
        }
    }

    /// The slots left out, made on first use.
    fn slots(&self) -> &SlotsLeftOut {
        self.slots.get_or_init(|| {
            Box::new(SlotsLeftOut {
                bits: std::array::from_fn(|_| AtomicU64::new(0)),
                count: AtomicU32::new(0),
            })
        })
    }

    /// A new connection's probe found `check`: left out for what it
    /// found, or counting if it found the domain valid, unless the master
    /// is left out for being in another epoch, which only a token's
    /// decision can tell. (A standalone master's: a cluster node's probe
    /// names no hash, and its verdict is the grants'.)
    pub(crate) fn probed(&self, check: FenceCheck) -> Told {
        match check.fault() {
            Some(fault) => self.left_out(None, fault),
            None if self.fault() == Some(FenceFault::OtherEpoch) => Told::Nothing,
            None => self.counts(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left_out(fault: FenceFault) -> Told {
        Told::LeftOut(fault)
    }

    #[test]
    fn an_episode_is_told_once_when_it_starts_and_once_when_it_ends() {
        let standing = FenceStanding::default();
        assert_eq!(
            standing.counts(None),
            Told::Nothing,
            "not known, then counts"
        );
        let unanchored = left_out(FenceFault::Unanchored);
        assert_eq!(standing.left_out(None, FenceFault::Unanchored), unanchored);
        assert_eq!(
            standing.left_out(None, FenceFault::Unanchored),
            Told::Nothing
        );
        let other = standing.left_out(None, FenceFault::Restarted);
        assert_eq!(other, Told::Nothing, "another reason, the same episode");
        assert_eq!(standing.fault(), Some(FenceFault::Restarted));
        assert_eq!(standing.counts(None), Told::Back);
        assert_eq!(standing.counts(None), Told::Nothing);
        assert_eq!(standing.fault(), None);
        let fresh = FenceStanding::default();
        let old = fresh.left_out(None, FenceFault::OldAnchor);
        assert_eq!(old, left_out(FenceFault::OldAnchor), "first known");
    }

    #[test]
    fn a_valid_probe_does_not_end_another_epoch_which_only_a_decision_tells() {
        let standing = FenceStanding::default();
        standing.left_out(None, FenceFault::OtherEpoch);
        assert_eq!(standing.probed(FenceCheck::Valid(None)), Told::Nothing);
        assert_eq!(standing.fault(), Some(FenceFault::OtherEpoch));
        assert_eq!(standing.counts(None), Told::Back);
        let unanchored = standing.probed(FenceCheck::Unanchored);
        assert_eq!(unanchored, left_out(FenceFault::Unanchored));
        assert_eq!(standing.probed(FenceCheck::Valid(None)), Told::Back);
    }

    #[test]
    fn a_cluster_voter_is_left_out_while_some_slot_is_and_told_once_each_way() {
        let standing = FenceStanding::default();
        assert_eq!(standing.counts(Some(5)), Told::Nothing);
        assert_eq!(standing.slots_left_out(), None);
        let stale = FenceFault::ReplicationChanged;
        let first = standing.left_out(Some(5), stale);
        assert_eq!(first, left_out(stale));
        assert_eq!(standing.slots_left_out(), Some(1));
        assert_eq!(standing.left_out(Some(5), stale), Told::Nothing, "again");
        let second = standing.left_out(Some(16383), FenceFault::Restarted);
        assert_eq!(second, Told::Nothing, "the same episode");
        assert_eq!(standing.slots_left_out(), Some(2));
        assert_eq!(standing.fault(), Some(FenceFault::Restarted));
        assert_eq!(standing.counts(Some(9)), Told::Nothing, "never left out");
        assert_eq!(standing.counts(Some(5)), Told::Nothing, "one left");
        assert_eq!(standing.counts(Some(16383)), Told::Back);
        assert_eq!(
            (standing.fault(), standing.slots_left_out()),
            (None, Some(0))
        );
    }

    #[test]
    fn a_repair_that_looked_at_every_slot_sets_them_all_and_tells_the_count() {
        let standing = FenceStanding::default();
        standing.left_out(Some(1), FenceFault::Unanchored);
        let told = standing.slots_found(&[(7, FenceFault::Restarted), (8, FenceFault::Restarted)]);
        assert_eq!(told, Told::Nothing, "left out before and after");
        assert_eq!(standing.slots_left_out(), Some(2), "slot 1 counts now");
        assert_eq!(standing.slots_found(&[]), Told::Back);
        let told = standing.slots_found(&[(3, FenceFault::ReplicationChanged)]);
        assert_eq!(told, left_out(FenceFault::ReplicationChanged));
        assert_eq!(standing.slots_left_out(), Some(1));
    }
}
