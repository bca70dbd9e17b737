//! Bounded waiting, where it is easiest to break: a pool with no room, the
//! drop of a handle with many pooled sessions, and rounds for short TTLs.
//! A frozen (SIGSTOPped) master makes every wait as long as it can be.
//! The node timeouts are long (hundreds of milliseconds) so that the bounds
//! below separate one node timeout from two on any machine.

mod support;

use redlock_sync::Redlock;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use support::Cluster;

const NODE_TIMEOUT: Duration = Duration::from_millis(600);
const TTL: Duration = Duration::from_secs(30);

fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let started = Instant::now();
    let result = f();
    (result, started.elapsed())
}

#[test]
fn a_call_never_waits_past_its_deadline_when_the_pool_is_full() {
    // No idle session is kept: every session is given back over the limit,
    // owing the frozen master's reply.
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .max_idle_connections(0)
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let frozen = cluster.servers[2].pause();

    // Masters 0 and 1 are a quorum: the frozen one costs nothing (a call
    // that waited for it would take the node timeout at least; a busy
    // machine may take a good part of it without).
    let (lock, took) = timed(|| redlock.try_lock("a", TTL));
    let lock = lock.unwrap().expect("granted by 0 and 1");
    assert!(took < NODE_TIMEOUT, "try_lock took {took:?}");
    let (released, took) = timed(|| lock.unlock());
    released.expect("released by 0 and 1");
    assert!(took < NODE_TIMEOUT, "unlock took {took:?}");

    // Held on master 0 by someone else: the quorum needs the frozen master,
    // so the round runs to its deadline, and no longer.
    cluster.servers[0].cmd(&["SET", "b", "someone-else", "PX", "60000"]);
    let (attempt, took) = timed(|| redlock.try_lock("b", TTL));
    assert!(attempt.is_err() || attempt.as_ref().unwrap().is_none());
    assert!(
        took < NODE_TIMEOUT + NODE_TIMEOUT / 2,
        "a failed try_lock took {took:?}"
    );
    drop(frozen);
}

#[test]
fn dropping_the_last_handle_waits_one_node_timeout_in_all() {
    // Four threads lock at once, so four sessions exist; each leaves the
    // frozen master's replies owed. Dropping the handle settles them
    // together: one node timeout, not four.
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let frozen = cluster.servers[2].pause();
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    thread::scope(|s| {
        for t in 0..threads {
            let (redlock, barrier) = (redlock.clone(), Arc::clone(&barrier));
            s.spawn(move || {
                barrier.wait();
                let lock = redlock.lock(format!("t{t}"), TTL).expect("acquired");
                // Hold on until every thread has its own session.
                barrier.wait();
                lock.unlock().expect("released");
            });
        }
    });
    let ((), took) = timed(|| drop(redlock));
    assert!(
        took < NODE_TIMEOUT + NODE_TIMEOUT / 2,
        "dropping the handle took {took:?}"
    );
    drop(frozen);
}

#[test]
fn a_short_ttl_bounds_the_round_below_the_node_timeout() {
    // A 40 ms TTL leaves about 37 ms of validity: a round that needs the
    // frozen master ends then, not at the 600 ms node timeout.
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    cluster.servers[0].cmd(&["SET", "short", "someone-else", "PX", "60000"]);
    let frozen = cluster.servers[2].pause();
    let (attempt, took) = timed(|| redlock.try_lock("short", Duration::from_millis(40)));
    match attempt {
        Ok(None) => {}
        Err(e) => assert!(e.is_no_quorum() || e.is_too_slow(), "{e}"),
        Ok(Some(_)) => panic!("granted without the frozen master"),
    }
    // Far less than the node timeout, which a round that waited for the
    // frozen master would take.
    assert!(took < NODE_TIMEOUT, "took {took:?}");
    drop(frozen);
}
