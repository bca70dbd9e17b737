//! What a connection keeps for a master that stopped answering: the
//! arguments of the script calls it still owes replies for (to re-send
//! them by body after a `NOSCRIPT`) are bounded in bytes, not only in
//! calls. Sets of large names against 3 real masters, one of them frozen
//! (SIGSTOP: the kernel takes the writes, nothing is answered).
//!
//! A binary of its own: the counting allocator's live bytes are the whole
//! process's, so no other test may run beside this one.

mod support;

use redlock_sync::Redlock;
use std::thread;
use std::time::{Duration, Instant};
use support::alloc::{live_bytes, CountingAllocator};
use support::Cluster;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Names per set, and bytes per name: a set near the largest allowed
/// (`MAX_SET_LEN` names, `MAX_SET_BYTES` of them).
const NAMES: usize = 1000;
const NAME_LEN: usize = 250;

/// Sets taken while the master is frozen, and extensions of each.
const SETS: usize = 30;
const EXTENSIONS: usize = 6;

/// The most the process may hold, above what it held before the master
/// froze, after all those rounds: 96 MiB. The frozen connection keeps at
/// most 16 MiB of arguments (`conn::kept`'s bound for releases; 4 MiB for
/// the rest), in a buffer whose capacity may be twice that, and its output
/// buffer holds the same calls' unsent bytes once the kernel's socket
/// buffer is full, again up to twice over: 64 MiB at the very worst. The
/// two healthy connections keep next to nothing. Without the bound the
/// frozen connection keeps every extension's arguments: the run measured
/// +163 MiB; with it, +8 MiB.
const BOUND: i64 = 96 << 20;

fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 30 s: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Set `i`'s names: `NAMES` names of `NAME_LEN` bytes, its own.
fn set_names(i: usize) -> Vec<String> {
    (0..NAMES)
        .map(|k| format!("{i:03}:{k:04}:{}", "n".repeat(NAME_LEN - 9)))
        .collect()
}

/// Sets of 1000 names of 250 bytes are taken, extended 6 times and
/// released 30 times over while one of 3 masters is frozen: every set is
/// granted by the other two, the process's live bytes stay within
/// `BOUND` of what they were before (the extensions go to the frozen
/// master too, and are most of what its connection would keep without
/// the bound), and once the master resumes (and later calls flush what
/// its socket could not take) every key on every master is gone.
#[test]
fn a_frozen_master_keeps_a_bounded_number_of_bytes_for_large_sets() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    // Warm: every connection open, its buffers grown to a set's calls.
    let warm = set_names(999);
    let set = redlock
        .try_lock_many(&warm, Duration::from_secs(30))
        .expect("no error")
        .expect("all free");
    set.unlock().expect("released");
    eventually("warm-up released", || cluster.total_keys() == 0);
    let names: Vec<Vec<String>> = (0..SETS).map(set_names).collect();
    let before = live_bytes();
    let frozen = cluster.servers[2].pause();
    let started = Instant::now();
    let mut peak = 0;
    for (i, names) in names.iter().enumerate() {
        let mut set = redlock
            .try_lock_many(names, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("set {i}: {e}"))
            .unwrap_or_else(|| panic!("set {i}: not granted"));
        for _ in 0..EXTENSIONS {
            set.extend(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("set {i}: extension: {e}"));
        }
        set.unlock()
            .unwrap_or_else(|e| panic!("set {i}: release: {e}"));
        peak = peak.max(live_bytes() - before);
    }
    let took = started.elapsed();
    let grown = live_bytes() - before;
    eprintln!(
        "{SETS} sets of {NAMES} names of {NAME_LEN} bytes, {EXTENSIONS} extensions each, one \
         master frozen, in {took:?}: live bytes {:+.1} MiB at the end, {:+.1} MiB at most \
         (bound {} MiB)",
        grown as f64 / (1 << 20) as f64,
        peak as f64 / (1 << 20) as f64,
        BOUND >> 20
    );
    // Within the lag limit (30 s): the frozen master's connection is still
    // the one that keeps the calls, not closed and opened again.
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(
        peak < BOUND,
        "live bytes grew by {peak} while the master was frozen (bound {BOUND})"
    );
    drop(frozen);
    // The client writes only within its calls: what the frozen master's
    // socket could not take stays in the connection's output buffer until
    // a later call on it flushes it. A health check each time round is
    // that call; then the master runs every release behind its SETs.
    let limit = Instant::now() + Duration::from_secs(30);
    while cluster.total_keys() != 0 {
        assert!(
            Instant::now() < limit,
            "keys left 30 s after the master resumed: {:?}",
            cluster
                .servers
                .iter()
                .map(|s| s.dbsize())
                .collect::<Vec<_>>()
        );
        let _ = redlock.ping();
        thread::sleep(Duration::from_millis(20));
    }
}
