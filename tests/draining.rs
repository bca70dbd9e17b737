//! A session given back over the pool's limit (`max_idle_connections`)
//! while it still owes a lagging master replies is kept aside (draining).
//! It must stay open until that master catches up or passes the lag limit:
//! a server reads a connection's commands in parts, and one closed under
//! it can run a lock's `SET` and drop the release queued behind it.

mod support;

use redlock_sync::Redlock;
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, OwnedReply};

const NODE_TIMEOUT: Duration = Duration::from_millis(300);
const TTL: Duration = Duration::from_secs(120);

/// One master of three is frozen while a lock is taken, extended 300 times
/// (tens of kilobytes queued on that master's connection behind the
/// lock's `SET`) and released, all on one session. The session goes back
/// over the pool's limit owing those replies; once they are overdue, one
/// more lock is taken on it (the frozen master, lagging, is not sent its
/// `SET`) and given back. Before the fix the pool closed the session
/// then, its replies being overdue, and the thawed server ran the `SET`
/// but never read the release: the key stayed for its whole TTL. Checked
/// here: once the master is thawed, no key is left on it.
#[test]
fn a_session_owing_a_lagging_master_stays_open_until_its_release_has_run() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .max_idle_connections(0)
        .max_extensions(1000)
        .build()
        .unwrap();
    let warm = redlock.try_lock("drain:warm", TTL).unwrap().unwrap();
    warm.unlock().unwrap();

    let frozen = cluster.servers[2].pause();
    let mut lock = redlock.try_lock("drain:first", TTL).unwrap().unwrap();
    for _ in 0..300 {
        lock.extend(TTL).unwrap();
    }
    lock.unlock().unwrap();
    // Every reply the session owes the frozen master is overdue.
    thread::sleep(NODE_TIMEOUT * 2);
    let last = redlock.try_lock("drain:last", TTL).unwrap().unwrap();
    drop(frozen);
    last.unlock().unwrap();

    let end = Instant::now() + Duration::from_secs(10);
    let left = loop {
        let left = keys(&cluster, 2);
        if left.is_empty() || Instant::now() >= end {
            break left;
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert!(
        left.is_empty(),
        "keys left on the master that was frozen (TTL {TTL:?}): {left:?}"
    );
}

/// The keys on server `i`.
fn keys(cluster: &Cluster, i: usize) -> Vec<String> {
    match cluster.servers[i].cmd(&["KEYS", "*"]) {
        OwnedReply::Array(keys) => keys
            .into_iter()
            .filter_map(|key| match key {
                OwnedReply::Bulk(key) => Some(String::from_utf8_lossy(&key).into_owned()),
                _ => None,
            })
            .collect(),
        other => panic!("KEYS: {other:?}"),
    }
}
