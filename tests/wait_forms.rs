//! The ways to wait for a held lock beside `lock` and `try_lock_for`:
//! `try_lock_until` (a deadline), `lock_waiting` with each [`Wait`],
//! `with_lock_waiting` (a wait per call), a wait with no time limit; and
//! `Redlock::shutdown`, which ends them from another thread. Real servers
//! throughout.

mod support;

use redlock_sync::{ConfigError, Error, Lock, Redlock, Wait};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, OwnedReply, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// So long that a waiter that acquires within a few seconds was woken, not
/// polled.
const NEVER: Duration = Duration::from_secs(30);

/// Generous: the machine may be busy.
const PROMPTLY: Duration = Duration::from_secs(5);

const CHANNEL_PREFIX: &str = "redlock-sync:released:";

/// A client that retries only every 30 s: it can only be quick if woken.
fn woken_only(urls: Vec<String>) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .build()
        .expect("valid configuration")
}

/// Waits until every server has at least `n` subscribers on `resource`'s
/// channel: the waiters are listening.
fn wait_for_subscribers(cluster: &Cluster, resource: &str, n: i64) {
    let channel = format!("{CHANNEL_PREFIX}{resource}");
    let limit = Instant::now() + Duration::from_secs(10);
    for server in &cluster.servers {
        while subscribers(server, &channel) < n {
            assert!(Instant::now() < limit, "no subscriber after 10 s");
            thread::sleep(Duration::from_millis(2));
        }
    }
}

fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    match server.cmd(&["PUBSUB", "NUMSUB", channel]) {
        OwnedReply::Array(items) => match items.get(1) {
            Some(OwnedReply::Integer(count)) => *count,
            other => panic!("PUBSUB NUMSUB: {other:?}"),
        },
        other => panic!("PUBSUB NUMSUB: {other:?}"),
    }
}

/// One way to wait for `resource`, called by a waiting thread: whether it
/// got the lock (and released it).
type Form = fn(&Redlock, &str) -> Result<bool, Error>;

fn release(lock: Lock) -> Result<bool, Error> {
    lock.unlock().map(|_| true)
}

const FORMS: [(&str, Form); 6] = [
    ("try_lock_until", |r, key| {
        let deadline = Instant::now() + Duration::from_secs(20);
        match r.try_lock_until(key, TTL, deadline)? {
            Some(lock) => release(lock),
            None => Ok(false),
        }
    }),
    ("lock_waiting(Wait::For)", |r, key| {
        release(r.lock_waiting(key, TTL, Wait::For(Duration::from_secs(20)))?)
    }),
    ("lock_waiting(Wait::Until)", |r, key| {
        let deadline = Instant::now() + Duration::from_secs(20);
        release(r.lock_waiting(key, TTL, Wait::Until(deadline))?)
    }),
    ("lock_waiting(Wait::NoLimit)", |r, key| {
        release(r.lock_waiting(key, TTL, Wait::NoLimit)?)
    }),
    ("with_lock_waiting(Wait::NoLimit)", |r, key| {
        r.with_lock_waiting(key, TTL, TTL, Wait::NoLimit, |lease| lease.check().is_ok())
    }),
    ("with_lock_waiting(Wait::For)", |r, key| {
        let wait = Wait::For(Duration::from_secs(20));
        r.with_lock_waiting(key, TTL, TTL, wait, |lease| lease.check().is_ok())
    }),
];

/// Each form waits while another client holds the lock, and is woken by
/// the release: it gets the lock after the release, and well before the
/// 30 s fallback pause could have started a try.
#[test]
fn each_form_waits_and_is_woken_by_the_release() {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    for (round, (name, form)) in FORMS.into_iter().enumerate() {
        let key = format!("job:{round}");
        let lock = holder.lock(&key, TTL).expect("free");
        let waiting = {
            let (waiter, key) = (waiter.clone(), key.clone());
            thread::spawn(move || {
                let got = form(&waiter, &key);
                (got, Instant::now())
            })
        };
        wait_for_subscribers(&cluster, &key, 1);
        thread::sleep(Duration::from_millis(50));
        assert!(
            !waiting.is_finished(),
            "{name}: returned while the lock was held"
        );
        let released = Instant::now();
        lock.unlock().expect("released");
        let (got, at) = waiting.join().expect("the waiter");
        assert!(matches!(got, Ok(true)), "{name}: {got:?}");
        let after = at.saturating_duration_since(released);
        assert!(after < PROMPTLY, "{name}: took {after:?} after the release");
    }
    assert_eq!(cluster.total_keys(), 0);
}

/// `Wait::NoLimit` waits past the handle's configured wait (0.9 s by
/// default), which `lock` gives up after: released after 2.5 s, the lock
/// goes to the unlimited waiter.
#[test]
fn a_wait_without_limit_outlasts_the_default_wait() {
    let cluster = Cluster::start(3);
    let holder = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let waiter = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let lock = holder.lock("job", TTL).expect("free");
    let started = Instant::now();
    let limited = {
        let waiter = waiter.clone();
        thread::spawn(move || waiter.lock("job", TTL).map(|lock| lock.unlock()))
    };
    let unlimited = {
        let waiter = waiter.clone();
        thread::spawn(move || {
            let lock = waiter.lock_waiting("job", TTL, Wait::NoLimit)?;
            let at = started.elapsed();
            lock.unlock()?;
            Ok::<_, Error>(at)
        })
    };
    let gave_up = limited.join().expect("the limited waiter");
    assert!(
        matches!(gave_up, Err(Error::Contended(_))),
        "lock gives up after its configured wait: {gave_up:?}"
    );
    thread::sleep(Duration::from_millis(2500).saturating_sub(started.elapsed()));
    lock.unlock().expect("released");
    let at = unlimited
        .join()
        .expect("the unlimited waiter")
        .expect("acquired");
    assert!(at >= Duration::from_millis(2500), "acquired at {at:?}");
}

/// `shutdown` from another thread ends every wait on the handle promptly
/// with `Error::ShutDown`: two waiters without a time limit on one handle
/// (one reads the subscriber connections, the other sleeps until told),
/// and, with release notices off, a waiter asleep in its fallback pause.
/// Afterwards acquisitions fail at once, and a lock the handle held
/// before is still released.
#[test]
fn shutdown_ends_blocked_waiters_promptly_with_a_typed_error() {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let _held = holder.lock("job", TTL).expect("free");
    for notices in [true, false] {
        let waiter = Redlock::builder()
            .nodes(cluster.urls())
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO)
            .release_notices(notices)
            .build()
            .unwrap();
        let own = waiter.lock("own", TTL).expect("free");
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let waiter = waiter.clone();
                thread::spawn(move || {
                    let got = waiter.lock_waiting("job", TTL, Wait::NoLimit);
                    (got.map(drop), Instant::now())
                })
            })
            .collect();
        if notices {
            wait_for_subscribers(&cluster, "job", 1);
        }
        thread::sleep(Duration::from_millis(300));
        assert!(waiting.iter().all(|w| !w.is_finished()), "still waiting");
        let shut = Instant::now();
        waiter.shutdown();
        for w in waiting {
            let (got, at) = w.join().expect("the waiter");
            assert!(
                matches!(got, Err(Error::ShutDown)),
                "notices {notices}: {got:?}"
            );
            let took = at.saturating_duration_since(shut);
            assert!(took < PROMPTLY, "notices {notices}: ended {took:?} after");
        }
        assert!(waiter.clone().is_shut_down());
        let started = Instant::now();
        let later = waiter.try_lock("free-key", TTL);
        assert!(matches!(later, Err(Error::ShutDown)), "{later:?}");
        let later = waiter.try_lock_for("job", TTL, NEVER);
        assert!(matches!(later, Err(Error::ShutDown)), "{later:?}");
        assert!(later.unwrap_err().is_shut_down());
        assert!(started.elapsed() < PROMPTLY, "refused at once");
        own.unlock()
            .expect("a lock held before the shutdown is released");
    }
    assert_eq!(
        cluster.total_keys(),
        3,
        "only the holder's key is left, on each master"
    );
}

/// An empty resource name is a configuration error, before any I/O (no
/// server listens at the URL).
#[test]
fn an_empty_resource_name_is_refused_before_any_io() {
    let redlock = Redlock::builder()
        .nodes(["redis://127.0.0.1:1"])
        .build()
        .unwrap();
    let empty = |e: &Error| matches!(e, Error::Config(ConfigError::EmptyResource));
    assert!(empty(&redlock.try_lock("", TTL).unwrap_err()));
    assert!(empty(&redlock.lock(b"", TTL).unwrap_err()));
    let waited = redlock.lock_waiting("", TTL, Wait::NoLimit).unwrap_err();
    assert!(empty(&waited) && waited.is_config(), "{waited}");
    assert!(
        waited.to_string().contains("resource name is empty"),
        "{waited}"
    );
    assert!(empty(&redlock.inspect("").unwrap_err()));
}
