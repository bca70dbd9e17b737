//! Locks on several resources at once (`try_lock_many`, `LockSet`) against
//! real servers started by the tests (REDLOCK_TEST_SERVER picks the
//! binary: Redis 7.0, Valkey 8.1 and 9.1 run the set's scripts).

mod support;

use redlock_sync::{ConfigError, Error, KeyState, Redlock, MAX_SET_BYTES, MAX_SET_LEN};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, OwnedReply, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// A node timeout a loaded machine meets (see tests/lock.rs).
const PATIENT: Duration = Duration::from_secs(1);

fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .build()
        .expect("valid configuration")
}

/// Waits (up to a generous bound) for `condition`: a call returns at
/// quorum, and the last master runs the same command a moment later.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < limit, "still not true after 10 s: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The keys of `server`, sorted.
fn keys_of(server: &RedisServer) -> Vec<Vec<u8>> {
    let mut keys = server.keys();
    keys.sort();
    keys
}

fn names(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|name| name.as_bytes().to_vec()).collect()
}

/// Connections the server accepted since it started (`INFO stats`; the
/// test's own `INFO` counts one).
fn connections_received(server: &RedisServer) -> u64 {
    let OwnedReply::Bulk(info) = server.cmd(&["INFO", "stats"]) else {
        panic!("INFO stats: not a bulk string")
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received")
}

#[test]
fn a_set_is_one_value_on_every_master_and_its_release_deletes_every_key() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let set = redlock
        .try_lock_many(["c", "a", "b", "a"], TTL)
        .expect("no error")
        .expect("all free");
    assert_eq!(
        set.resources().collect::<Vec<_>>(),
        [&b"a"[..], b"b", b"c"],
        "sorted, each once"
    );
    assert!(set.validity() > TTL / 2, "{:?}", set.validity());
    eventually("every key on every master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 3)
    });
    let value = cluster.servers[0].get(b"a").expect("a set");
    for server in &cluster.servers {
        assert_eq!(keys_of(server), names(&["a", "b", "c"]));
        for key in [b"a", b"b", b"c"] {
            assert_eq!(server.get(key).as_deref(), Some(&value[..]), "one value");
            let pttl = server.pttl(key);
            assert!(pttl > 0 && pttl <= 10_000, "PTTL {pttl}");
        }
    }
    // Another set sharing one resource, and a lock on one of them, are
    // refused; a disjoint set is not.
    assert!(redlock.try_lock_many(["b", "z"], TTL).unwrap().is_none());
    assert!(redlock.try_lock("c", TTL).unwrap().is_none());
    let other = redlock
        .try_lock_many(["x", "y"], TTL)
        .unwrap()
        .expect("free");
    other.unlock().expect("released");
    set.unlock().expect("released");
    eventually("no key left", || cluster.total_keys() == 0);
}

#[test]
fn eight_threads_on_random_pairs_and_triples_never_overlap_and_always_return() {
    // 8 threads over 3 masters take random pairs and triples of 6
    // resources, named in random orders; a referee per resource counts its
    // holders (incremented once the set is returned, decremented before its
    // release). No attempt holds anything while it waits (here it does not
    // wait: a refused attempt backs off and tries again), so none may hang.
    contend(None);
}

#[test]
fn eight_threads_waiting_for_random_sets_never_overlap_and_always_return() {
    // The same with `try_lock_many_for` (a wait of up to 2 s each): the
    // waiting calls never overlap and always return (that they are woken
    // by releases is tested on its own below).
    contend(Some(Duration::from_secs(2)));
}

/// 8 threads for 4 s on random pairs and triples of 6 resources, each
/// attempt `try_lock_many` (`wait`: `None`) or `try_lock_many_for`.
fn contend(wait: Option<Duration>) {
    const THREADS: usize = 8;
    const RESOURCES: [&str; 6] = ["r0", "r1", "r2", "r3", "r4", "r5"];
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let referees: Arc<Vec<AtomicUsize>> = Arc::new((0..6).map(|_| AtomicUsize::new(0)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let (done, finished) = mpsc::channel();
    let run_for = Duration::from_secs(4);
    for t in 0..THREADS {
        let (redlock, referees, overlaps, done) = (
            redlock.clone(),
            Arc::clone(&referees),
            Arc::clone(&overlaps),
            done.clone(),
        );
        thread::spawn(move || {
            let mut seed =
                0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
            let mut next = move || {
                // xorshift64*
                seed ^= seed >> 12;
                seed ^= seed << 25;
                seed ^= seed >> 27;
                seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33
            };
            let (mut attempts, mut held) = (0u64, 0u64);
            let end = Instant::now() + run_for;
            while Instant::now() < end {
                let mut order = [0, 1, 2, 3, 4, 5];
                for i in (1..6).rev() {
                    order.swap(i, (next() % (i as u64 + 1)) as usize);
                }
                let k = 2 + (next() % 2) as usize;
                let picked = &order[..k];
                attempts += 1;
                let set = match wait {
                    None => redlock.try_lock_many(picked.iter().map(|&i| RESOURCES[i]), TTL),
                    Some(wait) => {
                        redlock.try_lock_many_for(picked.iter().map(|&i| RESOURCES[i]), TTL, wait)
                    }
                }
                .expect("no error on healthy masters");
                let Some(set) = set else {
                    thread::sleep(Duration::from_micros(200 + next() % 800));
                    continue;
                };
                held += 1;
                for &i in picked {
                    if referees[i].fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                }
                assert!(set.validity() > Duration::ZERO);
                thread::sleep(Duration::from_micros(300));
                for &i in picked {
                    referees[i].fetch_sub(1, Ordering::SeqCst);
                }
                set.unlock().expect("released");
            }
            done.send((t, attempts, held)).unwrap();
        });
    }
    drop(done);
    let mut total_held = 0;
    let watchdog = Instant::now() + run_for + Duration::from_secs(60);
    for _ in 0..THREADS {
        let left = watchdog.saturating_duration_since(Instant::now());
        let (t, attempts, held) = match finished.recv_timeout(left) {
            Ok(report) => report,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("a thread has not returned within a generous bound: a deadlock?")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a thread panicked (above)"),
        };
        println!("thread {t}: {held} sets held of {attempts} attempts");
        total_held += held;
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of one resource"
    );
    assert!(total_held > 0, "no set was ever held");
    eventually("no key left on any master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 0)
    });
}

#[test]
fn a_master_holding_one_key_from_a_crash_refuses_the_whole_set_there() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    // A key of the set left on master 0 (an earlier holder that crashed).
    cluster.servers[0].cmd(&["SET", "b", "crashed", "PX", "60000"]);
    let set = redlock
        .try_lock_many(["a", "b", "c"], TTL)
        .unwrap()
        .expect("granted by the other two");
    eventually("the set on masters 1 and 2", || {
        cluster.servers[1..].iter().all(|s| s.dbsize() == 3)
    });
    // Nothing of the set was written on master 0.
    assert_eq!(keys_of(&cluster.servers[0]), names(&["b"]));
    assert_eq!(
        cluster.servers[0].get(b"b").as_deref(),
        Some(&b"crashed"[..])
    );
    // Its refusal may come in after the quorum decided (then unconfirmed).
    let states: Vec<KeyState> = set.masters().map(|(_, state)| state).collect();
    assert_ne!(states[0], KeyState::Held, "{states:?}");
    set.unlock().expect("released");
    eventually("released on masters 1 and 2", || {
        cluster.servers[1..].iter().all(|s| s.dbsize() == 0)
    });
    assert_eq!(
        keys_of(&cluster.servers[0]),
        names(&["b"]),
        "not ours: kept"
    );

    // Two masters with a leftover each: no quorum, and nothing left behind.
    cluster.servers[1].cmd(&["SET", "c", "crashed", "PX", "60000"]);
    assert!(redlock
        .try_lock_many(["c", "b", "a"], TTL)
        .unwrap()
        .is_none());
    eventually("the failed attempt released on master 2", || {
        cluster.servers[2].dbsize() == 0
    });
    assert_eq!(keys_of(&cluster.servers[0]), names(&["b"]));
    assert_eq!(keys_of(&cluster.servers[1]), names(&["c"]));
}

#[test]
fn a_frozen_minority_master_costs_at_most_its_node_timeout() {
    let cluster = Cluster::start(3);
    let node_timeout = Duration::from_secs(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    // Warm: every connection is open, so the round's command reaches the
    // frozen master's socket and waits there, unanswered.
    redlock
        .try_lock_many(["w1", "w2"], TTL)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    eventually("warm-up released", || cluster.total_keys() == 0);
    let frozen = cluster.servers[2].pause();
    let started = Instant::now();
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("granted by the two others");
    let took = started.elapsed();
    assert!(took < node_timeout, "the round took {took:?}");
    let states: Vec<KeyState> = set.masters().map(|(_, state)| state).collect();
    assert_eq!(&states[..2], [KeyState::Held, KeyState::Held]);
    set.unlock().expect("released by the two others");
    drop(frozen);
    // The frozen master ran the acquisition when it resumed, then the
    // release that followed it on the same connection.
    eventually("nothing left on any master", || cluster.total_keys() == 0);
}

/// Two of five masters frozen (SIGSTOP) while four threads take and
/// release sets back to back (so rounds are likely under way when they
/// stop; not asserted): every call returns within a bound of its node timeout, every set
/// is granted by the three others, and once the two resume (running what
/// they were sent, in order) no key is left anywhere, long before the
/// TTL could have removed one.
#[test]
fn a_minority_frozen_while_sets_are_under_way_bounds_every_call_and_leaves_no_key() {
    const LONG_TTL: Duration = Duration::from_secs(120);
    let cluster = Cluster::start(5);
    let node_timeout = Duration::from_secs(1);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    let stop = AtomicBool::new(false);
    let calls = AtomicUsize::new(0);
    let slowest = thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (redlock, stop, calls) = (&redlock, &stop, &calls);
                s.spawn(move || {
                    let mut slowest = Duration::ZERO;
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let names = [format!("mid:{t}:{n}:a"), format!("mid:{t}:{n}:b")];
                        n += 1;
                        let started = Instant::now();
                        let set = redlock.try_lock_many(&names, LONG_TTL);
                        let set = set.unwrap().expect("granted by the three running masters");
                        slowest = slowest.max(started.elapsed());
                        let started = Instant::now();
                        set.unlock().expect("released by the three running masters");
                        slowest = slowest.max(started.elapsed());
                        calls.fetch_add(2, Ordering::Relaxed);
                    }
                    slowest
                })
            })
            .collect();
        // Let the threads get going, then freeze two masters under them.
        let warm = Instant::now() + Duration::from_secs(30);
        while calls.load(Ordering::Relaxed) < 40 {
            assert!(Instant::now() < warm, "no progress before the freeze");
            thread::sleep(Duration::from_millis(1));
        }
        let frozen = [cluster.servers[3].pause(), cluster.servers[4].pause()];
        let before = calls.load(Ordering::Relaxed);
        let limit = Instant::now() + Duration::from_secs(30);
        while calls.load(Ordering::Relaxed) < before + 100 {
            assert!(
                Instant::now() < limit,
                "fewer than 100 calls in 30 s with two frozen"
            );
            thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        let slowest = workers.into_iter().map(|w| w.join().unwrap()).max();
        drop(frozen);
        slowest.unwrap()
    });
    // A call waits for the frozen masters at most its node timeout (a
    // round under way when they stopped); 3x for a loaded machine.
    assert!(
        slowest < node_timeout * 3,
        "the slowest call took {slowest:?}"
    );
    eventually("nothing left on any master", || cluster.total_keys() == 0);
}

#[test]
fn a_set_of_1000_keys_is_granted_extended_and_released() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let names: Vec<String> = (0..1000).map(|i| format!("big:{i:04}")).collect();
    let mut set = redlock
        .try_lock_many(&names, Duration::from_secs(5))
        .unwrap()
        .expect("all free");
    assert_eq!(set.resources().len(), 1000);
    eventually("1000 keys on every master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 1000)
    });
    let seen = redlock
        .inspect_many(&names)
        .expect("one round of 1000 looks");
    assert_eq!(seen.iter().len(), 1000);
    assert!(seen.iter().all(|(_, one)| one.held_on() == 3));
    set.extend(Duration::from_secs(60)).expect("extended");
    eventually("every master extended", || {
        cluster.servers.iter().all(|s| {
            [&names[0], &names[499], &names[999]]
                .iter()
                .all(|key| s.pttl(key.as_bytes()) > 10_000)
        })
    });
    set.unlock().expect("released");
    eventually("every key gone", || cluster.total_keys() == 0);
}

#[test]
fn limits_empty_and_bad_sets_are_refused_before_any_io() {
    let server = RedisServer::start();
    let redlock = Redlock::builder().nodes([server.url()]).build().unwrap();
    let before = connections_received(&server);
    let too_many: Vec<String> = (0..=MAX_SET_LEN).map(|i| format!("k{i}")).collect();
    let config = |result: Result<Option<redlock_sync::LockSet>, Error>| match result {
        Err(Error::Config(e)) => e,
        other => panic!("expected a configuration error, got {other:?}"),
    };
    assert_eq!(
        config(redlock.try_lock_many(&too_many, TTL)),
        ConfigError::ResourceSetTooLarge {
            given: MAX_SET_LEN + 1,
            max: MAX_SET_LEN
        }
    );
    // Duplicates count: 1025 copies of one name are refused too.
    assert!(matches!(
        config(redlock.try_lock_many(vec!["a"; MAX_SET_LEN + 1], TTL)),
        ConfigError::ResourceSetTooLarge { .. }
    ));
    let long = vec![b'x'; 60_000];
    let longs: Vec<Vec<u8>> = (0..5u8).map(|i| [&[i][..], &long].concat()).collect();
    assert_eq!(
        config(redlock.try_lock_many(&longs, TTL)),
        ConfigError::ResourceSetNamesTooLong {
            bytes: 5 * 60_001,
            max: MAX_SET_BYTES
        }
    );
    assert_eq!(
        config(redlock.try_lock_many(Vec::<String>::new(), TTL)),
        ConfigError::ResourceSetEmpty
    );
    assert_eq!(
        config(redlock.try_lock_many(["a", ""], TTL)),
        ConfigError::EmptyResource
    );
    assert!(matches!(
        config(redlock.try_lock_many(["a", "b"], Duration::ZERO)),
        ConfigError::TtlTooShort(_)
    ));
    // The waiting forms, the work forms and `inspect_many` read the names
    // by the same rules, before any I/O (as their docs say).
    let empty = Vec::<&str>::new;
    let wait = Duration::from_secs(5);
    assert_eq!(
        config(redlock.lock_many(empty(), TTL).map(Some)),
        ConfigError::ResourceSetEmpty
    );
    assert_eq!(
        config(redlock.try_lock_many_for(empty(), TTL, wait)),
        ConfigError::ResourceSetEmpty
    );
    assert!(matches!(
        config(redlock.try_lock_many_until(&too_many, TTL, Instant::now() + wait)),
        ConfigError::ResourceSetTooLarge { .. }
    ));
    assert!(matches!(
        config(
            redlock
                .lock_many_waiting(&longs, TTL, redlock_sync::Wait::NoLimit)
                .map(Some)
        ),
        ConfigError::ResourceSetNamesTooLong { .. }
    ));
    let ran = AtomicBool::new(false);
    let work = |_: &redlock_sync::LeaseSet| ran.store(true, Ordering::SeqCst);
    assert!(matches!(
        redlock.with_lock_many(empty(), TTL, wait, work),
        Err(redlock_sync::WithLockError::NotTaken(Error::Config(
            ConfigError::ResourceSetEmpty
        )))
    ));
    assert!(matches!(
        redlock.try_with_lock_many(&too_many, TTL, wait, work),
        Err(redlock_sync::WithLockError::NotTaken(Error::Config(
            ConfigError::ResourceSetTooLarge { .. }
        )))
    ));
    assert!(!ran.load(Ordering::SeqCst), "no work without the set");
    assert!(matches!(
        redlock.inspect_many(&too_many),
        Err(Error::Config(ConfigError::ResourceSetTooLarge { .. }))
    ));
    // No connection was made: only this INFO's own.
    assert_eq!(connections_received(&server), before + 1);
}

#[test]
fn a_waiting_set_of_one_resource_is_woken_by_its_release_and_excludes_a_lock_on_it() {
    // The documented set of one: the lock on its resource, waiting as a
    // lock does (woken by the release's notice, not the fallback pause).
    let cluster = Cluster::start(3);
    let fallback = Duration::from_secs(10);
    let waiting = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(fallback)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let holding = client(&cluster);
    let lock = holding.try_lock("a", TTL).unwrap().expect("free");
    let waiter = {
        let waiting = waiting.clone();
        thread::spawn(move || {
            let set = waiting
                .try_lock_many_for(["a", "a"], TTL, Duration::from_secs(30))
                .expect("no error");
            (set, Instant::now())
        })
    };
    // The waiter's first try and its subscription, on a loaded machine
    // (the test holds either way: a try after the release finds a free).
    thread::sleep(Duration::from_millis(500));
    let released = Instant::now();
    lock.unlock().expect("released");
    let (set, got) = waiter.join().unwrap();
    let set = set.expect("taken once released");
    let after = got.saturating_duration_since(released);
    assert!(
        after < fallback / 2,
        "the set of one was taken {after:?} after the release"
    );
    assert_eq!(set.resources().collect::<Vec<_>>(), [&b"a"[..]]);
    // Its one key is the lock's key: a lock on `a` is refused.
    eventually("a on every master", || {
        cluster.servers.iter().all(|s| keys_of(s) == names(&["a"]))
    });
    assert!(holding.try_lock("a", TTL).unwrap().is_none());
    set.unlock().expect("released");
    eventually("no key left", || cluster.total_keys() == 0);
}

/// Script calls (`EVAL`, `EVALSHA`) and `SET`s (in scripts too) so far,
/// per master.
/// Per master: the calls that take a whole set in one command (a script,
/// or `MSETEX` where the server has it: Valkey 9.1+), the `SET`s (a
/// script's included), and the `MSETEX`s.
fn calls(cluster: &Cluster) -> Vec<(u64, u64, u64)> {
    cluster
        .servers
        .iter()
        .map(|s| {
            let msetex = s.calls_of("msetex");
            (
                s.calls_of("eval") + s.calls_of("evalsha") + msetex,
                s.calls_of("set"),
                msetex,
            )
        })
        .collect()
}

#[test]
fn a_duplicate_only_set_is_a_lock_on_its_one_resource() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    // Warm connections (their first acquisition goes as a tagged script).
    redlock
        .try_lock_many(["w", "x"], TTL)
        .unwrap()
        .unwrap()
        .unlock()
        .unwrap();
    eventually("warm-up released", || cluster.total_keys() == 0);
    let before = calls(&cluster);
    let set = redlock
        .try_lock_many(["a", "a", "a"], TTL)
        .unwrap()
        .expect("free");
    assert_eq!(set.resources().collect::<Vec<_>>(), [&b"a"[..]]);
    // The single lock's command: one `SET NX` per master, no script.
    eventually("a set everywhere", || {
        cluster.servers.iter().all(|s| s.get(b"a").is_some())
    });
    let after = calls(&cluster);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (a.0 - b.0, a.1 - b.1, a.2 - b.2),
            (0, 1, 0),
            "set commands, SETs, MSETEXs: {before:?} -> {after:?}"
        );
    }
    // On the same key: a Lock on `a` and a set holding `a` are refused.
    assert!(redlock.try_lock("a", TTL).unwrap().is_none());
    assert!(redlock.try_lock_many(["b", "a"], TTL).unwrap().is_none());
    set.unlock().expect("released");
    eventually("released", || cluster.total_keys() == 0);
    // And the other way round: a Lock excludes a set of one.
    let lock = redlock.try_lock("a", TTL).unwrap().expect("free");
    assert!(redlock.try_lock_many(["a"], TTL).unwrap().is_none());
    lock.unlock().unwrap();
    // A set of two is one command per master (the script, or MSETEX),
    // which sets both keys.
    eventually("released", || cluster.total_keys() == 0);
    let before = calls(&cluster);
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("free");
    eventually("a and b everywhere", || {
        cluster.servers.iter().all(|s| s.dbsize() == 2)
    });
    let after = calls(&cluster);
    for (b, a) in before.iter().zip(&after) {
        // Both keys set by the script's two SETs, or by one MSETEX.
        let (commands, sets, msetex) = (a.0 - b.0, a.1 - b.1, a.2 - b.2);
        assert!(
            commands == 1 && (sets == 2 || msetex == 1),
            "set commands, SETs, MSETEXs: {before:?} -> {after:?}"
        );
    }
    set.unlock().unwrap();
}

#[test]
fn a_sets_renew_if_below_let_expire_and_drop_do_as_a_locks() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    // renew_if_below: false and not extended while enough is left, true
    // and extended when not.
    let mut set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("free");
    let until = set.valid_until();
    // (An extension after this pause would move valid_until by as much.)
    thread::sleep(Duration::from_millis(100));
    assert!(!set.renew_if_below(Duration::from_secs(1), TTL).unwrap());
    // (valid_until is read from two clocks: it may move by a few ns.)
    let moved = set.valid_until().max(until) - set.valid_until().min(until);
    assert!(moved < Duration::from_millis(5), "extended: {moved:?}");
    let longer = Duration::from_secs(60);
    assert!(set.renew_if_below(TTL * 2, longer).unwrap());
    assert!(set.validity() > TTL, "{:?}", set.validity());
    eventually("both keys extended on every master", || {
        cluster
            .servers
            .iter()
            .all(|s| s.pttl(b"a") > 10_000 && s.pttl(b"b") > 10_000)
    });
    // let_expire: the validity left is returned, the keys stay.
    let left = set.let_expire();
    assert!(left > TTL && left <= longer, "{left:?}");
    thread::sleep(Duration::from_millis(200));
    assert!(cluster
        .servers
        .iter()
        .all(|s| keys_of(s) == names(&["a", "b"])));
    assert!(redlock.try_lock_many(["b", "c"], TTL).unwrap().is_none());
    for server in &cluster.servers {
        server.cmd(&["DEL", "a", "b"]);
    }
    // Drop: released at once, every key of the set.
    let set = redlock
        .try_lock_many(["c", "d"], TTL)
        .unwrap()
        .expect("free");
    eventually("c and d on every master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 2)
    });
    drop(set);
    eventually("dropped: no key left", || cluster.total_keys() == 0);
}

#[test]
fn an_extension_counts_a_master_only_when_every_key_got_its_ttl() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let ttl = Duration::from_secs(5);
    let mut set = redlock
        .try_lock_many(["a", "b"], ttl)
        .unwrap()
        .expect("free");
    eventually("the set on every master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 2)
    });
    // Master 0 lost one key of the set: it must not extend the other.
    cluster.servers[0].cmd(&["DEL", "b"]);
    set.extend(Duration::from_secs(60))
        .expect("masters 1 and 2 count");
    eventually("masters 1 and 2 extended both keys", || {
        cluster.servers[1..]
            .iter()
            .all(|s| s.pttl(b"a") > 10_000 && s.pttl(b"b") > 10_000)
    });
    assert!(
        cluster.servers[0].pttl(b"a") <= 5_000,
        "all or none on master 0"
    );
    assert_eq!(
        cluster.servers[0].pttl(b"b"),
        -2,
        "not repaired on a holder"
    );
    let states: Vec<KeyState> = set.masters().map(|(_, state)| state).collect();
    assert_ne!(states[0], KeyState::Held, "{states:?}");
    assert_eq!(&states[1..], [KeyState::Held, KeyState::Held]);
    // An extension after one that read master 0's no repairs it (a round
    // decides at a quorum, so the no may be read later: up to 50 tries).
    let mut extensions = 0;
    while cluster.servers[0].pttl(b"b") < 0 {
        assert!(extensions < 50, "master 0 not repaired in 50 extensions");
        set.extend(Duration::from_secs(60)).expect("extended");
        extensions += 1;
    }
    assert!(cluster.servers[0].pttl(b"a") > 10_000, "a extended with b");
    // `b` now holds another value on masters 0 and 1: a majority cannot
    // extend the set, which is lost.
    for server in &cluster.servers[..2] {
        server.cmd(&["SET", "b", "another", "PX", "60000"]);
    }
    let pttl_a1 = cluster.servers[1].pttl(b"a");
    let err = set.extend(Duration::from_secs(120)).expect_err("lost");
    assert!(matches!(err, Error::LockLost(_)), "{err}");
    assert!(
        cluster.servers[1].pttl(b"a") <= pttl_a1,
        "master 1 extended a key of a set it does not hold in full"
    );
    assert_eq!(set.validity(), Duration::ZERO);
    drop(set);
    // The release deletes every key still ours, and only those.
    eventually("ours released, theirs kept", || {
        keys_of(&cluster.servers[0]) == names(&["b"])
            && keys_of(&cluster.servers[1]) == names(&["b"])
            && cluster.servers[2].dbsize() == 0
    });
    assert_eq!(
        cluster.servers[1].get(b"b").as_deref(),
        Some(&b"another"[..])
    );
}

#[test]
fn a_set_waiter_is_woken_by_the_release_of_either_resource() {
    let cluster = Cluster::start(3);
    // The fallback pause is 10 s: a waiter that returns well before it
    // was woken by the release's notice.
    let fallback = Duration::from_secs(10);
    let waiting = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(fallback)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let holding = client(&cluster);
    // Other waiters of the same handle, on resources held throughout: the
    // set waiter is often not the thread that reads the subscriber
    // connections, and must be woken by the channel of its resource.
    let others: Vec<_> = (0..4)
        .map(|i| {
            holding
                .try_lock(format!("other{i}"), TTL)
                .unwrap()
                .expect("free")
        })
        .collect();
    let bystanders: Vec<_> = (0..4)
        .map(|i| {
            let waiting = waiting.clone();
            thread::spawn(move || {
                let got = waiting
                    .try_lock_for(format!("other{i}"), TTL, Duration::from_secs(6))
                    .expect("no error");
                assert!(got.is_none(), "other{i} is held throughout");
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    for held in ["a", "b"] {
        let lock = holding.try_lock(held, TTL).unwrap().expect("free");
        let waiter = {
            let waiting = waiting.clone();
            thread::spawn(move || {
                let set = waiting
                    .try_lock_many_for(["a", "b"], TTL, Duration::from_secs(30))
                    .expect("no error");
                (set, Instant::now())
            })
        };
        // Long enough for the waiter's first try and its subscriptions on
        // a loaded machine; the test holds either way (a try after the
        // subscriptions would find the set free).
        thread::sleep(Duration::from_millis(500));
        let released = Instant::now();
        lock.unlock().expect("released");
        let (set, got) = waiter.join().unwrap();
        let set = set.expect("taken once released");
        let after = got.saturating_duration_since(released);
        assert!(
            after < fallback / 2,
            "held {held}: the waiter took the set {after:?} after the release"
        );
        set.unlock().unwrap();
    }
    for bystander in bystanders {
        bystander.join().unwrap();
    }
    drop(others);
    eventually("no key left", || cluster.total_keys() == 0);
}

#[test]
fn a_set_waiter_gives_up_at_its_deadline_holding_nothing() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let lock = redlock.try_lock("b", TTL).unwrap().expect("free");
    let started = Instant::now();
    let set = redlock
        .try_lock_many_until(["a", "b"], TTL, started + Duration::from_millis(600))
        .unwrap();
    let took = started.elapsed();
    assert!(set.is_none(), "b is held");
    assert!(
        took >= Duration::from_millis(600),
        "returned after {took:?}"
    );
    // Only the single lock's key is left: the set's tries released `a`.
    eventually("only b left", || {
        cluster.servers.iter().all(|s| keys_of(s) == names(&["b"]))
    });
    lock.unlock().unwrap();
    // A wait that did not wait (the set is free) takes it at once.
    let set = redlock.lock_many(["b", "a"], TTL).expect("free");
    set.unlock().unwrap();
}

#[test]
fn shutdown_ends_set_waiters_promptly_and_refuses_later_sets() {
    let cluster = Cluster::start(3);
    let holder = client(&cluster);
    let held = holder.try_lock("b", TTL).unwrap().expect("free");
    // A fallback pause longer than the test's bound: a waiter that ends
    // within it was ended by the shutdown, not by a timer.
    let waiter = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(Duration::from_secs(30))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let locking = {
        let waiter = waiter.clone();
        thread::spawn(move || waiter.lock_many(["a", "b"], TTL).map(drop))
    };
    let working = {
        let waiter = waiter.clone();
        thread::spawn(move || {
            match waiter.with_lock_many(["b", "c"], TTL, TTL, |_| panic!("ran")) {
                Err(redlock_sync::WithLockError::NotTaken(error)) => error,
                other => panic!("with_lock_many on a held b, shut down: {other:?}"),
            }
        })
    };
    thread::sleep(Duration::from_secs(1));
    assert!(!locking.is_finished() && !working.is_finished());
    let shut = Instant::now();
    waiter.shutdown();
    let locked = locking.join().expect("lock_many()");
    assert!(matches!(locked, Err(Error::ShutDown)), "{locked:?}");
    let worked = working.join().expect("with_lock_many()");
    assert!(worked.is_shut_down(), "{worked}");
    assert!(
        shut.elapsed() < Duration::from_secs(5),
        "{:?}",
        shut.elapsed()
    );
    assert!(matches!(
        waiter.try_lock_many(["x", "y"], TTL),
        Err(Error::ShutDown)
    ));
    // The waiters' tries left nothing: only the holder's b.
    eventually("only b left", || {
        cluster.servers.iter().all(|s| keys_of(s) == names(&["b"]))
    });
    held.unlock().unwrap();
}

#[test]
fn with_lock_many_keeps_the_set_renewed_past_several_ttls() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let ttl = Duration::from_secs(2);
    let other = client(&cluster);
    let result = redlock.with_lock_many(["b", "a"], ttl, Duration::from_secs(30), |lease| {
        assert_eq!(lease.resources().collect::<Vec<_>>(), [&b"a"[..], b"b"]);
        let end = Instant::now() + 3 * ttl;
        let mut checks = 0;
        while Instant::now() < end {
            lease.check().expect("the set holds");
            assert!(other.try_lock("a", ttl).unwrap().is_none(), "a is ours");
            assert!(
                other.try_lock_many(["b", "c"], ttl).unwrap().is_none(),
                "b is ours"
            );
            checks += 1;
            thread::sleep(Duration::from_millis(200));
        }
        checks
    });
    assert!(result.expect("held to the end") > 10);
    eventually("released", || cluster.total_keys() == 0);
    // One attempt: `None` while a resource is held, and `work` not run.
    let lock = other.try_lock("a", TTL).unwrap().unwrap();
    let ran = redlock
        .try_with_lock_many(["a", "b"], TTL, TTL, |_| ())
        .expect("no error");
    assert!(ran.is_none());
    lock.unlock().unwrap();
}

#[test]
fn a_leased_set_whose_key_is_gone_on_a_majority_ends_lost() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let ttl = Duration::from_secs(2);
    let result = redlock.with_lock_many(["a", "b"], ttl, Duration::from_secs(30), |lease| {
        eventually("the set on every master", || {
            cluster.servers.iter().all(|s| s.dbsize() == 2)
        });
        // One key of the set gone on two masters: no renewal can count
        // there (every key or none), so the set is lost.
        for server in &cluster.servers[..2] {
            server.cmd(&["DEL", "b"]);
        }
        lease
            .wait_ended(Duration::from_secs(10))
            .expect("the renewer ends the lease")
    });
    match result {
        Err(redlock_sync::WithLockError::Lost { result, .. }) => {
            assert!(matches!(result, Error::LockLost(_)), "{result}")
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    eventually("what was left released", || cluster.total_keys() == 0);
}

/// The mixed contention figure (docs/design.md, "The figure"): 3 masters,
/// 4 threads taking `{a}`, 4 taking `{b}`, `sets` taking `{a, b}` (named
/// `[a, b]` and `[b, a]` in turn), each holding for 1 ms, until every set
/// caller has `goal` acquisitions or `limit` has passed. Returns the
/// acquisitions per thread (the set callers last) and how long the run
/// took. Asserts no overlap on either resource and no key left.
fn mixed_contention(fair: bool, sets: usize, goal: u32, limit: Duration) -> (Vec<u32>, Duration) {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .fair_waiting(fair)
        .build()
        .unwrap();
    let referees: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let overlaps = Arc::new(AtomicUsize::new(0));
    let sets_done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let end = start + limit;
    let threads: Vec<_> = (0..8 + sets)
        .map(|t| {
            let (redlock, referees, overlaps, sets_done) = (
                redlock.clone(),
                Arc::clone(&referees),
                Arc::clone(&overlaps),
                Arc::clone(&sets_done),
            );
            thread::spawn(move || {
                let mine: &[usize] = match t {
                    0..=3 => &[0],
                    4..=7 => &[1],
                    _ if t % 2 == 0 => &[0, 1],
                    _ => &[1, 0],
                };
                let names: Vec<&str> = mine.iter().map(|&i| ["a", "b"][i]).collect();
                let wait = Duration::from_secs(2);
                let hold = || {
                    for &i in mine {
                        if referees[i].fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    thread::sleep(Duration::from_millis(1));
                    for &i in mine {
                        referees[i].fetch_sub(1, Ordering::SeqCst);
                    }
                };
                let mut held = 0u32;
                let mut took = None;
                while Instant::now() < end && sets_done.load(Ordering::SeqCst) < sets {
                    let got = if names.len() == 1 {
                        redlock
                            .try_lock_for(names[0], TTL, wait)
                            .expect("no error")
                            .map(|lock| {
                                hold();
                                lock.unlock().expect("released")
                            })
                    } else {
                        redlock
                            .try_lock_many_for(&names, TTL, wait)
                            .expect("no error")
                            .map(|set| {
                                hold();
                                set.unlock().expect("released")
                            })
                    };
                    held += u32::from(got.is_some());
                    if names.len() == 2 && held == goal && took.is_none() {
                        took = Some(start.elapsed());
                        sets_done.fetch_add(1, Ordering::SeqCst);
                    }
                }
                (held, took.unwrap_or_else(|| start.elapsed()))
            })
        })
        .collect();
    let results: Vec<(u32, Duration)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let took = results[8..].iter().map(|r| r.1).max().unwrap_or_default();
    let held: Vec<u32> = results.iter().map(|r| r.0).collect();
    println!(
        "fair_waiting({fair}): {{a}} x4 {:?}, {{b}} x4 {:?}, {{a, b}} x{sets} {:?} in {took:.1?}",
        &held[..4],
        &held[4..8],
        &held[8..]
    );
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of a resource"
    );
    eventually("no key left", || cluster.total_keys() == 0);
    (held, took)
}

#[test]
fn a_set_caller_is_not_starved_by_callers_of_its_single_resources() {
    // The figure of docs/design.md. With fair waiting (the default) the
    // set waiter holds its turn at the head of each queue: asserted, it
    // reaches 50 acquisitions within a generous bound while 8 threads
    // take `{a}` and `{b}`, which all get some too, and it gets at least
    // three quarters as many as a caller of one resource does on average
    // (it waits its turn in each queue, FIFO: about one acquisition per
    // turn of the queue; measured 1.4 to 2 times as many; without the held
    // turn it got a fifth to two fifths, on a 2-core machine, and a
    // twentieth or less without fair waiting). Without fair
    // waiting the figure is printed (`--nocapture`), not asserted.
    let (held, took) = mixed_contention(true, 1, 50, Duration::from_secs(60));
    assert!(
        held[8] >= 50,
        "the set caller starved: {held:?} in {took:?}"
    );
    assert!(held[..8].iter().all(|&n| n > 0), "{held:?}");
    let single_mean = held[..8].iter().sum::<u32>() / 8;
    assert!(
        4 * held[8] >= 3 * single_mean,
        "the set caller got less than 3/4 of a single caller's share: {held:?} in {took:?}"
    );
    mixed_contention(false, 1, 50, Duration::from_secs(20));
}

#[test]
fn set_waiters_of_one_set_named_in_both_orders_both_finish_among_single_callers() {
    // Two set callers, `[a, b]` and `[b, a]`, among 4 callers of `{a}` and
    // 4 of `{b}`, with fair waiting: each may head a queue the other needs
    // (no deadlock of advice: a set waiter held back only by another's
    // turn tries after 1 s). Asserted: both reach 20 acquisitions within
    // 60 s (generous), the single callers get some too.
    let (held, took) = mixed_contention(true, 2, 20, Duration::from_secs(60));
    assert!(held[8..].iter().all(|&n| n >= 20), "{held:?} in {took:?}");
    assert!(held[..8].iter().all(|&n| n > 0), "{held:?}");
}

#[test]
fn a_sets_release_wakes_the_waiters_of_each_of_its_resources() {
    // Waiters for `a` and for `b` alone, on another handle whose fallback
    // is far off (the key's expiry, 10 s): each is woken by the set's
    // release notice, published on each deleted key's channel.
    let cluster = Cluster::start(3);
    let holding = client(&cluster);
    let waiting = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(Duration::from_secs(10))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let set = holding
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("free");
    let waiters: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let waiting = waiting.clone();
            thread::spawn(move || {
                let lock = waiting
                    .try_lock_for(name, TTL, Duration::from_secs(30))
                    .expect("no error")
                    .expect("taken once released");
                let got = Instant::now();
                lock.unlock().unwrap();
                got
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let released = Instant::now();
    set.unlock().expect("released");
    for (name, waiter) in ["a", "b"].iter().zip(waiters) {
        let after = waiter.join().unwrap().saturating_duration_since(released);
        assert!(
            after < Duration::from_secs(5),
            "{name} taken {after:?} after the release"
        );
    }
}

#[test]
fn inspect_many_sees_each_resource_and_the_sets_one_holder() {
    let cluster = Cluster::start(3);
    let holder = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .holder_label("host-1")
        .build()
        .unwrap();
    let redlock = client(&cluster);
    let set = holder
        .try_lock_many(["b", "a"], TTL)
        .unwrap()
        .expect("free");
    eventually("the set on every master", || {
        cluster.servers.iter().all(|s| s.dbsize() == 2)
    });
    let seen = redlock
        .inspect_many(["c", "b", "a", "b"])
        .expect("inspected");
    let names: Vec<&[u8]> = seen.iter().map(|(name, _)| name).collect();
    assert_eq!(names, [&b"a"[..], b"b", b"c"]);
    for held in ["a", "b"] {
        let one = seen.get(held).expect("looked at");
        assert!(one.is_held() && one.held_on() == 3, "{held}: {one}");
        assert_eq!(one.holder_label(), Some("host-1"));
    }
    assert!(seen.get("c").unwrap().is_free());
    assert!(!seen.is_free());
    assert_eq!(seen.held_by_one_holder(), None, "c is free");
    let both = redlock.inspect_many(["a", "b"]).unwrap();
    assert_eq!(both.held_by_one_holder(), Some("host-1"));
    set.unlock().unwrap();
    eventually("released", || cluster.total_keys() == 0);
    assert!(redlock.inspect_many(["a", "b"]).unwrap().is_free());
    // The same limits as a set's, before any I/O.
    assert!(matches!(
        redlock.inspect_many(Vec::<&str>::new()),
        Err(Error::Config(ConfigError::ResourceSetEmpty))
    ));
}

#[test]
fn an_extension_sets_the_whole_set_on_a_master_the_acquisition_left_out() {
    let mut cluster = Cluster::start(3);
    cluster.servers[2].kill();
    let redlock = client(&cluster);
    let mut set = redlock
        .try_lock_many(["a", "b"], Duration::from_secs(30))
        .unwrap()
        .expect("granted by masters 0 and 1");
    let states: Vec<KeyState> = set.masters().map(|(_, state)| state).collect();
    assert_eq!(states[2], KeyState::Absent, "{states:?}");
    cluster.servers[2].restart();
    // Master 2 was never sent the set: an extension sets every key there
    // (once its reconnect backoff lets it be dialled).
    eventually("the set repaired on master 2", || {
        set.extend(Duration::from_secs(30)).expect("extended");
        keys_of(&cluster.servers[2]) == names(&["a", "b"])
    });
    let value = cluster.servers[0].get(b"a").unwrap();
    assert_eq!(cluster.servers[2].get(b"b"), Some(value), "the set's value");
    set.unlock().unwrap();
    eventually("released everywhere, master 2 included", || {
        cluster.total_keys() == 0
    });
}

#[test]
fn a_set_waiter_tries_again_when_more_masters_are_heard_running_the_release() {
    // The release of `b` runs on master 0 first: its notice wakes the set
    // waiter, whose try finds `b` still on masters 1 and 2 and fails. When
    // master 1's copy of the same notice comes in (it ran the release
    // too), the set can be had on masters 0 and 1: the waiter must try
    // again then, not sleep until its fallback (10 s). The release is
    // played by hand, master by master, with the holder's own notice.
    let cluster = Cluster::start(3);
    let waiting = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .retry_delay(Duration::from_secs(10))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let holder = client(&cluster);
    let lock = holder.try_lock("b", TTL).unwrap().expect("free");
    let value = cluster.servers[0].get(b"b").expect("b set");
    let notice = [&b"r"[..], &value[..16]].concat();
    // A set's try is a script, or MSETEX where the server has it.
    let scripts =
        |s: &RedisServer| s.calls_of("eval") + s.calls_of("evalsha") + s.calls_of("msetex");
    let waiter = {
        let waiting = waiting.clone();
        thread::spawn(move || {
            let set = waiting
                .try_lock_many_for(["a", "b"], TTL, Duration::from_secs(30))
                .expect("no error");
            (set, Instant::now())
        })
    };
    // The waiter is subscribed to b's channel on every master.
    let mut channel = Vec::new();
    eventually("the waiter subscribed on every master", || {
        let subscribed =
            cluster
                .servers
                .iter()
                .all(|s| match s.cmd(&["PUBSUB", "CHANNELS", "*}b"]) {
                    OwnedReply::Array(names) => match names.first() {
                        Some(OwnedReply::Bulk(name)) => {
                            channel = name.clone();
                            true
                        }
                        _ => false,
                    },
                    _ => false,
                });
        subscribed
    });
    // Let its try after subscribing go by (b is held everywhere then).
    thread::sleep(Duration::from_millis(300));
    let release_on = |i: usize| {
        let server = &cluster.servers[i];
        server.command(&[b"DEL", b"b"]).unwrap();
        server.command(&[b"PUBLISH", &channel, &notice]).unwrap();
    };
    let tries = scripts(&cluster.servers[1]);
    release_on(0);
    eventually("the waiter tried again after master 0's notice", || {
        scripts(&cluster.servers[1]) > tries
    });
    let released = Instant::now();
    release_on(1);
    let (set, got) = waiter.join().unwrap();
    let set = set.expect("taken on masters 0 and 1");
    let after = got.saturating_duration_since(released);
    assert!(
        after < Duration::from_secs(5),
        "taken {after:?} after master 1's copy"
    );
    set.unlock().unwrap();
    drop(lock);
    eventually("no key left", || cluster.total_keys() == 0);
}

/// The release channel of `resource` once the handles subscribed to it on
/// every master (its name carries the slot's tag, read back from the
/// servers).
fn subscribed_channel(cluster: &Cluster, resource: &str) -> String {
    let pattern = format!("redlock-sync:released:*}}{resource}");
    let mut found = None;
    eventually("the channel subscribed on every master", || {
        let names: Vec<Option<String>> = cluster
            .servers
            .iter()
            .map(|s| match s.cmd(&["PUBSUB", "CHANNELS", &pattern]) {
                OwnedReply::Array(items) => items.into_iter().find_map(|item| match item {
                    OwnedReply::Bulk(name) => String::from_utf8(name).ok(),
                    _ => None,
                }),
                _ => None,
            })
            .collect();
        found = names[0].clone();
        names.iter().all(|n| n.is_some())
    });
    found.expect("found")
}

/// Says `s<id>` (a set waiter) on `channel` on every master, as a set
/// waiter of another client would (only the queue's master's counts).
fn say_set_waiter(cluster: &Cluster, channel: &str, id: &str) {
    assert_eq!(id.len(), 16);
    for server in &cluster.servers {
        server.cmd(&["PUBLISH", channel, &format!("s{id}")]);
    }
}

/// Says `s<id>` on `channel` every 300 ms (a set waiter alive at the head
/// of the queue, that never tries) until the flag is set.
fn keep_saying_set_waiter(cluster: &Cluster, channel: &str, id: &str) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let urls: Vec<u16> = cluster.servers.iter().map(|s| s.port()).collect();
    let (channel, id, flag) = (channel.to_string(), id.to_string(), Arc::clone(&stop));
    thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            for port in &urls {
                use std::io::Write;
                if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", *port)) {
                    let payload = format!("s{id}");
                    let _ = write!(
                        s,
                        "*3\r\n$7\r\nPUBLISH\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
                        channel.len(),
                        payload.len()
                    );
                }
            }
            thread::sleep(Duration::from_millis(300));
        }
    });
    stop
}

#[test]
fn a_set_waiter_fallen_silent_at_the_head_of_a_queue_holds_it_about_a_second() {
    // Queue of `a`: a waiter, then a set waiter of another client that
    // announced itself once and died (a forged `s`), then a second waiter.
    // When the first has taken and released `a`, the dead set waiter heads
    // the queue: the second holds back for its turn (at least 0.5 s: the
    // turn was held) and goes on once it has been silent for 1 s (within
    // 10 s: no stall).
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let holder = client(&cluster);
    let lock = holder.try_lock("a", TTL).unwrap().expect("free");
    let waiter = |then_release: bool| {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let lock = redlock
                .try_lock_for("a", TTL, Duration::from_secs(30))
                .expect("no error")
                .expect("taken");
            let got = Instant::now();
            if then_release {
                lock.unlock().expect("released");
                (got, Instant::now(), None)
            } else {
                (got, got, Some(lock))
            }
        })
    };
    let first = waiter(true);
    let channel = subscribed_channel(&cluster, "a");
    thread::sleep(Duration::from_millis(500));
    say_set_waiter(&cluster, &channel, "dead0000set00000");
    thread::sleep(Duration::from_millis(500));
    let second = waiter(false);
    thread::sleep(Duration::from_millis(500));
    lock.unlock().expect("released");
    let (_, first_released, _) = first.join().unwrap();
    let (second_got, _, second_lock) = second.join().unwrap();
    let gap = second_got.saturating_duration_since(first_released);
    println!("the second waiter took `a` {gap:?} after the first released it");
    assert!(
        gap >= Duration::from_millis(500),
        "the turn was not held: {gap:?}"
    );
    assert!(gap < Duration::from_secs(10), "stalled: {gap:?}");
    second_lock.expect("held").unlock().expect("released");
}

#[test]
fn a_live_set_waiters_turn_holds_a_waiter_of_one_resource_a_second_at_most() {
    // Queue of `a`: a waiter, then a set waiter of another client that
    // stays alive and never tries (a forged `s`, said every 300 ms: what a
    // client publishing on the channel could do), then a second waiter.
    // Once the first has taken and released `a`, the live set waiter heads
    // the queue: the second holds back (at least 0.5 s: the turn was held)
    // and tries once it has been held back for 1 s (taken within 5 s; its
    // own wait is 30 s, and before the bound it waited all of it).
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let holder = client(&cluster);
    let lock = holder.try_lock("a", TTL).unwrap().expect("free");
    let waiter = |then_release: bool| {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let lock = redlock
                .try_lock_for("a", TTL, Duration::from_secs(30))
                .expect("no error")
                .expect("taken within the wait");
            let got = Instant::now();
            if then_release {
                lock.unlock().expect("released");
                (got, Instant::now(), None)
            } else {
                (got, got, Some(lock))
            }
        })
    };
    let first = waiter(true);
    let channel = subscribed_channel(&cluster, "a");
    thread::sleep(Duration::from_millis(500));
    let speaker = keep_saying_set_waiter(&cluster, &channel, "live0000set00000");
    thread::sleep(Duration::from_millis(500));
    let second = waiter(false);
    thread::sleep(Duration::from_millis(500));
    lock.unlock().expect("released");
    let (_, first_released, _) = first.join().unwrap();
    let (second_got, _, second_lock) = second.join().unwrap();
    speaker.store(true, Ordering::SeqCst);
    let gap = second_got.saturating_duration_since(first_released);
    println!("the second waiter took `a` {gap:?} after the first released it");
    assert!(
        gap >= Duration::from_millis(500),
        "the turn was not held: {gap:?}"
    );
    assert!(gap < Duration::from_secs(5), "held back too long: {gap:?}");
    second_lock.expect("held").unlock().expect("released");
}

#[test]
fn a_set_waiter_is_not_stalled_by_another_set_waiters_held_turn() {
    // Another client's set waiter heads the queue of `b` and stays alive
    // (a forged `s`, said every 300 ms, that never tries); our set waiter
    // of `{a, b}` heads the queue of `a`. Each holds a turn the other
    // needs: ours tries anyway after 1 s, and takes the set once `a` is
    // released (within 10 s; its wait would end at 20 s).
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let holder = client(&cluster);
    let la = holder.try_lock("a", TTL).unwrap().expect("free");
    let lb = holder.try_lock("b", TTL).unwrap().expect("free");
    let b_waiter = {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let lock = redlock
                .try_lock_for("b", TTL, Duration::from_secs(30))
                .expect("no error")
                .expect("taken");
            lock.unlock().expect("released");
        })
    };
    let channel = subscribed_channel(&cluster, "b");
    thread::sleep(Duration::from_millis(500));
    let speaker = keep_saying_set_waiter(&cluster, &channel, "other000set00000");
    thread::sleep(Duration::from_millis(500));
    // The waiter of `b` takes it and releases it: the other set waiter
    // heads the queue of `b`, alive.
    lb.unlock().expect("released");
    b_waiter.join().unwrap();
    let set_waiter = {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let set = redlock
                .try_lock_many_for(["b", "a"], TTL, Duration::from_secs(20))
                .expect("no error");
            let got = Instant::now();
            set.map(|set| {
                set.unlock().expect("released");
                got
            })
        })
    };
    thread::sleep(Duration::from_millis(500));
    let released = Instant::now();
    la.unlock().expect("released");
    let got = set_waiter.join().unwrap();
    speaker.store(true, Ordering::SeqCst);
    let got = got.expect("the set waiter stalled behind the other's turn (20 s)");
    let after = got.saturating_duration_since(released);
    println!("the set taken {after:?} after `a` was released");
    assert!(after < Duration::from_secs(10), "stalled: {after:?}");
}

#[test]
fn a_waiter_that_does_not_take_turns_ignores_a_set_waiters_held_turn() {
    // A client that does not take turns (`fair_waiting(false)`, or an old
    // client, which drops `s` as a message it does not know) takes a lock
    // released while a live set waiter heads its queue.
    let cluster = Cluster::start(3);
    let unfair = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(PATIENT)
        .fair_waiting(false)
        .build()
        .unwrap();
    let holder = client(&cluster);
    let lock = holder.try_lock("a", TTL).unwrap().expect("free");
    let waiter = {
        let unfair = unfair.clone();
        thread::spawn(move || {
            let lock = unfair
                .try_lock_for("a", TTL, Duration::from_secs(20))
                .expect("no error")
                .expect("taken");
            let got = Instant::now();
            lock.unlock().expect("released");
            got
        })
    };
    let channel = subscribed_channel(&cluster, "a");
    let speaker = keep_saying_set_waiter(&cluster, &channel, "alive000set00000");
    thread::sleep(Duration::from_millis(700));
    let released = Instant::now();
    lock.unlock().expect("released");
    let got = waiter.join().unwrap();
    speaker.store(true, Ordering::SeqCst);
    let after = got.saturating_duration_since(released);
    assert!(
        after < Duration::from_secs(5),
        "taken {after:?} after the release"
    );
}
