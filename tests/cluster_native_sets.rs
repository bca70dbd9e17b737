//! Sets on cluster voters of Valkey 9.1 (`REDLOCK_TEST_NATIVE_SERVER`;
//! skipped without a server that has `MSETEX`), where a set may be taken
//! by `MSETEX … NX` and, without scripts (`Builder::allow_scripts(false)`),
//! released and extended by runs of native commands
//! (docs/guide/native-commands.md, "Sets").
//!
//! Valkey 9.1.2 runs `MSETEX` on any cluster node without checking its
//! keys' slots (no `MOVED`, no `ASK`, no `CROSSSLOT`): a set sent by a
//! stale map would be stored where nobody looks. A cluster node's `MSETEX`
//! is used only where the handshake saw the server refuse it for its keys'
//! slots. The tests of a server that checks them are ignored (no server
//! installed here has one: run them with `--ignored` where one is); the
//! others check the side this server is on.

mod support;

use redlock_sync::{Error, KeyState, NodeError, NodeOutcome, Redlock};
use std::thread;
use std::time::{Duration, Instant};
use support::{key_in_slot, key_slot, native_server_binary, unique_prefix, OwnedReply};
use support::{RedisCluster, RedisServer};

const TTL: Duration = Duration::from_secs(30);

/// A Valkey 9.1 cluster of three masters, if the native server is named
/// and has `MSETEX`.
fn valkey_91_cluster() -> Option<RedisCluster> {
    let valkey = native_server_binary()?;
    let cluster = RedisCluster::start_binary(&valkey, 1, 3, 0, &[], &[]).remove(0);
    let node = cluster.node(0);
    let reply = node.command(&[b"MSETEX", b"1", b"k", b"v", b"NX", b"PX", b"0"]);
    match reply {
        Ok(OwnedReply::Error(line)) if String::from_utf8_lossy(&line).contains("expire time") => {
            Some(cluster)
        }
        other => {
            println!("skipped: the native server has no MSETEX (Valkey 9.1+ has): {other:?}");
            None
        }
    }
}

/// Whether `cluster`'s `MSETEX` is checked for its keys' slots: two keys
/// in two slots, a zero TTL (nothing set either way), `CROSSSLOT` back.
fn checks_msetex_slots(cluster: &RedisCluster) -> bool {
    let args: [&[u8]; 9] = [
        b"MSETEX", b"2", b"{a}k", b"v", b"{b}k", b"v", b"NX", b"PX", b"0",
    ];
    match cluster.node(0).command(&args) {
        Ok(OwnedReply::Error(line)) => line.starts_with(b"CROSSSLOT"),
        other => panic!("MSETEX: {other:?}"),
    }
}

/// Waits up to a generous bound for `condition` (a call returns at a
/// quorum; the last voter's answer may come a moment later).
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 10 s: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Keys stored on any master of `cluster`.
fn keys_anywhere(cluster: &RedisCluster) -> Vec<Vec<u8>> {
    cluster
        .masters()
        .into_iter()
        .flat_map(|m| cluster.node(m).keys())
        .collect()
}

/// Script calls on every master of `cluster`.
fn script_calls(cluster: &RedisCluster) -> u64 {
    let calls = |s: &RedisServer| s.calls_of("eval") + s.calls_of("evalsha");
    cluster
        .masters()
        .into_iter()
        .map(|m| calls(cluster.node(m)))
        .sum()
}

/// `INFO errorstats`' count of `code` errors node `node` has answered.
fn errors_answered(cluster: &RedisCluster, node: usize, code: &str) -> u64 {
    let info = match cluster.node(node).command(&[b"INFO", b"errorstats"]) {
        Ok(OwnedReply::Bulk(text)) => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("INFO errorstats: {other:?}"),
    };
    let field = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|line| line.strip_prefix(&field))
        .and_then(|n| n.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

/// Takes, extends and releases `names` as a set on `redlock`, checking
/// after each step what the masters of `cluster` hold.
fn take_extend_release(redlock: &Redlock, cluster: &RedisCluster, names: &[String]) {
    let mut set = redlock
        .try_lock_many(names, TTL)
        .expect("no error")
        .expect("free");
    assert!(set.validity() > TTL / 2);
    assert!(set.masters().all(|(_, state)| state == KeyState::Held));
    eventually("every key of the set stored", || {
        keys_anywhere(cluster).len() >= names.len()
    });
    // Shorten every key's TTL: the extension must set it back.
    for key in keys_anywhere(cluster) {
        let owner = cluster.node(cluster.master_of_key(&key));
        owner.command(&[b"PEXPIRE", &key, b"5000"]).unwrap();
    }
    set.extend(TTL).expect("extended");
    assert!(set.validity() > TTL / 2);
    for key in keys_anywhere(cluster) {
        let owner = cluster.node(cluster.master_of_key(&key));
        assert!(owner.pttl(&key) > 5000, "{key:?} not extended");
    }
    set.unlock().expect("released");
    eventually("no key of the set left", || {
        keys_anywhere(cluster).is_empty()
    });
}

/// Whether every key of `names` is stored on its slot's owner in
/// `cluster`, and on no other master.
fn on_owners_only(cluster: &RedisCluster, names: &[String]) -> bool {
    names.iter().all(|name| {
        let owner = cluster.master_of_key(name.as_bytes());
        let slot = key_slot(name.as_bytes());
        cluster.masters().into_iter().all(|m| {
            let stored = cluster
                .keys_in_slot(m, slot)
                .contains(&name.as_bytes().to_vec());
            stored == (m == owner)
        })
    })
}

/// Names of a set in one slot served by a master other than node 0 (the
/// first seed), and of a set across the three masters' slots.
fn sets_of_names(cluster: &RedisCluster) -> [Vec<String>; 2] {
    let prefix = unique_prefix("one-slot");
    let elsewhere = cluster.masters().into_iter().find(|&m| m != 0).unwrap();
    let tagged = cluster.key_on(elsewhere, &prefix);
    let one_slot = ["a", "b", "c"].map(|n| format!("{tagged}{n}")).to_vec();
    let across = cluster
        .masters()
        .into_iter()
        .map(|m| cluster.key_on(m, &unique_prefix("across")))
        .collect();
    [one_slot, across]
}

/// Regression (Valkey 9.1.2 stores an `MSETEX` on whatever cluster node
/// gets it): a set in one slot, taken and released once (the handle
/// learns the map), then its slot moved to another master: taken again on
/// the stale map, it is stored on the slot's new owner only, where a
/// single lock on one of its names is refused; extended and released with
/// no key left. (Before the handshake checked the slots, the set went by
/// `MSETEX` to the old owner, which stored it: another handle's single
/// lock on each name of the set was granted.)
#[test]
fn a_set_on_a_stale_map_of_a_valkey_9_1_cluster_is_stored_on_its_slots_owner_only() {
    let Some(cluster) = valkey_91_cluster() else {
        return;
    };
    let handle = || {
        Redlock::builder()
            .cluster(cluster.seeds())
            .node_timeout(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let (redlock, other) = (handle(), handle());
    let [names, _] = sets_of_names(&cluster);
    for _ in 0..2 {
        // The second set goes on connections whose handshakes answered.
        let set = redlock.try_lock_many(&names, TTL).unwrap().expect("free");
        set.unlock().expect("released");
    }
    eventually("no key left", || keys_anywhere(&cluster).is_empty());
    let slot = key_slot(names[0].as_bytes());
    let moved_to = cluster.other_master(cluster.master_of_slot(slot));
    cluster.move_slot(slot, moved_to);
    let mut set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    eventually("the set's keys on their owner only", || {
        on_owners_only(&cluster, &names)
    });
    for name in &names {
        let lock = other.try_lock(name, TTL).expect("no error");
        assert!(
            lock.is_none(),
            "{name}: a single lock granted beside the set"
        );
    }
    set.extend(TTL).expect("extended");
    set.unlock().expect("released");
    eventually("no key left", || keys_anywhere(&cluster).is_empty());
}

/// Without scripts, a cluster voter whose server does not check
/// `MSETEX`'s slots (Valkey 9.1.2) cannot take a set: the try fails with
/// `CannotLockSets` naming `MSETEX` and stores nothing, on a cluster voter
/// and in the single-cluster mode; single locks still work. (Before, the
/// set was granted and stored on a node that does not serve its slot.)
#[test]
fn without_scripts_a_cluster_whose_msetex_ignores_slots_refuses_sets_by_name() {
    let Some(cluster) = valkey_91_cluster() else {
        return;
    };
    if checks_msetex_slots(&cluster) {
        println!("skipped: this server checks MSETEX's slots (see the tests below)");
        return;
    }
    let builders = [
        Redlock::builder().cluster(cluster.seeds()),
        Redlock::builder().cluster_shards(cluster.seeds()),
    ];
    for builder in builders {
        let redlock = builder
            .node_timeout(Duration::from_secs(1))
            .allow_scripts(false)
            .build()
            .unwrap();
        for names in sets_of_names(&cluster) {
            let error = redlock
                .try_lock_many(&names, TTL)
                .expect_err("no voter can take a set");
            assert!(matches!(error, Error::NoQuorum(_)), "{error}");
            let report = error.nodes().expect("a report");
            let refused = report.iter().any(|status| {
                matches!(
                    status.outcome(),
                    NodeOutcome::Failed(NodeError::CannotLockSets(what)) if what.contains("MSETEX")
                )
            });
            assert!(refused, "{error}");
            assert!(keys_anywhere(&cluster).is_empty(), "{error}");
        }
        let lock = redlock.try_lock("single", TTL).unwrap().expect("free");
        lock.unlock().expect("released");
        eventually("no key left", || keys_anywhere(&cluster).is_empty());
    }
}

/// A set in one slot (its names share a hash tag) and a set across the
/// three masters' slots, on a cluster voter without scripts: each taken
/// (by `MSETEX`), extended and released (by runs), no script run and no
/// key left.
#[test]
#[ignore = "needs a cluster whose MSETEX checks slots (Redis 8.4+): no server installed here has one; run with --ignored where one is"]
fn without_scripts_a_cluster_voter_takes_extends_and_releases_sets_in_one_slot_and_across_slots() {
    let Some(cluster) = valkey_91_cluster() else {
        return;
    };
    if !checks_msetex_slots(&cluster) {
        println!("skipped: this server's MSETEX ignores slots (no set without scripts)");
        return;
    }
    let redlock = Redlock::builder()
        .cluster(cluster.seeds())
        .node_timeout(Duration::from_secs(1))
        .allow_scripts(false)
        .build()
        .unwrap();
    let prefix = unique_prefix("one-slot");
    let one_slot: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{{{prefix}}}{n}"))
        .collect();
    take_extend_release(&redlock, &cluster, &one_slot);
    let across: Vec<String> = cluster
        .masters()
        .into_iter()
        .map(|m| cluster.key_on(m, &unique_prefix("across")))
        .collect();
    take_extend_release(&redlock, &cluster, &across);
    assert_eq!(script_calls(&cluster), 0, "no script run");
    let msetex: u64 = cluster
        .masters()
        .into_iter()
        .map(|m| cluster.node(m).calls_of("msetex"))
        .sum();
    assert!(msetex >= 4, "the sets taken by MSETEX ({msetex} calls)");
}

/// The single-cluster mode without scripts: each master is a voter, the
/// set's keys carry its tag, and the set is taken, extended and released
/// on every master with no script run and no key left.
#[test]
#[ignore = "needs a cluster whose MSETEX checks slots (Redis 8.4+): no server installed here has one; run with --ignored where one is"]
fn without_scripts_the_single_cluster_mode_takes_extends_and_releases_a_set() {
    let Some(cluster) = valkey_91_cluster() else {
        return;
    };
    if !checks_msetex_slots(&cluster) {
        println!("skipped: this server's MSETEX ignores slots (no set without scripts)");
        return;
    }
    let redlock = Redlock::builder()
        .cluster_shards(cluster.seeds())
        .node_timeout(Duration::from_secs(1))
        .allow_scripts(false)
        .build()
        .unwrap();
    assert_eq!(redlock.node_count(), 3);
    let prefix = unique_prefix("shards");
    let names: Vec<String> = ["x", "y", "z"]
        .iter()
        .map(|n| format!("{prefix}{n}"))
        .collect();
    let mut set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    eventually("every master holds the set's three keys", || {
        cluster
            .masters()
            .into_iter()
            .all(|m| cluster.node(m).dbsize() == 3)
    });
    set.extend(TTL).expect("extended");
    assert!(set.validity() > TTL / 2);
    set.unlock().expect("released");
    eventually("no key left", || keys_anywhere(&cluster).is_empty());
    assert_eq!(script_calls(&cluster), 0, "no script run");
}

/// A set of three keys in one slot that is being migrated, its keys moved
/// to the target: the extension and the release meet `ASK` on the source
/// and follow it to the target, where each command of the run needs its
/// own `ASKING` (one `ASKING` for the run leaves commands 2 and 3 with a
/// `MOVED`, and the voter fails: the extension's `NoQuorum`).
#[test]
#[ignore = "needs a cluster whose MSETEX checks slots (Redis 8.4+): no server installed here has one; run with --ignored where one is"]
fn without_scripts_a_sets_runs_follow_ask_with_asking_before_each_command() {
    let Some(cluster) = valkey_91_cluster() else {
        return;
    };
    if !checks_msetex_slots(&cluster) {
        println!("skipped: this server's MSETEX ignores slots (no set without scripts)");
        return;
    }
    let redlock = Redlock::builder()
        .cluster(cluster.seeds())
        .node_timeout(Duration::from_secs(1))
        .allow_scripts(false)
        .build()
        .unwrap();
    let prefix = unique_prefix("ask");
    let first = key_in_slot(&prefix, key_slot(format!("{prefix}x").as_bytes()));
    let slot = key_slot(first.as_bytes());
    let names: Vec<String> = (0..3).map(|i| format!("{first}{i}")).collect();
    assert!(names.iter().all(|n| key_slot(n.as_bytes()) == slot));
    let mut set = redlock
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    let source = cluster.master_of_slot(slot);
    let target = cluster.other_master(source);
    let migration = cluster.begin_migration(slot, target);
    let keys: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    cluster.migrate_keys(&migration, &keys);
    assert_eq!(cluster.node(target).dbsize(), 3, "the keys moved");
    let asked = errors_answered(&cluster, source, "ASK");
    set.extend(TTL).expect("extended on the target after ASK");
    assert!(errors_answered(&cluster, source, "ASK") > asked, "ASK met");
    assert_eq!(errors_answered(&cluster, target, "MOVED"), 0);
    for key in &keys {
        assert!(cluster.node(target).pttl(key) > 0);
    }
    set.unlock().expect("released on the target after ASK");
    eventually("no key left on the target", || {
        cluster.node(target).dbsize() == 0
    });
    assert_eq!(errors_answered(&cluster, target, "MOVED"), 0);
    cluster.finish_migration(migration);
    assert!(keys_anywhere(&cluster).is_empty());
    assert_eq!(script_calls(&cluster), 0, "no script run");
}
