//! The cost of fencing (issue 24, docs/fencing.md "Cost"): uncontended
//! acquisition + release against 3 real local `redis-server`s (started
//! here), with fencing and without, in the same run, on the same servers.
//! One "pair" is `try_lock` (with fencing: `acquire.lua`, one round when
//! the masters agree, which they do uncontended) and `unlock`; every pair
//! uses a fresh name from a rotating set of 1000; node timeout 50 ms.
//!
//! - `fencing-pair/N=3`: criterion, `plain` and `fenced` side by side, and
//!   `fenced-set-2`: a fenced set of two fresh names (`try_lock_many`:
//!   `acquire_set.lua`, one count for both) and its `unlock`.
//! - then, outside criterion, the latency percentiles of each: blocks of
//!   1000 pairs alternating between the two handles (so that the machine's
//!   load hits both alike), 20 000 pairs each, and the ratio of the p50s
//!   (the target: at most 1.2).
//!
//! `cargo bench --bench fencing -- percentiles` runs only the second part.

#[allow(dead_code)]
#[path = "../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../tests/support/resp.rs"]
mod resp;

use criterion::{Criterion, Throughput};
use redlock_sync::Redlock;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(10);
const NAMES: usize = 1000;
const BLOCK: usize = 1000;
const PAIRS: usize = 20_000;

fn client(urls: &[String], fencing: bool) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(50))
        .lock_wait(Duration::ZERO)
        .fencing(fencing)
        .build()
        .expect("valid configuration")
}

/// One pair; a failure (a stall of the whole machine past the node
/// timeout) is counted and its time kept.
fn pair(redlock: &Redlock, name: &[u8], failed: &mut u64) {
    match redlock.try_lock(name, TTL) {
        Ok(Some(lock)) => {
            if lock.unlock().is_err() {
                *failed += 1;
            }
        }
        _ => *failed += 1,
    }
}

/// One fenced set of two and its release, as [`pair`].
fn set_pair(redlock: &Redlock, names: [&[u8]; 2], failed: &mut u64) {
    match redlock.try_lock_many(names, TTL) {
        Ok(Some(set)) => {
            if set.unlock().is_err() {
                *failed += 1;
            }
        }
        _ => *failed += 1,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn percentiles(plain: &Redlock, fenced: &Redlock, names: &[Vec<u8>]) {
    let mut samples = [Vec::with_capacity(PAIRS), Vec::with_capacity(PAIRS)];
    let mut failed = [0, 0];
    let mut next = 0;
    for block in 0..(2 * PAIRS / BLOCK) {
        let which = block % 2;
        let redlock = if which == 0 { plain } else { fenced };
        for _ in 0..BLOCK {
            next = (next + 1) % names.len();
            let started = Instant::now();
            pair(redlock, &names[next], &mut failed[which]);
            samples[which].push(started.elapsed());
        }
    }
    let mut p50 = [Duration::ZERO; 2];
    for (which, label) in ["plain", "fenced"].iter().enumerate() {
        let sorted = &mut samples[which];
        sorted.sort();
        p50[which] = percentile(sorted, 0.5);
        println!(
            "{label:>6}: p50 {:?}  p90 {:?}  p99 {:?}  ({} pairs, {} failed)",
            p50[which],
            percentile(sorted, 0.9),
            percentile(sorted, 0.99),
            sorted.len(),
            failed[which]
        );
    }
    println!(
        "p50 fenced / plain: {:.3}",
        p50[1].as_secs_f64() / p50[0].as_secs_f64()
    );
}

fn main() {
    let cluster = redis::Cluster::start(3);
    let urls = cluster.urls();
    let plain = client(&urls, false);
    let fenced = client(&urls, true);
    fenced.fence_init(0).expect("fence_init on fresh servers");
    let names: Vec<Vec<u8>> = (0..NAMES)
        .map(|i| format!("bench:fence:{i:04}").into_bytes())
        .collect();
    let only_percentiles = std::env::args().any(|a| a == "percentiles");
    if !only_percentiles {
        let mut c = Criterion::default().configure_from_args();
        let mut group = c.benchmark_group("fencing-pair/N=3");
        group.throughput(Throughput::Elements(1));
        for (label, redlock) in [("plain", &plain), ("fenced", &fenced)] {
            let mut next = 0;
            let mut failed = 0;
            group.bench_function(label, |b| {
                b.iter(|| {
                    next = (next + 1) % NAMES;
                    pair(redlock, &names[next], &mut failed);
                })
            });
            println!("{label}: {failed} failed pairs");
        }
        let (mut next, mut failed) = (0, 0);
        group.bench_function("fenced-set-2", |b| {
            b.iter(|| {
                next = (next + 2) % NAMES;
                set_pair(&fenced, [&names[next], &names[next + 1]], &mut failed);
            })
        });
        println!("fenced-set-2: {failed} failed sets");
        group.finish();
        c.final_summary();
    }
    percentiles(&plain, &fenced, &names);
}
