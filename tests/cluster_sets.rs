//! Locks on several resources (issue 36) on cluster voters, on real Redis
//! or Valkey Clusters (whichever `REDLOCK_TEST_SERVER` names): a set whose
//! keys fall in several slots goes to each cluster voter in parts, one per
//! slot, and the voter's vote is their conjunction (docs/design.md,
//! "Cluster voters: the vote is the conjunction of its per-slot parts").

mod support;

use redlock_sync::{KeyState, Redlock};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::{key_slot, shared_clusters, unique_prefix, RedisCluster, RedisServer};

const TTL: Duration = Duration::from_secs(30);

/// Waits up to a generous bound for `condition`: a call returns at a
/// quorum, and the last voter's answer may come a moment later.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 10 s: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `key` is on its slot's owner in `cluster`, with a TTL.
fn on_owner(cluster: &RedisCluster, key: &str) -> bool {
    let owner = cluster.node(cluster.master_of_key(key.as_bytes()));
    owner.pttl(key.as_bytes()) > 0
}

/// Whether no master of `cluster` stores `key` (in its slot).
fn on_no_node(cluster: &RedisCluster, key: &str) -> bool {
    let slot = key_slot(key.as_bytes());
    cluster.masters().into_iter().all(|node| {
        !cluster
            .keys_in_slot(node, slot)
            .contains(&key.as_bytes().to_vec())
    })
}

/// Three names on three different masters of `clusters[0]` (in three
/// slots), checked to span two masters or more of every other cluster.
fn names_across_nodes(clusters: &[RedisCluster], prefix: &str) -> Vec<String> {
    let first = &clusters[0];
    let masters = first.masters();
    assert!(masters.len() >= 3, "a cluster of three masters");
    let names: Vec<String> = masters[..3]
        .iter()
        .map(|&m| first.key_on(m, prefix))
        .collect();
    for cluster in clusters {
        let owners: BTreeSet<usize> = names
            .iter()
            .map(|n| cluster.master_of_key(n.as_bytes()))
            .collect();
        assert!(owners.len() >= 2, "the names span masters of every cluster");
    }
    let slots: BTreeSet<u16> = names.iter().map(|n| key_slot(n.as_bytes())).collect();
    assert_eq!(slots.len(), 3, "three slots");
    names
}

fn handle(clusters: &[RedisCluster], master: Option<&RedisServer>) -> Redlock {
    let mut builder = Redlock::builder().node_timeout(Duration::from_secs(1));
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    if let Some(master) = master {
        builder = builder.nodes([master.url()]);
    }
    builder.build().expect("a valid configuration")
}

/// A set whose keys fall in three slots on three masters, on two cluster
/// voters and a standalone master: granted, every key on its slot's owner
/// of each cluster and on the master, extended, then released everywhere.
#[test]
fn a_set_across_slots_and_nodes_is_granted_extended_and_released_everywhere() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = handle(clusters, Some(&master));
    let names = names_across_nodes(clusters, &unique_prefix("across"));
    let mut set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    assert!(set.validity() > TTL / 2);
    // Every voter the round counted holds every key, on each slot's owner
    // of a cluster, all with one value: the set's. (The round returns at a
    // quorum; a third voter's answer may come later, or never.)
    let states: Vec<(String, KeyState)> = set
        .masters()
        .map(|(name, state)| (name.to_string(), state))
        .collect();
    let held: Vec<&String> = states
        .iter()
        .filter(|(_, state)| *state == KeyState::Held)
        .map(|(name, _)| name)
        .collect();
    assert!(held.len() >= 2, "{states:?}");
    let mut values = BTreeSet::new();
    for voter in held {
        let cluster = clusters
            .iter()
            .find(|c| voter.contains(&c.seeds()[0].replace("redis://", "")));
        for name in &names {
            let value = match cluster {
                Some(cluster) => {
                    assert!(
                        on_owner(cluster, name),
                        "{name} not on {voter}'s owner: {states:?}"
                    );
                    let owner = cluster.node(cluster.master_of_key(name.as_bytes()));
                    owner.get(name.as_bytes())
                }
                None => master.get(name.as_bytes()),
            };
            values.insert(value.expect("held"));
        }
    }
    assert_eq!(values.len(), 1, "one value for the set");
    set.extend(TTL).expect("extended on a quorum");
    assert!(set.validity() > TTL / 2);
    set.unlock().expect("released");
    eventually("no key of the set left on any node", || {
        names
            .iter()
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)) && master.pttl(n.as_bytes()) == -2)
    });
}

/// Two cluster voters and nothing else: a quorum needs both, so a set
/// whose keys span slots is granted only if each cluster voter said yes
/// to every part (a `CROSSSLOT` on either would be its failure, and the
/// try's `NoQuorum`). Every voter holds it, and it is released everywhere.
#[test]
fn a_set_over_slots_on_cluster_voters_alone_meets_no_crossslot() {
    let clusters = shared_clusters(2);
    let redlock = handle(clusters, None);
    assert_eq!(redlock.quorum(), 2);
    let names = names_across_nodes(clusters, &unique_prefix("crossslot"));
    let set = match redlock.try_lock_many(&names, TTL) {
        Ok(Some(set)) => set,
        Ok(None) => panic!("held elsewhere"),
        Err(e) => panic!("refused: {e}"),
    };
    assert_eq!(
        set.masters()
            .filter(|(_, state)| *state == KeyState::Held)
            .count(),
        2
    );
    assert!(names
        .iter()
        .all(|n| clusters.iter().all(|c| on_owner(c, n))));
    set.unlock().expect("released");
    eventually("no key left on any node", || {
        names
            .iter()
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)))
    });
}

/// One key of a set held by another value on one cluster voter's owner,
/// and on the standalone master: those two voters say no (the cluster's
/// no from one part while its other parts set their keys), the set is not
/// granted, and the failed try releases the parts it won: nothing of ours
/// is left on any node, and the other holder's keys stay.
#[test]
fn a_set_with_a_key_held_elsewhere_gets_that_voters_no_and_leaves_nothing() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = handle(clusters, Some(&master));
    let names = names_across_nodes(clusters, &unique_prefix("held"));
    let taken = &names[1];
    let ttl_ms = (TTL.as_millis() * 4).to_string();
    let set_elsewhere = |reply: support::OwnedReply| {
        assert!(
            matches!(reply, support::OwnedReply::Simple(ref s) if s == b"OK"),
            "{reply:?}"
        );
    };
    set_elsewhere(
        clusters[0].cmd_for_key(taken.as_bytes(), &["SET", taken, "another", "PX", &ttl_ms]),
    );
    set_elsewhere(master.cmd(&["SET", taken, "another", "PX", &ttl_ms]));
    let tried = redlock.try_lock_many(&names, TTL).expect("no error");
    assert!(tried.is_none(), "granted with two voters' no");
    // The first cluster's other parts set their keys; the failed try
    // deletes them, long before their TTL.
    eventually("nothing of ours left on any node", || {
        names
            .iter()
            .filter(|n| *n != taken)
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)) && master.pttl(n.as_bytes()) == -2)
            && on_no_node(&clusters[1], taken)
    });
    let owner = clusters[0].node(clusters[0].master_of_key(taken.as_bytes()));
    assert_eq!(
        owner.get(taken.as_bytes()).as_deref(),
        Some(&b"another"[..])
    );
    assert_eq!(
        master.get(taken.as_bytes()).as_deref(),
        Some(&b"another"[..])
    );
    // The other holder's keys cleaned up for the shared clusters.
    owner.cmd(&["DEL", taken]);
}

/// Two handles on the same voters (two clusters and a master), four
/// threads each, taking overlapping sets of three resources (each on its
/// own master of the first cluster) named in different orders, with a
/// referee per resource: no two holders ever overlap, every thread
/// returns, and nothing is left on any node.
#[test]
fn overlapping_sets_in_any_order_from_two_handles_never_overlap() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let handles = [
        Arc::new(handle(clusters, Some(&master))),
        Arc::new(handle(clusters, Some(&master))),
    ];
    let names = names_across_nodes(clusters, &unique_prefix("contend"));
    let (a, b, c) = (names[0].clone(), names[1].clone(), names[2].clone());
    let sets: Arc<Vec<Vec<(usize, String)>>> = Arc::new(vec![
        vec![(0, a.clone()), (1, b.clone())],
        vec![(1, b.clone()), (0, a.clone())],
        vec![(2, c.clone()), (1, b.clone())],
        vec![(0, a.clone()), (2, c.clone())],
        vec![(2, c.clone()), (1, b.clone()), (0, a.clone())],
    ]);
    let referees: Arc<[AtomicBool; 3]> = Arc::new(Default::default());
    let (overlaps, granted) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let redlock = Arc::clone(&handles[t % 2]);
            let (sets, referees) = (Arc::clone(&sets), Arc::clone(&referees));
            let (overlaps, granted) = (Arc::clone(&overlaps), Arc::clone(&granted));
            thread::spawn(move || {
                for round in 0..25 {
                    let set = &sets[(t + round) % sets.len()];
                    let tried = redlock
                        .try_lock_many(set.iter().map(|(_, n)| n.as_str()), TTL)
                        .expect("no error");
                    let Some(held) = tried else {
                        continue;
                    };
                    granted.fetch_add(1, Ordering::Relaxed);
                    for (r, _) in set {
                        if referees[*r].swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    thread::sleep(Duration::from_millis(2));
                    for (r, _) in set {
                        referees[*r].store(false, Ordering::SeqCst);
                    }
                    held.unlock().expect("released");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a contender returned");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert!(granted.load(Ordering::Relaxed) > 0, "nobody was granted");
    eventually("no key left on any node", || {
        names
            .iter()
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)) && master.pttl(n.as_bytes()) == -2)
    });
}

/// `inspect_many` on cluster voters: one op per resource, each to its
/// slot's owner, so a held set shows on every voter, and a released one
/// is free.
#[test]
fn inspect_many_sees_a_set_over_slots_on_every_voter() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = handle(clusters, Some(&master));
    let names = names_across_nodes(clusters, &unique_prefix("inspect"));
    let set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    let held = set
        .masters()
        .filter(|(_, state)| *state == KeyState::Held)
        .count();
    let seen = redlock.inspect_many(&names).expect("inspected");
    for name in &names {
        let one = seen.get(name).expect("every resource inspected");
        assert!(one.is_held(), "{one}");
        assert!(one.held_on() >= held, "{one}");
    }
    set.unlock().expect("released");
    eventually("every resource free", || {
        redlock.inspect_many(&names).expect("inspected").is_free()
    });
}

/// `keep_alive` of a set whose keys span slots, on two cluster voters and
/// a master (TTL 3 s): after 8 s (more than two TTLs) the lease still
/// holds, every key is on a quorum of voters (renewed: unrenewed keys
/// would have expired), and its unlock removes them from every node.
#[test]
fn a_lease_on_a_set_over_slots_is_renewed_on_cluster_voters() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let redlock = handle(clusters, Some(&master));
    let names = names_across_nodes(clusters, &unique_prefix("lease"));
    let ttl = Duration::from_secs(3);
    let lease = redlock
        .try_lock_many(&names, ttl)
        .expect("no error")
        .expect("free")
        .keep_alive(Duration::from_secs(120))
        .expect("renewed in the background");
    thread::sleep(Duration::from_secs(8));
    lease.check().expect("still held");
    for name in &names {
        let on = clusters.iter().filter(|c| on_owner(c, name)).count()
            + usize::from(master.pttl(name.as_bytes()) > 0);
        assert!(on >= 2, "{name} on {on} voters");
    }
    lease.unlock().expect("released");
    eventually("no key of the set left on any node", || {
        names
            .iter()
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)) && master.pttl(n.as_bytes()) == -2)
    });
}

/// The masters of `cluster` that hold the key of `name` with a voter's own
/// tag (`{TAG}name`, the single-cluster mode's form).
fn masters_with_own_key(cluster: &RedisCluster, name: &str) -> usize {
    let pattern = format!("*}}{name}");
    cluster
        .masters()
        .into_iter()
        .filter(
            |&m| match cluster.node(m).command(&[b"KEYS", pattern.as_bytes()]) {
                Ok(support::OwnedReply::Array(keys)) => !keys.is_empty(),
                other => panic!("KEYS: {other:?}"),
            },
        )
        .count()
}

/// In the single-cluster mode each master is a voter whose keys carry a
/// hash tag of its own: a set's keys all get that tag, so the set is one
/// command on each master (all keys in its slot). Granted with every key
/// on every master, excluding a single lock and an overlapping set,
/// extended, then released with no key left anywhere.
#[test]
fn the_single_cluster_mode_takes_a_set_on_each_voters_own_master() {
    let cluster = &shared_clusters(1)[0];
    let redlock = Redlock::builder()
        .cluster_shards(cluster.seeds())
        .node_timeout(Duration::from_secs(1))
        .lock_wait(Duration::ZERO)
        .build()
        .expect("the cluster's masters found");
    let masters = cluster.masters().len();
    assert_eq!(redlock.node_count(), masters, "one voter per master");
    let prefix = unique_prefix("shards-set");
    let names: Vec<String> = ["x", "y", "z"]
        .iter()
        .map(|n| format!("{prefix}{n}"))
        .collect();
    let mut set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    let held = set
        .masters()
        .filter(|(_, state)| *state == KeyState::Held)
        .count();
    assert!(held >= redlock.quorum(), "{held} voters hold the set");
    for name in &names {
        eventually("every master holds its voter's key of each name", || {
            masters_with_own_key(cluster, name) == masters
        });
    }
    assert!(
        redlock.try_lock(&names[1], TTL).unwrap().is_none(),
        "a single lock on one of the set's names is refused"
    );
    let overlapping = [names[2].clone(), format!("{prefix}w")];
    assert!(
        redlock.try_lock_many(&overlapping, TTL).unwrap().is_none(),
        "an overlapping set is refused"
    );
    set.extend(TTL).expect("extended");
    assert!(set.validity() > TTL / 2);
    set.unlock().expect("released");
    for name in names.iter().chain([&overlapping[1]]) {
        eventually("no master keeps a key of the set", || {
            masters_with_own_key(cluster, name) == 0
        });
    }
}

/// One key of a set held by another value on the first cluster voter's
/// owner, the standalone master paused until that voter has answered:
/// the set is granted by the master and the second cluster, and the first
/// cluster voter, which said no to one part and set the keys of the
/// others, is reported `Unconfirmed` (it holds some of the set's keys),
/// not `Absent`. The unlock deletes its keys.
#[test]
fn a_cluster_voter_that_declined_some_parts_is_unconfirmed_not_absent() {
    let master = RedisServer::start();
    let clusters = shared_clusters(2);
    let mut builder = Redlock::builder().node_timeout(Duration::from_secs(5));
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = builder
        .nodes([master.url()])
        .build()
        .expect("a valid configuration");
    let names = names_across_nodes(clusters, &unique_prefix("partly"));
    // Every connection open and every topology known before the round.
    let warm = redlock
        .try_lock_many(names_across_nodes(clusters, &unique_prefix("warm")), TTL)
        .expect("no error")
        .expect("free");
    warm.unlock().expect("released");
    let taken = &names[1];
    let ttl_ms = (TTL.as_millis() * 4).to_string();
    let reply =
        clusters[0].cmd_for_key(taken.as_bytes(), &["SET", taken, "another", "PX", &ttl_ms]);
    assert!(
        matches!(reply, support::OwnedReply::Simple(ref s) if s == b"OK"),
        "{reply:?}"
    );
    // The master answers only after a second, by when the first cluster
    // voter's parts have all answered: its no is in before the quorum.
    let paused = master.pause();
    let set = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_secs(1));
            master.resume();
        });
        redlock.try_lock_many(&names, TTL)
    });
    drop(paused);
    let set = set.expect("no error").expect("granted by two voters");
    let first = clusters[0].seeds()[0].replace("redis://", "");
    let states: Vec<(String, KeyState)> = set
        .masters()
        .map(|(name, state)| (name.to_string(), state))
        .collect();
    let state = states
        .iter()
        .find(|(name, _)| name.contains(&first))
        .map(|(_, state)| *state);
    assert_eq!(state, Some(KeyState::Unconfirmed), "{states:?}");
    assert!(
        names
            .iter()
            .filter(|n| *n != taken)
            .all(|n| on_owner(&clusters[0], n)),
        "the first cluster voter set its other parts' keys"
    );
    set.unlock().expect("released");
    eventually("nothing of ours left on any node", || {
        names
            .iter()
            .filter(|n| *n != taken)
            .all(|n| clusters.iter().all(|c| on_no_node(c, n)) && master.pttl(n.as_bytes()) == -2)
            && on_no_node(&clusters[1], taken)
    });
    let owner = clusters[0].node(clusters[0].master_of_key(taken.as_bytes()));
    assert_eq!(
        owner.get(taken.as_bytes()).as_deref(),
        Some(&b"another"[..])
    );
    owner.cmd(&["DEL", taken]);
}

/// Voters 0 and 1 are one standalone server behind two proxies that hold
/// the set's acquisition back (1.5 s and 0.5 s; the node timeout is 4 s),
/// voter 2 a cluster, so that the set goes in parts: both handshakes
/// answer at once, so voter 1 is refused mid-round (same server as voter
/// 0), after it was sent the set; its acquisition runs first and sets the
/// keys, voter 0 then declines, and the attempt fails (the cluster alone
/// agrees). The release after it still goes to voter 1: the set's keys
/// leave the shared server long before their TTL. (Without it they stay.)
#[test]
fn the_release_after_a_failed_set_in_parts_reaches_a_voter_refused_mid_round() {
    let clusters = shared_clusters(1);
    let shared = RedisServer::start();
    let names = names_across_nodes(clusters, &unique_prefix("refused"));
    let holding = |ms: u64| {
        let marker = names[0].clone().into_bytes();
        let held = AtomicBool::new(false);
        support::Proxy::holding(shared.addr(), move |command| {
            // The first command naming the set's keys: its acquisition.
            if command.contains(&marker) && !held.swap(true, Ordering::SeqCst) {
                Duration::from_millis(ms)
            } else {
                Duration::ZERO
            }
        })
    };
    let (slower, slow) = (holding(1500), holding(500));
    let redlock = Redlock::builder()
        .nodes([slower.url(), slow.url()])
        .cluster(clusters[0].seeds())
        .node_timeout(Duration::from_secs(4))
        .release_notices(false)
        .build()
        .expect("a valid configuration");
    let ttl = Duration::from_secs(60);
    let tried = redlock.try_lock_many(&names, ttl).expect("no error");
    assert!(
        tried.is_none(),
        "voter 0 declines: voter 1's keys are there"
    );
    let refused = redlock.health()[1].to_string();
    assert!(refused.contains("same server"), "{refused}");
    eventually("the set's keys gone from the shared server", || {
        names.iter().all(|n| shared.pttl(n.as_bytes()) == -2)
    });
    eventually("the set's keys gone from the cluster", || {
        names.iter().all(|n| on_no_node(&clusters[0], n))
    });
}

/// Two cluster voters (the first a cluster of its own) and a master, one
/// of the first cluster's nodes SIGSTOPped: the set is granted by the
/// second cluster and the master while the first cluster's part on that
/// node is still owed (a part that two cluster voters could still decide
/// on its own), and the health view does not show the first cluster voter
/// failing for it (the round was decided without it; it missed no
/// deadline), as after a single lock's round. The node resumes and the
/// unlock leaves no key.
#[test]
fn a_cluster_voter_still_owing_a_part_when_the_set_is_decided_is_not_marked_down() {
    let own = RedisCluster::start(3, 0);
    let shared = &shared_clusters(1)[0];
    let master = RedisServer::start();
    let redlock = Redlock::builder()
        .node_timeout(Duration::from_secs(5))
        .cluster(own.seeds())
        .cluster(shared.seeds())
        .nodes([master.url()])
        .build()
        .expect("a valid configuration");
    let port = own.seeds()[0].replace("redis://", "");
    let index = redlock
        .health()
        .iter()
        .position(|h| h.node().contains(&port))
        .expect("the first cluster voter");
    // Three names on three masters of the first cluster (three slots).
    let names_on_own = |prefix: &str| -> Vec<String> {
        let names: Vec<String> = own.masters()[..3]
            .iter()
            .map(|&m| own.key_on(m, &unique_prefix(prefix)))
            .collect();
        let slots: BTreeSet<u16> = names.iter().map(|n| key_slot(n.as_bytes())).collect();
        assert_eq!(slots.len(), 3, "three slots");
        names
    };
    // Every connection open and the topology known before the round.
    let warm = redlock
        .try_lock_many(names_on_own("warm"), TTL)
        .expect("no error")
        .expect("free");
    warm.unlock().expect("released");
    assert!(!redlock.health()[index].is_failing());
    let names = names_on_own("owing");
    let stalled = own.master_of_key(names[1].as_bytes());
    let paused = own.pause_node(stalled);
    let set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("granted by the second cluster and the master");
    let health = redlock.health()[index].clone();
    drop(paused);
    assert!(!health.is_failing(), "{health}");
    set.unlock().expect("released");
    eventually("no key of the set left on any node", || {
        names.iter().all(|n| {
            on_no_node(&own, n) && on_no_node(shared, n) && master.pttl(n.as_bytes()) == -2
        })
    });
}

/// Three leases on one handle (a cluster voter and two masters, the
/// first behind a proxy; TTL 0.7 s, node timeout 0.4 s: renewed 0.35 s
/// before the end), the first on a set over slots, so renewed in parts in
/// a round of its own, the others on single keys. The set's keys are
/// deleted on the second master (it says no to the extension) and the
/// proxy holds the set's first extension back for 0.45 s, so that the
/// set's renewal round runs to its deadline, 0.4 s, longer than the
/// others' renewal margin. The single-key leases, renewed in the batch
/// before that round, are judged on their own answers at once, not after
/// the set's round (which would find them past their validity): after 3 s
/// both still hold, and their keys are on a quorum.
#[test]
fn leases_renewed_beside_a_set_in_parts_are_judged_before_its_round() {
    let clusters = shared_clusters(1);
    let cluster = &clusters[0];
    let (first, second) = (RedisServer::start(), RedisServer::start());
    let names = names_across_nodes(clusters, &unique_prefix("beside"));
    let marker = names[0].clone().into_bytes();
    let seen = AtomicUsize::new(0);
    // The set's second command on this connection: its first extension.
    let proxy = support::Proxy::holding(first.addr(), move |command| {
        if command.contains(&marker) && seen.fetch_add(1, Ordering::SeqCst) == 1 {
            Duration::from_millis(450)
        } else {
            Duration::ZERO
        }
    });
    let redlock = Redlock::builder()
        .node_timeout(Duration::from_millis(400))
        .cluster(cluster.seeds())
        .nodes([proxy.url(), second.url()])
        .release_notices(false)
        .build()
        .expect("a valid configuration");
    let ttl = Duration::from_millis(700);
    let set = redlock
        .try_lock_many(&names, ttl)
        .expect("no error")
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed in the background");
    for name in &names {
        second.cmd(&["DEL", name]);
    }
    let singles: Vec<String> = (0..2)
        .map(|k| unique_prefix(&format!("single{k}")))
        .collect();
    let leases: Vec<_> = singles
        .iter()
        .map(|name| {
            redlock
                .try_lock(name, ttl)
                .expect("no error")
                .expect("free")
                .keep_alive(Duration::from_secs(60))
                .expect("renewed in the background")
        })
        .collect();
    thread::sleep(Duration::from_secs(3));
    for (lease, name) in leases.iter().zip(&singles) {
        lease.check().unwrap_or_else(|e| panic!("{name}: {e}"));
        let on = usize::from(first.pttl(name.as_bytes()) > 0)
            + usize::from(second.pttl(name.as_bytes()) > 0)
            + usize::from(on_owner(cluster, name));
        assert!(on >= 2, "{name} on {on} voters");
    }
    for lease in leases {
        lease.unlock().expect("released");
    }
    let _ = set.unlock();
}
