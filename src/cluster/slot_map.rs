//! A cluster voter's slot map: for each of the 16384 slots, the index of
//! its owner in the voter's list of nodes (which the layer above keeps,
//! with each node's connection settings). Rounds read it on the lock path
//! with one relaxed atomic load: no lock, no allocation. A `MOVED` updates
//! its slot in place at once; a full refresh (a new [`Topology`]) rewrites
//! every slot and bumps a generation counter.
//!
//! Each entry is a hint, never a promise: the server a command reaches
//! decides (it answers `MOVED` when the hint is stale), so a reader that
//! sees a refresh half done, or an entry a concurrent `MOVED` just wrote,
//! routes one command to a node that redirects it, and nothing worse.
//!
//! Memory: 16384 two-byte atomics, 32 KiB per cluster voter, allocated
//! once when the voter is set up; a refresh needs another 32 KiB for the
//! time it runs.
//!
//! When to refresh is decided here, without reading a clock: callers pass
//! `Instant`s. Anything that suggests the map is out of date (a `MOVED`, a
//! node that cannot be reached, a sharded subscription the server ended)
//! marks it stale; a refresh is then due, at most once per
//! `min_interval`, and one caller at a time wins the right to do it.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::slot::SLOTS;
use super::topology::{ClusterNode, Shard, Topology};

/// The entry of a slot whose owner is not known.
pub const UNKNOWN: u16 = u16::MAX;

/// See the module's docs.
#[derive(Debug)]
pub struct SlotMap {
    /// Owner index per slot, or [`UNKNOWN`].
    owners: Box<[AtomicU16]>,
    /// Full refreshes installed so far.
    generation: AtomicU64,
    /// How many times the map was marked stale, ever; a refresh clears
    /// what was marked before it began (`cleared`).
    marks: AtomicU64,
    /// The `marks` that the last installed refresh had seen.
    cleared: AtomicU64,
    /// When the last refresh was claimed, in nanoseconds after `base`,
    /// plus one; 0 for never.
    last_attempt: AtomicU64,
    /// The origin of the times above.
    base: Instant,
    /// The least time between two refreshes.
    min_interval: Duration,
}

/// The right to refresh the map, won by [`SlotMap::begin_refresh`]: fetch
/// a topology, then [`SlotMap::install`] it. Dropped unused (the fetch
/// failed), the map stays stale and the next refresh is due after the
/// interval.
#[derive(Debug)]
#[must_use = "a won refresh is installed, or dropped when the fetch fails"]
pub struct RefreshTicket {
    /// The marks the refresh answers: those made before it began.
    marks: u64,
}

impl SlotMap {
    /// A map with every owner unknown, stale, so that a refresh is due at
    /// once. `base` is any instant not after the ones later passed in (the
    /// voter's creation); `min_interval` is the least time between two
    /// refreshes.
    pub fn new(base: Instant, min_interval: Duration) -> SlotMap {
        SlotMap {
            owners: (0..SLOTS).map(|_| AtomicU16::new(UNKNOWN)).collect(),
            generation: AtomicU64::new(0),
            marks: AtomicU64::new(1),
            cleared: AtomicU64::new(0),
            last_attempt: AtomicU64::new(0),
            base,
            min_interval,
        }
    }

    /// The index of `slot`'s owner, if known (`None` too for a slot of
    /// 16384 or more).
    pub fn owner(&self, slot: u16) -> Option<u16> {
        let owner = self.owners.get(usize::from(slot))?.load(Ordering::Relaxed);
        (owner != UNKNOWN).then_some(owner)
    }

    /// A `MOVED`: `slot` is now served by node `owner`. Written at once
    /// (the next command for the slot goes there), and the map is marked
    /// stale: a slot seldom moves alone. Out-of-range arguments are
    /// ignored.
    pub fn moved(&self, slot: u16, owner: u16) {
        if let Some(entry) = self.owners.get(usize::from(slot)) {
            entry.store(owner, Ordering::Relaxed);
        }
        self.mark_stale();
    }

    /// Something suggests the map is out of date: a refresh is due once
    /// the interval since the last one allows.
    pub fn mark_stale(&self) {
        self.marks.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the map was marked stale since the last refresh began.
    pub fn is_stale(&self) -> bool {
        self.marks.load(Ordering::Acquire) != self.cleared.load(Ordering::Acquire)
    }

    /// How many full refreshes were installed (0: none yet, every owner
    /// unknown but those a `MOVED` taught).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a refresh is due at `now`: the map is stale and no refresh
    /// was claimed in the last `min_interval`.
    pub fn refresh_due(&self, now: Instant) -> bool {
        self.is_stale() && self.interval_passed(self.last_attempt.load(Ordering::Acquire), now)
    }

    /// Claims the refresh that is due at `now`, if one is and no other
    /// caller claimed it first; `None` otherwise. The claim counts as the
    /// attempt that the rate limit measures from, whether it succeeds.
    pub fn begin_refresh(&self, now: Instant) -> Option<RefreshTicket> {
        let marks = self.marks.load(Ordering::Acquire);
        if marks == self.cleared.load(Ordering::Acquire) {
            return None;
        }
        let last = self.last_attempt.load(Ordering::Acquire);
        if !self.interval_passed(last, now) {
            return None;
        }
        let stamp = self.nanos(now).saturating_add(1);
        self.last_attempt
            .compare_exchange(last, stamp, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| RefreshTicket { marks })
    }

    /// Installs a refreshed topology: each slot a master owns gets
    /// `index_of(shard, master)`; slots no master owns, or whose master
    /// `index_of` does not place (`None`), become unknown. Bumps and
    /// returns the generation. The marks made before the ticket was won
    /// are cleared; one made since (a `MOVED` newer than the topology)
    /// leaves the map stale.
    pub fn install(
        &self,
        ticket: RefreshTicket,
        topology: &Topology,
        mut index_of: impl FnMut(&Shard, &ClusterNode) -> Option<u16>,
    ) -> u64 {
        // The whole table first, so that readers see each slot change at
        // most once, and only to its new owner.
        let mut table = vec![UNKNOWN; SLOTS];
        for (shard, master) in topology.masters() {
            let index = index_of(shard, master).unwrap_or(UNKNOWN);
            for range in shard.ranges() {
                // Ranges are checked to be within the slots.
                for entry in &mut table[usize::from(range.start)..=usize::from(range.end)] {
                    *entry = index;
                }
            }
        }
        for (entry, owner) in self.owners.iter().zip(table) {
            entry.store(owner, Ordering::Relaxed);
        }
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.cleared.fetch_max(ticket.marks, Ordering::AcqRel);
        generation
    }

    fn interval_passed(&self, last: u64, now: Instant) -> bool {
        if last == 0 {
            return true;
        }
        let since = self.nanos(now).saturating_add(1).saturating_sub(last);
        since >= u64::try_from(self.min_interval.as_nanos()).unwrap_or(u64::MAX)
    }

    /// `now` in nanoseconds after `base` (0 for an instant before it).
    fn nanos(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.base);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::topology::{Health, Role, SlotRange};
    use crate::cluster::Endpoint;

    const SECOND: Duration = Duration::from_secs(1);

    fn node(id: &str) -> ClusterNode {
        ClusterNode {
            id: id.into(),
            endpoint: Endpoint::Host("h".into()),
            ip: None,
            hostname: None,
            port: Some(7000),
            tls_port: None,
            role: Role::Master,
            health: Health::Online,
            replication_offset: None,
        }
    }

    /// Masters `a` (0-99 and 200-299), `b` (100-199), and a shard `c`
    /// without slots; slots 300 and up have no owner.
    fn topology() -> Topology {
        let range = |start, end| SlotRange { start, end };
        let shards = vec![
            Shard::new(None, vec![range(0, 99), range(200, 299)], vec![node("a")]),
            Shard::new(None, vec![range(100, 199)], vec![node("b")]),
            Shard::new(None, vec![], vec![node("c")]),
        ];
        Topology::checked(shards.into_iter().map(Result::unwrap).collect()).unwrap()
    }

    fn index(_: &Shard, master: &ClusterNode) -> Option<u16> {
        match master.id.as_str() {
            "a" => Some(0),
            "b" => Some(1),
            _ => None,
        }
    }

    #[test]
    fn a_new_map_knows_nothing_and_wants_a_refresh_at_once() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        assert!((0..SLOTS as u16).all(|s| map.owner(s).is_none()));
        assert_eq!(map.owner(SLOTS as u16), None);
        assert_eq!(map.generation(), 0);
        assert!(map.is_stale() && map.refresh_due(t0));
        assert_eq!(std::mem::size_of_val(&*map.owners), 32 * 1024);
    }

    #[test]
    fn install_places_every_owned_slot_and_clears_the_rest() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        map.moved(5000, 9); // taught by a MOVED before any refresh
        let ticket = map.begin_refresh(t0).expect("due");
        assert_eq!(map.install(ticket, &topology(), index), 1);
        for (slot, owner) in [(0, Some(0)), (99, Some(0)), (100, Some(1)), (199, Some(1))] {
            assert_eq!(map.owner(slot), owner, "slot {slot}");
        }
        assert_eq!(map.owner(250), Some(0));
        assert_eq!(map.owner(300), None);
        assert_eq!(map.owner(5000), None, "the topology has no owner for it");
        assert_eq!(map.owner(16383), None);
        assert!(!map.is_stale() && !map.refresh_due(t0 + SECOND));
        assert_eq!(map.generation(), 1);
    }

    #[test]
    fn a_master_the_caller_cannot_place_leaves_its_slots_unknown() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        let ticket = map.begin_refresh(t0).expect("due");
        map.install(ticket, &topology(), |_, m| (m.id == "b").then_some(1));
        assert_eq!((map.owner(0), map.owner(100)), (None, Some(1)));
    }

    #[test]
    fn moved_writes_the_slot_and_makes_a_refresh_due_after_the_interval() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        map.install(map.begin_refresh(t0).expect("due"), &topology(), index);
        map.moved(0, 1);
        assert_eq!(map.owner(0), Some(1), "at once");
        assert_eq!(map.owner(1), Some(0), "its neighbours unchanged");
        assert!(map.is_stale());
        // The last refresh was claimed at t0: not before t0 + 1 s.
        assert!(!map.refresh_due(t0 + SECOND / 2));
        assert!(map.begin_refresh(t0 + SECOND / 2).is_none());
        assert!(map.refresh_due(t0 + SECOND));
        // An out-of-range slot is ignored (still marks stale).
        map.moved(SLOTS as u16, 3);
        assert_eq!(map.owner(SLOTS as u16), None);
    }

    #[test]
    fn one_caller_wins_a_due_refresh_and_a_failed_one_waits_the_interval() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        let won = map.begin_refresh(t0).expect("due");
        assert!(map.begin_refresh(t0).is_none(), "claimed already");
        assert!(map.begin_refresh(t0 + SECOND / 2).is_none());
        drop(won); // the fetch failed
        assert!(map.is_stale());
        assert!(!map.refresh_due(t0 + SECOND / 2));
        let again = map
            .begin_refresh(t0 + SECOND)
            .expect("due after the interval");
        map.install(again, &topology(), index);
        assert!(!map.is_stale());
        // Not stale: nothing is due, however late.
        assert!(map.begin_refresh(t0 + 100 * SECOND).is_none());
        // An instant before the last claim is not later than it.
        map.mark_stale();
        assert!(!map.refresh_due(t0));
    }

    #[test]
    fn a_mark_made_during_a_refresh_outlives_it() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        let ticket = map.begin_refresh(t0).expect("due");
        map.moved(7, 1); // newer than the topology being fetched
        map.install(ticket, &topology(), index);
        assert!(map.is_stale(), "the MOVED after the fetch still counts");
        assert!(map.refresh_due(t0 + SECOND));
    }

    #[test]
    fn instants_before_the_base_count_as_the_base() {
        let t0 = Instant::now();
        let map = SlotMap::new(t0 + SECOND, SECOND);
        let ticket = map.begin_refresh(t0).expect("due: never refreshed");
        drop(ticket);
        map.mark_stale();
        assert!(!map.refresh_due(t0 + SECOND), "claimed at the base");
        assert!(map.refresh_due(t0 + 2 * SECOND));
    }

    #[test]
    fn reading_owners_allocates_nothing() {
        use crate::counting_alloc::counted;
        let t0 = Instant::now();
        let map = SlotMap::new(t0, SECOND);
        map.install(map.begin_refresh(t0).expect("due"), &topology(), index);
        let (found, counts) = counted(|| {
            let known = (0..SLOTS as u16)
                .filter(|&s| map.owner(s).is_some())
                .count();
            let slot = crate::cluster::key_slot(b"{user1000}.following");
            map.moved(slot, 1);
            (known, map.owner(slot), map.refresh_due(t0 + SECOND))
        });
        assert_eq!(found, (300, Some(1), true));
        assert_eq!(counts.allocations, 0, "{counts:?}");
    }
}
