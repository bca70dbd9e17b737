//! Several resources at once (issue 36): a set of K resources taken and
//! released as one lock (`try_lock_many`, then `unlock`) next to the same K
//! resources taken as K single-resource locks in sorted order (`try_lock`
//! each, then `unlock` each), and one single-resource lock, the baseline
//! the issue's goal is stated against ("a set of K costs at most 1.2x one
//! lock up to K = 8"). K = 2, 8, 64, on 3 local `redis-server`s started
//! here (the integration tests' spawner), one thread, node timeout 50 ms.
//!
//! Each iteration takes fresh names from a rotating stock (a name comes
//! back after 500 iterations, long after its release ran). Every pair is
//! checked inside the timed code; failures are counted and printed at the
//! end (a stall of a shared machine can outlast the node timeout).
//!
//! Read the ratios within one group (one run, same servers, same load):
//! `set / one-lock` and `set / singles-sorted`. Absolute figures move with
//! the machine's load; the ratios much less.

#[allow(dead_code)]
#[path = "../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../tests/support/resp.rs"]
mod resp;

use criterion::{Criterion, Throughput};
use redlock_sync::{Lock, Redlock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(10);
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
const MASTERS: usize = 3;
/// Iterations before a name comes back.
const ROTATION: usize = 500;

static FAILED: AtomicU64 = AtomicU64::new(0);

fn failed(what: &str) {
    if FAILED.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("first failed pair: {what}");
    }
}

/// `ROTATION` groups of `k` sorted names each, handed out in turn.
struct Stock {
    groups: Vec<Vec<Vec<u8>>>,
    next: usize,
}

impl Stock {
    fn new(tag: &str, k: usize) -> Stock {
        let groups = (0..ROTATION)
            .map(|i| {
                let mut group: Vec<Vec<u8>> = (0..k)
                    .map(|j| format!("bench:many:{tag}:{k}:{i:03}:{j:02}").into_bytes())
                    .collect();
                group.sort();
                group
            })
            .collect();
        Stock { groups, next: 0 }
    }

    fn next(&mut self) -> &[Vec<u8>] {
        self.next = (self.next + 1) % self.groups.len();
        &self.groups[self.next]
    }
}

fn client(urls: &[String]) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration")
}

/// One set: acquired in one round, released in one.
fn set_pair(redlock: &Redlock, names: &[Vec<u8>]) {
    match redlock.try_lock_many(names, TTL) {
        Ok(Some(set)) => {
            if let Err(e) = set.unlock() {
                failed(&format!("set unlock: {e}"));
            }
        }
        Ok(None) => failed("set held"),
        Err(e) => failed(&format!("try_lock_many: {e}")),
    }
}

/// K single locks taken in sorted order (the deadlock-free way to hold K
/// resources with single locks), then released; a failed acquisition
/// releases what was taken.
fn singles_pair(redlock: &Redlock, names: &[Vec<u8>], held: &mut Vec<Lock>) {
    for name in names {
        match redlock.try_lock(name, TTL) {
            Ok(Some(lock)) => held.push(lock),
            Ok(None) => {
                failed("single held");
                break;
            }
            Err(e) => {
                failed(&format!("try_lock: {e}"));
                break;
            }
        }
    }
    for lock in held.drain(..) {
        if let Err(e) = lock.unlock() {
            failed(&format!("unlock: {e}"));
        }
    }
}

fn main() {
    let cluster = redis::Cluster::start(MASTERS);
    let urls = cluster.urls();
    let redlock = client(&urls);
    let mut c = Criterion::default().configure_from_args();
    for k in [2usize, 8, 64] {
        let mut group = c.benchmark_group(format!("many/K={k}/N={MASTERS}"));
        group
            .throughput(Throughput::Elements(1))
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .sample_size(20);
        let mut stock = Stock::new("one", 1);
        let mut held = Vec::with_capacity(1);
        group.bench_function("one-lock", |b| {
            b.iter(|| singles_pair(&redlock, stock.next(), &mut held))
        });
        let mut stock = Stock::new("set", k);
        group.bench_function("set", |b| b.iter(|| set_pair(&redlock, stock.next())));
        let mut stock = Stock::new("singles", k);
        let mut held = Vec::with_capacity(k);
        group.bench_function("singles-sorted", |b| {
            b.iter(|| singles_pair(&redlock, stock.next(), &mut held))
        });
        group.finish();
    }
    c.final_summary();
    println!("failed pairs: {}", FAILED.load(Ordering::Relaxed));
}
