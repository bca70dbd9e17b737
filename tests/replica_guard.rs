//! The replica guard (`Builder::replica_ack`) on real failovers: three
//! voters, each a master with one replica (`support::Replicated`), whose
//! masters are killed and replicas promoted while a lock is held.
//!
//! Without the guard the known hole opens: a master acknowledges the
//! lock's `SET`, its replica never gets it (the link was cut), the master
//! dies and the replica is promoted; with two such voters of three, a
//! contender takes the lock while the first holder is still valid. With
//! the guard, a grant counts only once the master's `WAIT` says a replica
//! has it, so the first holder never counts those voters, and a lock that
//! did count survives the failovers.
//!
//! Cluster voters too: each shard master `WAIT`s for its own replicas, and
//! a shard failover (the cluster promotes the replica) is the same hole.
//!
//! Servers: whichever `REDLOCK_TEST_SERVER` names (Redis 7.0, Valkey 8.1,
//! Valkey 9.1 in CI).

mod support;

use redlock_sync::{Error, NodeError, NodeOutcome, Redlock};
use std::time::{Duration, Instant};
use support::{server_version, OwnedReply, RedisCluster, Replicated};

/// Long enough to outlast every failover step of a test.
const TTL: Duration = Duration::from_secs(60);
/// Generous: a loaded machine must not fail a round by its deadline.
const NODE_TIMEOUT: Duration = Duration::from_secs(5);
/// The guard's wait, generous too (a replica not scheduled for a while
/// must not fail a round): what a replica whose link is cut costs a round.
const ACK_TIMEOUT: Duration = Duration::from_secs(1);
/// How many failovers each test runs.
const RUNS: usize = 4;

/// Three voters, each a master (node 0) with one replica (node 1).
fn voters() -> Vec<Replicated> {
    voters_with(&[])
}

/// The same, with extra server arguments. Each master has counted its
/// replica in a `WAIT` once: a replica that has just loaded its copy is
/// counted only after its first acknowledgement (within a second).
fn voters_with(args: &[&str]) -> Vec<Replicated> {
    let voters: Vec<Replicated> = (0..3).map(|_| Replicated::start_with(1, args)).collect();
    for voter in &voters {
        let counted = voter.node(0).cmd(&["WAIT", "1", "10000"]);
        assert_eq!(counted, OwnedReply::Integer(1), "{}", voter.logs());
    }
    voters
}

/// The URL of each voter's current master.
fn masters(voters: &[Replicated]) -> Vec<String> {
    voters.iter().map(|v| v.url(v.master())).collect()
}

fn client(urls: &[String], guard: bool) -> Redlock {
    let builder = Redlock::builder()
        .nodes(urls)
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO);
    let builder = if guard {
        builder.replica_ack(1, ACK_TIMEOUT)
    } else {
        builder
    };
    builder.build().expect("valid configuration")
}

/// Cuts the replication link of voters 0 and 1 (their replicas miss what
/// follows), after their replicas caught up with what came before.
fn cut_two_links(voters: &[Replicated]) {
    for voter in &voters[..2] {
        voter.wait_synced();
        voter.cut_link(1);
    }
}

/// Kills the masters of voters 0 and 1 and promotes their replicas.
fn fail_two_over(voters: &mut [Replicated]) {
    for voter in &mut voters[..2] {
        voter.node_mut(0).kill();
        voter.promote(1);
    }
}

/// The voters an error's report says failed with `ReplicasBehind`.
fn behind(error: &Error) -> Vec<String> {
    error
        .nodes()
        .expect("a report")
        .iter()
        .filter(|s| {
            matches!(
                s.outcome(),
                NodeOutcome::Failed(NodeError::ReplicasBehind {
                    acked: 0,
                    wanted: 1
                })
            )
        })
        .map(|s| s.node().to_string())
        .collect()
}

#[test]
fn without_the_guard_two_failovers_let_a_second_holder_in() {
    for run in 0..RUNS / 2 {
        let mut voters = voters();
        let first = client(&masters(&voters), false);
        cut_two_links(&voters);
        let held = first
            .try_lock("job", TTL)
            .expect("a round")
            .expect("free: every master grants");
        fail_two_over(&mut voters);
        // The promoted replicas never had the key.
        let second = client(&masters(&voters), false);
        let taken = second.try_lock("job", TTL).expect("a round");
        let validity = held.validity();
        assert!(
            taken.is_some() && validity > Duration::ZERO,
            "run {run}: the hole did not open (second holder: {}, first valid for {validity:?})",
            taken.is_some(),
        );
    }
}

#[test]
fn with_the_guard_no_two_holders_across_failovers() {
    for run in 0..RUNS {
        let mut voters = voters();
        let first = client(&masters(&voters), true);
        // Taken while every replica is linked: each replica has the key.
        let kept = first
            .try_lock("kept", TTL)
            .expect("a round")
            .expect("free, and every replica confirms");
        cut_two_links(&voters);
        // Now two masters grant, but their replicas never confirm: those
        // grants do not count, and the acquisition fails.
        let started = Instant::now();
        let refused = first.try_lock("job", TTL);
        let elapsed = started.elapsed();
        let error = match refused {
            Err(e) => e,
            Ok(lock) => panic!("run {run}: granted without the replicas: {lock:?}"),
        };
        assert!(error.is_no_quorum(), "run {run}: {error}");
        assert_eq!(behind(&error).len(), 2, "run {run}: {error}");
        // The guard waited its timeout, not the node timeout.
        assert!(elapsed >= ACK_TIMEOUT / 2, "run {run}: {elapsed:?}");

        fail_two_over(&mut voters);
        let second = client(&masters(&voters), false);
        // The lock that counted survived on the promoted replicas.
        assert!(
            second.try_lock("kept", TTL).expect("a round").is_none(),
            "run {run}: a second holder of a lock taken under the guard"
        );
        assert!(kept.validity() > Duration::ZERO);
        // The refused one is free: its only holder is the contender.
        let job = second.try_lock("job", TTL).expect("a round");
        assert!(job.is_some(), "run {run}: the refused lock is not free");
        drop(kept);
    }
}

#[test]
fn the_guard_waits_no_longer_than_the_round() {
    let voters = voters();
    // A guard's timeout far beyond the node timeout: cut to the round.
    let node_timeout = Duration::from_millis(1500);
    let redlock = Redlock::builder()
        .nodes(masters(&voters))
        .node_timeout(node_timeout)
        .replica_ack(1, Duration::from_secs(60))
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration");
    redlock.ping().expect("every master answers");
    // Two replicas frozen: their masters' WAIT cannot be answered.
    let paused: Vec<_> = voters[..2].iter().map(|v| v.node(1).pause()).collect();
    let started = Instant::now();
    let result = redlock.try_lock("frozen", TTL);
    let elapsed = started.elapsed();
    let error = result.expect_err("no quorum of confirmed grants");
    assert!(error.is_no_quorum(), "{error}");
    // Each of the two says no: too few replicas, or the deadline passed.
    let frozen: Vec<String> = voters[..2]
        .iter()
        .map(|v| v.url(0).trim_start_matches("redis://").to_string())
        .collect();
    for status in error.nodes().expect("a report").iter() {
        if frozen.iter().any(|name| name == status.node()) {
            assert!(
                matches!(
                    status.outcome(),
                    NodeOutcome::Failed(NodeError::ReplicasBehind { .. } | NodeError::TimedOut(_))
                ),
                "{error}"
            );
        }
    }
    assert!(
        elapsed < node_timeout + Duration::from_secs(3),
        "{elapsed:?}"
    );
    drop(paused);
    // The WAIT the masters ran was cut to the round too (not 60 s): once
    // the replicas are back, the next lock goes through.
    let started = Instant::now();
    let lock = redlock
        .try_lock("after", TTL)
        .expect("a round")
        .expect("free");
    assert!(started.elapsed() < Duration::from_secs(10));
    lock.unlock().expect("released");
}

#[test]
fn an_extension_counts_only_with_its_replicas() {
    let voters = voters();
    let redlock = client(&masters(&voters), true);
    let mut lock = redlock
        .try_lock("extended", TTL)
        .expect("a round")
        .expect("free");
    lock.extend(TTL)
        .expect("every replica confirms the new TTL");
    cut_two_links(&voters);
    let error = lock.extend(TTL).expect_err("two replicas cut off");
    assert!(error.is_no_quorum(), "{error}");
    assert_eq!(behind(&error).len(), 2, "{error}");
}

#[test]
fn a_fenced_acquisition_counts_only_with_its_replicas() {
    let voters = voters();
    let redlock = Redlock::builder()
        .nodes(masters(&voters))
        .node_timeout(NODE_TIMEOUT)
        .replica_ack(1, ACK_TIMEOUT)
        .fencing(true)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration");
    redlock.fence_init(0).expect("fence_init");
    let lock = redlock
        .try_lock("fenced", TTL)
        .expect("a round")
        .expect("free");
    let token = lock.fence_token().expect("a token");
    lock.unlock().expect("released");
    cut_two_links(&voters);
    // Round 1 raised two counters that no replica has: not counted.
    let error = redlock.try_lock("fenced", TTL).expect_err("no quorum");
    assert_eq!(behind(&error).len(), 2, "{error}");
    assert!(token >= 1);
}

/// `WAITAOF` where the server has it (Redis 7.2+, Valkey); Redis 7.0 lacks
/// it, and the guard then says so, for good.
#[test]
fn waitaof_where_the_server_has_it_and_a_clear_error_where_not() {
    let version = server_version().unwrap_or_default();
    let lacks_waitaof = version.starts_with("Redis server v=7.0") || version.contains("v=6.");
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let voters = voters_with(&args);
    let redlock = Redlock::builder()
        .nodes(masters(&voters))
        .node_timeout(NODE_TIMEOUT)
        // An fsync on every write of six servers: on a loaded machine a
        // replica's took more than ACK_TIMEOUT once (all three masters
        // behind where two were cut). Still within the node timeout.
        .replica_ack(1, 3 * ACK_TIMEOUT)
        .replica_ack_aof(true)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration");
    let result = redlock.try_lock("aof", TTL);
    if lacks_waitaof {
        let error = result.expect_err("no WAITAOF on this server");
        assert!(error.is_no_quorum(), "{error}");
        let failures: Vec<&NodeError> = error
            .nodes()
            .expect("a report")
            .iter()
            .filter_map(|status| match status.outcome() {
                NodeOutcome::Failed(failure) => Some(failure),
                _ => None,
            })
            .collect();
        assert!(failures.len() >= 2, "{error}");
        for failure in failures {
            assert!(
                matches!(
                    failure,
                    NodeError::ReplicaAckRefused {
                        command: "WAITAOF",
                        ..
                    }
                ),
                "{error}"
            );
            assert!(failure.is_permanent(), "{failure}");
            assert!(failure.to_string().contains("Redis 7.2+"), "{failure}");
        }
        // Known for good on these connections: nothing is sent.
        let again = redlock.try_lock("aof-2", TTL).expect_err("still refused");
        assert!(again.is_no_quorum(), "{again}");
        // The keys the first round set were released.
        let limit = Instant::now() + Duration::from_secs(10);
        while voters.iter().any(|v| v.node(0).dbsize() != 0) {
            assert!(Instant::now() < limit, "a key left behind");
            std::thread::sleep(Duration::from_millis(10));
        }
        return;
    }
    let lock = result
        .expect("a round")
        .expect("every master and replica fsynced it");
    lock.unlock().expect("released");
    cut_two_links(&voters);
    let error = redlock
        .try_lock("aof", TTL)
        .expect_err("two replicas cut off");
    assert_eq!(behind(&error).len(), 2, "{error}");
}

/// Holds back what `node` (a cluster replica) applies of its master's
/// stream (`CLIENT PAUSE WRITE` on the replica: it acknowledges nothing
/// new, and the paused stream is dropped if its master dies; see
/// `tests/cluster_support.rs`, `how_a_replica_misses_a_write`).
fn pause_replica_writes(cluster: &RedisCluster, replica: usize) {
    let paused = cluster
        .node(replica)
        .cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]);
    assert_eq!(paused, OwnedReply::Simple(b"OK".to_vec()));
}

/// One seed of `cluster`: a node that is not the master of the keys
/// below, so that the master which holds them is a node the voter meets
/// through the cluster (it must wait for its replicas as a seed would).
fn one_seed(cluster: &RedisCluster) -> Vec<String> {
    let master = cluster.master_of_key(CLUSTER_KEYS[0].as_bytes());
    let seed = (0..cluster.nodes().len())
        .find(|&k| k != master)
        .expect("more than one node");
    vec![cluster.node(seed).url()]
}

/// A handle over one cluster voter and two standalone voters.
fn mixed(cluster: &RedisCluster, standalone: &[Replicated], guard: bool) -> Redlock {
    let builder = Redlock::builder()
        .cluster(one_seed(cluster))
        .nodes(masters(standalone))
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO);
    let builder = if guard {
        builder.replica_ack(1, ACK_TIMEOUT)
    } else {
        builder
    };
    builder.build().expect("valid configuration")
}

/// The shard master of `cluster` that owns `key` is killed and its
/// replica promoted by the cluster; the first standalone voter's master
/// is killed and its replica promoted. Both replicas had their stream
/// held back before, so both miss what followed.
fn fail_cluster_shard_and_one_master_over(
    cluster: &mut RedisCluster,
    standalone: &mut [Replicated],
    key: &str,
) {
    let master = cluster.master_of_key(key.as_bytes());
    let failover = cluster.fail_over(master);
    let _ = cluster
        .node(failover.new_master)
        .cmd(&["CLIENT", "UNPAUSE"]);
    standalone[0].node_mut(0).kill();
    standalone[0].promote(1);
}

/// Takes and releases `key` until every voter held it: the cluster
/// voter's map is learnt then (a round decided by the other voters
/// before the cluster's redirect was followed leaves it out).
fn warm_up(redlock: &Redlock, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lock = redlock.try_lock(key, TTL).expect("a round").expect("free");
        let all = lock
            .masters()
            .all(|(_, state)| state == redlock_sync::KeyState::Held);
        lock.unlock().expect("released");
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "a voter never held a lock");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The keys of these tests share one slot, so one shard master holds
/// them all.
const CLUSTER_KEYS: [&str; 3] = ["{guard}warm", "{guard}kept", "{guard}job"];

#[test]
fn a_cluster_voter_without_the_guard_loses_a_grant_in_a_shard_failover() {
    let mut cluster = RedisCluster::start(3, 1);
    let mut standalone: Vec<Replicated> = (0..2).map(|_| Replicated::start(1)).collect();
    let first = mixed(&cluster, &standalone, false);
    // The cluster voter learns its map (its first command meets MOVED).
    warm_up(&first, CLUSTER_KEYS[0]);
    let [_, _, job] = CLUSTER_KEYS;
    let master = cluster.master_of_key(job.as_bytes());
    let replica = cluster.replicas_of(master)[0];
    pause_replica_writes(&cluster, replica);
    standalone[0].wait_synced();
    standalone[0].cut_link(1);
    let held = first
        .try_lock(job, TTL)
        .expect("a round")
        .expect("free: every voter grants");
    // Wait until the cluster voter holds it too (the round returns at 2).
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.cmd_for_key(job.as_bytes(), &["EXISTS", job]) != OwnedReply::Integer(1) {
        assert!(
            Instant::now() < deadline,
            "the cluster voter never got the key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    fail_cluster_shard_and_one_master_over(&mut cluster, &mut standalone, job);
    let second = mixed(&cluster, &standalone, false);
    let taken = second.try_lock(job, TTL).expect("a round");
    let validity = held.validity();
    assert!(
        taken.is_some() && validity > Duration::ZERO,
        "the hole did not open (second holder: {}, first valid for {validity:?})",
        taken.is_some()
    );
}

#[test]
fn a_cluster_voter_counts_only_grants_its_shard_masters_replicas_confirm() {
    let mut cluster = RedisCluster::start(3, 1);
    let mut standalone: Vec<Replicated> = (0..2).map(|_| Replicated::start(1)).collect();
    for set in &standalone {
        let counted = set.node(0).cmd(&["WAIT", "1", "10000"]);
        assert_eq!(counted, OwnedReply::Integer(1), "{}", set.logs());
    }
    let first = mixed(&cluster, &standalone, true);
    let [warm, kept, job] = CLUSTER_KEYS;
    warm_up(&first, warm);
    // Taken while every replica is linked: each replica has the key,
    // the cluster's shard master confirmed its own replica has it.
    let kept_lock = first
        .try_lock(kept, TTL)
        .expect("a round")
        .expect("free, and every replica confirms");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.cmd_for_key(kept.as_bytes(), &["EXISTS", kept]) != OwnedReply::Integer(1) {
        assert!(
            Instant::now() < deadline,
            "the cluster voter never got the key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let master = cluster.master_of_key(job.as_bytes());
    let replica = cluster.replicas_of(master)[0];
    pause_replica_writes(&cluster, replica);
    standalone[0].wait_synced();
    standalone[0].cut_link(1);
    // The shard master's replica and one master's replica miss what
    // follows: the cluster voter's grant and the cut master's do not count.
    let error = first
        .try_lock(job, TTL)
        .expect_err("two grants not confirmed");
    assert!(error.is_no_quorum(), "{error}");
    assert_eq!(behind(&error).len(), 2, "{error}");
    let cluster_voter = error
        .nodes()
        .expect("a report")
        .iter()
        .find(|s| s.node().starts_with("cluster("))
        .expect("the cluster voter is reported");
    assert!(
        matches!(
            cluster_voter.outcome(),
            NodeOutcome::Failed(NodeError::ReplicasBehind { .. })
        ),
        "{error}"
    );

    fail_cluster_shard_and_one_master_over(&mut cluster, &mut standalone, job);
    let second = mixed(&cluster, &standalone, false);
    // The lock that counted survived the shard's failover and the
    // master's; the refused one is free.
    assert!(
        second.try_lock(kept, TTL).expect("a round").is_none(),
        "a second holder of a lock taken under the guard"
    );
    assert!(kept_lock.validity() > Duration::ZERO);
    assert!(second.try_lock(job, TTL).expect("a round").is_some());
}

#[test]
fn the_single_cluster_mode_waits_for_each_masters_own_replica() {
    let cluster = RedisCluster::start(3, 1);
    let redlock = Redlock::builder()
        .cluster_shards(vec![cluster
            .node(cluster.replicas_of(cluster.masters()[0])[0])
            .url()])
        .node_timeout(NODE_TIMEOUT)
        .replica_ack(1, ACK_TIMEOUT)
        .lock_wait(Duration::ZERO)
        // As tests/cluster.rs's handles of this mode: a release with a
        // notice is refused there (CROSSSLOT), a matter apart.
        .release_notices(false)
        .build()
        .expect("valid configuration");
    let lock = redlock
        .try_lock("shards", TTL)
        .expect("a round")
        .expect("free, and every shard's replica confirms");
    lock.unlock().expect("released");
    // Two masters' replicas hold back their streams: those two voters'
    // grants are not confirmed, the third's is.
    let masters = cluster.masters();
    for &master in &masters[..2] {
        pause_replica_writes(&cluster, cluster.replicas_of(master)[0]);
    }
    let error = redlock.try_lock("shards", TTL).expect_err("no quorum");
    assert!(error.is_no_quorum(), "{error}");
    assert_eq!(behind(&error).len(), 2, "{error}");
    for &master in &masters[..2] {
        let _ = cluster
            .node(cluster.replicas_of(master)[0])
            .cmd(&["CLIENT", "UNPAUSE"]);
    }
    let lock = redlock
        .try_lock("shards-after", TTL)
        .expect("a round")
        .expect("confirmed again");
    lock.unlock().expect("released");
}
