//! Arbitrary bytes as a cluster's topology reply: decoding under the
//! topology bounds and reading it as `CLUSTER SHARDS` and as `CLUSTER
//! SLOTS` (over TCP and TLS) never panics, and whatever is accepted keeps
//! the topology's promises: ranges within the 16384 slots, in order, no
//! slot owned twice, no node listed twice, an owner for every shard that
//! owns slots, and a slot map built from it that agrees with it.
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use redlock_sync::cluster::{SlotMap, Topology, SLOTS};
use redlock_sync::resp::{decode_topology, Decoded, MAX_TOPOLOGY_REPLY_LEN};

fn check(topology: &Topology) {
    let mut owned = vec![false; SLOTS];
    let mut ids = HashSet::new();
    for shard in topology.shards() {
        for range in shard.ranges() {
            assert!(range.start <= range.end && usize::from(range.end) < SLOTS);
            for slot in range.start..=range.end {
                assert!(!owned[usize::from(slot)], "slot {slot} owned twice");
                owned[usize::from(slot)] = true;
            }
        }
        if !shard.ranges().is_empty() {
            assert!(shard.master().is_some(), "slots without an owner");
        }
        for node in shard.nodes() {
            assert!(ids.insert(node.id.clone()), "node {} twice", node.id);
            assert!(node.port.is_some() || node.tls_port.is_some());
        }
    }
    assert_eq!(owned.iter().filter(|&&o| o).count(), topology.owned_slots());
    // The slot map agrees with the topology: masters numbered in order.
    let masters: Vec<String> = topology.masters().map(|(_, m)| m.id.clone()).collect();
    let now = Instant::now();
    let map = SlotMap::new(now, Duration::ZERO);
    let ticket = map.begin_refresh(now).expect("a new map is due");
    map.install(ticket, topology, |_, m| {
        masters.iter().position(|id| *id == m.id).map(|i| i as u16)
    });
    for slot in (0..SLOTS as u16).step_by(97).chain([SLOTS as u16 - 1]) {
        let expected = topology
            .owner_of(slot)
            .and_then(|s| s.master())
            .and_then(|m| masters.iter().position(|id| *id == m.id))
            .map(|i| i as u16);
        assert_eq!(map.owner(slot), expected, "slot {slot}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(Decoded::Complete(reply, used)) = decode_topology(data) else {
        return;
    };
    assert!(used <= data.len() && used <= MAX_TOPOLOGY_REPLY_LEN);
    if let Ok(topology) = Topology::from_shards(&reply) {
        check(&topology);
    }
    for tls in [false, true] {
        if let Ok(topology) = Topology::from_slots(&reply, tls) {
            check(&topology);
        }
    }
});
