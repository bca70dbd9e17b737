//! The crate's entry points on cluster voters mixed with a standalone
//! master (issue 32: "everything the crate does today works on cluster
//! voters"), and what one frozen node of a cluster costs a round, on real
//! Redis/Valkey Clusters (whichever `REDLOCK_TEST_SERVER` names).

mod support;

use redlock_sync::{KeyOnMaster, KeyState, Redlock};
use std::thread;
use std::time::{Duration, Instant};
use support::{shared_clusters, unique_prefix, RedisCluster, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// Waits up to a generous bound for `condition`: a call returns at a
/// quorum, and the last voter's answer may come a moment later.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 10 s: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// A handle over two shared clusters and `master`: three voters.
fn mixed(master: &RedisServer) -> Redlock {
    let clusters = shared_clusters(2);
    Redlock::builder()
        .node_timeout(Duration::from_secs(1))
        .cluster(clusters[0].seeds())
        .cluster(clusters[1].seeds())
        .nodes([master.url()])
        .build()
        .expect("a valid configuration")
}

/// Whether `resource`'s key is on its slot's owner in `cluster`.
fn on_owner(cluster: &RedisCluster, resource: &str) -> bool {
    let owner = cluster.node(cluster.master_of_key(resource.as_bytes()));
    owner.pttl(resource.as_bytes()) > 0
}

/// `ping`, `try_lock`, `inspect`, `extend`, `unlock` and `health` on two
/// cluster voters and a standalone master: each answers for all three
/// voters, and the key is where each voter keeps it (the slot's owner on
/// the clusters).
#[test]
fn ping_lock_inspect_extend_unlock_and_health_answer_for_every_voter() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = mixed(&master);
    assert_eq!((redlock.node_count(), redlock.quorum()), (3, 2));

    let report = redlock.ping().expect("every voter answers a ping");
    assert_eq!(report.iter().count(), 3, "{report:?}");

    let resource = unique_prefix("calls") + "entry";
    let mut lock = redlock
        .try_lock(&resource, TTL)
        .expect("no error")
        .expect("free");
    assert!(
        lock.masters()
            .filter(|(_, state)| *state == KeyState::Held)
            .count()
            >= 2
    );
    eventually("the key on both clusters' owners and the master", || {
        clusters.iter().all(|c| on_owner(c, &resource)) && master.pttl(resource.as_bytes()) > 0
    });

    let seen = redlock.inspect(&resource).expect("inspected");
    assert!(seen.is_held(), "{seen}");
    assert_eq!(seen.held_on(), 3, "{seen}");
    assert!(seen
        .masters()
        .all(|(_, key)| matches!(key, KeyOnMaster::Held { .. })));

    lock.extend(TTL).expect("extended on a quorum");
    assert!(lock.validity() > TTL / 2);

    lock.unlock().expect("released");
    eventually("the key gone from every voter", || {
        clusters.iter().all(|c| !on_owner(c, &resource)) && master.pttl(resource.as_bytes()) == -2
    });
    let seen = redlock.inspect(&resource).expect("inspected");
    assert!(seen.is_free() && seen.absent_on() == 3, "{seen}");

    let health = redlock.health();
    assert_eq!(health.len(), 3);
    for node in &health {
        assert_eq!(node.consecutive_failures(), 0, "{node:?}");
        assert!(node.last_answer().is_some(), "{node:?}");
    }
}

/// A lease on cluster voters is renewed: held for three TTLs, it is still
/// valid, and its key is still on every voter.
#[test]
fn a_lease_on_cluster_voters_outlives_its_ttl() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = mixed(&master);
    let resource = unique_prefix("calls") + "lease";
    let ttl = Duration::from_secs(2);
    let lease = redlock
        .try_lock(&resource, ttl)
        .expect("no error")
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("a lease");
    let start = Instant::now();
    while start.elapsed() < 3 * ttl {
        thread::sleep(Duration::from_millis(100));
    }
    let left = lease.check().expect("renewed past three TTLs");
    assert!(left > Duration::ZERO);
    assert!(clusters.iter().any(|c| on_owner(c, &resource)));
    lease.unlock().expect("released");
}

/// A holder label on cluster voters and a master: every voter's key
/// carries it (the `GETRANGE` goes to the slot's owner, as the `PTTL`),
/// another handle's inspection shows it, and the lease's renewals (which
/// compare the whole value) keep the lock past its TTL.
#[test]
fn a_holder_label_on_cluster_voters_is_seen_and_its_lease_renews() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let labelled = Redlock::builder()
        .node_timeout(Duration::from_secs(1))
        .cluster(clusters[0].seeds())
        .cluster(clusters[1].seeds())
        .nodes([master.url()])
        .holder_label("batch-host-2")
        .build()
        .expect("a valid configuration");
    let resource = unique_prefix("calls") + "labelled";
    let ttl = Duration::from_secs(2);
    let lease = labelled
        .try_lock(&resource, ttl)
        .expect("no error")
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("a lease");
    eventually("the key on both clusters' owners and the master", || {
        clusters.iter().all(|c| on_owner(c, &resource)) && master.pttl(resource.as_bytes()) > 0
    });
    let start = Instant::now();
    while start.elapsed() < 2 * ttl {
        thread::sleep(Duration::from_millis(100));
    }
    lease.check().expect("renewed past two TTLs");
    let seen = mixed(&master).inspect(&resource).expect("inspected");
    assert_eq!(seen.held_on(), 3, "{seen}");
    assert_eq!(seen.holder_label(), Some("batch-host-2"), "{seen}");
    assert!(seen
        .holder_labels()
        .all(|(_, label)| label == Some("batch-host-2")));
    lease.unlock().expect("released");
}

/// A waiter on cluster voters and a master gets the lock once its holder
/// (another handle) releases it.
#[test]
fn a_waiter_on_cluster_voters_gets_the_lock_its_holder_released() {
    let master = RedisServer::start();
    let holder = mixed(&master);
    let resource = unique_prefix("calls") + "wait";
    let held = holder
        .try_lock(&resource, TTL)
        .expect("no error")
        .expect("free");
    let waiter = thread::spawn({
        let redlock = mixed(&master);
        let resource = resource.clone();
        move || {
            redlock
                .try_lock_for(&resource, TTL, Duration::from_secs(30))
                .expect("no error")
                .map(|lock| lock.unlock())
        }
    });
    thread::sleep(Duration::from_millis(200));
    held.unlock().expect("released");
    let got = waiter.join().expect("the waiter's thread");
    got.expect("the waiter got the lock within its wait")
        .expect("and released it");
}

/// One frozen node of a cluster voter costs a round what a frozen
/// standalone master costs: nothing while the other voters make the
/// quorum. The node that owns the key's slot in one cluster is paused;
/// acquisition and release return at the others' answers, well before the
/// node timeout (5 s here), and the frozen voter is counted as no holder.
#[test]
fn a_frozen_node_of_a_cluster_voter_does_not_hold_up_the_round() {
    let fresh = RedisCluster::start(3, 0);
    let shared = shared_clusters(2);
    let node_timeout = Duration::from_secs(5);
    let redlock = Redlock::builder()
        .node_timeout(node_timeout)
        .release_notices(false)
        .cluster(fresh.seeds())
        .cluster(shared[0].seeds())
        .cluster(shared[1].seeds())
        .build()
        .expect("a valid configuration");
    let prefix = unique_prefix("frozen");
    // Learn the three slot maps before the pause.
    let warm = redlock
        .try_lock(prefix.clone() + "warm", TTL)
        .expect("no error")
        .expect("free");
    warm.unlock().expect("released");
    eventually("the warm-up key released everywhere", || {
        !on_owner(&fresh, &(prefix.clone() + "warm"))
    });

    let resource = prefix + "held";
    let owner = fresh.master_of_key(resource.as_bytes());
    // The pause is shorter than the cluster's own node timeout, so the
    // cluster does not fail the node over meanwhile.
    let paused = fresh.pause_node(owner);
    let start = Instant::now();
    let lock = redlock
        .try_lock(&resource, TTL)
        .expect("no error")
        .expect("free on the two answering voters");
    let acquired_in = start.elapsed();
    let states: Vec<KeyState> = lock.masters().map(|(_, state)| state).collect();
    assert_ne!(states[0], KeyState::Held, "the frozen voter: {states:?}");
    assert!(
        states[1..].iter().all(|s| *s == KeyState::Held),
        "{states:?}"
    );
    let start = Instant::now();
    lock.unlock().expect("released by the two answering voters");
    let released_in = start.elapsed();
    drop(paused);
    assert!(
        acquired_in < node_timeout / 2 && released_in < node_timeout / 2,
        "acquired in {acquired_in:?}, released in {released_in:?}: the round waited for the \
         frozen node"
    );
}
