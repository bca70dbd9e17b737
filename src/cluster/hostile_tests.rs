//! Hostile and unusual topology replies, written by hand: each refused
//! with its reason, or read as the format allows; the largest topologies
//! a cluster can have read, and larger ones are refused.

use super::tests::{decoded, owner};
use super::*;
use crate::resp::{decode_topology, DecodeError};

// A small RESP2 writer for hostile replies.
enum V {
    I(i64),
    B(&'static str),
    Nil,
    A(Vec<V>),
}

fn bytes_of(v: &V, out: &mut Vec<u8>) {
    match v {
        V::I(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        V::B(s) => out.extend_from_slice(format!("${}\r\n{s}\r\n", s.len()).as_bytes()),
        V::Nil => out.extend_from_slice(b"$-1\r\n"),
        V::A(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            items.iter().for_each(|i| bytes_of(i, out));
        }
    }
}

fn parse_shards(v: V) -> Result<Topology, TopologyError> {
    let mut bytes = Vec::new();
    bytes_of(&v, &mut bytes);
    Topology::from_shards(&decoded(&bytes))
}

fn parse_slots(v: V) -> Result<Topology, TopologyError> {
    let mut bytes = Vec::new();
    bytes_of(&v, &mut bytes);
    Topology::from_slots(&decoded(&bytes), false)
}

/// A node map as `CLUSTER SHARDS` writes it, with `extra` pairs appended.
fn node(id: &'static str, port: i64, role: &'static str, extra: Vec<V>) -> V {
    node_in_health(id, port, role, "online", extra)
}

fn node_in_health(
    id: &'static str,
    port: i64,
    role: &'static str,
    health: &'static str,
    extra: Vec<V>,
) -> V {
    let mut pairs = vec![
        V::B("id"),
        V::B(id),
        V::B("port"),
        V::I(port),
        V::B("ip"),
        V::B("10.0.0.1"),
        V::B("endpoint"),
        V::B("10.0.0.1"),
        V::B("role"),
        V::B(role),
        V::B("replication-offset"),
        V::I(1),
        V::B("health"),
        V::B(health),
    ];
    pairs.extend(extra);
    V::A(pairs)
}

fn shard(ranges: &[(i64, i64)], nodes: Vec<V>) -> V {
    let slots = ranges
        .iter()
        .flat_map(|&(a, b)| [V::I(a), V::I(b)])
        .collect();
    V::A(vec![V::B("slots"), V::A(slots), V::B("nodes"), V::A(nodes)])
}

fn master_node(id: &'static str) -> V {
    node(id, 7000, "master", vec![])
}

#[test]
fn hostile_shards_replies_give_their_reason() {
    use TopologyError as E;
    let full = |nodes| shard(&[(0, 16383)], nodes);
    let cases: Vec<(V, E)> = vec![
        (V::I(1), E::WrongType("reply")),
        (V::Nil, E::WrongType("reply")),
        (V::A(vec![V::I(1)]), E::WrongType("shard")),
        (V::A(vec![V::A(vec![V::B("slots")])]), E::WrongType("shard")),
        (
            V::A(vec![V::A(vec![V::I(1), V::I(2)])]),
            E::WrongType("shard"),
        ),
        (
            V::A(vec![V::A(vec![V::B("nodes"), V::A(vec![])])]),
            E::Missing("slots"),
        ),
        (
            V::A(vec![V::A(vec![V::B("slots"), V::A(vec![])])]),
            E::Missing("nodes"),
        ),
        (
            V::A(vec![V::A(vec![
                V::B("slots"),
                V::A(vec![]),
                V::B("slots"),
                V::A(vec![]),
            ])]),
            E::Duplicate("slots"),
        ),
        (
            V::A(vec![V::A(vec![V::B("slots"), V::I(1)])]),
            E::WrongType("slots"),
        ),
        (
            V::A(vec![V::A(vec![V::B("slots"), V::A(vec![V::I(1)])])]),
            E::WrongType("slots"),
        ),
        (
            V::A(vec![shard(&[(0, 16384)], vec![master_node("a")])]),
            E::OutOfRange("slot"),
        ),
        (
            V::A(vec![shard(&[(-1, 5)], vec![master_node("a")])]),
            E::OutOfRange("slot"),
        ),
        (
            V::A(vec![shard(&[(9, 5)], vec![master_node("a")])]),
            E::BadRange { start: 9, end: 5 },
        ),
        (
            V::A(vec![
                shard(&[(0, 10)], vec![master_node("a")]),
                shard(&[(10, 20)], vec![master_node("b")]),
            ]),
            E::Overlap { slot: 10 },
        ),
        (
            V::A(vec![shard(&[(0, 10), (5, 6)], vec![master_node("a")])]),
            E::Overlap { slot: 5 },
        ),
        (V::A(vec![full(vec![V::I(1)])]), E::WrongType("node")),
        (
            V::A(vec![full(vec![V::A(vec![
                V::B("port"),
                V::I(1),
                V::B("role"),
                V::B("master"),
            ])])]),
            E::Missing("node id"),
        ),
        (
            V::A(vec![full(vec![V::A(vec![
                V::B("id"),
                V::B("a"),
                V::B("port"),
                V::I(1),
            ])])]),
            E::Missing("role"),
        ),
        (
            V::A(vec![full(vec![V::A(vec![
                V::B("id"),
                V::B("a"),
                V::B("role"),
                V::B("master"),
                V::B("ip"),
                V::B("h"),
            ])])]),
            E::Missing("port"),
        ),
        (
            V::A(vec![full(vec![V::A(vec![
                V::B("id"),
                V::B("a"),
                V::B("port"),
                V::I(1),
                V::B("role"),
                V::B("master"),
            ])])]),
            E::Missing("endpoint"),
        ),
        (
            V::A(vec![full(vec![node("a b", 1, "master", vec![])])]),
            E::BadNodeId,
        ),
        (
            V::A(vec![full(vec![node("", 1, "master", vec![])])]),
            E::BadNodeId,
        ),
        (
            V::A(vec![full(vec![node("a", 70000, "master", vec![])])]),
            E::OutOfRange("port"),
        ),
        (
            V::A(vec![full(vec![node(
                "a",
                1,
                "master",
                vec![V::B("tls-port"), V::I(-1)],
            )])]),
            E::OutOfRange("tls-port"),
        ),
        (
            V::A(vec![full(vec![node("a", 1, "arbiter", vec![])])]),
            E::UnknownRole,
        ),
        (
            V::A(vec![full(vec![node(
                "a",
                1,
                "master",
                vec![V::B("id"), V::B("b")],
            )])]),
            E::Duplicate("node id"),
        ),
        (
            V::A(vec![full(vec![node(
                "a",
                1,
                "master",
                vec![V::B("health"), V::I(1)],
            )])]),
            E::Duplicate("health"),
        ),
        (
            V::A(vec![full(vec![node(
                "a",
                1,
                "master",
                vec![V::B("hostname"), V::B("a\u{7f}")],
            )])]),
            E::BadText("hostname"),
        ),
        (
            V::A(vec![full(vec![node(
                "a",
                1,
                "master",
                vec![V::B("endpoint"), V::B("x")],
            )])]),
            E::Duplicate("endpoint"),
        ),
        (
            V::A(vec![V::A(vec![
                V::B("id"),
                V::I(3),
                V::B("slots"),
                V::A(vec![]),
                V::B("nodes"),
                V::A(vec![]),
            ])]),
            E::WrongType("shard id"),
        ),
        (
            V::A(vec![
                shard(&[(0, 10)], vec![master_node("a")]),
                shard(&[(11, 20)], vec![master_node("a")]),
            ]),
            E::DuplicateNode,
        ),
        (
            V::A(vec![full(vec![master_node("a"), master_node("a")])]),
            E::DuplicateNode,
        ),
        (
            V::A(vec![full(vec![node("r", 1, "replica", vec![])])]),
            E::NoOwner,
        ),
        (V::A(vec![full(vec![])]), E::NoOwner),
        (
            V::A(vec![full(vec![master_node("a"), master_node("b")])]),
            E::ManyOwners,
        ),
        (
            V::A(vec![full(vec![
                node("a", 1, "master", vec![]),
                node("b", 2, "master", vec![]),
            ])]),
            E::ManyOwners,
        ),
    ];
    for (i, (reply, error)) in cases.into_iter().enumerate() {
        assert_eq!(parse_shards(reply), Err(error), "case {i}");
    }
}

#[test]
fn odd_but_valid_shards_replies_read() {
    // A shard without slots may list two masters (a failed one coming
    // back); a failed master alone still owns its slots; unknown keys (a
    // later server's) are skipped; numbers may come as digit strings.
    let t = parse_shards(V::A(vec![
        shard(
            &[(0, 16383)],
            vec![node_in_health("a", 1, "master", "fail", vec![])],
        ),
        shard(&[], vec![master_node("b"), master_node("c")]),
        V::A(vec![
            V::B("availability-zone"),
            V::B("az1"),
            V::B("slots"),
            V::A(vec![]),
            V::B("nodes"),
            V::A(vec![node(
                "d",
                1,
                "replica",
                vec![V::B("zone"), V::A(vec![])],
            )]),
        ]),
    ]))
    .expect("reads");
    let master = owner(&t, 5);
    assert_eq!((master.id.as_str(), master.health), ("a", Health::Failed));
    assert!(!master.is_usable(false));
    assert_eq!(t.masters().count(), 1);
    assert_eq!(t.shards()[1].master().map(|m| m.id.as_str()), Some("b"));
    assert_eq!(t.shards()[2].master(), None);
    assert_eq!(t.shards()[2].replicas().count(), 1);
    let strings = V::A(vec![V::A(vec![
        V::B("slots"),
        V::A(vec![V::B("0"), V::B("16383")]),
        V::B("nodes"),
        V::A(vec![V::A(vec![
            V::B("id"),
            V::B("a"),
            V::B("tls-port"),
            V::B("6380"),
            V::B("endpoint"),
            V::B("h.example"),
            V::B("role"),
            V::B("primary"),
        ])]),
    ])]);
    let t = parse_shards(strings).expect("reads");
    let master = owner(&t, 16383);
    assert_eq!((master.port, master.tls_port), (None, Some(6380)));
    assert_eq!(master.ip, None);
    assert_eq!(master.health, Health::Online, "no health field");
    assert!(master.is_usable(true));
    // A partial keyspace is a topology (its other slots have no owner).
    let t = parse_shards(V::A(vec![shard(&[(5, 5)], vec![master_node("a")])])).expect("reads");
    assert_eq!(t.owned_slots(), 1);
    assert!(t.owner_of(4).is_none() && t.owner_of(5).is_some());
}

/// A `CLUSTER SLOTS` node: endpoint, port, id, metadata.
fn slots_node(endpoint: V, port: i64, id: &'static str) -> V {
    V::A(vec![endpoint, V::I(port), V::B(id), V::A(vec![])])
}

fn entry(start: i64, end: i64, nodes: Vec<V>) -> V {
    let mut items = vec![V::I(start), V::I(end)];
    items.extend(nodes);
    V::A(items)
}

#[test]
fn hostile_slots_replies_give_their_reason() {
    use TopologyError as E;
    let n = |id| slots_node(V::B("10.0.0.1"), 7000, id);
    let cases: Vec<(V, E)> = vec![
        (V::I(1), E::WrongType("reply")),
        (V::A(vec![V::I(1)]), E::WrongType("slot range")),
        (
            V::A(vec![V::A(vec![V::I(0), V::I(1)])]),
            E::Missing("slot range's master"),
        ),
        (
            V::A(vec![entry(0, 16384, vec![n("a")])]),
            E::OutOfRange("slot"),
        ),
        (
            V::A(vec![entry(5, 1, vec![n("a")])]),
            E::BadRange { start: 5, end: 1 },
        ),
        (
            V::A(vec![entry(0, 9, vec![n("a")]), entry(9, 9, vec![n("b")])]),
            E::Overlap { slot: 9 },
        ),
        (V::A(vec![entry(0, 1, vec![V::I(3)])]), E::WrongType("node")),
        (
            V::A(vec![entry(0, 1, vec![V::A(vec![V::B("h")])])]),
            E::Missing("node's endpoint and port"),
        ),
        (
            V::A(vec![entry(0, 1, vec![V::A(vec![V::B("h"), V::I(1)])])]),
            E::Missing("node id"),
        ),
        (
            V::A(vec![entry(0, 1, vec![slots_node(V::I(1), 1, "a")])]),
            E::WrongType("endpoint"),
        ),
        (
            V::A(vec![entry(0, 1, vec![slots_node(V::B("a b"), 1, "a")])]),
            E::BadHost(HostError::NotPrintable),
        ),
        (
            V::A(vec![entry(0, 1, vec![slots_node(V::B("h"), 0, "a")])]),
            E::Missing("port"),
        ),
        (
            V::A(vec![entry(0, 1, vec![slots_node(V::B("h"), 65536, "a")])]),
            E::OutOfRange("port"),
        ),
        (
            V::A(vec![entry(
                0,
                1,
                vec![V::A(vec![
                    V::B("h"),
                    V::I(1),
                    V::B("a"),
                    V::A(vec![V::B("ip")]),
                ])],
            )]),
            E::WrongType("node metadata"),
        ),
        (
            V::A(vec![entry(
                0,
                1,
                vec![V::A(vec![
                    V::B("h"),
                    V::I(1),
                    V::B("a"),
                    V::A(vec![
                        V::B("ip"),
                        V::B("1.1.1.1"),
                        V::B("ip"),
                        V::B("1.1.1.1"),
                    ]),
                ])],
            )]),
            E::Duplicate("ip"),
        ),
        // The same master id at two addresses.
        (
            V::A(vec![
                entry(0, 1, vec![slots_node(V::B("h"), 1, "a")]),
                entry(2, 3, vec![slots_node(V::B("h"), 2, "a")]),
            ]),
            E::DuplicateNode,
        ),
        // A master that is another master's replica.
        (
            V::A(vec![
                entry(0, 1, vec![n("a")]),
                entry(2, 3, vec![n("b"), n("a")]),
            ]),
            E::DuplicateNode,
        ),
        // A replica listed twice with different addresses.
        (
            V::A(vec![
                entry(0, 1, vec![n("a"), slots_node(V::B("h"), 1, "r")]),
                entry(2, 3, vec![n("a"), slots_node(V::B("h"), 2, "r")]),
            ]),
            E::DuplicateNode,
        ),
    ];
    for (i, (reply, error)) in cases.into_iter().enumerate() {
        assert_eq!(parse_slots(reply), Err(error), "case {i}");
    }
}

#[test]
fn slots_replies_of_older_servers_and_each_endpoint_type_read() {
    // Before 7.0: `[ip, port, id]`, no metadata. A master's several ranges
    // make one shard; its replica, listed with each, is kept once.
    let a = || V::A(vec![V::B("10.0.0.1"), V::I(7000), V::B("a")]);
    let r = || V::A(vec![V::B("10.0.0.2"), V::I(7001), V::B("r")]);
    let t = parse_slots(V::A(vec![
        entry(0, 99, vec![a(), r()]),
        entry(100, 199, vec![slots_node(V::Nil, 7002, "b")]),
        entry(200, 16383, vec![a(), r()]),
    ]))
    .expect("reads");
    assert_eq!(t.shards().len(), 2);
    let shard = t.owner_of(0).expect("owned");
    let ranges = [
        SlotRange { start: 0, end: 99 },
        SlotRange {
            start: 200,
            end: 16383,
        },
    ];
    assert_eq!(shard.ranges(), ranges);
    assert_eq!(shard.replicas().count(), 1);
    let master = shard.master().expect("a master");
    assert_eq!(
        master.ip.as_deref(),
        Some("10.0.0.1"),
        "the endpoint is the IP"
    );
    assert_eq!(master.hostname, None);
    assert_eq!(master.health, Health::Online);
    let b = owner(&t, 100);
    assert_eq!(b.endpoint, Endpoint::SameAsAsked, "null: unknown-endpoint");
    assert_eq!(b.ip, None);
    // "" (no address known) and "?" (no host name) are unknown; with the
    // host name preferred, the metadata has the IP and the endpoint is the
    // name; unknown metadata keys and extra elements are skipped.
    let meta = |items| V::A(items);
    let t = parse_slots(V::A(vec![
        entry(0, 1, vec![slots_node(V::B(""), 1, "a")]),
        entry(2, 3, vec![slots_node(V::B("?"), 2, "b")]),
        entry(
            4,
            5,
            vec![V::A(vec![
                V::B("c.example"),
                V::I(3),
                V::B("c"),
                meta(vec![V::B("ip"), V::B("10.0.0.3")]),
            ])],
        ),
        entry(
            6,
            16383,
            vec![V::A(vec![
                V::B("10.0.0.4"),
                V::I(4),
                V::B("d"),
                meta(vec![
                    V::B("hostname"),
                    V::B("d.example"),
                    V::B("az"),
                    V::I(1),
                ]),
                V::B("a later server's fifth element"),
            ])],
        ),
    ]))
    .expect("reads");
    assert_eq!(owner(&t, 0).endpoint, Endpoint::Unknown);
    assert_eq!(owner(&t, 2).endpoint, Endpoint::Unknown);
    let c = owner(&t, 4);
    assert_eq!(c.endpoint, Endpoint::Host("c.example".into()));
    assert_eq!(c.ip.as_deref(), Some("10.0.0.3"));
    assert_eq!(c.hostname.as_deref(), Some("c.example"));
    let d = owner(&t, 6);
    assert_eq!(d.endpoint, Endpoint::Host("10.0.0.4".into()));
    assert_eq!(d.ip.as_deref(), Some("10.0.0.4"));
    assert_eq!(d.hostname.as_deref(), Some("d.example"));
}

#[test]
fn the_largest_topologies_read_and_larger_ones_are_refused() {
    // Two shards owning every other slot: 8192 one-slot ranges each, the
    // most a `CLUSTER SHARDS` reply's arrays hold.
    let mut bytes = b"*2\r\n".to_vec();
    for (first, id) in [(0, "a"), (1, "b")] {
        bytes.extend_from_slice(b"*4\r\n$5\r\nslots\r\n*16384\r\n");
        for slot in (first..SLOTS).step_by(2) {
            bytes.extend_from_slice(format!(":{slot}\r\n:{slot}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"$5\r\nnodes\r\n*1\r\n");
        bytes_of(&master_node(id), &mut bytes);
    }
    let t = Topology::from_shards(&decoded(&bytes)).expect("reads");
    assert_eq!(t.owned_slots(), SLOTS);
    assert_eq!(owner(&t, 16382).id, "a");
    assert_eq!(owner(&t, 16383).id, "b");
    // `CLUSTER SLOTS` of 16384 one-slot ranges.
    let mut bytes = b"*16384\r\n".to_vec();
    for slot in 0..SLOTS {
        let id = if slot % 2 == 0 { "a" } else { "b" };
        bytes_of(
            &entry(
                slot as i64,
                slot as i64,
                vec![slots_node(V::B("10.0.0.1"), 7000, id)],
            ),
            &mut bytes,
        );
    }
    // Both masters at one address: allowed (ports may be shared behind a
    // proxy); ids tell them apart.
    let t = Topology::from_slots(&decoded(&bytes), false).expect("reads");
    assert_eq!((t.owned_slots(), t.shards().len()), (SLOTS, 2));
    // One range too many is a decode error, as is an oversized reply.
    let mut over = b"*16385\r\n".to_vec();
    over.extend_from_slice(&bytes[b"*16384\r\n".len()..]);
    assert_eq!(
        decode_topology(&over),
        Err(DecodeError::ArrayTooLong(16385))
    );
}
