//! Sentinel voters (`Builder::sentinel`) on real servers: masters with one
//! replica each and three sentinels watching them (`support::shared_sentinels`,
//! started once for this binary), a lock taken and released through
//! them, a `SENTINEL FAILOVER` under eight contending threads, a master
//! name the sentinels do not know, a replica named as a voter, and
//! sentinels whose password is not the masters'.
//!
//! Servers: whichever `REDLOCK_TEST_SERVER` names (Redis 7.0, Valkey 8.1,
//! Valkey 9.1 in CI; each runs as a sentinel too).

mod support;

use redlock_sync::{Error, KeyState, NodeError, NodeOutcome, NotAVoter, Redlock};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::{shared_sentinels, Replicated, SentinelSet, Sentinels};

const TTL: Duration = Duration::from_secs(10);
/// Generous: a loaded machine must not fail a round by its deadline.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a voter may take to be back after a failover: the sentinels'
/// own time, then the voter's next ask (at most a second later).
const BACK_WITHIN: Duration = Duration::from_secs(30);

/// A handle whose three voters are the shared set's Sentinel voters.
fn sentinel_handle(set: &SentinelSet) -> Redlock {
    let mut builder = Redlock::builder()
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO);
    for name in SentinelSet::NAMES {
        builder = builder.sentinel(set.sentinel_urls(), name);
    }
    builder.build().expect("a valid configuration")
}

/// Takes and releases locks until one was held by every voter: each
/// voter's connection is then set up (a Sentinel voter's master sends no
/// acquisition before its `ROLE` answered, so the first round may be
/// decided by the others without it). Every attempt, of every test,
/// takes a resource of its own: tests run at once on the shared set, and a
/// name taken twice could meet another's lock or its straggling release.
fn warm_up(redlock: &Redlock) {
    static ATTEMPTS: AtomicUsize = AtomicUsize::new(0);
    let deadline = Instant::now() + BACK_WITHIN;
    loop {
        let resource = format!("sentinel:warm:{}", ATTEMPTS.fetch_add(1, Ordering::Relaxed));
        let lock = match redlock.lock(&resource, TTL) {
            Ok(lock) => lock,
            Err(error) => panic!("{resource} not granted: {error}"),
        };
        let all = lock.masters().all(|(_, state)| state == KeyState::Held);
        lock.unlock().expect("released");
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "a voter never held a lock");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `key` is on set `j`'s current master.
fn held_on_master(set: &SentinelSet, j: usize, key: &str) -> bool {
    let replicated = &set.sets[j];
    replicated
        .node(replicated.master())
        .get(key.as_bytes())
        .is_some()
}

#[test]
fn a_sentinel_voter_locks_and_releases() {
    let set = shared_sentinels();
    let redlock = sentinel_handle(&set);
    assert_eq!(redlock.quorum(), 2);
    warm_up(&redlock);
    let lock = redlock
        .try_lock("sentinel:plain", TTL)
        .expect("a round")
        .expect("free");
    // The round returns at a quorum: the third master may still be
    // answering.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(0..3).all(|j| held_on_master(&set, j, "sentinel:plain")) {
        assert!(Instant::now() < deadline, "a master never got the key");
        thread::sleep(Duration::from_millis(5));
    }
    let names: Vec<String> = lock.masters().map(|(name, _)| name.to_string()).collect();
    assert!(
        names[0].starts_with("sentinel(") && names[0].ends_with(";alpha)"),
        "{names:?}"
    );
    lock.unlock().expect("released");
    let deadline = Instant::now() + Duration::from_secs(10);
    while (0..3).any(|j| held_on_master(&set, j, "sentinel:plain")) {
        assert!(Instant::now() < deadline, "a key left behind");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_set_on_sentinel_voters_is_set_whole_on_each_current_master_and_released() {
    // Sets (issue 36) on Sentinel voters: each voter's current master
    // gets every key of the set, and none is left after the release (the
    // refusing side of all-or-none is tested on standalone masters, in
    // tests/many.rs).
    let set = shared_sentinels();
    let redlock = sentinel_handle(&set);
    warm_up(&redlock);
    let keys = ["sentinel:set:b", "sentinel:set:a"];
    let lock = redlock
        .try_lock_many(keys, TTL)
        .expect("a round")
        .expect("free");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(0..3).all(|j| keys.iter().all(|key| held_on_master(&set, j, key))) {
        assert!(
            Instant::now() < deadline,
            "a master never got the whole set"
        );
        thread::sleep(Duration::from_millis(5));
    }
    lock.unlock().expect("released");
    let deadline = Instant::now() + Duration::from_secs(10);
    while (0..3).any(|j| keys.iter().any(|key| held_on_master(&set, j, key))) {
        assert!(Instant::now() < deadline, "a key left behind");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_sentinel_failover_under_eight_contending_threads_lets_no_two_hold() {
    let set = shared_sentinels();
    // Two handles (each with its own watchers), four threads each, the
    // replica guard on: what a master granted counts only once its
    // replica has it.
    let handles: Vec<Redlock> = (0..2)
        .map(|_| {
            let mut builder = Redlock::builder()
                .node_timeout(NODE_TIMEOUT)
                .replica_ack(1, Duration::from_millis(500))
                .lock_wait(Duration::ZERO);
            for name in SentinelSet::NAMES {
                builder = builder.sentinel(set.sentinel_urls(), name);
            }
            builder.build().expect("a valid configuration")
        })
        .collect();
    let holders = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let redlock = handles[t % 2].clone();
            let (holders, overlaps, acquired, stop) = (
                Arc::clone(&holders),
                Arc::clone(&overlaps),
                Arc::clone(&acquired),
                Arc::clone(&stop),
            );
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match redlock.try_lock("sentinel:contended", TTL) {
                        Ok(Some(lock)) => {
                            // The referee: no one else holds it now.
                            if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                                overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                            acquired.fetch_add(1, Ordering::Relaxed);
                            thread::sleep(Duration::from_millis(2));
                            holders.fetch_sub(1, Ordering::SeqCst);
                            let _ = lock.unlock();
                        }
                        _ => thread::sleep(Duration::from_millis(1)),
                    }
                }
            })
        })
        .collect();
    let wait_for = |count: usize| {
        let deadline = Instant::now() + BACK_WITHIN;
        while acquired.load(Ordering::Relaxed) < count {
            assert!(
                Instant::now() < deadline,
                "the threads stopped getting the lock"
            );
            thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(20);
    let old = set
        .sentinels
        .master_port(0, "alpha")
        .expect("alpha's master");
    let (new, took) = set.sentinels.failover("alpha");
    assert_ne!(new, old);
    let before = acquired.load(Ordering::Relaxed);
    // Contention goes on through the failover and after it.
    wait_for(before + 50);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a contender panicked");
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders at once ({} acquisitions; failover took {took:?})",
        acquired.load(Ordering::Relaxed)
    );
    // The voter is back: the new master grants (the voter's key held).
    // Each attempt takes a resource of its own: a release is decided by a
    // quorum, and a straggler master may still run the previous attempt's
    // release (queued behind its `WAIT`, or on another pooled connection)
    // when the next `SET` of the same name reaches it; that "no" is
    // Redlock's, not the voter's, and is not what this checks.
    for (h, redlock) in handles.iter().enumerate() {
        let deadline = Instant::now() + BACK_WITHIN;
        for attempt in 0.. {
            let resource = format!("sentinel:back:{h}:{attempt}");
            let lock = match redlock.lock(&resource, TTL) {
                Ok(lock) => lock,
                Err(error) => panic!("{resource} not granted: {error}"),
            };
            let alpha = lock.masters().next().map(|(_, state)| state);
            lock.unlock().expect("released");
            if alpha == Some(KeyState::Held) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the failed-over voter never came back"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(set.sets[0].node(set.sets[0].master()).port(), new);
}

/// The failure a report gives for its only node.
fn only_failure(error: &Error) -> NodeError {
    let report = error.nodes().expect("a report");
    match report.iter().next().map(|s| s.outcome()) {
        Some(NodeOutcome::Failed(failure)) => failure.clone(),
        other => panic!("{error}: {other:?}"),
    }
}

#[test]
fn a_master_name_the_sentinels_do_not_know_fails_the_voter_at_once() {
    let set = shared_sentinels();
    let redlock = Redlock::builder()
        .sentinel(set.sentinel_urls(), "nobody")
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("built: the voter is found (or not) later");
    let started = Instant::now();
    let error = redlock
        .try_lock("sentinel:nobody", TTL)
        .expect_err("no master");
    let took = started.elapsed();
    let failure = only_failure(&error);
    assert!(matches!(failure, NodeError::NoMaster(_)), "{error}");
    assert!(
        failure
            .to_string()
            .contains("knows no master named \"nobody\""),
        "{failure}"
    );
    // The round did not wait for the sentinels.
    assert!(took < NODE_TIMEOUT, "{took:?}");
}

#[test]
fn a_replica_named_as_a_voter_is_refused_naming_its_master() {
    let set = shared_sentinels();
    let replicated = &set.sets[1];
    let master = replicated.master();
    let replica = replicated.replicas()[0];
    let redlock = Redlock::builder()
        .nodes([replicated.url(replica)])
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("a valid configuration");
    let error = redlock
        .try_lock("sentinel:replica", TTL)
        .expect_err("a replica never votes");
    let failure = only_failure(&error);
    let expected = format!("127.0.0.1:{}", replicated.node(master).port());
    assert_eq!(
        failure,
        NodeError::NotAVoter(NotAVoter::Replica {
            master: expected.clone()
        }),
        "{error}"
    );
    assert!(failure.is_permanent());
    assert!(failure.to_string().contains(&expected), "{failure}");
    // A sentinel named as a master is refused too.
    let redlock = Redlock::builder()
        .nodes([set.sentinel_urls()[0].clone()])
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("a valid configuration");
    let error = redlock
        .try_lock("sentinel:sentinel", TTL)
        .expect_err("a sentinel never votes");
    assert_eq!(
        only_failure(&error),
        NodeError::NotAVoter(NotAVoter::Sentinel),
        "{error}"
    );
}

#[test]
fn sentinels_and_masters_with_passwords_of_their_own() {
    let args = ["--requirepass", "mpw-9k", "--masterauth", "mpw-9k"];
    let replicated = Replicated::start_with_auth(1, &args, &["mpw-9k"]);
    let config = [
        "sentinel auth-pass guarded mpw-9k",
        "requirepass spw-4q",
        "sentinel sentinel-pass spw-4q",
    ];
    let sentinels = Sentinels::start_with(1, &[("guarded", &replicated)], 1, &config, &["spw-4q"]);
    let url = sentinels.urls()[0].replace("redis://", "redis://:spw-4q@");
    let builder = Redlock::builder()
        .sentinel([url.clone()], "guarded")
        .sentinel_master_auth(None, Some("mpw-9k"))
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO);
    let shown = format!("{builder:?}");
    assert!(
        !shown.contains("mpw-9k") && !shown.contains("spw-4q"),
        "{shown}"
    );
    let redlock = builder.build().expect("a valid configuration");
    let lock = redlock
        .try_lock("sentinel:auth", TTL)
        .expect("a round")
        .expect("free");
    assert!(replicated
        .node(replicated.master())
        .get(b"sentinel:auth")
        .is_some());
    lock.unlock().expect("released");
    // Without the masters' own password, the sentinels' is tried on the
    // master, which refuses it: the voter has no master (never a lock).
    let redlock = Redlock::builder()
        .sentinel([url], "guarded")
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .expect("a valid configuration");
    let error = redlock
        .try_lock("sentinel:auth", TTL)
        .expect_err("the master refuses the sentinels' password");
    let failure = only_failure(&error);
    assert!(matches!(failure, NodeError::NoMaster(_)), "{error}");
    assert!(!failure.to_string().contains("spw-4q"), "{failure}");
}

/// A handle of a Sentinel voter and a cluster voter (quorum 2: both must
/// agree), a set whose keys span the cluster's slots, so it goes in parts:
/// the first set after building, and the first after the Sentinel voter's
/// master closed our connection, are granted with the Sentinel voter
/// counted. Its acquisition waits on a new connection until the master has
/// answered `ROLE`, as a single lock's does (without that it is refused
/// there at once, `Backlogged`, and the set is not granted).
#[test]
fn a_set_in_parts_counts_a_sentinel_voter_on_a_new_connection() {
    let set = shared_sentinels();
    let cluster = &support::shared_clusters(1)[0];
    let redlock = Redlock::builder()
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .sentinel(set.sentinel_urls(), SentinelSet::NAMES[0])
        .cluster(cluster.seeds())
        .build()
        .expect("a valid configuration");
    assert_eq!(redlock.quorum(), 2);
    let prefix = support::unique_prefix("sentinel-parts");
    let masters = cluster.masters();
    let names: Vec<String> = masters[..2]
        .iter()
        .map(|&m| cluster.key_on(m, &prefix))
        .collect();
    let take = |when: &str| {
        let held = redlock
            .try_lock_many(&names, TTL)
            .unwrap_or_else(|e| panic!("{when}: {e}"))
            .unwrap_or_else(|| panic!("{when}: not granted"));
        let states: Vec<KeyState> = held.masters().map(|(_, state)| state).collect();
        assert_eq!(states, [KeyState::Held, KeyState::Held], "{when}");
        assert!(
            names.iter().all(|n| held_on_master(&set, 0, n)),
            "{when}: the Sentinel voter's master holds the set"
        );
        held.unlock().expect("released");
    };
    take("the first set after building");
    let master = &set.sets[0];
    master
        .node(master.master())
        .cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    // The closed connection is seen (and a new one opened) by the next
    // round.
    thread::sleep(Duration::from_millis(200));
    take("the first set after the connection was closed");
}
