//! Cluster voters on real Redis/Valkey Clusters (whichever
//! `REDLOCK_TEST_SERVER` names): slot routing within the round, redirects,
//! migrations, failovers, and mutual exclusion over voters that are whole
//! clusters.

mod support;

use redlock_sync::{KeyState, Redlock};
use std::time::{Duration, Instant};
use support::{key_slot, shared_clusters, unique_prefix};

const TTL: Duration = Duration::from_secs(10);

/// A handle whose voters are the given clusters.
fn handle_of(clusters: &[support::RedisCluster]) -> Redlock {
    let mut builder = Redlock::builder()
        .node_timeout(Duration::from_secs(1))
        .release_notices(false);
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    builder.build().expect("a valid configuration")
}

#[test]
fn keys_in_every_master_of_three_clusters_lock_and_unlock() {
    let clusters = shared_clusters(3);
    let redlock = handle_of(clusters);
    assert_eq!(redlock.quorum(), 2);
    let prefix = unique_prefix("route");
    let mut slots_seen = std::collections::HashSet::new();
    for n in 0..64 {
        let resource = format!("{prefix}{n}");
        slots_seen.insert(clusters[0].master_of_key(resource.as_bytes()));
        let lock = redlock
            .try_lock(&resource, TTL)
            .expect("no error")
            .unwrap_or_else(|| panic!("{resource} is free"));
        // Where a cluster confirmed the key, it is on the master that
        // owns its slot (the round returns at a quorum: the last cluster
        // may still be answering).
        let held: Vec<bool> = lock
            .masters()
            .map(|(_, state)| state == KeyState::Held)
            .collect();
        assert!(held.iter().filter(|&&h| h).count() >= 2);
        for (cluster, _) in clusters.iter().zip(&held).filter(|(_, &h)| h) {
            assert!(
                exists_on_owner(cluster, &resource),
                "{resource} (slot {}) on its owner",
                key_slot(resource.as_bytes())
            );
        }
        lock.unlock().expect("released");
        // Every cluster is sent the release; the call returns at a quorum.
        let deadline = Instant::now() + Duration::from_secs(10);
        while clusters.iter().any(|c| exists_on_owner(c, &resource)) {
            assert!(Instant::now() < deadline, "{resource} left on a cluster");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(slots_seen.len(), 3, "the keys covered every master");
}

/// Whether `resource` exists on the master of `cluster` that owns its slot.
fn exists_on_owner(cluster: &support::RedisCluster, resource: &str) -> bool {
    let master = cluster.master_of_key(resource.as_bytes());
    match cluster
        .node(master)
        .command(&[b"EXISTS", resource.as_bytes()])
    {
        Ok(support::OwnedReply::Integer(n)) => n == 1,
        other => panic!("EXISTS {resource}: {other:?}"),
    }
}
