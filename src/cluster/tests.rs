//! Topology tests: the three servers' own replies (fixtures), `CLUSTER
//! SHARDS` and `CLUSTER SLOTS` of one moment agreeing, and hostile replies
//! refused with their reason, never a panic.

use super::fixtures;
use super::*;
use crate::resp::{decode_topology, DecodeError, Decoded, ServerErrorKind};

const SERVERS: [&str; 3] = ["redis7.0", "valkey8.1", "valkey9.1"];

/// The cases captured as both replies (`fixtures/capture.py`).
const CASES: [&str; 8] = [
    "3",
    "6",
    "6-failover",
    "fragmented",
    "hostname",
    "hostname-missing",
    "unknown-endpoint",
    "ipv6",
];

pub(super) fn decoded(bytes: &[u8]) -> crate::resp::Reply<'_> {
    match decode_topology(bytes) {
        Ok(Decoded::Complete(reply, used)) if used == bytes.len() => reply,
        other => panic!("not one whole reply: {other:?}"),
    }
}

fn shards(name: &str) -> Topology {
    Topology::from_shards(&decoded(fixtures::get(name))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn slots(name: &str) -> Topology {
    Topology::from_slots(&decoded(fixtures::get(name)), false)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The master that owns `slot`.
pub(super) fn owner(topology: &Topology, slot: u16) -> &ClusterNode {
    topology
        .owner_of(slot)
        .and_then(Shard::master)
        .unwrap_or_else(|| panic!("slot {slot} has an owner"))
}

#[test]
fn every_servers_shards_reply_reads_as_it_was_made() {
    for server in SERVERS {
        let name = |case: &str| format!("{server}-shards-{case}");
        for case in CASES {
            let t = shards(&name(case));
            assert_eq!(t.owned_slots(), SLOTS, "{server} {case}");
            assert_eq!(t.masters().count(), 3, "{server} {case}");
            for (shard, master) in t.masters() {
                // Valkey 9 names its shards; the others do not.
                assert_eq!(shard.id().is_some(), server == "valkey9.1");
                assert!(master.is_usable(false) || case == "hostname-missing");
                assert_eq!(master.tls_port, None);
                assert!(!master.is_usable(true), "no TLS port");
                assert_eq!(master.role, Role::Master);
                assert_eq!(master.id.len(), 40);
            }
        }
        // Three masters on the first three ports, the keyspace cut in three.
        let t = shards(&name("3"));
        for (slot, port) in [(0, 21000), (5460, 21000), (5461, 21001), (16383, 21002)] {
            let master = owner(&t, slot);
            assert_eq!(master.port, Some(port), "{server} slot {slot}");
            assert_eq!(master.endpoint, Endpoint::Host("127.0.0.1".into()));
            assert_eq!(master.dial_host("seed"), Some("127.0.0.1"));
            assert_eq!(master.ip.as_deref(), Some("127.0.0.1"));
            assert_eq!(master.health, Health::Online);
        }
        // One replica per master, on the next three ports.
        let t = shards(&name("6"));
        for (shard, master) in t.masters() {
            let replicas: Vec<_> = shard.replicas().collect();
            assert_eq!(replicas.len(), 1, "{server}");
            let port = replicas[0].port.expect("a port");
            assert!((21013..=21015).contains(&port) && Some(port) != master.port);
            assert_eq!(replicas[0].health, Health::Online);
            assert!(replicas[0].replication_offset.is_some());
        }
        // Slot 7000 given to the first master: two ranges for two shards.
        let t = shards(&name("fragmented"));
        assert_eq!(owner(&t, 7000).port, Some(21000));
        assert_eq!(owner(&t, 6999).port, Some(21001));
        assert_eq!(owner(&t, 7001).port, Some(21001));
        assert_eq!(t.owner_of(7000).map(|s| s.ranges().len()), Some(2));
        // The endpoint types, as the answering node was set.
        let t = shards(&name("hostname"));
        let master = owner(&t, 16383);
        assert_eq!(master.endpoint, Endpoint::Host("node-2.example".into()));
        assert_eq!(master.hostname.as_deref(), Some("node-2.example"));
        assert_eq!(master.ip.as_deref(), Some("127.0.0.1"));
        let t = shards(&name("unknown-endpoint"));
        let master = owner(&t, 16383);
        assert_eq!(master.endpoint, Endpoint::SameAsAsked);
        assert_eq!(master.dial_host("seed.example"), Some("seed.example"));
        assert!(master.is_usable(false));
        let t = shards(&name("hostname-missing"));
        let master = owner(&t, 16383);
        assert_eq!(master.endpoint, Endpoint::Unknown);
        assert_eq!(master.dial_host("seed"), None);
        assert!(!master.is_usable(false));
        let t = shards(&name("ipv6"));
        assert_eq!(owner(&t, 0).endpoint, Endpoint::Host("::1".into()));
        assert_eq!(owner(&t, 0).port, Some(21020));
    }
}

#[test]
fn after_a_failover_the_promoted_replica_owns_the_slots() {
    for server in SERVERS {
        let t = shards(&format!("{server}-shards-6-failover"));
        let master = owner(&t, 0);
        assert_ne!(master.port, Some(21010), "{server}: the killed master");
        assert_eq!(master.health, Health::Online);
        // The killed master is still listed, failed: Redis 7.0 in a shard
        // of its own without slots, Valkey in its old shard.
        let dead = t
            .shards()
            .iter()
            .flat_map(Shard::nodes)
            .find(|n| n.port == Some(21010))
            .expect("the failed master is listed");
        assert_eq!(dead.health, Health::Failed, "{server}");
        assert!(!dead.is_usable(false));
        let (shard, _) = t.node(&dead.id).expect("found by id");
        assert_eq!(shard.owns(0), server != "redis7.0", "{server}");
        // `CLUSTER SLOTS` leaves it out altogether.
        let s = slots(&format!("{server}-slots-6-failover"));
        assert!(s.node(&dead.id).is_none());
        assert_eq!(owner(&s, 0).id, master.id);
    }
}

#[test]
fn shards_and_slots_of_one_moment_agree() {
    for server in SERVERS {
        for case in CASES {
            let a = shards(&format!("{server}-shards-{case}"));
            let b = slots(&format!("{server}-slots-{case}"));
            assert_eq!(b.owned_slots(), SLOTS);
            for (shard, master) in b.masters() {
                assert_eq!(shard.id(), None);
                for range in shard.ranges() {
                    for slot in [range.start, range.end] {
                        let other = owner(&a, slot);
                        let what = format!("{server} {case} slot {slot}");
                        assert_eq!(other.id, master.id, "{what}");
                        assert_eq!(other.endpoint, master.endpoint, "{what}");
                        assert_eq!(other.port, master.port, "{what}");
                        assert_eq!(other.ip, master.ip, "{what}");
                        assert_eq!(other.hostname, master.hostname, "{what}");
                    }
                }
                let (theirs, _) = a.node(&master.id).expect("the same master");
                let ids = |s: &Shard| {
                    let mut ids: Vec<String> = s
                        .replicas()
                        .filter(|r| r.health == Health::Online)
                        .map(|r| r.id.clone())
                        .collect();
                    ids.sort();
                    ids
                };
                assert_eq!(ids(shard), ids(theirs), "{server} {case}");
            }
        }
    }
}

#[test]
fn slots_over_tls_are_the_tls_ports() {
    let reply = decoded(fixtures::get("redis7.0-slots-3"));
    let t = Topology::from_slots(&reply, true).expect("reads");
    let master = owner(&t, 0);
    assert_eq!((master.port, master.tls_port), (None, Some(21000)));
    assert_eq!(master.port_for(true), Some(21000));
    assert!(master.is_usable(true) && !master.is_usable(false));
}

#[test]
fn a_decode_error_converts_for_the_caller_that_decoded() {
    fn read(bytes: &[u8]) -> Result<Option<Topology>, TopologyError> {
        match decode_topology(bytes)? {
            Decoded::Complete(reply, _) => Topology::from_shards(&reply).map(Some),
            Decoded::Partial => Ok(None),
        }
    }
    assert_eq!(
        read(b"*16385\r\n"),
        Err(TopologyError::Decode(DecodeError::ArrayTooLong(16385)))
    );
    assert_eq!(read(b"*1\r\n"), Ok(None));
    assert!(read(b"*0\r\n").is_ok_and(|t| t.is_some_and(|t| t.owned_slots() == 0)));
}

#[test]
fn refusals_are_told_as_such() {
    let reply = decoded(fixtures::get("redis7.0-myshardid"));
    assert_eq!(
        Topology::from_shards(&reply),
        Err(TopologyError::Refused(ServerErrorKind::Err))
    );
    assert_eq!(
        Topology::from_slots(&reply, false),
        Err(TopologyError::Refused(ServerErrorKind::Err))
    );
}

#[test]
fn mangled_fixtures_never_panic() {
    // Every topology fixture, cut short and with bytes replaced: whatever
    // decodes is parsed, and refused with a reason or read; nothing
    // panics. (The fuzz target does this at length.)
    let mut parsed = 0;
    for (name, bytes) in fixtures::ALL {
        if !(name.contains("shards-") || name.contains("slots-")) {
            continue;
        }
        let mut try_parse = |b: &[u8]| {
            if let Ok(Decoded::Complete(reply, _)) = decode_topology(b) {
                let _ = Topology::from_shards(&reply);
                let _ = Topology::from_slots(&reply, false);
                parsed += 1;
            }
        };
        // A stride, so that the test stays short; the fuzzer goes on.
        for cut in (0..bytes.len()).step_by(3) {
            try_parse(&bytes[..cut]);
        }
        let mut copy = bytes.to_vec();
        for i in (0..copy.len()).step_by(5) {
            let original = copy[i];
            for b in [b'0', b'-', b'*', 0xff] {
                copy[i] = b;
                try_parse(&copy);
            }
            copy[i] = original;
        }
    }
    assert!(parsed > 1000, "{parsed}");
}

#[test]
fn ranges_are_checked_64_slots_at_a_time_as_slot_by_slot() {
    // The check as it reads in the cluster specification, one slot at a
    // time: the first range out of bounds or out of order, or the first
    // slot (in the ranges' order) owned twice.
    fn slot_by_slot(ranges: &[SlotRange]) -> Result<(), TopologyError> {
        let mut owned = vec![false; SLOTS];
        for range in ranges {
            if range.start > range.end || usize::from(range.end) >= SLOTS {
                return Err(TopologyError::BadRange {
                    start: range.start,
                    end: range.end,
                });
            }
            for slot in range.start..=range.end {
                if std::mem::replace(&mut owned[usize::from(slot)], true) {
                    return Err(TopologyError::Overlap { slot });
                }
            }
        }
        Ok(())
    }
    // Ranges near word boundaries, whole words, one slot, the last slot,
    // and random ones (xorshift: the same cases every run).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound) as u16
    };
    let edges = [
        0u16, 1, 62, 63, 64, 65, 127, 128, 191, 8191, 8192, 16320, 16382, 16383,
    ];
    let (mut overlaps, mut bad) = (0, 0);
    for _ in 0..3000 {
        let count = 1 + usize::from(next(4));
        let ranges: Vec<SlotRange> = (0..count)
            .map(|_| {
                let pick = |next: &mut dyn FnMut(u64) -> u16| match next(8) {
                    0..=3 => edges[usize::from(next(edges.len() as u64))],
                    4 => next(SLOTS as u64 + 2), // sometimes out of bounds
                    _ => next(SLOTS as u64),
                };
                let start = pick(&mut next);
                let end = match next(8) {
                    0 => start,
                    1..=4 => start.saturating_add(next(130)),
                    5 | 6 => pick(&mut next),
                    _ => start.saturating_sub(next(3)), // sometimes out of order
                };
                SlotRange { start, end }
            })
            .collect();
        let expected = slot_by_slot(&ranges);
        assert_eq!(
            super::topology::check_ranges(ranges.iter()),
            expected,
            "{ranges:?}"
        );
        match expected {
            Err(TopologyError::Overlap { .. }) => overlaps += 1,
            Err(_) => bad += 1,
            Ok(()) => {}
        }
    }
    // Every outcome is exercised.
    assert!(
        overlaps > 300 && bad > 300 && overlaps + bad < 2700,
        "{overlaps}, {bad}"
    );
}
