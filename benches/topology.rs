//! What a cluster voter's slot map refresh costs the client: the topology
//! reply (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on servers before 7.0)
//! decoded and read into a checked `Topology`, and the slot map rebuilt
//! from it, for clusters of 3, 30 and 300 masters with one replica each.
//!
//! The replies are built here in the servers' own form (the fields and
//! their order as Redis 7.0 sends them; see src/cluster/fixtures/), each
//! master owning one contiguous range, as `redis-cli --cluster create`
//! leaves them. Every benchmark checks what it parsed, so a broken parser
//! cannot produce a fast, meaningless figure. The reply sizes are printed
//! first and appear as the throughput.
//!
//! ```sh
//! cargo bench --features fuzzing --bench topology
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use redlock_sync::cluster::{SlotMap, Topology, SLOTS};
use redlock_sync::resp::{decode_topology, Decoded};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Cluster sizes, in masters.
const SIZES: [usize; 3] = [3, 30, 300];

/// A node of the synthetic cluster: its id, port and role.
struct Node {
    id: String,
    port: u16,
    master: bool,
}

/// `masters` shards of a master and one replica; shard `s` owns an even
/// share of the slots, in order.
fn shards(masters: usize) -> Vec<((usize, usize), [Node; 2])> {
    (0..masters)
        .map(|s| {
            let start = s * SLOTS / masters;
            let end = (s + 1) * SLOTS / masters - 1;
            let node = |n: usize, master: bool| Node {
                id: format!("{:040x}", 0x5eed_0000 + 2 * s + n),
                port: 30000 + (2 * s + n) as u16,
                master,
            };
            ((start, end), [node(0, true), node(1, false)])
        })
        .collect()
}

fn bulk(out: &mut String, text: &str) {
    let _ = write!(out, "${}\r\n{text}\r\n", text.len());
}

/// The `CLUSTER SHARDS` reply of a cluster of `masters` masters.
fn shards_reply(masters: usize) -> Vec<u8> {
    let mut out = String::new();
    let shards = shards(masters);
    let _ = write!(out, "*{}\r\n", shards.len());
    for ((start, end), nodes) in &shards {
        let _ = write!(out, "*4\r\n");
        bulk(&mut out, "slots");
        let _ = write!(out, "*2\r\n:{start}\r\n:{end}\r\n");
        bulk(&mut out, "nodes");
        let _ = write!(out, "*{}\r\n", nodes.len());
        for node in nodes {
            let _ = write!(out, "*14\r\n");
            bulk(&mut out, "id");
            bulk(&mut out, &node.id);
            bulk(&mut out, "port");
            let _ = write!(out, ":{}\r\n", node.port);
            bulk(&mut out, "ip");
            bulk(&mut out, "127.0.0.1");
            bulk(&mut out, "endpoint");
            bulk(&mut out, "127.0.0.1");
            bulk(&mut out, "role");
            bulk(&mut out, if node.master { "master" } else { "replica" });
            bulk(&mut out, "replication-offset");
            let _ = write!(out, ":14\r\n");
            bulk(&mut out, "health");
            bulk(&mut out, "online");
        }
    }
    out.into_bytes()
}

/// The `CLUSTER SLOTS` reply of a cluster of `masters` masters.
fn slots_reply(masters: usize) -> Vec<u8> {
    let mut out = String::new();
    let shards = shards(masters);
    let _ = write!(out, "*{}\r\n", shards.len());
    for ((start, end), nodes) in &shards {
        let _ = write!(out, "*{}\r\n:{start}\r\n:{end}\r\n", 2 + nodes.len());
        for node in nodes {
            let _ = write!(out, "*4\r\n");
            bulk(&mut out, "127.0.0.1");
            let _ = write!(out, ":{}\r\n", node.port);
            bulk(&mut out, &node.id);
            let _ = write!(out, "*0\r\n");
        }
    }
    out.into_bytes()
}

/// Decodes and reads `reply` as `CLUSTER SHARDS` (`slots`: as `CLUSTER
/// SLOTS`), checking that it has `masters` masters.
fn read(reply: &[u8], slots: bool, masters: usize) -> Topology {
    let Ok(Decoded::Complete(decoded, used)) = decode_topology(reply) else {
        panic!("the reply does not decode");
    };
    assert_eq!(used, reply.len());
    let topology = if slots {
        Topology::from_slots(&decoded, false)
    } else {
        Topology::from_shards(&decoded)
    }
    .expect("a valid topology");
    assert_eq!(topology.masters().count(), masters);
    topology
}

fn parse(c: &mut Criterion) {
    for (command, slots) in [("CLUSTER SHARDS", false), ("CLUSTER SLOTS", true)] {
        let mut group = c.benchmark_group(format!("refresh: {command} decoded and read"));
        for masters in SIZES {
            let reply = if slots {
                slots_reply(masters)
            } else {
                shards_reply(masters)
            };
            eprintln!(
                "{command} reply of {masters} masters, 1 replica each: {} bytes",
                reply.len()
            );
            group.throughput(Throughput::Bytes(reply.len() as u64));
            group.bench_with_input(BenchmarkId::new("masters", masters), &reply, |b, reply| {
                b.iter(|| read(black_box(reply), slots, masters))
            });
        }
        group.finish();
    }
}

fn install(c: &mut Criterion) {
    let mut group = c.benchmark_group("refresh: slot map rebuilt (SlotMap::install)");
    for masters in SIZES {
        let topology = read(&shards_reply(masters), false, masters);
        let base = Instant::now();
        let map = SlotMap::new(base, Duration::ZERO);
        group.bench_with_input(
            BenchmarkId::new("masters", masters),
            &topology,
            |b, topology| {
                b.iter(|| {
                    map.mark_stale();
                    let ticket = map
                        .begin_refresh(Instant::now())
                        .expect("a refresh is due at once");
                    let mut next = 0u16;
                    map.install(ticket, black_box(topology), |_, _| {
                        next += 1;
                        Some(next - 1)
                    });
                    assert_eq!(map.owner((SLOTS - 1) as u16), Some(masters as u16 - 1));
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, parse, install);
criterion_main!(benches);
