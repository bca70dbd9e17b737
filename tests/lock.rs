//! Lock behaviour against real redis-server processes started by the tests,
//! with 1, 3 and 5 masters.

mod support;

use redlock_sync::{Error, KeyState, NodeError, NodeOutcome, Redlock, ServerErrorKind};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// A node timeout a loaded machine meets, for tests that are not about
/// what a slow master costs: the default (50 ms) can be missed there (seen:
/// all five masters of a release timed out).
const PATIENT: Duration = Duration::from_secs(1);

/// Waits (up to a generous bound) for `condition`. A call returns once a
/// quorum answered; the other masters get the same command on the same
/// connection and run it a moment later, so their state is checked this way.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 5 s: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// A client whose rounds give each master 1 s ([`PATIENT`]).
fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .build()
        .expect("valid configuration")
}

/// The value stored under `key` on every server of `cluster`, asserting it
/// is the same everywhere (one lock value per acquisition). Waits until
/// every server has the key: the call that set it returned at quorum, and
/// the last master may run its SET later.
fn value_everywhere(cluster: &Cluster, key: &[u8]) -> Vec<u8> {
    let mut values: Vec<Option<Vec<u8>>> = Vec::new();
    eventually("the key set on every server", || {
        values = cluster.servers.iter().map(|s| s.get(key)).collect();
        values.iter().all(Option::is_some)
    });
    let first = values[0].clone().expect("key set on the first server");
    assert!(
        values.iter().all(|v| v.as_deref() == Some(&first[..])),
        "{values:?}"
    );
    first
}

#[test]
fn acquire_and_release_with_1_3_and_5_nodes() {
    for n in [1, 3, 5] {
        let cluster = Cluster::start(n);
        let redlock = client(&cluster);
        assert_eq!(redlock.quorum(), n / 2 + 1);

        let before = Instant::now();
        let lock = redlock.lock("orders:42", TTL).expect("acquired");
        let value = value_everywhere(&cluster, b"orders:42");
        assert_eq!(value.len(), 40, "20 random bytes, hex-encoded");
        for server in &cluster.servers {
            let pttl = server.pttl(b"orders:42");
            // Set after `before` with the TTL: at most the TTL left, and at
            // least the TTL less the time since `before`, taken after the
            // read (1 ms for PTTL's rounding).
            let elapsed = before.elapsed().as_millis() as i64;
            assert!(
                pttl <= 10_000 && pttl >= 10_000 - elapsed - 1,
                "PTTL {pttl}, {elapsed} ms after the call began"
            );
        }
        assert_eq!(lock.resource(), b"orders:42");
        lock.unlock().expect("released");
        eventually("keys gone after unlock", || cluster.total_keys() == 0);

        // A second acquisition gets a new value.
        let again = redlock.lock("orders:42", TTL).expect("acquired again");
        assert_ne!(value_everywhere(&cluster, b"orders:42"), value);
        drop(again); // dropping releases too
        eventually("keys gone after drop", || cluster.total_keys() == 0);
    }
}

#[test]
fn exactly_one_thread_wins_a_contended_lock() {
    for n in [1, 3, 5] {
        let cluster = Cluster::start(n);
        let redlock = client(&cluster);
        for round in 0..5 {
            let resource = format!("contended:{round}");
            let threads = 8;
            let barrier = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (redlock, barrier, resource) =
                        (redlock.clone(), barrier.clone(), resource.clone());
                    thread::spawn(move || {
                        barrier.wait();
                        redlock.try_lock(&resource, TTL).expect("no error")
                    })
                })
                .collect();
            let locks: Vec<_> = handles
                .into_iter()
                .filter_map(|h| h.join().expect("thread"))
                .collect();
            assert!(locks.len() <= 1, "n = {n}: {} winners", locks.len());
            // Votes can split so that nobody wins: failed attempts release
            // their keys, so the resource is free again either way.
            drop(locks);
            eventually("failed attempts released their keys", || {
                cluster.total_keys() == 0
            });
        }
    }
}

#[test]
fn separate_handles_exclude_each_other() {
    let cluster = Cluster::start(3);
    let first = client(&cluster);
    let second = client(&cluster);
    let lock = first.lock(b"shared", TTL).expect("first acquires");
    assert!(second.try_lock(b"shared", TTL).expect("no error").is_none());
    let err = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .lock_wait(Duration::from_millis(20))
        .build()
        .unwrap()
        .lock(b"shared", TTL)
        .expect_err("held by the first handle");
    assert!(err.is_contention(), "{err}");
    let report = err.nodes().expect("per-node detail");
    // Decided once two of three declined; the third may not have answered.
    let declined = report
        .iter()
        .filter(|s| *s.outcome() == NodeOutcome::Declined)
        .count();
    assert!(declined >= 2, "{report}");
    assert!(
        report
            .iter()
            .all(|s| matches!(s.outcome(), NodeOutcome::Declined | NodeOutcome::Pending)),
        "{report}"
    );
    lock.unlock().unwrap();
    second
        .try_lock(b"shared", TTL)
        .unwrap()
        .expect("free again")
        .unlock()
        .unwrap();
}

#[test]
fn a_late_unlock_never_deletes_the_next_holders_lock() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        // Not 10-20 ms: a loaded machine misses that, and timing is not
        // what this checks.
        .node_timeout(PATIENT)
        .build()
        .unwrap();
    let ttl = Duration::from_millis(300);
    let stale = redlock.lock("job", ttl).expect("first holder");
    thread::sleep(ttl + Duration::from_millis(100));
    assert_eq!(stale.validity(), Duration::ZERO);
    // The keys expire a TTL after each master ran the SET, which the last
    // one may have done late (seen under load: its key, still there, kept
    // it out of the second lock).
    eventually("the first holder's keys expired", || {
        cluster.total_keys() == 0
    });

    let current = redlock.lock("job", TTL).expect("second holder");
    let value = value_everywhere(&cluster, b"job");
    let err = stale.unlock().expect_err("the first lock is gone");
    assert!(err.is_lock_lost(), "{err}");
    assert_eq!(
        value_everywhere(&cluster, b"job"),
        value,
        "late unlock touched the new lock"
    );

    // Extending the stale lock's successor still works; the key is intact.
    current.unlock().expect("second holder releases");
    eventually("keys gone", || cluster.total_keys() == 0);
}

#[test]
fn extend_moves_the_expiry_and_never_deletes() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        // Not 10-20 ms: a loaded machine misses that, and timing is not
        // what this checks.
        .node_timeout(PATIENT)
        .max_extensions(2)
        .build()
        .unwrap();
    let mut lock = redlock.lock("extend", Duration::from_secs(5)).unwrap();
    assert!(lock.validity() <= Duration::from_secs(5));
    lock.extend(Duration::from_secs(30)).expect("extended");
    assert!(
        lock.validity() > Duration::from_secs(25),
        "{:?}",
        lock.validity()
    );
    // Extended where a quorum answered; the last master a moment later.
    eventually("the expiry moved on every master", || {
        cluster
            .servers
            .iter()
            .all(|server| server.pttl(b"extend") > 25_000)
    });
    lock.extend(Duration::from_secs(30))
        .expect("second extension");
    let err = lock
        .extend(Duration::from_secs(30))
        .expect_err("limit of 2");
    assert!(matches!(err, Error::ExtensionLimit(2)), "{err}");

    // The lock is lost on a majority (an operator deleted it): extend fails
    // with LockLost, does not delete the remaining key, and shrinks nothing
    // it did not have to.
    let value = value_everywhere(&cluster, b"extend");
    cluster.servers[0].cmd(&["DEL", "extend"]);
    cluster.servers[1].cmd(&["DEL", "extend"]);
    let mut lost = redlock.lock("other", TTL).unwrap();
    cluster.servers[0].cmd(&["DEL", "other"]);
    cluster.servers[1].cmd(&["DEL", "other"]);
    let err = lost.extend(TTL).expect_err("lost on a majority");
    assert!(err.is_lock_lost(), "{err}");
    assert_eq!(
        lost.validity(),
        Duration::ZERO,
        "another client may hold it"
    );
    assert!(
        cluster.servers[2].get(b"other").is_some(),
        "a failed extend deleted a key"
    );
    assert_eq!(cluster.servers[2].get(b"extend"), Some(value));
    drop(lost);
    drop(lock);
}

#[test]
fn extending_an_expired_lock_is_refused_without_contacting_the_masters() {
    let cluster = Cluster::start(1);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        // Not 10-20 ms: a loaded machine misses that, and timing is not
        // what this checks.
        .node_timeout(PATIENT)
        .build()
        .unwrap();
    let mut lock = redlock.lock("short", Duration::from_millis(100)).unwrap();
    thread::sleep(Duration::from_millis(150));
    let err = lock.extend(TTL).expect_err("expired");
    assert!(matches!(err, Error::Expired { .. }), "{err}");
    assert!(cluster.servers[0].get(b"short").is_none());
    let err = lock.unlock().expect_err("expired");
    assert!(matches!(err, Error::Expired { .. }), "{err}");
    assert_rounded(&err.to_string(), "lock expired ", " before the call");
}

/// An extension that starts while validity remains (600 ms of it, so that
/// a busy machine still starts it in time) but is confirmed only after it
/// ended does not revive the lock: masters 1 and 2 are frozen during the
/// extension and resumed 100 ms after the validity ended, and
/// then extend the key (the test had made the keys outlive the validity on
/// the servers, as they do by the drift, only by more): a quorum of yeses
/// that came too late to prove the lock was held throughout. The extension
/// fails with `Expired` and the masters' answers, and the lock stays
/// expired for good. (It once returned `Ok` with a fresh validity.)
#[test]
fn an_extension_confirmed_after_the_validity_ended_revives_nothing() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(1);
    let lock = redlock.lock("late", ttl).expect("acquired");
    for server in &cluster.servers {
        server.cmd(&["PEXPIRE", "late", "60000"]);
    }
    let frozen = [cluster.servers[1].pause(), cluster.servers[2].pause()];
    thread::sleep(lock.validity().saturating_sub(Duration::from_millis(600)));
    let ends = lock.valid_until();
    let extension = thread::spawn(move || {
        let mut lock = lock;
        let result = lock.extend(ttl);
        (result, lock)
    });
    thread::sleep((ends + Duration::from_millis(100)).saturating_duration_since(Instant::now()));
    drop(frozen);
    let (result, mut lock) = extension.join().unwrap();
    let err = result.expect_err("confirmed only after the validity ended");
    assert!(
        matches!(
            &err,
            Error::Expired {
                last_extension: Some(report),
                ..
            } if report.iter().filter(|s| matches!(s.outcome(), NodeOutcome::Agreed)).count() >= 2
        ),
        "{err}"
    );
    assert_eq!(lock.validity(), Duration::ZERO);
    let again = lock.extend(ttl).expect_err("expired for good");
    assert!(matches!(again, Error::Expired { .. }), "{again}");
    let again = lock.renew_if_below(ttl, ttl).expect_err("expired for good");
    assert!(matches!(again, Error::Expired { .. }), "{again}");
    let err = lock.unlock().expect_err("expired");
    assert!(matches!(err, Error::Expired { .. }), "{err}");
    eventually("no key left", || cluster.total_keys() == 0);
}

/// The `SET NX` that sets a lock's key where its acquisition left it out
/// (the repair) goes out only in a round that ends within the validity:
/// never written for a lock whose validity has ended, and never counted
/// late. With less validity left than a round may last, an extension
/// refreshes the key where it is and repairs nothing; with enough, it
/// repairs. (Rounds of up to 2 s and 1.5 s left: the extension has that
/// long to start and end within the validity on a busy machine.)
#[test]
fn an_extension_that_may_outlast_the_validity_repairs_no_master() {
    let mut cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(3);
    cluster.servers[2].kill();
    // Refused twice: in its reconnect backoff, master 2 is not sent the SET.
    for _ in 0..2 {
        let _ = redlock.ping();
    }
    let mut lock = redlock.lock("repair", ttl).expect("masters 0 and 1");
    cluster.servers[2].restart();
    let on_2 = |lock: &redlock_sync::Lock| lock.masters().nth(2).map(|(_, state)| state);
    assert_eq!(on_2(&lock), Some(KeyState::Absent), "master 2 was down");
    // 1.5 s left at most, rounds of up to 2 s: no repair.
    thread::sleep(lock.validity().saturating_sub(Duration::from_millis(1_500)));
    // Extended for 10 s, so that the next extension finds far more than a
    // round's time left however long a busy machine takes to start it.
    lock.extend(Duration::from_secs(10))
        .expect("masters 0 and 1 extend it");
    assert_eq!(on_2(&lock), Some(KeyState::Absent), "repaired");
    assert!(cluster.servers[2].get(b"repair").is_none(), "repaired");
    // Plenty of validity left: repaired.
    lock.extend(ttl).expect("extended");
    assert_ne!(on_2(&lock), Some(KeyState::Absent), "not repaired");
    eventually("the key set on master 2", || {
        cluster.servers[2].get(b"repair").is_some()
    });
    lock.unlock().expect("released");
}

/// A master whose key vanished while the lock is held (deleted here by
/// hand, as a restart without persistence does) is set again by an
/// extension after one that read its no (the repair). A round decides at a
/// quorum, so it may end before the no is read: extended up to 50 times,
/// until the key is back. It used to stay a holder for good: every
/// extension asked it to refresh a key it no longer had, and the lock
/// rested on the other two masters until its end (a cluster voter's SET
/// answered with a redirect did the same to a lease in CI).
#[test]
fn a_master_that_lost_the_key_is_repaired_by_an_extension_after_its_no() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let ttl = Duration::from_secs(10);
    let mut lock = redlock.lock("vanished", ttl).expect("free");
    cluster.servers[2].cmd(&["DEL", "vanished"]);
    let mut extensions = 0;
    while cluster.servers[2].get(b"vanished").is_none() {
        assert!(extensions < 50, "master 2 not repaired in 50 extensions");
        lock.extend(ttl).expect("masters 0 and 1 extend it");
        extensions += 1;
    }
    eprintln!("master 2 repaired by extension {extensions}");
    assert!(extensions >= 2, "repaired before a no was read");
    lock.unlock().expect("released");
    eventually("no key left", || cluster.total_keys() == 0);
}

/// That the duration between `before` and `after` in `message` is shown
/// rounded: to the millisecond in seconds (`1.723s`), to a tenth in
/// milliseconds (`53.2ms`), whole below (`310µs`); not with every digit of
/// the nanoseconds (`53.178602ms`).
fn assert_rounded(message: &str, before: &str, after: &str) {
    let start = message.find(before).expect("the text before") + before.len();
    let end = start + message[start..].find(after).expect("the text after");
    let shown = &message[start..end];
    let (number, decimals) = if let Some(n) = shown.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = shown.strip_suffix("µs") {
        (n, 0)
    } else if let Some(n) = shown.strip_suffix("ns") {
        (n, 0)
    } else {
        (shown.strip_suffix('s').expect("a unit"), 3)
    };
    let fraction = number.split_once('.').map_or("", |(_, f)| f);
    assert!(
        fraction.len() <= decimals && number.parse::<f64>().is_ok(),
        "{shown} in {message:?}"
    );
}

#[test]
fn validity_is_bounded_by_ttl_minus_drift_and_counts_down() {
    let cluster = Cluster::start(5);
    let redlock = client(&cluster);
    let before = Instant::now();
    let lock = redlock.lock("validity", TTL).unwrap();
    let drift = TTL / 100 + Duration::from_millis(2);
    let first = lock.validity();
    assert!(first > Duration::ZERO);
    assert!(first <= TTL - drift, "{first:?}");
    // At least TTL - drift - (time the call took), with a generous margin.
    assert!(first + before.elapsed() >= TTL - drift - Duration::from_millis(1));
    thread::sleep(Duration::from_millis(20));
    assert!(lock.validity() < first);
    assert!(lock.valid_until() <= before + TTL);
    lock.unlock().unwrap();
}

#[test]
fn resource_names_are_binary_safe() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let long = vec![b'x'; 10_000];
    // The empty name is refused (`ConfigError::EmptyResource`: see
    // tests/config.rs); every other byte string is a name.
    let names: Vec<&[u8]> = vec![
        b" ",
        b"*",
        b"a b\tc",
        b"\0",
        b"line\r\nbreak",
        b"\xff\xfe\x00\x01 not utf-8",
        "ключ:锁".as_bytes(),
        &long,
    ];
    for name in names {
        let lock = redlock.lock(name, TTL).expect("acquired");
        assert_eq!(lock.resource(), name);
        assert!(
            redlock.try_lock(name, TTL).unwrap().is_none(),
            "{name:?} not held"
        );
        value_everywhere(&cluster, name);
        lock.unlock().expect("released");
        eventually("keys gone", || cluster.total_keys() == 0);
    }
}

#[test]
fn authenticates_with_a_password_and_with_an_acl_user() {
    let password = RedisServer::start_with(&["--requirepass", "s3cret@pass"])
        .with_admin_auth(&["s3cret@pass"]);
    let acl = RedisServer::start_with(&["--user", "locker on >hunter2 ~* &* +@all"])
        .with_admin_auth(&["locker", "hunter2"]);
    for (url, server) in [
        (
            format!("redis://:s3cret%40pass@127.0.0.1:{}", password.port()),
            &password,
        ),
        (
            format!("redis://locker:hunter2@127.0.0.1:{}", acl.port()),
            &acl,
        ),
    ] {
        let redlock = Redlock::builder()
            .nodes([&url])
            .node_timeout(PATIENT)
            .build()
            .unwrap();
        let lock = redlock.lock("auth", TTL).expect("authenticated");
        assert!(server.get(b"auth").is_some());
        lock.unlock().unwrap();
        assert!(!format!("{redlock:?}").contains("hunter2"));
        assert!(!format!("{redlock:?}").contains("s3cret"));
    }
}

/// The documented meaning of an ambiguous URL (docs/guide/configuration.md): an `@` left
/// unencoded in the password (`redis://:p@ss@host`) belongs to the
/// password, since the last `@` ends the credentials (as WHATWG URL
/// parsers read it), and the password never shows.
#[test]
fn an_unencoded_at_sign_in_the_password_belongs_to_the_password() {
    let server = RedisServer::start_with(&["--requirepass", "p@ss"]).with_admin_auth(&["p@ss"]);
    let url = format!("redis://:p@ss@127.0.0.1:{}", server.port());
    let redlock = Redlock::builder()
        .nodes([&url])
        .node_timeout(PATIENT)
        .build()
        .unwrap();
    let lock = redlock.lock("auth", TTL).expect("authenticated as p@ss");
    assert!(server.get(b"auth").is_some());
    lock.unlock().unwrap();
    let shown = format!("{redlock:?}");
    assert!(!shown.contains("p@ss") && !shown.contains(":p@"), "{shown}");
}

#[test]
fn a_wrong_password_is_a_typed_error_naming_the_node() {
    let server = RedisServer::start_with(&["--requirepass", "right"]);
    let url = format!("redis://:wrong-secret@127.0.0.1:{}", server.port());
    let redlock = Redlock::builder()
        .nodes([&url])
        .node_timeout(PATIENT)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    let err = redlock.lock("auth", TTL).expect_err("rejected");
    assert!(err.is_no_quorum(), "{err}");
    assert!(err.has_server_error(ServerErrorKind::WrongPass), "{err}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains(&format!("127.0.0.1:{}", server.port())),
        "{text}"
    );
    assert!(!text.contains("wrong-secret"), "password leaked: {text}");

    // No password at all: the server answers NOAUTH.
    let plain = format!("redis://127.0.0.1:{}", server.port());
    let err = Redlock::builder()
        .nodes([&plain])
        .node_timeout(PATIENT)
        .build()
        .unwrap()
        .try_lock("auth", TTL);
    let err = err.expect_err("rejected");
    assert!(err.has_server_error(ServerErrorKind::NoAuth), "{err}");
}

#[test]
fn selects_the_database_from_the_url() {
    let server = RedisServer::start();
    let url = format!("redis://127.0.0.1:{}/3", server.port());
    let redlock = Redlock::builder()
        .nodes([&url])
        .node_timeout(PATIENT)
        .build()
        .unwrap();
    let lock = redlock.lock("in-db-3", TTL).unwrap();
    assert!(server.get(b"in-db-3").is_none(), "set in db 0");
    // The admin client uses db 0: swap db 3 in to look, then swap it back.
    server.cmd(&["SWAPDB", "0", "3"]);
    assert!(server.get(b"in-db-3").is_some(), "not set in db 3");
    server.cmd(&["SWAPDB", "0", "3"]);
    lock.unlock().unwrap();
}

#[test]
fn one_node_down_out_of_five_still_acquires() {
    let mut cluster = Cluster::start(5);
    let redlock = client(&cluster);
    cluster.servers[2].kill();
    for i in 0..20 {
        let lock = redlock
            .lock(format!("r{i}"), TTL)
            .expect("4 of 5 are enough");
        lock.unlock().expect("released on a quorum");
    }
    eventually("no keys left on the live nodes", || {
        [0, 1, 3, 4]
            .iter()
            .map(|&i| cluster.servers[i].dbsize())
            .sum::<i64>()
            == 0
    });
}

#[test]
fn a_majority_down_fails_fast_with_a_typed_error() {
    let mut cluster = Cluster::start(5);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .lock_wait(Duration::from_millis(30))
        .retry_delay(Duration::from_millis(10))
        .retry_jitter(Duration::from_millis(5))
        .build()
        .unwrap();
    for i in [0, 2, 4] {
        cluster.servers[i].kill();
    }
    let started = Instant::now();
    let err = redlock.try_lock("down", TTL).expect_err("no quorum");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(err.is_no_quorum(), "{err}");
    let report = err.nodes().unwrap();
    let refused = report
        .iter()
        .filter(|s| matches!(s.outcome(), NodeOutcome::Failed(NodeError::Refused)))
        .count();
    assert_eq!(refused, 3, "{report}");

    let started = Instant::now();
    let err = redlock.lock("down", TTL).expect_err("still no quorum");
    assert!(err.is_no_quorum(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    eventually("failed attempts released their keys", || {
        cluster.servers[1].dbsize() + cluster.servers[3].dbsize() == 0
    });
}

#[test]
fn a_paused_node_does_not_hold_up_a_healthy_quorum() {
    let cluster = Cluster::start(5);
    // A long node timeout: if a round waited for the paused node, the pairs
    // would take that long at least; without, twenty rounds take far less,
    // on a busy machine too.
    let node_timeout = Duration::from_secs(10);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    redlock
        .lock("warm", Duration::from_secs(60))
        .unwrap()
        .unlock()
        .unwrap();
    let _paused = cluster.servers[4].pause();
    let started = Instant::now();
    for i in 0..10 {
        let lock = redlock
            .lock(format!("p{i}"), Duration::from_secs(60))
            .expect("acquired");
        lock.unlock().expect("released");
    }
    assert!(
        started.elapsed() < node_timeout,
        "10 pairs took {:?}: rounds waited for the paused node",
        started.elapsed()
    );
}

#[test]
fn a_frozen_master_is_sent_a_few_sets_not_one_per_lock() {
    // Master 2 is frozen. Its replies are far from their deadline (10 s, the
    // locks' TTL: 100 pairs on a busy machine end long before), so only how
    // many it owes shows that it lags: after a few locks, it must be sent
    // no more SETs (each would wait there, and run when it resumes).
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    eventually("the warm-up released everywhere", || {
        cluster.total_keys() == 0
    });
    let before = cluster.servers[2].calls_of("set");
    let frozen = cluster.servers[2].pause();
    let mut left_out = 0;
    for i in 0..100 {
        let lock = redlock
            .lock(format!("f{i}"), TTL)
            .expect("granted by 0 and 1");
        left_out += usize::from(lock.masters().nth(2).unwrap().1 == KeyState::Absent);
        lock.unlock().expect("released by 0 and 1");
    }
    drop(frozen);
    // Once resumed, it runs what it was sent, each release after its SET.
    eventually("the resumed master ran all it was sent", || {
        let answered = redlock.ping().is_ok_and(|report| {
            report
                .iter()
                .all(|status| *status.outcome() == NodeOutcome::Agreed)
        });
        answered && cluster.servers[2].dbsize() == 0
    });
    let sets = cluster.servers[2].calls_of("set") - before;
    assert!(
        sets <= 10,
        "the frozen master was sent {sets} SETs for 100 locks"
    );
    assert_eq!(
        sets as usize + left_out,
        100,
        "{sets} SETs sent, {left_out} left out"
    );
}

#[test]
fn a_paused_node_costs_a_round_no_more_than_its_deadline() {
    let mut cluster = Cluster::start(3);
    let node_timeout = Duration::from_millis(200);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    cluster.servers[0].kill();
    let _paused = cluster.servers[1].pause();
    // The quorum (2 of 3) now needs the paused node: the round must end at
    // its deadline, not hang.
    let started = Instant::now();
    let err = redlock.try_lock("stuck", TTL).expect_err("no quorum");
    let took = started.elapsed();
    assert!(took >= node_timeout, "gave up early: {took:?}");
    assert!(
        took < node_timeout + Duration::from_secs(2),
        "took {took:?}"
    );
    assert!(err.is_no_quorum(), "{err}");
    let paused_name = format!("127.0.0.1:{}", cluster.servers[1].port());
    let paused = err
        .nodes()
        .unwrap()
        .iter()
        .find(|s| s.node() == paused_name)
        .unwrap();
    // Timed out (sent the SET, behind any reply to the warm-up it still
    // owed); or, had that reply been overdue already (a machine stalled
    // for 200 ms), held back as lagging (never sent the SET) until the
    // deadline.
    assert!(
        matches!(
            paused.outcome(),
            NodeOutcome::Failed(NodeError::TimedOut(_) | NodeError::Backlogged)
        ),
        "{paused:?}"
    );
}

/// A client whose rounds may take seconds (so that no test below depends on
/// timing), whose `lock` retries a failure for `lock_wait`, about 100 ms
/// apart (`try_lock` makes one attempt), and whose connections to masters 0 and 1
/// of `cluster` lag for about `pause`: their writes are paused, and locks
/// are taken and released (granted and released by masters 2, 3 and 4, and
/// queued on 0 and 1 too) until 0 and 1 owe so many replies that an
/// acquisition leaves them out.
fn client_with_two_lagging_masters(
    cluster: &Cluster,
    pause: Duration,
    lock_wait: Duration,
) -> Redlock {
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(3))
        .lock_wait(lock_wait)
        .retry_delay(Duration::from_millis(100))
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let millis = pause.as_millis().to_string();
    for server in &cluster.servers[..2] {
        server.cmd(&["CLIENT", "PAUSE", &millis, "WRITE"]);
    }
    for i in 0.. {
        let lock = redlock.lock(format!("busy:{i}"), TTL).unwrap();
        let states: Vec<_> = lock.masters().map(|(_, state)| state).collect();
        lock.unlock().expect("released by masters 2, 3 and 4");
        if states[..2] == [KeyState::Absent; 2] {
            break;
        }
        assert!(i < 100, "masters 0 and 1 never lagged: {states:?}");
    }
    redlock
}

#[test]
fn a_master_frozen_while_idle_is_covered_by_the_lagging_ones() {
    // Masters 0 and 1 lag behind our earlier commands, so an acquisition
    // goes first to the three others, 2, 3 and 4, exactly a quorum. Master
    // 2 is frozen while idle: it looks free, but will not answer. The round
    // must bring in 0 and 1 once they catch up, not fail.
    let cluster = Cluster::start(5);
    let redlock =
        client_with_two_lagging_masters(&cluster, Duration::from_millis(300), Duration::ZERO);
    let frozen = cluster.servers[2].pause();
    let lock = redlock
        .try_lock("wanted", Duration::from_secs(60))
        .expect("no error")
        .expect("granted by 0, 1, 3 and 4");
    drop(frozen);
    lock.unlock().unwrap();
    eventually("every key released", || cluster.total_keys() == 0);
}

#[test]
fn a_stale_key_on_one_master_costs_an_attempt_not_the_lock() {
    // Master 2 still holds a stale key of this name (a holder that crashed
    // before releasing it there), and masters 0 and 1 lag, so an attempt
    // goes to 2, 3 and 4 only. Master 2's refusal ends it at once: the
    // lagging masters are not waited for (under contention that would only
    // slow failures down). The next attempt, once they have caught up, asks
    // them too, and wins with 0, 1, 3 and 4.
    let cluster = Cluster::start(5);
    cluster.servers[2].cmd(&["SET", "wanted", "stale", "PX", "60000"]);
    // Long enough for the setup's locks to make 0 and 1 lag and for the
    // refused attempt, on a busy machine too.
    let pause = Duration::from_secs(4);
    // Before the masters' pause began: it ends `pause` after this at the
    // earliest, so an attempt that returns sooner did not wait for it.
    let paused_from = Instant::now();
    let redlock = client_with_two_lagging_masters(&cluster, pause, Duration::from_secs(20));
    let first = redlock
        .try_lock("wanted", Duration::from_secs(60))
        .expect("no error");
    assert!(first.is_none(), "refused by master 2, with 0 and 1 lagging");
    assert!(
        paused_from.elapsed() < pause,
        "the refused attempt waited for the lagging masters"
    );
    let lock = redlock
        .lock("wanted", Duration::from_secs(60))
        .expect("granted by 0, 1, 3 and 4 once 0 and 1 caught up");
    eventually("a quorum holds the lock's value", || {
        let values: Vec<_> = cluster.servers.iter().map(|s| s.get(b"wanted")).collect();
        let ours = values[3].clone().expect("set on master 3");
        ours != b"stale" && values.iter().filter(|v| v.as_ref() == Some(&ours)).count() >= 3
    });
    assert_eq!(
        cluster.servers[2].get(b"wanted").as_deref(),
        Some(&b"stale"[..])
    );
    lock.unlock().unwrap();
}

#[test]
fn connections_are_reused_one_per_thread() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    for i in 0..200 {
        redlock
            .lock(format!("reuse{i}"), TTL)
            .unwrap()
            .unlock()
            .unwrap();
    }
    for server in &cluster.servers {
        // Our one connection, plus the admin client asking.
        let clients = server.cmd(&["CLIENT", "LIST"]);
        let support::OwnedReply::Bulk(list) = clients else {
            panic!("CLIENT LIST: {clients:?}")
        };
        let lines = list
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(lines, 2, "{}", String::from_utf8_lossy(&list));
    }
}

#[test]
fn a_restarted_master_is_reconnected_within_the_same_call() {
    let mut cluster = Cluster::start(1);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    redlock.lock("before", TTL).unwrap().unlock().unwrap();
    // The idle connection dies with the server; the next call notices
    // before sending on it, and reconnects in the same round.
    cluster.servers[0].kill();
    cluster.servers[0].restart();
    let lock = redlock
        .lock("after", TTL)
        .expect("reconnected without a failed round");
    lock.unlock().unwrap();
}

#[test]
fn threads_sharing_a_handle_never_find_their_released_locks_still_held() {
    // Each thread reuses its own names quickly. A release that overtook its
    // own SET on some master (sent on another connection than the SET)
    // would leave the key there, and the name's next use would find it
    // held: the release must always follow its SET on the same connection.
    let cluster = Cluster::start(5);
    // 20 000 rounds on five masters: on a loaded machine, one in so many
    // was seen to find three masters not answering within 1 s. Rounds of
    // up to 5 s, so that every call is answered and nothing here depends
    // on timing.
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("valid configuration");
    thread::scope(|s| {
        for t in 0..4 {
            let redlock = &redlock;
            s.spawn(move || {
                let names: Vec<String> = (0..50).map(|i| format!("t{t}:{i}")).collect();
                for i in 0..2500 {
                    let lock = redlock.try_lock(&names[i % names.len()], TTL);
                    let lock = lock.expect("no error").unwrap_or_else(|| {
                        panic!(
                            "thread {t}: its own released name {} is held",
                            names[i % names.len()]
                        )
                    });
                    lock.unlock().expect("released");
                }
            });
        }
    });
    eventually("keys gone", || cluster.total_keys() == 0);
}

/// Three masters whose ACL user may run scripts but not the SCRIPT command
/// (so scripts cannot be loaded and must go by body), with `resource`
/// already held by another value on masters 0 and 1.
fn cluster_without_script_command(resource: &str) -> (Cluster, Redlock) {
    let cluster = Cluster::start_with(3, &["--user", "locker on >pw ~* &* +@all -script"]);
    for server in &cluster.servers[..2] {
        server.cmd(&["SET", resource, "someone-else", "PX", "60000"]);
    }
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", s.port()))
        .collect();
    let redlock = Redlock::builder()
        .nodes(urls)
        .node_timeout(PATIENT)
        .build()
        .unwrap();
    (cluster, redlock)
}

#[test]
fn a_failed_acquisition_is_released_under_an_acl_that_forbids_script() {
    // The release after a failed acquisition is not awaited. With SCRIPT
    // forbidden, EVALSHA can only answer NOSCRIPT: it must go by body.
    let (cluster, redlock) = cluster_without_script_command("taken");
    assert!(redlock.try_lock("taken", TTL).unwrap().is_none());
    eventually("our key released on the free master", || {
        cluster.servers[2].get(b"taken").is_none()
    });
    // Locking and unlocking work too, by body.
    let lock = redlock.lock("free", TTL).expect("acquired");
    lock.unlock().expect("released");
    eventually("no key left", || {
        cluster.servers.iter().all(|s| s.get(b"free").is_none())
    });
}

#[test]
fn a_failed_acquisition_is_released_after_a_script_flush() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    // Warm connections: the scripts are loaded, so releases go by digest.
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    for server in &cluster.servers {
        server.cmd(&["SCRIPT", "FLUSH"]);
    }
    for server in &cluster.servers[..2] {
        server.cmd(&["SET", "taken", "someone-else", "PX", "60000"]);
    }
    assert!(redlock.try_lock("taken", TTL).unwrap().is_none());
    eventually("our key released on the free master", || {
        cluster.servers[2].get(b"taken").is_none()
    });
}

#[test]
fn a_late_noscript_to_an_unlock_is_answered_with_eval_on_the_next_call() {
    // The unlock returns once masters 0 and 1 deleted the key; master 2,
    // its writes paused, answers later. Its NOSCRIPT is read by the next
    // call on the connection at the latest, which sends the release again
    // by body instead of taking NOSCRIPT as an answer.
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let lock = redlock.lock("late", TTL).unwrap();
    for server in &cluster.servers {
        server.cmd(&["SCRIPT", "FLUSH"]);
    }
    cluster.servers[2].cmd(&["CLIENT", "PAUSE", "200", "WRITE"]);
    lock.unlock().expect("released by masters 0 and 1");
    // Redis answers NOSCRIPT once the pause ends, after the call returned;
    // Valkey checks the script before pausing, so its NOSCRIPT comes during
    // the call and the EVAL is sent at once. Either way, after the next
    // call the key must be gone. A write of the test's own waits out the
    // pause, and master 2 runs it after what the client had sent before
    // (paused commands resume in order): once it is done, the late answer
    // has been given.
    assert_eq!(
        cluster.servers[2].cmd(&["DEL", "no-such-key"]),
        support::OwnedReply::Integer(0)
    );
    let before_next = cluster.servers[2].command_calls();
    redlock.lock("next", TTL).unwrap().unlock().unwrap();
    let limit = Instant::now() + Duration::from_secs(5);
    while cluster.servers[2].get(b"late").is_some() {
        // What master 2 ran, to tell a release never re-sent from one
        // that went wrong (seen twice under load, not reproduced since).
        assert!(
            Instant::now() < limit,
            "master 2's copy of the key is still there 5 s after the next call; \
             its commands before that call: {before_next:?}, now: {:?}",
            cluster.servers[2].command_calls()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn back_to_back_locks_are_set_on_every_master() {
    // A call returns once a quorum has answered, so when the next one
    // starts the slowest master often still owes the last reply, by
    // microseconds. It must be sent the SET all the same (behind that
    // reply, on the same connection), not left out: a lock held on just a
    // quorum of masters is lost with one more of them.
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    for i in 0..200 {
        let name = format!("loop:{i}");
        let lock = redlock.lock(&name, TTL).expect("acquired");
        // Held where the round read the answer; Unconfirmed where it was
        // decided first (the SET was sent there too).
        let states: Vec<_> = lock.masters().map(|(_, state)| state).collect();
        assert!(
            !states.contains(&KeyState::Absent),
            "lock {i} left a master out: {states:?}"
        );
        eventually("the key set on every master", || {
            let values: Vec<_> = cluster
                .servers
                .iter()
                .map(|s| s.get(name.as_bytes()))
                .collect();
            values[0].is_some() && values.iter().all(|v| *v == values[0])
        });
        lock.unlock().expect("released");
    }
    eventually("keys gone", || cluster.total_keys() == 0);
}

#[test]
fn a_lock_taken_while_two_masters_lag_survives_losing_a_holder() {
    // Masters 0 and 1 lag, so the acquisition goes to 2, 3 and 4 only:
    // exactly a quorum holds the key. Master 2 then dies. With 4 of 5
    // masters up, extend (which also sets the key on 0 and 1) and unlock
    // must succeed. (They lag for 2 s: both acquisitions below must find
    // them lagging, also on a busy machine.)
    let mut cluster = Cluster::start(5);
    let redlock = client_with_two_lagging_masters(&cluster, Duration::from_secs(2), Duration::ZERO);
    let mut extended = redlock
        .try_lock("extended", Duration::from_secs(60))
        .unwrap()
        .expect("granted by 2, 3 and 4");
    let unlocked = redlock
        .try_lock("unlocked", Duration::from_secs(60))
        .unwrap()
        .expect("granted by 2, 3 and 4");
    for lock in [&extended, &unlocked] {
        let states: Vec<_> = lock.masters().map(|(_, state)| state).collect();
        assert_eq!(
            &states[..2],
            [KeyState::Absent; 2],
            "the lagging masters were left out"
        );
    }
    cluster.servers[2].kill();
    extended
        .extend(Duration::from_secs(60))
        .expect("4 of 5 masters are up");
    assert!(extended.validity() > Duration::from_secs(50));
    eventually("the key set on every live master", || {
        [0, 1, 3, 4]
            .iter()
            .all(|&i| cluster.servers[i].get(b"extended").is_some())
    });
    extended.unlock().expect("4 of 5 masters are up");
    unlocked
        .unlock()
        .expect("2 holders and 2 masters never sent it");
    eventually("no key left on the live masters", || {
        [0, 1, 3, 4]
            .iter()
            .all(|&i| cluster.servers[i].dbsize() == 0)
    });
}

#[test]
fn validity_drops_to_zero_when_an_extension_finds_the_lock_lost() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let mut lock = redlock.lock("lost", TTL).unwrap();
    for server in &cluster.servers[..2] {
        server.cmd(&["DEL", "lost"]);
    }
    assert!(lock.validity() > Duration::from_secs(9));
    let err = lock.extend(TTL).expect_err("lost on a majority");
    assert!(matches!(err, Error::LockLost(_)), "{err}");
    assert_eq!(lock.validity(), Duration::ZERO);
    assert!(lock.valid_until() <= Instant::now());
}

/// After an extension found the lock lost, its validity is zero; later
/// calls say the lock was lost (as that extension did), not that it expired
/// some absurd time ago (the validity's end is no real instant then). The
/// release is still sent.
#[test]
fn calls_after_a_lost_lock_report_it_lost_not_expired() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let mut lock = redlock.lock("gone", TTL).unwrap();
    eventually("the key is set on every master", || {
        cluster.servers.iter().all(|s| s.get(b"gone").is_some())
    });
    cluster.servers[0].cmd(&["DEL", "gone"]);
    cluster.servers[1].cmd(&["DEL", "gone"]);
    let lost = lock.extend(TTL).expect_err("lost on a majority");
    assert!(matches!(lost, Error::LockLost(_)), "{lost}");
    assert_eq!(lock.validity(), Duration::ZERO);

    let again = lock.extend(TTL).expect_err("still lost");
    assert!(matches!(again, Error::LockLost(_)), "{again}");
    assert_eq!(again.to_string(), lost.to_string());
    let err = lock.unlock().expect_err("lost before the call");
    assert!(matches!(err, Error::LockLost(_)), "{err}");
    assert!(err.is_lock_lost(), "{err}");
    assert_eq!(err.to_string(), lost.to_string());
    assert!(!err.to_string().contains("expired"), "{err}");
    eventually("the release deleted the key where it remained", || {
        cluster.servers[2].get(b"gone").is_none()
    });
}

#[test]
fn short_ttls_work_with_the_default_node_timeout() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder().nodes(cluster.urls()).build().unwrap(); // node timeout 50 ms
    let lock = redlock
        .lock("short", Duration::from_millis(300))
        .expect("a 300 ms lock");
    assert!(lock.validity() <= Duration::from_millis(300));
    lock.unlock().unwrap();
    // The shortest TTL is accepted. Its validity (under a millisecond after
    // the drift) is met by a round on an idle machine, not on a busy one:
    // granted, or refused because the rounds outlasted it, never refused
    // as a configuration error.
    match redlock.lock("tiny", redlock_sync::MIN_TTL) {
        Ok(tiny) => drop(tiny),
        Err(e) => assert!(e.is_too_slow() || e.is_no_quorum(), "{e}"),
    }
    let err = redlock
        .lock("too-short", Duration::from_millis(2))
        .expect_err("no validity possible");
    assert!(err.is_config(), "{err}");
    assert!(err.to_string().contains("at least 3ms"), "{err}");
}

#[test]
fn a_server_that_echoes_the_password_never_shows_it() {
    // With AUTH renamed away, the server answers "unknown command 'AUTH',
    // with args beginning with: '<password>'".
    let server = RedisServer::start_with(&["--rename-command", "AUTH", ""]);
    let url = format!("redis://:hunter2-secret@127.0.0.1:{}", server.port());
    let redlock = Redlock::builder()
        .nodes([&url])
        .node_timeout(PATIENT)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    for _ in 0..2 {
        let err = redlock.lock("r", TTL).expect_err("AUTH refused");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("hunter2"), "password shown: {shown}");
        assert!(err.nodes().is_some(), "{shown}");
    }
    let health = format!("{:?}", redlock.health());
    assert!(!health.contains("hunter2"), "{health}");
}

/// Our connections to `server` (CLIENT LIST lines, less the admin's own).
fn our_connections(server: &RedisServer) -> usize {
    let support::OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST")
    };
    list.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.windows(14).any(|w| w == b"cmd=client|lis"))
        .count()
}

#[test]
fn a_refused_handshake_closes_the_connection_and_is_reported_each_time() {
    let server = RedisServer::start_with(&["--requirepass", "right"]).with_admin_auth(&["right"]);
    let url = format!("redis://:wrong@127.0.0.1:{}", server.port());
    // A retry would come after the retry delay at the earliest: a call that
    // ends sooner made one attempt. (Long, so that a busy machine's slow
    // attempt is not taken for a retry.)
    let retry_delay = Duration::from_secs(2);
    let redlock = Redlock::builder()
        .nodes([&url])
        .node_timeout(PATIENT)
        .retry_delay(retry_delay)
        .build()
        .unwrap();
    for call in 0..3 {
        let started = Instant::now();
        let err = redlock.lock("r", TTL).expect_err("refused");
        assert!(err.is_auth_failure(), "call {call}: {err}");
        assert!(!err.is_retryable(), "call {call}: {err}");
        assert!(
            started.elapsed() < retry_delay,
            "call {call}: retried a refused password"
        );
        assert!(err.to_string().contains("WRONGPASS"), "call {call}: {err}");
        eventually("the refused connection closed", || {
            our_connections(&server) == 0
        });
    }
}

#[test]
fn held_locks_use_no_connections_and_still_release_behind_their_set() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let locks: Vec<_> = (0..300)
        .map(|i| redlock.lock(format!("held:{i}"), TTL).expect("acquired"))
        .collect();
    // Counted by each server (CLIENT LIST), not by this process's file
    // descriptors: other tests of this binary open and close descriptors
    // at the same time.
    for server in &cluster.servers {
        assert!(our_connections(server) <= 2, "{}", our_connections(server));
    }
    // Each lock is held by at least a quorum (a master still answering
    // earlier commands may have been left out).
    eventually("every lock on a quorum", || cluster.total_keys() >= 600);
    for lock in locks {
        lock.unlock().expect("released");
    }
    eventually("keys gone", || cluster.total_keys() == 0);
}

#[test]
fn a_release_waits_behind_its_set_on_a_frozen_master() {
    // Master 2 is frozen while the lock is taken: its SET sits unanswered
    // in its socket. Other locks are taken and released meanwhile; then the
    // lock is released while master 2 is still frozen. The release must go
    // behind the SET on the same connection, so once master 2 resumes it
    // runs SET then release, and no key is left there. (A node timeout as
    // long as the TTL: master 2's SET must not time out, and its connection
    // be dropped, while a busy machine takes the other locks.)
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let frozen = cluster.servers[2].pause();
    let lock = redlock.lock("behind", TTL).expect("granted by 0 and 1");
    for i in 0..10 {
        redlock
            .lock(format!("other:{i}"), TTL)
            .unwrap()
            .unlock()
            .unwrap();
    }
    lock.unlock().expect("released by 0 and 1");
    drop(frozen);
    eventually("no key left on the resumed master", || {
        cluster.servers[2].dbsize() == 0
    });
}
