//! Fencing on cluster voters (docs/fencing.md, "Fencing on cluster
//! voters"), on real clusters (whichever server `REDLOCK_TEST_SERVER`
//! names): a fence domain's hash per slot on each cluster voter, anchored
//! by `fence_init`; tokens unique and rising per resource under contention,
//! over three clusters, a cluster and a standalone master mixed, and the
//! single-cluster mode; a resharding that moves a slot's hash to another
//! node, and a shard failover, leave those slots out on that voter until
//! `fence_repair`, the other voters keeping a quorum and the tokens rising.

mod support;

use redlock_sync::{
    Builder, FenceFault, HandleEvent, MasterChange, MasterEvent, NodeOutcome, Redlock,
};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};
use support::{
    key_in_slot, key_slot, shared_clusters, unique_prefix, OwnedReply, RedisCluster, Replication,
};

const TTL: Duration = Duration::from_secs(10);

/// The operator's calls run a script per slot on every cluster voter (16384
/// each, reading `INFO`): one test at a time runs here. Several at once on
/// the shared clusters (node timeout 1 s) kept a node from its cluster bus
/// long enough, on a loaded machine, for the others to fail it
/// (`CLUSTERDOWN` in the middle of `fence_init`).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A cluster of this test's own, `shards` masters with `replicas` each,
/// whose nodes wait 3 s (not the support's 1 s) before they suspect one
/// another: the operator's calls keep each busy.
fn own_cluster(shards: usize, replicas: usize) -> RedisCluster {
    RedisCluster::start_with(shards, replicas, &["--cluster-node-timeout", "3000"])
}

/// Slots in a cluster: hashes per cluster voter and domain.
const SLOTS: usize = 16384;

/// A fencing handle in `domain` over the voters `builder` names.
fn fenced(builder: Builder, domain: &str) -> Redlock {
    builder
        .fencing(true)
        .fence_domain(domain)
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(2))
        .retry_jitter(Duration::from_millis(3))
        .lock_wait(Duration::from_secs(60))
        .release_notices(false)
        .build()
        .expect("a valid configuration")
}

/// Asserts that every voter of `report` agreed (anchored, or repaired).
fn all_agreed(report: &redlock_sync::NodeReport) {
    for status in report.iter() {
        assert_eq!(
            *status.outcome(),
            NodeOutcome::Agreed,
            "{}: {:?}",
            status.node(),
            status.outcome()
        );
    }
}

/// The domain's hashes on `cluster`'s masters.
fn hashes_on(cluster: &RedisCluster, domain: &str) -> usize {
    let pattern = format!("redlock-sync:fence:{{*}}:{domain}");
    cluster
        .masters()
        .into_iter()
        .map(
            |m| match cluster.node(m).command(&[b"KEYS", pattern.as_bytes()]) {
                Ok(OwnedReply::Array(keys)) => keys.len(),
                other => panic!("KEYS {pattern}: {other:?}"),
            },
        )
        .sum()
}

/// The domain's hash of `slot` on node `node` of `cluster`: its name.
fn hash_of_slot(cluster: &RedisCluster, node: usize, slot: u16, domain: &str) -> String {
    let suffix = format!(":{domain}");
    cluster
        .keys_in_slot(node, slot)
        .into_iter()
        .map(|k| String::from_utf8(k).unwrap())
        .find(|k| k.starts_with("redlock-sync:fence:{") && k.ends_with(&suffix))
        .unwrap_or_else(|| panic!("no hash of slot {slot} on node {node}"))
}

/// A field of the hash `key` on node `node`.
fn field(cluster: &RedisCluster, node: usize, key: &str, field: &str) -> Option<String> {
    match cluster.node(node).cmd(&["HGET", key, field]) {
        OwnedReply::Bulk(v) => Some(String::from_utf8(v).unwrap()),
        OwnedReply::Nil => None,
        other => panic!("HGET {key} {field}: {other:?}"),
    }
}

/// `threads` threads each take and release locks on `resources` in turn,
/// `per_thread` times, noting each token while they hold the lock (so in
/// the order of the tenures): every resource's tokens must rise strictly.
/// Returns the largest token.
fn tokens_rise(redlock: &Redlock, resources: &[String], threads: usize, per_thread: usize) -> u64 {
    let seen: Vec<Mutex<Vec<u64>>> = resources.iter().map(|_| Mutex::new(Vec::new())).collect();
    thread::scope(|scope| {
        for t in 0..threads {
            let seen = &seen;
            scope.spawn(move || {
                for k in 0..per_thread {
                    let r = (t + k) % resources.len();
                    let lock = redlock
                        .lock(&resources[r], TTL)
                        .unwrap_or_else(|e| panic!("lock {}: {e}", resources[r]));
                    let token = lock.fence_token().expect("a fenced lock has a token");
                    seen[r].lock().unwrap().push(token);
                    lock.unlock().expect("unlock");
                }
            });
        }
    });
    let mut largest = 0;
    let mut total = 0;
    for (resource, tokens) in resources.iter().zip(seen) {
        let tokens = tokens.into_inner().unwrap();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "{resource}: tokens not rising with the tenures: {tokens:?}"
        );
        total += tokens.len();
        largest = largest.max(tokens.last().copied().unwrap_or(0));
    }
    assert_eq!(total, threads * per_thread);
    largest
}

#[test]
fn four_threads_over_three_clusters_get_tokens_that_rise_with_the_tenures() {
    let _one = one_at_a_time();
    let clusters = shared_clusters(3);
    let domain = unique_prefix("three");
    let mut builder = Redlock::builder();
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    let started = Instant::now();
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    // The cost docs/fencing.md gives: every slot's hash probed, then anchored.
    eprintln!("fence_init on 3 clusters: {:?}", started.elapsed());
    for cluster in clusters {
        assert_eq!(hashes_on(cluster, &domain), SLOTS, "a hash per slot");
    }
    // What one slot's hash costs a server (the figure docs/fencing.md
    // gives: 16384 of them per cluster and domain).
    let master = clusters[0].masters()[0];
    let (first, _) = clusters[0].slots_of(master)[0];
    let hash = hash_of_slot(&clusters[0], master, first, &domain);
    let usage = clusters[0].node(master).cmd(&["MEMORY", "USAGE", &hash]);
    eprintln!("MEMORY USAGE of one slot's hash ({hash}): {usage:?}");
    // Initialised once: a second init is refused, writing nothing.
    assert!(redlock.fence_init(0).is_err());
    let resources: Vec<String> = (0..3).map(|n| format!("{domain}res{n}")).collect();
    let largest = tokens_rise(&redlock, &resources, 4, 30);
    for health in redlock.health() {
        assert_eq!(health.fence_fault(), None, "{health}");
    }
    // A repair with nothing to re-anchor moves every hash to a fresh
    // epoch (probe and barrier on each), and the tokens go on rising.
    let started = Instant::now();
    all_agreed(&redlock.fence_repair().expect("a repair"));
    eprintln!("fence_repair on 3 clusters: {:?}", started.elapsed());
    let after = tokens_rise(&redlock, &resources, 2, 6);
    assert!(after > largest, "{after} after {largest}");
}

#[test]
fn a_standalone_master_and_two_clusters_fence_together() {
    let _one = one_at_a_time();
    let server = support::RedisServer::start();
    let clusters = shared_clusters(2);
    let domain = unique_prefix("mixed");
    let mut builder = Redlock::builder().nodes([server.url()]);
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    // The standalone master keeps the one hash.
    let one = format!("redlock-sync:fence:{domain}");
    assert_eq!(server.cmd(&["EXISTS", &one]), OwnedReply::Integer(1));
    assert_eq!(server.dbsize(), 1);
    let calls = |name: &str| {
        let stats = server.command_calls();
        stats.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c)
    };
    let counted_before = calls("hincrby");
    let resources: Vec<String> = (0..3).map(|n| format!("{domain}res{n}")).collect();
    tokens_rise(&redlock, &resources, 4, 20);
    // One at a time, the resources in turn (each in its own slot): the
    // master's counter is ahead of every slot's.
    let (hmget, set) = (calls("hmget"), calls("set"));
    let mut last = vec![0; resources.len()];
    for k in 0..30 {
        let r = k % resources.len();
        last[r] = locks_above(&redlock, &resources[r], 1, last[r]);
    }
    // acquire.lua reads the hash and sets once each; write_back.lua reads
    // it alone.
    eprintln!(
        "one at a time: {} write-backs on the master for 30 locks",
        (calls("hmget") - hmget) - (calls("set") - set)
    );
    // The master's one counter was raised by every acquisition it granted
    // (acquire.lua's HINCRBY), whatever the resource's slot.
    let counter: u64 = match server.cmd(&["HGET", &one, "c"]) {
        OwnedReply::Bulk(c) => String::from_utf8(c).unwrap().parse().unwrap(),
        other => panic!("{other:?}"),
    };
    let granted = calls("hincrby") - counted_before;
    assert!(granted >= 30, "the master granted {granted} locks");
    assert!(counter >= granted, "{counter} after {granted} grants");
}

#[test]
fn the_single_cluster_mode_fences_with_one_hash_per_voter_in_its_slot() {
    let _one = one_at_a_time();
    let cluster = own_cluster(3, 0);
    let domain = unique_prefix("shards");
    let redlock = fenced(Redlock::builder().cluster_shards(cluster.seeds()), &domain);
    assert_eq!(redlock.node_count(), 3);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    // A hash per voter, each on its own master.
    assert_eq!(hashes_on(&cluster, &domain), 3);
    for master in cluster.masters() {
        let pattern = format!("redlock-sync:fence:{{*}}:{domain}");
        match cluster.node(master).cmd(&["KEYS", &pattern]) {
            OwnedReply::Array(keys) => assert_eq!(keys.len(), 1, "master {master}"),
            other => panic!("{other:?}"),
        }
    }
    let resources: Vec<String> = (0..3).map(|n| format!("{domain}res{n}")).collect();
    tokens_rise(&redlock, &resources, 4, 20);
    // A set in this mode: its keys carry each voter's own tag (one slot per
    // voter, so it is taken), its one token comes from the voters' hashes,
    // above an earlier single lock's on its resources and below a later one.
    let before = locks_above(&redlock, &resources[0], 1, 0);
    let set = redlock
        .try_lock_many(&resources[..2], TTL)
        .expect("a fenced set in the single-cluster mode")
        .expect("free");
    let token = set.fence_token().expect("a fenced set's token");
    assert!(token > before, "the set's {token} after {before}");
    set.unlock().expect("unlock");
    locks_above(&redlock, &resources[1], 1, token);
}

/// Records the master changes a handle tells.
#[derive(Clone, Default)]
struct Told(Arc<Mutex<Vec<String>>>);

impl HandleEvent for Told {
    fn handle_master(&self, event: MasterEvent<'_>) {
        let line = match event.change() {
            MasterChange::FenceLeftOut(fault) => format!("{} left out: {fault:?}", event.index()),
            MasterChange::FenceBack => format!("{} back", event.index()),
            _ => return,
        };
        self.0.lock().unwrap().push(line);
    }
}

impl Told {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// `n` locks on `resource`, each token above `above` and the one before;
/// returns the last.
fn locks_above(redlock: &Redlock, resource: &str, n: usize, mut above: u64) -> u64 {
    for _ in 0..n {
        let lock = redlock.lock(resource, TTL).expect("lock");
        let token = lock.fence_token().unwrap();
        assert!(token > above, "{token} after {above}");
        above = token;
        lock.unlock().expect("unlock");
    }
    above
}

/// Locks on `resource` (tokens rising above `above`) until the first voter
/// is seen left out in one slot: a round decided by the other voters may
/// not wait for its answer, which a later one then hears. Returns the
/// last token.
fn locks_until_left_out(redlock: &Redlock, resource: &str, mut above: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        above = locks_above(redlock, resource, 1, above);
        if redlock.health()[0].fence_slots_left_out() == Some(1) {
            return above;
        }
        assert!(
            Instant::now() < deadline,
            "never left out: {}",
            redlock.health()[0]
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tokens_rise_across_a_resharding_and_the_moved_slot_counts_again_once_repaired() {
    let _one = one_at_a_time();
    let fresh = own_cluster(3, 0);
    let shared = shared_clusters(2);
    let domain = unique_prefix("reshard");
    let told = Told::default();
    let mut builder = Redlock::builder()
        .cluster(fresh.seeds())
        .events(told.clone());
    for cluster in shared {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    let resource = format!("{domain}moved");
    let slot = key_slot(resource.as_bytes());
    let last = locks_above(&redlock, &resource, 5, 0);
    let from = fresh.master_of_slot(slot);
    let hash = hash_of_slot(&fresh, from, slot, &domain);
    let counted = |node| {
        field(&fresh, node, &hash, "c")
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(counted(from), last, "the fresh voter counted every lock");

    // The slot moves, its hash with it: anchored on another node's data set.
    let to = fresh.other_master(from);
    fresh.move_slot(slot, to);
    assert_ne!(
        field(&fresh, to, &hash, "p"),
        Some(fresh.node(to).replication_id())
    );
    // The other voters are a quorum: tokens go on rising, and the moved
    // hash counts nothing (round 1 refuses it before writing).
    let moved = locks_until_left_out(&redlock, &resource, last);
    let moved = locks_above(&redlock, &resource, 3, moved);
    assert_eq!(counted(to), last, "left out: not counted");
    let health = &redlock.health()[0];
    assert_eq!(
        health.fence_fault(),
        Some(FenceFault::ReplicationChanged),
        "{health}"
    );
    assert_eq!(health.fence_slots_left_out(), Some(1), "{health}");
    assert!(health.to_string().contains("in 1 slots"), "{health}");
    // Another slot of the same voter counts all the while.
    let other_slot = fresh.slots_of(from)[0].0;
    let elsewhere = key_in_slot(&format!("{domain}other"), other_slot);
    locks_above(&redlock, &elsewhere, 2, 0);
    assert_eq!(redlock.health()[0].fence_slots_left_out(), Some(1));

    // The repair anchors the moved hash on its new node, at least at the
    // largest token, and every voter counts again.
    let report = redlock.fence_repair().expect("repaired");
    all_agreed(&report);
    assert_eq!(
        field(&fresh, to, &hash, "p"),
        Some(fresh.node(to).replication_id())
    );
    assert!(counted(to) >= moved, "{} below {moved}", counted(to));
    assert_eq!(redlock.health()[0].fence_fault(), None);
    let before = counted(to);
    let last = locks_above(&redlock, &resource, 5, moved);
    assert_eq!(
        counted(to),
        before + 5,
        "the repaired hash counts every lock"
    );
    assert!(last > moved);
    assert_eq!(
        told.lines(),
        ["0 left out: ReplicationChanged", "0 back"],
        "told once each way"
    );
}

#[test]
fn a_shard_failover_leaves_its_slots_out_until_repaired() {
    let _one = one_at_a_time();
    let mut fresh = own_cluster(3, 1);
    let shared = shared_clusters(2);
    let domain = unique_prefix("failover");
    let mut builder = Redlock::builder().cluster(fresh.seeds());
    for cluster in shared {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    let resource = format!("{domain}held");
    let slot = key_slot(resource.as_bytes());
    let last = locks_above(&redlock, &resource, 3, 0);
    // The replicas have every hash before the master is killed.
    let master = fresh.master_of_slot(slot);
    let replica = fresh.replicas_of(master)[0];
    let deadline = Instant::now() + Duration::from_secs(20);
    while fresh.node(replica).dbsize() < fresh.node(master).dbsize() {
        assert!(Instant::now() < deadline, "the replica never caught up");
        thread::sleep(Duration::from_millis(20));
    }
    let failover = fresh.fail_over(master);
    // The promoted replica has a data set of its own (a new replication
    // id): its slots' hashes do not count, the others' do, and the other
    // voters keep the quorum.
    let moved = locks_until_left_out(&redlock, &resource, last);
    let report = redlock.fence_repair().expect("repaired");
    all_agreed(&report);
    assert_eq!(redlock.health()[0].fence_fault(), None);
    let hash = hash_of_slot(&fresh, failover.new_master, slot, &domain);
    let replid = fresh.node(failover.new_master).replication_id();
    assert_eq!(field(&fresh, failover.new_master, &hash, "p"), Some(replid));
    let counter: u64 = field(&fresh, failover.new_master, &hash, "c")
        .unwrap()
        .parse()
        .unwrap();
    assert!(counter >= moved, "{counter} below {moved}");
    locks_above(&redlock, &resource, 3, moved);
    // Every slot of the failed-over shard was repaired, not only the one
    // the locks met: a lock in another of its slots counts at once.
    let (start, end) = fresh.slots_of(failover.new_master)[0];
    let other = (start..=end).find(|&s| s != slot).unwrap();
    let elsewhere = key_in_slot(&format!("{domain}else"), other);
    locks_above(&redlock, &elsewhere, 1, 0);
    assert_eq!(redlock.health()[0].fence_fault(), None);
}

#[test]
fn tokens_rise_while_a_slot_migrates_under_contention_its_voter_saying_tryagain_meanwhile() {
    let _one = one_at_a_time();
    let fresh = own_cluster(3, 0);
    let shared = shared_clusters(2);
    let domain = unique_prefix("migrating");
    let mut builder = Redlock::builder().cluster(fresh.seeds());
    for cluster in shared {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    // Three resources in one slot, contended by four threads while the
    // slot moves on the fresh cluster, key by key.
    let slot = key_slot(format!("{domain}a").as_bytes());
    let resources: Vec<String> = (0..3)
        .map(|n| key_in_slot(&format!("{domain}r{n}"), slot))
        .collect();
    let from = fresh.master_of_slot(slot);
    let to = fresh.other_master(from);
    let hash = hash_of_slot(&fresh, from, slot, &domain);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let seen: Vec<Mutex<Vec<u64>>> = resources.iter().map(|_| Mutex::new(Vec::new())).collect();
    let tried_alone = thread::scope(|scope| {
        for t in 0..4 {
            let (seen, stop, resources, redlock) = (&seen, &stop, &resources, &redlock);
            scope.spawn(move || {
                let mut k = t;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = k % resources.len();
                    k += 1;
                    let lock = redlock
                        .lock(&resources[r], TTL)
                        .unwrap_or_else(|e| panic!("lock {}: {e}", resources[r]));
                    let token = lock.fence_token().expect("a token");
                    seen[r].lock().unwrap().push(token);
                    thread::sleep(Duration::from_millis(2));
                    lock.unlock().expect("unlock");
                }
            });
        }
        thread::sleep(Duration::from_millis(300));
        let migration = fresh.begin_migration(slot, to);
        thread::sleep(Duration::from_millis(300));
        // The counter's hash moves first: on the source the lock keys are
        // there or not, the hash is not; on the target the other way.
        fresh.migrate_keys(&migration, &[hash.as_bytes()]);
        // What the fresh voter alone says of a fenced acquisition now
        // (its own handle, of the same domain): TRYAGAIN, from the source
        // (a key there, the other not) or from the target after ASK.
        let alone = fenced(Redlock::builder().cluster(fresh.seeds()), &domain);
        let tried = alone.try_lock(key_in_slot(&format!("{domain}alone"), slot), TTL);
        thread::sleep(Duration::from_millis(300));
        // The lock keys (a cluster voter's keys are the resources' names).
        let held: Vec<&[u8]> = resources.iter().map(|r| r.as_bytes()).collect();
        fresh.migrate_keys(&migration, &held);
        thread::sleep(Duration::from_millis(300));
        fresh.finish_migration(migration);
        thread::sleep(Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        tried
    });
    let tried = tried_alone.map(|l| l.map(|l| l.fence_token()));
    let said_tryagain = match &tried {
        Err(e) => e.nodes().is_some_and(|report| {
            report.iter().any(|s| {
                matches!(s.outcome(), NodeOutcome::Failed(e)
                    if e.server_error().map(|e| e.kind())
                        == Some(redlock_sync::ServerErrorKind::TryAgain))
            })
        }),
        Ok(_) => false,
    };
    assert!(said_tryagain, "the migrating voter alone: {tried:?}");
    let mut total = 0;
    for (resource, tokens) in resources.iter().zip(&seen) {
        let tokens = tokens.lock().unwrap();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "{resource}: tokens not rising with the tenures: {tokens:?}"
        );
        total += tokens.len();
    }
    assert!(total >= 12, "only {total} locks taken");
    // Moved: the hash is on the target, anchored on the source's data set,
    // and counts nothing there until repaired.
    assert_eq!(fresh.master_of_slot(slot), to);
    assert_eq!(hash_of_slot(&fresh, to, slot, &domain), hash);
    let last = seen
        .iter()
        .map(|t| *t.lock().unwrap().last().unwrap())
        .max()
        .unwrap();
    let last = locks_until_left_out(&redlock, &resources[0], last);
    all_agreed(&redlock.fence_repair().expect("repaired"));
    let before = field(&fresh, to, &hash, "c")
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert!(before >= last, "{before} below {last}");
    locks_above(&redlock, &resources[1], 3, last);
    let after = field(&fresh, to, &hash, "c")
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert_eq!(after, before + 3, "the repaired hash counts every lock");
}

/// A fenced set on cluster voters (docs/fencing.md, "Sets"): keys that
/// share a hash tag are in one slot, whose hash counts for the whole set
/// (one column, as for one resource), so its token rises with the single
/// locks' of its resources; keys that span slots are refused before any
/// I/O, with nothing written anywhere.
#[test]
fn a_fenced_set_in_one_slot_takes_that_slots_counter_and_one_across_slots_is_refused() {
    use redlock_sync::{ConfigError, Error, SetUnsupported};
    let _one = one_at_a_time();
    let server = support::RedisServer::start();
    let clusters = shared_clusters(2);
    let domain = unique_prefix("sets");
    let mut builder = Redlock::builder().nodes([server.url()]);
    for cluster in clusters {
        builder = builder.cluster(cluster.seeds());
    }
    let redlock = fenced(builder, &domain);
    all_agreed(&redlock.fence_init(0).expect("fence_init"));
    let (a, b) = (format!("{{{domain}t}}a"), format!("{{{domain}t}}b"));
    assert_eq!(key_slot(a.as_bytes()), key_slot(b.as_bytes()));
    // Each step shares a resource with the one before it: a set {a, b},
    // then a lock of one of them, in turn.
    let mut last = 0;
    for k in 0..12 {
        let token = if k % 2 == 0 {
            let set = redlock.try_lock_many([&a, &b], TTL).unwrap().expect("free");
            let token = set.fence_token().expect("a token");
            set.unlock().unwrap();
            token
        } else {
            let one = if k % 4 == 1 { &a } else { &b };
            let lock = redlock.try_lock(one, TTL).unwrap().expect("free");
            let token = lock.fence_token().expect("a token");
            lock.unlock().unwrap();
            token
        };
        assert!(token > last, "step {k}: {token} after {last}");
        last = token;
    }
    // Across slots: refused, by each entry point, before any I/O.
    let (x, y) = (format!("{domain}x"), format!("{domain}y"));
    assert_ne!(key_slot(x.as_bytes()), key_slot(y.as_bytes()));
    let counter = |name: &str| server.cmd(&["HGET", &format!("redlock-sync:fence:{domain}"), name]);
    let before = counter("c");
    let across = |result: Result<_, Error>| match result {
        Err(Error::Config(ConfigError::ResourceSetUnsupported(why))) => why,
        other => panic!(
            "expected ResourceSetUnsupported, got {:?}",
            other.map(|_| ())
        ),
    };
    assert_eq!(
        across(redlock.try_lock_many([&x, &y], TTL).map(|_| ())),
        SetUnsupported::FencingAcrossSlots
    );
    assert_eq!(
        across(redlock.lock_many([&x, &y], TTL).map(|_| ())),
        SetUnsupported::FencingAcrossSlots
    );
    assert_eq!(
        counter("c"),
        before,
        "the standalone master counted nothing"
    );
    for key in [&x, &y] {
        assert_eq!(server.get(key.as_bytes()), None);
        for cluster in clusters {
            assert_eq!(
                cluster.cmd_for_key(key.as_bytes(), &["GET", key]),
                OwnedReply::Nil
            );
        }
    }
}
