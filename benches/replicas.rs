//! The cost of the replica guard (`Builder::replica_ack`, issue 34):
//! uncontended acquisitions against 3 real local masters, each with one
//! replica (`tests/support/replication.rs`, started here), with the guard
//! (`replica_ack(1, 50 ms)`: `WAIT 1 50` behind each `SET`) and without,
//! in the same run, on the same masters. Only the acquisition is timed
//! (`try_lock` until it returns); the release follows outside the timing.
//! Every acquisition uses a fresh name from a rotating set of 1000; node
//! timeout 100 ms.
//!
//! - `replica-guard-acquire/N=3`: criterion, `plain` and `guarded` side by
//!   side (`iter_custom`: the time of the acquisitions alone).
//! - then, outside criterion, the latency percentiles of each: blocks of
//!   1000 acquisitions alternating between the two handles (so that the
//!   machine's load hits both alike), 10 000 each, and the ratio of the
//!   p50s.
//!
//! `cargo bench --bench replicas -- percentiles` runs only the second part.

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{Criterion, Throughput};
use redlock_sync::Redlock;
use std::time::{Duration, Instant};
use support::{OwnedReply, Replicated};

const TTL: Duration = Duration::from_secs(10);
const NAMES: usize = 1000;
const BLOCK: usize = 1000;
const ACQUISITIONS: usize = 10_000;
const GUARD_TIMEOUT: Duration = Duration::from_millis(50);

fn client(urls: &[String], guard: bool) -> Redlock {
    let builder = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(100))
        .lock_wait(Duration::ZERO);
    let builder = if guard {
        builder.replica_ack(1, GUARD_TIMEOUT)
    } else {
        builder
    };
    builder.build().expect("valid configuration")
}

/// One acquisition, timed, then its release (not timed). A failure (a
/// stall of the machine past the node timeout or the guard's) is
/// counted and its time kept.
fn acquire(redlock: &Redlock, name: &[u8], failed: &mut u64) -> Duration {
    let started = Instant::now();
    let taken = redlock.try_lock(name, TTL);
    let took = started.elapsed();
    match taken {
        Ok(Some(lock)) => {
            if lock.unlock().is_err() {
                *failed += 1;
            }
        }
        _ => *failed += 1,
    }
    took
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn percentiles(handles: [&Redlock; 2], names: &[Vec<u8>]) {
    let mut samples = [
        Vec::with_capacity(ACQUISITIONS),
        Vec::with_capacity(ACQUISITIONS),
    ];
    let mut failed = [0, 0];
    let mut next = 0;
    for block in 0..(2 * ACQUISITIONS / BLOCK) {
        let which = block % 2;
        for _ in 0..BLOCK {
            next = (next + 1) % names.len();
            let took = acquire(handles[which], &names[next], &mut failed[which]);
            samples[which].push(took);
        }
    }
    let mut p50 = [Duration::ZERO; 2];
    for (which, label) in ["plain", "guarded"].iter().enumerate() {
        let sorted = &mut samples[which];
        sorted.sort();
        p50[which] = percentile(sorted, 0.5);
        println!(
            "{label:>7}: acquisition p50 {:?}  p90 {:?}  p99 {:?}  ({} acquisitions, {} failed)",
            p50[which],
            percentile(sorted, 0.9),
            percentile(sorted, 0.99),
            sorted.len(),
            failed[which]
        );
    }
    println!(
        "acquisition p50 guarded / plain: {:.3}",
        p50[1].as_secs_f64() / p50[0].as_secs_f64()
    );
}

fn main() {
    let sets: Vec<Replicated> = (0..3).map(|_| Replicated::start(1)).collect();
    for set in &sets {
        // Each master has counted its replica once (see tests/replica_guard.rs).
        assert_eq!(
            set.node(0).cmd(&["WAIT", "1", "10000"]),
            OwnedReply::Integer(1)
        );
    }
    let urls: Vec<String> = sets.iter().map(|s| s.url(0)).collect();
    let plain = client(&urls, false);
    let guarded = client(&urls, true);
    let names: Vec<Vec<u8>> = (0..NAMES)
        .map(|i| format!("bench:guard:{i:04}").into_bytes())
        .collect();
    let only_percentiles = std::env::args().any(|a| a == "percentiles");
    if !only_percentiles {
        let mut c = Criterion::default().configure_from_args();
        let mut group = c.benchmark_group("replica-guard-acquire/N=3");
        group.throughput(Throughput::Elements(1));
        for (label, redlock) in [("plain", &plain), ("guarded", &guarded)] {
            let mut next = 0;
            let mut failed = 0;
            group.bench_function(label, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        next = (next + 1) % NAMES;
                        total += acquire(redlock, &names[next], &mut failed);
                    }
                    total
                })
            });
            println!("{label}: {failed} failed acquisitions");
        }
        group.finish();
        c.final_summary();
    }
    percentiles([&plain, &guarded], &names);
}
