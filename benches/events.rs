//! What an event hook costs (`Builder::events`): acquire+release pairs on
//! 3 local `redis-server`s (started here), one thread, node timeout 50 ms,
//! a fresh name per pair from a rotating set of 1000, with three handles on
//! the same servers in one criterion group:
//!
//! - `none`: no hook (the default);
//! - `no-op`: a hook that implements nothing (every method's default);
//! - `counting`: a hook that counts rounds, successes and each master's
//!   agreement (it reads every master's answer) in atomics.
//!
//! ```sh
//! cargo bench --bench events
//! ```
//!
//! Read the ratios within the group (one run, same servers and load).
//!
//! On a loaded machine, count instructions instead (stable under load):
//! `EVENTS_HOOK=none|no-op|counting` runs 2 000 warm-up pairs, then
//! `EVENTS_PAIRS` (default 10 000) pairs in `measured_pairs` with that
//! handle only, without criterion:
//!
//! ```sh
//! cargo bench --bench events --no-run   # then, for each hook:
//! EVENTS_HOOK=counting valgrind --tool=callgrind --toggle-collect='*measured_pairs*' \
//!     target/release/deps/events-<hash>
//! ```

#[allow(dead_code)]
#[path = "../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../tests/support/resp.rs"]
mod resp;

use criterion::{Criterion, Throughput};
use redlock_sync::{Builder, HandleEvent, MasterAnswer, Redlock, RoundEvent, RoundOutcome};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(10);
const NAMES: usize = 1000;

/// A hook with every method's default: the cost of the calls alone.
struct NoOp;
impl HandleEvent for NoOp {}

/// Counts what an operator would chart.
#[derive(Default)]
struct Counting {
    rounds: AtomicU64,
    succeeded: AtomicU64,
    agreed: AtomicU64,
    nanos: AtomicU64,
}

impl HandleEvent for Counting {
    fn handle_round(&self, event: RoundEvent<'_>) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
        if event.outcome() == RoundOutcome::Succeeded {
            self.succeeded.fetch_add(1, Ordering::Relaxed);
        }
        let agreed = event
            .masters()
            .filter(|(_, a)| *a == MasterAnswer::Agreed)
            .count();
        self.agreed.fetch_add(agreed as u64, Ordering::Relaxed);
        let nanos = u64::try_from(event.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

fn client(urls: &[String], hook: impl FnOnce(Builder) -> Builder) -> Redlock {
    hook(
        Redlock::builder()
            .nodes(urls)
            .node_timeout(Duration::from_millis(50))
            .lock_wait(Duration::ZERO),
    )
    .build()
    .expect("valid configuration")
}

/// `pairs` acquire+release pairs; returns how many failed.
#[inline(never)]
fn measured_pairs(redlock: &Redlock, names: &[Vec<u8>], pairs: usize) -> u64 {
    let mut failed = 0;
    for key in names.iter().cycle().take(pairs) {
        match redlock.try_lock(key, TTL) {
            Ok(Some(lock)) => failed += u64::from(lock.unlock().is_err()),
            _ => failed += 1,
        }
    }
    failed
}

fn main() {
    let cluster = redis::Cluster::start(3);
    let urls = cluster.urls();
    let counting = std::sync::Arc::new(Counting::default());
    let clients = [
        ("none", client(&urls, |b| b)),
        ("no-op", client(&urls, |b| b.events(NoOp))),
        (
            "counting",
            client(&urls, |b| b.events(std::sync::Arc::clone(&counting))),
        ),
    ];
    let names: Vec<Vec<u8>> = (0..NAMES)
        .map(|i| format!("bench:events:{i:04}").into_bytes())
        .collect();
    if let Ok(hook) = std::env::var("EVENTS_HOOK") {
        let (_, redlock) = clients
            .iter()
            .find(|(name, _)| *name == hook)
            .expect("EVENTS_HOOK is none, no-op or counting");
        let pairs = std::env::var("EVENTS_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        measured_pairs(redlock, &names, 2_000);
        let failed = measured_pairs(redlock, &names, pairs);
        println!("{hook}: {pairs} pairs, {failed} failed");
        return;
    }
    let mut failed = 0u64;
    {
        let mut c = Criterion::default().configure_from_args();
        let mut group = c.benchmark_group("hook");
        group.throughput(Throughput::Elements(1));
        for (name, redlock) in &clients {
            let mut next = names.iter().cycle();
            group.bench_function(*name, |b| {
                b.iter(|| {
                    let key = next.next().expect("endless");
                    match redlock.try_lock(key, TTL) {
                        Ok(Some(lock)) => {
                            if lock.unlock().is_err() {
                                failed += 1;
                            }
                        }
                        _ => failed += 1,
                    }
                })
            });
        }
        group.finish();
        c.final_summary();
    }
    println!(
        "failed pairs: {failed}; the counting hook saw {} rounds, {} succeeded",
        counting.rounds.load(Ordering::Relaxed),
        counting.succeeded.load(Ordering::Relaxed)
    );
}
