//! Cluster voters on real Redis/Valkey Clusters (whichever
//! `REDLOCK_TEST_SERVER` names): slot routing within the round, redirects,
//! migrations, failovers, and mutual exclusion over voters that are whole
//! clusters.

mod support;

use redlock_sync::{KeyState, Redlock};
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// `INFO errorstats`' count of `code` errors a node has answered.
fn errors_answered(cluster: &support::RedisCluster, node: usize, code: &str) -> u64 {
    let info = match cluster.node(node).command(&[b"INFO", b"errorstats"]) {
        Ok(support::OwnedReply::Bulk(text)) => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("INFO errorstats: {other:?}"),
    };
    let field = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|line| line.strip_prefix(&field))
        .and_then(|n| n.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

#[test]
fn a_slot_moved_since_the_map_was_learnt_costs_one_moved_within_the_round() {
    let cluster = support::RedisCluster::start(3, 0);
    // The cluster is the only voter: a call succeeds only if its command
    // reached the key's new owner within the round.
    let redlock = handle_of(std::slice::from_ref(&cluster));
    let resource = unique_prefix("stale") + "key";
    redlock
        .try_lock(&resource, TTL)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let slot = key_slot(resource.as_bytes());
    let old_owner = cluster.master_of_slot(slot);
    let new_owner = cluster.other_master(old_owner);
    cluster.move_slot(slot, new_owner);
    let moved_before = errors_answered(&cluster, old_owner, "MOVED");
    let lock = redlock
        .try_lock(&resource, TTL)
        .expect("no error")
        .expect("granted in the round that met MOVED");
    assert!(exists_on_owner(&cluster, &resource));
    assert_eq!(cluster.master_of_key(resource.as_bytes()), new_owner);
    assert_eq!(
        errors_answered(&cluster, old_owner, "MOVED") - moved_before,
        1,
        "one MOVED for the stale entry"
    );
    lock.unlock().expect("released on the new owner");
    assert!(!exists_on_owner(&cluster, &resource));
    // The map learnt the move: the next pair meets no MOVED.
    redlock
        .try_lock(&resource, TTL)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(
        errors_answered(&cluster, old_owner, "MOVED") - moved_before,
        1
    );
}

#[test]
fn a_slot_being_migrated_is_locked_where_its_key_lives_and_never_twice() {
    let cluster = support::RedisCluster::start(3, 0);
    let redlock = handle_of(std::slice::from_ref(&cluster));
    let other = handle_of(std::slice::from_ref(&cluster));
    let prefix = unique_prefix("ask");
    let held = prefix.clone() + "held";
    let slot = key_slot(held.as_bytes());
    // A second key of the same slot, not set before the migration.
    let fresh = support::key_in_slot(&(prefix + "fresh"), slot);
    let mut lock = redlock.try_lock(&held, TTL).unwrap().expect("free");
    let source = cluster.master_of_slot(slot);
    let target = cluster.other_master(source);
    let migration = cluster.begin_migration(slot, target);
    // The held key is still on the source: a contender is refused there.
    assert!(other.try_lock(&held, TTL).unwrap().is_none());
    // A key not on the source: ASK, then ASKING + SET NX on the target.
    let asked_before = errors_answered(&cluster, source, "ASK");
    let fresh_lock = other
        .try_lock(&fresh, TTL)
        .unwrap()
        .expect("granted via ASK");
    assert!(errors_answered(&cluster, source, "ASK") > asked_before);
    assert!(
        redlock.try_lock(&fresh, TTL).unwrap().is_none(),
        "never twice"
    );
    // The held key moves to the target: its extension and release follow.
    cluster.migrate_keys(&migration, &[held.as_bytes()]);
    assert!(
        other.try_lock(&held, TTL).unwrap().is_none(),
        "held on the target"
    );
    lock.extend(TTL).expect("extended on the target");
    lock.unlock().expect("released on the target");
    fresh_lock.unlock().expect("released on the target");
    cluster.finish_migration(migration);
    for resource in [&held, &fresh] {
        assert!(!exists_on_owner(&cluster, resource), "{resource} released");
        other
            .try_lock(resource, TTL)
            .unwrap()
            .expect("free again")
            .unlock()
            .unwrap();
    }
}

#[test]
fn eight_threads_over_three_clusters_never_hold_a_lock_together() {
    let clusters = shared_clusters(3);
    let redlock = handle_of(clusters);
    let prefix = unique_prefix("mutex");
    let resources: Vec<String> = (0..4).map(|i| format!("{prefix}{i}")).collect();
    let holders: Vec<AtomicUsize> = resources.iter().map(|_| AtomicUsize::new(0)).collect();
    let granted = AtomicUsize::new(0);
    let until = Instant::now() + Duration::from_secs(3);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (redlock, resources, holders, granted) = (&redlock, &resources, &holders, &granted);
            s.spawn(move || {
                let mut n = t;
                while Instant::now() < until {
                    n += 1;
                    let r = n % resources.len();
                    let wait = Duration::from_millis(200);
                    let Some(lock) = redlock
                        .try_lock_for(&resources[r], TTL, wait)
                        .expect("no error")
                    else {
                        continue;
                    };
                    // The referee: nobody else holds this resource now.
                    assert_eq!(holders[r].fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    std::thread::yield_now();
                    assert_eq!(holders[r].fetch_sub(1, Ordering::SeqCst), 1, "two holders");
                    granted.fetch_add(1, Ordering::Relaxed);
                    lock.unlock().expect("released");
                }
            });
        }
    });
    assert!(granted.load(Ordering::Relaxed) > 8, "locks were granted");
    for resource in &resources {
        let deadline = Instant::now() + Duration::from_secs(10);
        while clusters.iter().any(|c| exists_on_owner(c, resource)) {
            assert!(Instant::now() < deadline, "{resource} left behind");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A fake cluster node (the voter's only seed) that answers every lock
/// command with `error`, and every topology request with an error.
fn refusing_node(error: &'static [u8]) -> support::FakeNode {
    support::FakeNode::start(support::lock_server(move |call| match call {
        support::Call::Other => support::Action::Reply(b"-ERR unknown subcommand\r\n".to_vec()),
        _ => support::Action::Reply(error.to_vec()),
    }))
}

#[test]
fn tryagain_and_clusterdown_are_the_voters_no_for_the_round() {
    for error in [
        &b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"[..],
        b"-CLUSTERDOWN The cluster is down\r\n",
    ] {
        let node = refusing_node(error);
        let redlock = Redlock::builder()
            .cluster([node.url()])
            .node_timeout(Duration::from_secs(5))
            .lock_wait(Duration::ZERO)
            .release_notices(false)
            .build()
            .unwrap();
        let started = Instant::now();
        let outcome = redlock.try_lock("tryagain", TTL);
        let took = started.elapsed();
        let code =
            std::str::from_utf8(&error[1..error.iter().position(|&b| b == b' ').unwrap()]).unwrap();
        match outcome {
            Err(e) => assert!(
                e.to_string().contains(code),
                "the error names the refusal: {e}"
            ),
            Ok(lock) => panic!("{code}: granted {lock:?}"),
        }
        // Decided by the answer, not by the 5 s deadline.
        assert!(took < Duration::from_secs(4), "{code}: took {took:?}");
        let sets = node
            .commands()
            .iter()
            .filter(|c| matches!(support::Call::parse(c), support::Call::Acquire { .. }))
            .count();
        assert_eq!(sets, 1, "{code}: not retried within the round");
    }
}

#[test]
fn a_shard_master_killed_while_holding_leaves_the_lock_to_the_others_and_its_voter_returns() {
    let mut fresh = support::RedisCluster::start(3, 1);
    let shared = shared_clusters(2);
    let mut builder = Redlock::builder()
        .node_timeout(Duration::from_millis(500))
        .release_notices(false)
        .cluster(fresh.seeds());
    for cluster in shared {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = builder.build().unwrap();
    let prefix = unique_prefix("failover");
    let resource = prefix.clone() + "held";
    // Learn the three slot maps first: a handle's first round reaches a
    // cluster through a seed, which redirects, and the round is decided
    // by the first two voters, so the third may not have set its key.
    // A key of the resource's slot, until all three voters set it: a
    // round decided before a voter followed its redirect leaves that
    // voter without the key, and the map it learns from the redirect
    // arrives with a later round.
    let all = [&fresh, &shared[0], &shared[1]];
    let slot = key_slot(resource.as_bytes());
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0.. {
        let warm = support::key_in_slot(&format!("{prefix}warm{n}-"), slot);
        let lock = redlock.try_lock(&warm, TTL).unwrap().expect("free");
        let settled = Instant::now() + Duration::from_secs(1);
        while !all.iter().all(|c| exists_on_owner(c, &warm)) && Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(5));
        }
        let everywhere = all.iter().all(|c| exists_on_owner(c, &warm));
        lock.unlock().unwrap();
        if everywhere {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the voters never all set a key of the slot"
        );
    }
    let mut lock = redlock.try_lock(&resource, TTL).unwrap().expect("free");
    // The round returns at a quorum: wait until every voter holds the key
    // (the third one's answer may come after), so that the two that stay
    // are known to hold it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all.iter().all(|c| exists_on_owner(c, &resource)) {
        assert!(Instant::now() < deadline, "a voter never got the key");
        std::thread::sleep(Duration::from_millis(5));
    }
    let master = fresh.master_of_key(resource.as_bytes());
    let failover = fresh.fail_over(master);
    // The other two voters are a quorum: the lock is still ours.
    lock.extend(TTL).expect("extended by the other voters");
    assert!(lock.validity() > Duration::ZERO);
    // The failed-over voter comes back: its new master takes keys of the
    // slot (after the voter finds the new owner), within a bounded time.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        n += 1;
        let other = support::key_in_slot(&format!("{prefix}back{n}-"), slot);
        let back = redlock.try_lock(&other, TTL).unwrap().expect("free");
        let first = back.masters().next().map(|(_, state)| state);
        back.unlock().unwrap();
        if first == Some(KeyState::Held) {
            assert_eq!(fresh.master_of_slot(slot), failover.new_master);
            break;
        }
        assert!(Instant::now() < deadline, "the voter never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    lock.unlock().expect("released");
}

/// A handle of the single-cluster mode over `cluster`'s masters.
fn shards_of(cluster: &support::RedisCluster) -> Redlock {
    Redlock::builder()
        .cluster_shards(cluster.seeds())
        .node_timeout(Duration::from_secs(1))
        .lock_wait(Duration::ZERO)
        .release_notices(false)
        .build()
        .expect("the cluster's masters found")
}

/// The masters of `cluster` that hold a key ending in `resource`.
fn masters_holding(cluster: &support::RedisCluster, resource: &str) -> Vec<usize> {
    let pattern = format!("*}}{resource}");
    cluster
        .masters()
        .into_iter()
        .filter(
            |&m| match cluster.node(m).command(&[b"KEYS", pattern.as_bytes()]) {
                Ok(support::OwnedReply::Array(keys)) => !keys.is_empty(),
                other => panic!("KEYS: {other:?}"),
            },
        )
        .collect()
}

#[test]
fn the_single_cluster_mode_puts_each_voters_key_on_its_own_master() {
    let cluster = support::RedisCluster::start(5, 0);
    let redlock = shards_of(&cluster);
    assert_eq!(redlock.node_count(), 5, "one voter per master");
    assert_eq!(redlock.quorum(), 3);
    let resource = unique_prefix("shards") + "key";
    let lock = redlock.try_lock(&resource, TTL).unwrap().expect("free");
    let held = lock
        .masters()
        .filter(|(_, state)| *state == KeyState::Held)
        .count();
    assert!(held >= 3);
    // The round returns at a quorum; every master gets its key shortly.
    let deadline = Instant::now() + Duration::from_secs(10);
    while masters_holding(&cluster, &resource).len() < 5 {
        assert!(
            Instant::now() < deadline,
            "a master without its voter's key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(redlock.try_lock(&resource, TTL).unwrap().is_none(), "held");
    lock.unlock().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !masters_holding(&cluster, &resource).is_empty() {
        assert!(Instant::now() < deadline, "a key left after the release");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn two_voters_resharded_onto_one_master_vote_once() {
    let cluster = support::RedisCluster::start(3, 0);
    let redlock = shards_of(&cluster);
    assert_eq!(redlock.node_count(), 3);
    let prefix = unique_prefix("reshard");
    // Learn which voter is where: each voter's key of this lock is on its
    // own master.
    let probe = prefix.clone() + "probe";
    redlock
        .try_lock(&probe, TTL)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    let masters = cluster.masters();
    // Move every slot of the second master's first range onto the first
    // master: the voter whose slot it holds lands on the first master.
    let (a, b, c) = (masters[0], masters[1], masters[2]);
    let (start, end) = cluster.slots_of(b)[0];
    let voter_slot = (start..=end)
        .find(|&slot| {
            // The voters' slots are the first slot of each master's first
            // range when the handle was built.
            slot == start
        })
        .expect("a slot");
    cluster.move_slot(voter_slot, a);
    // With the third master frozen, only the first master (two voters)
    // answers: counted twice it would make a quorum of two.
    let frozen = cluster.pause_node(c);
    let resource = prefix + "once";
    match redlock.try_lock(&resource, TTL) {
        Ok(Some(lock)) => panic!("granted by one master counted twice: {lock:?}"),
        Ok(None) => panic!("refused as held: nobody holds it"),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("votes once"), "the report says why: {text}");
        }
    }
    drop(frozen);
    let shares = redlock
        .health()
        .into_iter()
        .filter(|h| {
            h.last_failure()
                .is_some_and(|(e, _)| matches!(e, redlock_sync::NodeError::SharesMaster(_)))
        })
        .count();
    assert_eq!(shares, 1, "health names the voter that shares a master");
}
