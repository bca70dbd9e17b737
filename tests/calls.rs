//! Calls that mean what they say (issue 33), on real servers: `lock` and
//! `with_lock` wait until they get the lock, ended by masters out of reach
//! for `unreachable_limit` in a row; the error of a wait says how long it
//! waited; a waiter wakes when the holder's key expires, whatever its
//! fallback pause; `with_lock` says whether the lock held to the end, and
//! `try_with_lock` does not wait; resource names have a limit; the hook
//! hears of waits only from calls that waited; what `health`,
//! `Lock::masters` and `fence_init`'s error say around fencing.

mod support;

use redlock_sync::{
    Builder, ConfigError, Error, HandleEvent, KeyState, Redlock, Wait, WaitChange, WaitEvent,
    WithLockError, MAX_RESOURCE_LEN,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::{release_channel, Cluster, OwnedReply};

const TTL: Duration = Duration::from_secs(10);

/// Generous, for a loaded machine; far below the 30 s fallback pauses the
/// tests that use it rule out.
const SLACK: Duration = Duration::from_secs(5);

/// So long that a waiter that acquires within [`SLACK`] was woken, not
/// polled.
const NEVER: Duration = Duration::from_secs(30);

fn client(cluster: &Cluster) -> Builder {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
}

/// Waits until every server has a subscriber on `resource`'s channel.
fn wait_for_subscribers(cluster: &Cluster, resource: &[u8]) {
    let channel = release_channel(std::str::from_utf8(resource).expect("UTF-8"));
    let limit = Instant::now() + Duration::from_secs(10);
    for server in &cluster.servers {
        loop {
            let reply = server
                .command(&[b"PUBSUB", b"NUMSUB", channel.as_bytes()])
                .expect("PUBSUB NUMSUB");
            let count = match reply {
                OwnedReply::Array(items) => match items.get(1) {
                    Some(OwnedReply::Integer(count)) => *count,
                    other => panic!("PUBSUB NUMSUB: {other:?}"),
                },
                other => panic!("PUBSUB NUMSUB: {other:?}"),
            };
            if count >= 1 {
                break;
            }
            assert!(Instant::now() < limit, "no subscriber after 10 s");
            thread::sleep(Duration::from_millis(2));
        }
    }
}

fn pttl_calls(cluster: &Cluster) -> u64 {
    cluster.servers.iter().map(|s| s.calls_of("pttl")).sum()
}

// ---- lock() and with_lock() wait until they get the lock ----

/// With the defaults, `lock` waits as long as the lock is held (it gave up
/// after 0.9 s before), and takes it after the release.
#[test]
fn lock_waits_until_the_release_with_the_defaults() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let waiter = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let lock = holder.lock("job", TTL).expect("free");
    let waiting = thread::spawn(move || {
        let lock = waiter.lock("job", TTL)?;
        let at = Instant::now();
        lock.unlock()?;
        Ok::<_, Error>(at)
    });
    thread::sleep(Duration::from_secs(2));
    assert!(
        !waiting.is_finished(),
        "lock() returned while the lock was held: {:?}",
        waiting.join()
    );
    let released = Instant::now();
    lock.unlock().expect("released");
    let at = waiting
        .join()
        .expect("the waiter")
        .expect("lock() waited and took the lock");
    assert!(at >= released);
    assert_eq!(cluster.total_keys(), 0);
}

/// `shutdown` ends `lock` and `with_lock` waiting with the defaults (no
/// time limit) promptly, with `Error::ShutDown` (`with_lock`: not taken,
/// the work not run).
#[test]
fn shutdown_ends_lock_and_with_lock_waiting_without_limit() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let _held = holder.lock("job", TTL).expect("free");
    let waiter = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let locking = {
        let waiter = waiter.clone();
        thread::spawn(move || waiter.lock("job", TTL).map(drop))
    };
    let working = {
        let waiter = waiter.clone();
        thread::spawn(move || match waiter.with_lock("job", TTL, TTL, |_| ()) {
            Err(WithLockError::NotTaken(error)) => error,
            other => panic!("with_lock on a held lock, shut down: {other:?}"),
        })
    };
    thread::sleep(Duration::from_secs(1));
    assert!(!locking.is_finished() && !working.is_finished());
    let shut = Instant::now();
    waiter.shutdown();
    let locked = locking.join().expect("lock()");
    assert!(matches!(locked, Err(Error::ShutDown)), "{locked:?}");
    let worked = working.join().expect("with_lock()");
    assert!(worked.is_shut_down(), "{worked}");
    assert!(shut.elapsed() < SLACK, "{:?}", shut.elapsed());
}

/// Masters out of reach for less than `unreachable_limit` (10 s by
/// default) are waited out: with 2 of 3 masters down for 2 s, `lock` takes
/// the lock once they are back (it failed with `NoQuorum` after 0.9 s
/// before).
#[test]
fn lock_waits_out_masters_down_for_less_than_the_unreachable_limit() {
    let mut cluster = Cluster::start(3);
    let redlock = client(&cluster)
        .retry_delay(Duration::from_millis(100))
        .build()
        .unwrap();
    redlock.ping().expect("every master answers");
    cluster.servers[1].kill();
    cluster.servers[2].kill();
    let waiting = {
        let redlock = redlock.clone();
        thread::spawn(move || redlock.lock("job", TTL))
    };
    thread::sleep(Duration::from_secs(2));
    assert!(
        !waiting.is_finished(),
        "lock() gave up while the masters were down for 2 s: {:?}",
        waiting.join()
    );
    cluster.servers[1].restart();
    cluster.servers[2].restart();
    let lock = waiting
        .join()
        .expect("the waiter")
        .expect("taken once the masters are back");
    lock.unlock().expect("released");
}

/// Masters out of reach for `unreachable_limit` in a row end a wait
/// without a time limit with `NoQuorum`, whose report says so and how long
/// the call waited; `with_lock` reports it as not taken. A wait with a
/// time limit retries them until its limit instead.
#[test]
fn masters_out_of_reach_for_the_limit_end_a_wait_without_limit_saying_so() {
    let mut cluster = Cluster::start(3);
    let limit = Duration::from_secs(1);
    let redlock = client(&cluster)
        .retry_delay(Duration::from_millis(100))
        .unreachable_limit(limit)
        .build()
        .unwrap();
    cluster.servers[1].kill();
    cluster.servers[2].kill();

    let started = Instant::now();
    let error = redlock.lock("job", TTL).expect_err("no quorum");
    let took = started.elapsed();
    assert!(error.is_no_quorum(), "{error}");
    let none_for = error
        .nodes()
        .and_then(|report| report.unreachable_for())
        .expect("the report says the masters were out of reach");
    assert!(none_for >= limit, "{none_for:?}");
    let waited = error.waited().expect("the report says how long it waited");
    assert!(waited >= none_for && waited <= took, "{waited:?} {took:?}");
    assert!(took < limit + SLACK, "took {took:?}");
    let text = error.to_string();
    assert!(text.contains("no quorum reachable for"), "{text}");
    assert!(text.contains("after waiting"), "{text}");

    let ran = AtomicBool::new(false);
    match redlock.with_lock("job", TTL, TTL, |_| ran.store(true, Ordering::Relaxed)) {
        Err(WithLockError::NotTaken(error)) => assert!(error.is_no_quorum(), "{error}"),
        other => panic!("with_lock without a quorum: {other:?}"),
    }
    assert!(
        !ran.load(Ordering::Relaxed),
        "the work ran without the lock"
    );

    // A time limit longer than `unreachable_limit` is waited out in full.
    let started = Instant::now();
    let wait = Duration::from_millis(2500);
    let error = redlock
        .lock_waiting("job", TTL, Wait::For(wait))
        .expect_err("no quorum");
    let took = started.elapsed();
    assert!(error.is_no_quorum(), "{error}");
    assert!(took >= wait, "gave up after {took:?}, before its wait");
    assert_eq!(error.nodes().and_then(|r| r.unreachable_for()), None);
}

/// The error of a wait that ran out says how long it waited (`waited()`
/// and its message); a call that made one attempt says nothing of the
/// kind.
#[test]
fn the_error_of_a_wait_that_ran_out_says_how_long_it_waited() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let _held = holder.lock("job", TTL).expect("free");
    let wait = Duration::from_millis(500);
    let waiter = client(&cluster).lock_wait(wait).build().unwrap();
    let error = waiter.lock("job", TTL).expect_err("held");
    assert!(error.is_contention(), "{error}");
    let waited = error.waited().expect("it waited");
    assert!(waited >= wait, "{waited:?}");
    assert!(error.to_string().contains("after waiting"), "{error}");
    match waiter.with_lock("job", TTL, TTL, |_| ()) {
        Err(e @ WithLockError::NotTaken(_)) => {
            assert!(
                e.is_contention() && e.waited().is_some_and(|w| w >= wait),
                "{e}"
            )
        }
        other => panic!("with_lock on a held lock: {other:?}"),
    }

    let once = client(&cluster).lock_wait(Duration::ZERO).build().unwrap();
    let error = once.lock("job", TTL).expect_err("held");
    assert!(error.is_contention(), "{error}");
    assert_eq!(error.waited(), None, "one attempt: {error}");
    assert!(!error.to_string().contains("after waiting"), "{error}");
}

// ---- Waiters wake when the holder's key expires ----

/// A holder that lets its 2 s key expire without a release (as one that
/// crashed: nothing is published) is replaced when the key expires, plus
/// the allowance for clock drift, by a waiter whose fallback pause is 30 s:
/// the waiter read the key's time to live after its try found it held.
#[test]
fn a_waiter_takes_the_lock_when_the_holders_key_expires() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let waiter = client(&cluster)
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .lock_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    let ttl = Duration::from_secs(2);
    let before = Instant::now();
    holder.lock("crashed", ttl).expect("free").let_expire();
    let lock = waiter.lock("crashed", TTL).expect("taken");
    let at = before.elapsed();
    // The key was set after `before`: it cannot expire sooner (1 ms for
    // the servers' rounding).
    assert!(at >= ttl - Duration::from_millis(1), "taken at {at:?}");
    assert!(
        at < ttl + SLACK,
        "taken {at:?} after the holder's 2 s key was set: the waiter slept \
         past its expiry (its fallback pause is 30 s)"
    );
    lock.unlock().expect("released");
    assert!(pttl_calls(&cluster) > 0, "the waiter asked the key's PTTL");
}

/// An acquisition that finds the lock free sends no `PTTL`: only a try
/// that found it held asks how long the key has left.
#[test]
fn an_uncontended_acquisition_asks_no_pttl() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster).build().unwrap();
    for i in 0..20 {
        let name = format!("free:{i}");
        redlock.lock(&name, TTL).expect("free").unlock().unwrap();
        let lock = redlock
            .try_lock_for(&name, TTL, Duration::from_secs(1))
            .expect("no error")
            .expect("free");
        lock.unlock().unwrap();
        let lock = redlock
            .lock_waiting(&name, TTL, Wait::NoLimit)
            .expect("free");
        lock.unlock().unwrap();
    }
    assert_eq!(pttl_calls(&cluster), 0);
}

/// A waiter woken by the release before its look-up time (the drift
/// allowance, at most a node timeout: a minute here) asks no `PTTL`: a
/// quick handoff costs no more than before.
#[test]
fn a_waiter_woken_by_a_release_before_its_look_up_asks_no_pttl() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let waiter = client(&cluster)
        .node_timeout(Duration::from_secs(60))
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .lock_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    let lock = holder.lock("handoff", TTL).expect("free");
    let waiting = thread::spawn(move || {
        // A year's TTL: a drift allowance of days, so the look-up waits a
        // node timeout.
        let lock = waiter.lock("handoff", redlock_sync::MAX_TTL)?;
        lock.unlock()
    });
    wait_for_subscribers(&cluster, b"handoff");
    thread::sleep(Duration::from_millis(100));
    lock.unlock().expect("released");
    waiting
        .join()
        .expect("the waiter")
        .expect("taken and released");
    assert_eq!(pttl_calls(&cluster), 0);
}

// ---- with_lock says whether the lock held to the end ----

/// A lock lost while the work ran (its keys deleted on every master) is
/// reported as `Lost`, with the work's result; a lock that held gives the
/// result; `?` turns the error into an `Error`.
#[test]
fn with_lock_reports_a_lock_lost_mid_work_with_the_result() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster).build().unwrap();
    let got = redlock.with_lock("work", TTL, Duration::from_secs(60), |lease| {
        assert!(lease.check().is_ok());
        for server in &cluster.servers {
            server.cmd(&["DEL", "work"]);
        }
        42
    });
    match got {
        Err(WithLockError::Lost { result, error }) => {
            assert_eq!(result, 42);
            assert!(error.is_lock_lost(), "{error}");
        }
        other => panic!("the keys were deleted during the work: {other:?}"),
    }
    assert_eq!(cluster.total_keys(), 0);

    let held = redlock.with_lock("work", TTL, Duration::from_secs(60), |_| 7);
    assert_eq!(held.expect("held to the end"), 7);

    fn lost_through_question_mark(cluster: &Cluster, redlock: &Redlock) -> Result<i32, Error> {
        Ok(redlock.with_lock("work", TTL, TTL, |_| {
            for server in &cluster.servers {
                server.cmd(&["DEL", "work"]);
            }
            1
        })?)
    }
    let error = lost_through_question_mark(&cluster, &redlock).expect_err("lost");
    assert!(error.is_lock_lost(), "{error}");
    assert_eq!(cluster.total_keys(), 0);
}

/// `try_with_lock` makes one attempt: `Ok(None)` without running the work
/// while another client holds the lock, the result once it is free, and a
/// loss reported as `with_lock` does.
#[test]
fn try_with_lock_does_not_wait_and_reports_a_loss() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster).build().unwrap();
    let redlock = client(&cluster).build().unwrap();
    let held = holder.lock("job", TTL).expect("free");
    let ran = AtomicBool::new(false);
    let started = Instant::now();
    let got = redlock.try_with_lock("job", TTL, TTL, |_| ran.store(true, Ordering::Relaxed));
    assert!(matches!(got, Ok(None)), "{got:?}");
    assert!(
        !ran.load(Ordering::Relaxed),
        "the work ran without the lock"
    );
    assert!(started.elapsed() < SLACK, "it waited");
    held.unlock().unwrap();

    let got = redlock.try_with_lock("job", TTL, TTL, |lease| lease.check().is_ok());
    assert!(matches!(got, Ok(Some(true))), "{got:?}");
    let got = redlock.try_with_lock("job", TTL, TTL, |_| {
        for server in &cluster.servers {
            server.cmd(&["DEL", "job"]);
        }
        "done"
    });
    match got {
        Err(e) => {
            assert!(e.is_lost() && e.is_lock_lost(), "{e}");
            assert_eq!(e.into_result(), Some("done"));
        }
        Ok(other) => panic!("the keys were deleted during the work: {other:?}"),
    }
    assert_eq!(cluster.total_keys(), 0);
}

// ---- Resource names have a limit ----

/// A 2 MB name (and one byte over the limit) is refused by every call that
/// takes a name, at once and before any I/O, with a typed error: nothing
/// is written (a 2 MB name was locked before, and its release timed out).
#[test]
fn a_name_over_the_limit_is_refused_at_the_call() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster).build().unwrap();
    for len in [2 << 20, MAX_RESOURCE_LEN + 1] {
        let name = vec![b'x'; len];
        let refused =
            |e: &Error| matches!(e, Error::Config(ConfigError::ResourceTooLong(n)) if *n == len);
        let started = Instant::now();
        let errors = [
            redlock.try_lock(&name, TTL).map(|_| ()),
            redlock.lock(&name, TTL).map(|_| ()),
            redlock
                .try_lock_for(&name, TTL, Duration::from_secs(1))
                .map(|_| ()),
            redlock.lock_waiting(&name, TTL, Wait::NoLimit).map(|_| ()),
            redlock.inspect(&name).map(|_| ()),
            redlock
                .with_lock(&name, TTL, TTL, |_| ())
                .map_err(Error::from),
            redlock
                .try_with_lock(&name, TTL, TTL, |_| ())
                .map(|_| ())
                .map_err(Error::from),
        ];
        for (i, result) in errors.into_iter().enumerate() {
            match result {
                Err(e) if refused(&e) => {
                    assert!(e.to_string().contains("MAX_RESOURCE_LEN"), "{e}")
                }
                other => panic!("call {i}, a name of {len} bytes: {other:?}"),
            }
        }
        assert!(started.elapsed() < SLACK, "{:?}", started.elapsed());
    }
    assert_eq!(cluster.total_keys(), 0);
}

/// A name of the longest length accepted is locked, waited for (its
/// waiter woken by the release notice, whose channel names the resource)
/// and released, leaving nothing.
#[test]
fn a_name_of_the_longest_length_is_locked_waited_for_and_released() {
    let cluster = Cluster::start(3);
    let name = vec![b'n'; MAX_RESOURCE_LEN];
    let holder = client(&cluster).build().unwrap();
    let waiter = client(&cluster)
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .lock_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    // Its key lives longer than the test may take: only the release can
    // wake the waiter in time.
    let lock = holder.lock(&name, Duration::from_secs(120)).expect("free");
    let waiting = {
        let name = name.clone();
        thread::spawn(move || {
            let lock = waiter.lock(&name, TTL)?;
            let at = Instant::now();
            lock.unlock()?;
            Ok::<_, Error>(at)
        })
    };
    wait_for_subscribers(&cluster, &name);
    let released = Instant::now();
    lock.unlock().expect("released");
    let at = waiting.join().expect("the waiter").expect("taken");
    let after = at.saturating_duration_since(released);
    assert!(after < SLACK, "took {after:?} after the release");
    assert_eq!(cluster.total_keys(), 0);
}

// ---- The hook hears of waits only from calls that waited ----

#[derive(Default)]
struct Waits(Mutex<Vec<(Vec<u8>, WaitChange)>>);

impl HandleEvent for Waits {
    fn handle_wait(&self, event: WaitEvent<'_>) {
        let mut seen = self.0.lock().unwrap();
        seen.push((event.resource().to_vec(), event.change()));
    }
}

impl Waits {
    fn of(&self, resource: &[u8]) -> Vec<WaitChange> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(r, _)| r == resource)
            .map(|(_, c)| *c)
            .collect()
    }
}

/// A call that takes a free lock at once tells the hook (and so the `log`
/// feature's "waiting for ...: Acquired after ..." line) nothing; a call
/// that waited tells its wait and that it acquired.
#[test]
fn only_calls_that_waited_tell_a_wait() {
    let cluster = Cluster::start(3);
    let waits = Arc::new(Waits::default());
    let redlock = client(&cluster).events(Arc::clone(&waits)).build().unwrap();
    redlock.lock("free", TTL).unwrap().unlock().unwrap();
    let lock = redlock
        .try_lock_for("free", TTL, Duration::from_secs(5))
        .unwrap()
        .expect("free");
    lock.unlock().unwrap();
    redlock
        .lock_waiting("free", TTL, Wait::NoLimit)
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(redlock.with_lock("free", TTL, TTL, |_| 1).unwrap(), 1);
    assert_eq!(waits.of(b"free"), [], "calls that never waited");

    let holder = client(&cluster).build().unwrap();
    let lock = holder.lock("held", TTL).expect("free");
    let waiting = {
        let redlock = redlock.clone();
        thread::spawn(move || redlock.lock("held", TTL).map(|l| l.unlock()))
    };
    wait_for_subscribers(&cluster, b"held");
    lock.unlock().unwrap();
    waiting.join().unwrap().expect("taken").expect("released");
    let told = waits.of(b"held");
    assert_eq!(told.first(), Some(&WaitChange::Contended), "{told:?}");
    assert_eq!(told.last(), Some(&WaitChange::Acquired), "{told:?}");
}

// ---- Fencing: what health, Lock::masters and fence_init's error say ----

const DOMAIN: &str = "redlock-sync:fence:default";

fn fenced(cluster: &Cluster) -> Redlock {
    client(cluster)
        .fencing(true)
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// A fresh fenced handle's first acquisition, decided without a paused
/// master's answer: `health()` says that master was sent commands, not
/// "not used yet".
#[test]
fn health_after_a_fenced_acquisition_does_not_say_not_used_yet() {
    let cluster = Cluster::start(3);
    fenced(&cluster).fence_init(0).expect("initialised");
    let redlock = fenced(&cluster);
    let lock = {
        let _paused = cluster.servers[2].pause();
        let lock = redlock.try_lock("r", TTL).unwrap().expect("free");
        for health in redlock.health() {
            let shown = health.to_string();
            assert!(!shown.contains("not used yet"), "{shown}");
        }
        let shown = redlock.health()[2].to_string();
        assert!(shown.contains("no answer read yet"), "{shown}");
        lock
    };
    lock.unlock().expect("released");
}

/// A master whose anchor is gone answers the fenced acquisition
/// `NOANCHOR`: `Lock::masters` shows it as `Absent` (it set nothing), not
/// `Unconfirmed`.
#[test]
fn a_master_that_answered_noanchor_is_absent_from_the_lock() {
    let cluster = Cluster::start(3);
    let redlock = fenced(&cluster);
    redlock.fence_init(0).expect("initialised");
    // Every connection open, its probe answered (anchored).
    redlock
        .try_lock("r", TTL)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    cluster.servers[2].cmd(&["DEL", DOMAIN]);
    // Master 0 answers last, so the round reads master 2's NOANCHOR
    // before a quorum agrees.
    let lock = {
        let _paused = cluster.servers[0].pause();
        let taking = {
            let redlock = redlock.clone();
            thread::spawn(move || redlock.try_lock("r", TTL))
        };
        thread::sleep(Duration::from_millis(300));
        drop(_paused);
        taking
            .join()
            .unwrap()
            .unwrap()
            .expect("masters 0 and 1 agree")
    };
    let states: Vec<KeyState> = lock.masters().map(|(_, state)| state).collect();
    assert_eq!(
        states,
        [KeyState::Held, KeyState::Held, KeyState::Absent],
        "{:?}",
        redlock.health()
    );
    lock.unlock().expect("released");
}

/// `fence_init` on a domain already initialised is told apart from one
/// refused because a master did not answer.
#[test]
fn fence_init_on_an_initialised_domain_has_its_own_predicate() {
    let cluster = Cluster::start(3);
    let redlock = fenced(&cluster);
    redlock.fence_init(0).expect("initialised");
    let again = redlock.fence_init(0).expect_err("initialised before");
    assert!(matches!(again, Error::FenceInitRefused(_)), "{again}");
    assert!(again.is_already_initialised(), "{again}");

    let mut fresh = Cluster::start(3);
    fresh.servers[2].kill();
    let redlock = fenced(&fresh);
    let down = redlock.fence_init(0).expect_err("a master is down");
    assert!(matches!(down, Error::FenceInitRefused(_)), "{down}");
    assert!(!down.is_already_initialised(), "{down}");
}
