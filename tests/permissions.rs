//! ACL users that lack a right the client needs, against real servers.
//!
//! - Without scripting rights (`-@scripting`), no lock could ever be
//!   released or extended: the client must never set a key there, whatever
//!   the order of the calls that opened its connections, and must say which
//!   right is missing (a permanent error: `lock()` does not retry it).
//! - Without channel rights (Redis 7's default for new users), waiters
//!   cannot hear release notices and fall back to polling: `health()` and
//!   the error of a wait that ran out say so.

mod support;

use redlock_sync::{Error, NodeOutcome, Redlock};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// An ACL user that may do everything but run scripts.
const NO_SCRIPTS: &str = "locker on >pw ~* &* +@all -@scripting";

/// An ACL user with every command and key, and no channel (pub/sub) rights.
const NO_CHANNELS: &str = "locker on >pw ~* resetchannels +@all";

/// The URLs of `servers` for the ACL user `locker`.
fn locker_urls<'a>(servers: impl IntoIterator<Item = &'a RedisServer>) -> Vec<String> {
    servers
        .into_iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", s.port()))
        .collect()
}

/// A node timeout a loaded machine meets: a master that answers late
/// would show as timed out, not as refused for want of a right (the
/// default, 50 ms, can be missed there).
const PATIENT: Duration = Duration::from_secs(1);

/// A client of `urls` whose `lock()` would retry for 5 s (200 ms pauses).
/// It releases by script only: these tests are about the scripts' rights,
/// on any server (where a master has native commands, a user without
/// scripting rights can lock: tests/native.rs).
fn client(urls: Vec<String>) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .node_timeout(PATIENT)
        .native_commands(false)
        .retry_delay(Duration::from_millis(200))
        .lock_wait(Duration::from_secs(5))
        .build()
        .expect("valid configuration")
}

/// Asserts that `error` is the refusal to lock for want of scripting
/// rights on every master: named, permanent, with what to grant.
fn assert_refused_for_scripting(error: &Error, what: &str) {
    assert!(error.is_no_quorum(), "{what}: {error}");
    assert!(!error.is_retryable(), "{what}: retried: {error}");
    assert!(error.is_permission_denied(), "{what}: {error}");
    // Every master failed for good, but those whose answer the round no
    // longer needed (a quorum had become impossible without them).
    let report = error.nodes().expect("a report");
    let mut failed = 0;
    for status in report {
        match status.outcome() {
            NodeOutcome::Failed(e) if e.is_permanent() => failed += 1,
            NodeOutcome::Pending => {}
            _ => panic!("{what}: {status:?}"),
        }
    }
    assert!(failed > report.len() / 2, "{what}: {error}");
    let text = error.to_string();
    assert!(
        text.contains("+evalsha +eval") && text.contains("ACL SETUSER"),
        "{what}: the error does not say what to grant: {text}"
    );
    assert!(!text.contains("pw"), "{what}: {text}");
}

/// No key at all on any master.
fn assert_no_key(cluster: &Cluster, what: &str) {
    let keys: Vec<Vec<Vec<u8>>> = cluster.servers.iter().map(|s| s.keys()).collect();
    assert!(
        keys.iter().all(Vec::is_empty),
        "{what}: keys set where they could never be released: {keys:?}"
    );
}

/// A `try_lock` of `resource` that must be refused for want of scripting
/// rights.
fn assert_try_lock_refused(redlock: &Redlock, resource: &str, what: &str) {
    match redlock.try_lock(resource, TTL) {
        Ok(Some(lock)) => {
            let unlocked = lock.unlock();
            panic!("{what}: locked (unlock: {unlocked:?})");
        }
        Ok(None) => panic!("{what}: contended, not refused"),
        Err(e) => assert_refused_for_scripting(&e, what),
    }
}

/// `try_lock` on a client whose connections are open and warm, and
/// `lock()`, which must give up at once.
fn assert_never_locks(cluster: &Cluster, redlock: &Redlock, what: &str) {
    for attempt in 0..3 {
        assert_try_lock_refused(redlock, "job", &format!("{what}: try_lock {attempt}"));
        assert_no_key(cluster, &format!("{what}: after try_lock {attempt}"));
    }
    let started = Instant::now();
    let error = redlock
        .lock("job", TTL)
        .expect_err("no lock without scripts");
    let took = started.elapsed();
    assert_refused_for_scripting(&error, &format!("{what}: lock()"));
    assert!(
        took < Duration::from_secs(2),
        "{what}: lock() retried a permanent refusal for {took:?}"
    );
    assert_no_key(cluster, &format!("{what}: after lock()"));
    for health in redlock.health() {
        let shown = health.to_string();
        assert!(health.is_failing(), "{what}: {shown}");
        assert!(shown.contains("+evalsha +eval"), "{what}: {shown}");
    }
    let ping = redlock.ping().expect_err("locking is unavailable");
    assert_refused_for_scripting(&ping, &format!("{what}: ping()"));
}

#[test]
fn without_scripting_rights_ping_then_try_lock_sets_no_key() {
    let cluster = Cluster::start_with(3, &["--user", NO_SCRIPTS]);
    let redlock = client(locker_urls(&cluster.servers));
    // PING runs no script: it opens connections the way any call does.
    let ping = redlock.ping().expect_err("locking is unavailable");
    assert_refused_for_scripting(&ping, "ping first");
    assert_never_locks(&cluster, &redlock, "ping first");
}

#[test]
fn without_scripting_rights_try_lock_first_sets_no_key() {
    let cluster = Cluster::start_with(3, &["--user", NO_SCRIPTS]);
    let redlock = client(locker_urls(&cluster.servers));
    assert_never_locks(&cluster, &redlock, "try_lock first");
}

#[test]
fn without_scripting_rights_lock_first_gives_up_at_once() {
    let cluster = Cluster::start_with(3, &["--user", NO_SCRIPTS]);
    let redlock = client(locker_urls(&cluster.servers));
    let started = Instant::now();
    let error = redlock
        .lock("job", TTL)
        .expect_err("no lock without scripts");
    assert_refused_for_scripting(&error, "lock first");
    assert!(started.elapsed() < Duration::from_secs(2), "retried");
    assert_never_locks(&cluster, &redlock, "lock first");
}

#[test]
fn without_scripting_rights_a_waiter_never_takes_the_lock() {
    // Another client (the default user, with every right) holds the lock
    // and releases it while ours waits: the waiter's connections (its
    // tries, its announcements on the queue's master, its subscriber
    // connections) must not end in a key it could not release.
    let cluster = Cluster::start_with(3, &["--user", NO_SCRIPTS]);
    let holder = client(cluster.urls());
    let waiter = client(locker_urls(&cluster.servers));
    for round in 0..2 {
        let held = holder.lock("job", TTL).expect("the holder locks");
        let waiting = {
            let waiter = waiter.clone();
            thread::spawn(move || {
                let started = Instant::now();
                let got = waiter.try_lock_for("job", TTL, Duration::from_secs(3));
                (got, started.elapsed())
            })
        };
        thread::sleep(Duration::from_millis(300));
        held.unlock().expect("the holder releases");
        let (got, took) = waiting.join().expect("waiter");
        match got {
            Ok(Some(lock)) => {
                let unlocked = lock.unlock();
                panic!("round {round}: the waiter locked (unlock: {unlocked:?})");
            }
            Ok(None) => panic!("round {round}: the waiter found the lock held"),
            Err(e) => assert_refused_for_scripting(&e, &format!("waiter, round {round}")),
        }
        assert!(
            took < Duration::from_secs(2),
            "round {round}: waited {took:?}"
        );
        assert_no_key(&cluster, &format!("waiter, round {round}"));
    }
}

#[test]
fn a_master_without_scripting_rights_is_never_sent_a_set() {
    // Two masters where the user may run scripts, one where it may not: a
    // quorum of two still locks, and the third never holds a key.
    let servers = [
        RedisServer::start_with(&["--user", "locker on >pw ~* &* +@all"]),
        RedisServer::start_with(&["--user", "locker on >pw ~* &* +@all"]),
        RedisServer::start_with(&["--user", NO_SCRIPTS]),
    ];
    let redlock = client(locker_urls(&servers));
    let report = redlock.ping().expect("a quorum of two");
    let outcomes: Vec<&NodeOutcome> = report.iter().map(|s| s.outcome()).collect();
    assert!(
        matches!(
            outcomes[..],
            [
                NodeOutcome::Agreed,
                NodeOutcome::Agreed,
                NodeOutcome::Failed(_)
            ]
        ),
        "{report}"
    );
    assert!(report.to_string().contains("+evalsha +eval"), "{report}");
    for i in 0..20 {
        let name = format!("job:{i}");
        let lock = redlock
            .try_lock(&name, TTL)
            .expect("no error")
            .expect("locked on two masters");
        assert!(
            servers[2].keys().is_empty(),
            "lock {i}: a key on the master that cannot release it"
        );
        lock.unlock().expect("released by the other two");
    }
    let health = redlock.health();
    assert!(
        !health[0].is_failing() && !health[1].is_failing(),
        "{health:?}"
    );
    assert!(health[2].is_failing(), "{}", health[2]);
    assert!(
        health[2].to_string().contains("+evalsha +eval"),
        "{}",
        health[2]
    );
    for server in &servers {
        assert!(server.keys().is_empty(), "{:?}", server.keys());
    }
}

#[test]
fn scripting_rights_revoked_are_learned_at_the_first_refused_release() {
    let cluster = Cluster::start_with(3, &["--user", "locker on >pw ~* &* +@all"]);
    let redlock = client(locker_urls(&cluster.servers));
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let lock = redlock.lock("held", TTL).expect("locked");
    for server in &cluster.servers {
        server.cmd(&["ACL", "SETUSER", "locker", "-@scripting"]);
    }
    let error = lock.unlock().expect_err("the release is refused now");
    assert!(error.is_permission_denied(), "{error}");
    assert!(!error.is_retryable(), "{error}");
    // The unlock returned once two masters refused; the third's refusal is
    // read by the next call on its connection (a SET sent on it before
    // then would go out behind the refusal: see the guide's known
    // limits). `ping()` awaits every master.
    let ping = redlock.ping().expect_err("locking is unavailable");
    assert_refused_for_scripting(&ping, "ping after the refusal");
    // The refusal is not forgotten: no key is set where it could not be
    // released, on new connections either.
    for attempt in 0..3 {
        assert_try_lock_refused(&redlock, "next", &format!("try_lock {attempt}"));
    }
    for server in &cluster.servers {
        assert_eq!(server.get(b"next"), None);
    }
    // Granted again, the right is found by the next connection: within
    // the reconnect backoff (at most a second).
    for server in &cluster.servers {
        server.cmd(&["ACL", "SETUSER", "locker", "+@scripting"]);
    }
    let limit = Instant::now() + Duration::from_secs(5);
    let lock = loop {
        match redlock.try_lock("next", TTL) {
            Ok(Some(lock)) => break lock,
            other => {
                assert!(Instant::now() < limit, "still refused: {other:?}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    };
    lock.unlock().expect("released");
}

#[test]
fn without_channel_rights_health_and_the_error_of_a_wait_say_so() {
    let cluster = Cluster::start_with(3, &["--user", NO_CHANNELS]);
    let holder = client(locker_urls(&cluster.servers));
    let _held = holder.lock("job", TTL).expect("the holder locks");
    let waiter = Redlock::builder()
        .nodes(locker_urls(&cluster.servers))
        .node_timeout(PATIENT)
        .retry_delay(Duration::from_millis(100))
        .lock_wait(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    let error = waiter.lock("job", TTL).expect_err("the lock stays held");
    assert!(error.is_contention(), "{error}");
    let text = error.to_string();
    assert_eq!(
        text.matches("&redlock-sync:released:*").count(),
        1,
        "the error should say once what to grant: {text}"
    );
    assert!(text.contains("NOPERM"), "{text}");
    for health in waiter.health() {
        let shown = health.to_string();
        assert!(!health.is_failing(), "locking works: {shown}");
        assert!(
            shown.contains("&redlock-sync:released:*"),
            "health does not say waiters poll: {shown}"
        );
    }
    // With channel rights (the default user), nothing of the kind.
    let granted = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(Duration::from_millis(100))
        .lock_wait(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    let error = granted.lock("job", TTL).expect_err("the lock stays held");
    assert!(!error.to_string().contains("released:*"), "{error}");
    for health in granted.health() {
        assert!(!health.to_string().contains("released:*"), "{health}");
    }
}

/// A master refused for good (no scripting rights; a wrong password) and
/// then fixed by the operator is seen as fixed by the very next `ping()`,
/// and `health()` agrees. (`ping()` never dialled a master whose last
/// failure was permanent: it kept reporting the old refusal until some
/// acquisition reconnected.)
#[test]
fn a_master_fixed_by_the_operator_is_seen_fixed_by_the_next_ping() {
    // No scripting rights, then granted.
    let cluster = Cluster::start_with(3, &["--user", NO_SCRIPTS]);
    let redlock = client(locker_urls(&cluster.servers));
    let ping = redlock.ping().expect_err("locking is unavailable");
    assert_refused_for_scripting(&ping, "before the grant");
    for server in &cluster.servers {
        server.cmd(&["ACL", "SETUSER", "locker", "+@scripting"]);
    }
    let report = redlock.ping().expect("granted: the next ping sees it");
    assert!(
        report.iter().all(|s| s.outcome() == &NodeOutcome::Agreed),
        "{report}"
    );
    for health in redlock.health() {
        assert!(!health.is_failing(), "{health}");
    }
    redlock
        .try_lock("job", TTL)
        .expect("no error")
        .expect("locked")
        .unlock()
        .expect("released");

    // A wrong password, then the user's password changed to it.
    let server = RedisServer::start_with(&["--user", "locker on >pw ~* &* +@all"]);
    let redlock = client(vec![format!(
        "redis://locker:other@127.0.0.1:{}",
        server.port()
    )]);
    let ping = redlock.ping().expect_err("wrong password");
    assert!(!ping.is_retryable(), "{ping}");
    server.cmd(&["ACL", "SETUSER", "locker", ">other"]);
    redlock.ping().expect("the password is right now");
    assert!(!redlock.health()[0].is_failing(), "{}", redlock.health()[0]);
}

/// Regression: the set's acquisition script looked at its keys with
/// `EXISTS`, a right no single lock needs, so a user granted what one lock
/// needs but not `EXISTS` could take one lock and never a set (the script
/// failed inside Lua, read as a refusal of scripts). It looks with `GET`
/// now: the same user takes a set of two and releases it, leaving no key.
#[test]
fn a_user_without_exists_takes_a_set_as_it_takes_one_lock() {
    let cluster = Cluster::start_with(3, &["--user", "locker on >pw ~* &* +@all -exists"]);
    let redlock = client(locker_urls(&cluster.servers));
    let one = redlock
        .try_lock("alone", TTL)
        .expect("one lock")
        .expect("free");
    one.unlock().expect("the lock released");
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .expect("a set, without the right to EXISTS")
        .expect("both free");
    assert_eq!(set.resources().count(), 2);
    set.unlock().expect("the set released");
    assert_no_key(&cluster, "after the set's release");
}
