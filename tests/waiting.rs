//! Waiting for a held lock (`try_lock_for`, `lock`): woken by the release,
//! not by the retry timer; falling back to the timer when notices cannot
//! come; with masters frozen or killed; under heavy contention; and against
//! masters that flood the channel or send garbage; the other ways to wait
//! (`try_lock_until`, `lock_waiting`, `with_lock_waiting`, no time limit)
//! and `shutdown`. Real servers throughout, except the one master that
//! sends garbage.

mod support;

use redlock_sync::{Builder, Error, Lock, Redlock, Wait};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::alloc::{live_bytes, CountingAllocator};
use support::resp::encode_command;
use support::{
    lock_server, release_channel, Action, Call, Cluster, FakeNode, OwnedReply, RedisServer,
};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const TTL: Duration = Duration::from_secs(10);

/// So long that a waiter that acquires within a second was woken, not
/// polled.
const NEVER: Duration = Duration::from_secs(30);

/// A node timeout a loaded machine does not miss (the default, 50 ms, it
/// can): for the tests whose point is not what a frozen or silent master
/// costs.
const PATIENT: Duration = Duration::from_secs(1);

/// A client that retries only every 30 s: it can only be quick if woken.
/// Default node timeout (50 ms): a frozen or silent master costs little.
fn woken_only(urls: Vec<String>) -> Redlock {
    retrying_every_30_s(urls)
        .build()
        .expect("valid configuration")
}

/// `woken_only` with its rounds given `node_timeout` per master.
fn woken_only_with(urls: Vec<String>, node_timeout: Duration) -> Redlock {
    retrying_every_30_s(urls)
        .node_timeout(node_timeout)
        .build()
        .expect("valid configuration")
}

fn retrying_every_30_s(urls: Vec<String>) -> Builder {
    Redlock::builder()
        .nodes(urls)
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
}

/// Waits until `servers` (those given) each have at least `n` subscribers
/// on `resource`'s channel: the waiters are listening.
fn wait_for_subscribers(servers: &[&RedisServer], resource: &str, n: i64) {
    let channel = release_channel(resource);
    let limit = Instant::now() + Duration::from_secs(10);
    for server in servers {
        loop {
            let count = match server.cmd(&["PUBSUB", "NUMSUB", &channel]) {
                OwnedReply::Array(items) => match items.get(1) {
                    Some(OwnedReply::Integer(count)) => *count,
                    other => panic!("PUBSUB NUMSUB: {other:?}"),
                },
                other => panic!("PUBSUB NUMSUB: {other:?}"),
            };
            if count >= n {
                break;
            }
            assert!(Instant::now() < limit, "no subscriber after 10 s");
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Calls of every command on `servers` but the test's own (`INFO` and
/// `PUBSUB`).
fn commands_run(servers: &[&RedisServer]) -> u64 {
    servers
        .iter()
        .flat_map(|server| server.command_calls())
        .filter(|(name, _)| name != "info" && !name.starts_with("pubsub"))
        .map(|(_, calls)| calls)
        .sum()
}

/// Calls of `SET` on `servers`: acquisition attempts, one per master.
fn set_calls(servers: &[&RedisServer]) -> u64 {
    servers.iter().map(|server| server.calls_of("set")).sum()
}

/// One holder and one waiter (separate clients, as separate processes
/// would be): the waiter, set to retry only every 30 s, takes the lock
/// within a second of each release, five times over.
fn handoffs_are_woken(n: usize) {
    let cluster = Cluster::start(n);
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    for round in 0..5 {
        let lock = holder.lock("job", TTL).expect("free");
        let released_at = Arc::new(Mutex::new(None::<Instant>));
        let waiting = {
            let (waiter, released_at) = (waiter.clone(), Arc::clone(&released_at));
            thread::spawn(move || {
                let lock = waiter
                    .try_lock_for("job", TTL, Duration::from_secs(60))
                    .expect("no error")
                    .expect("acquired within the wait");
                let after = released_at
                    .lock()
                    .unwrap()
                    .expect("acquired only after the release")
                    .elapsed();
                lock.unlock().expect("released");
                after
            })
        };
        // The waiter listens on every master before the release.
        wait_for_subscribers(&servers, "job", 1);
        thread::sleep(Duration::from_millis(20));
        *released_at.lock().unwrap() = Some(Instant::now());
        lock.unlock().expect("released");
        let after = waiting.join().expect("waiter");
        assert!(
            after < Duration::from_secs(1),
            "N={n}, round {round}: the waiter took {after:?} after the release"
        );
    }
    assert_eq!(cluster.total_keys(), 0);
}

#[test]
fn a_waiter_is_woken_by_the_release_with_1_master() {
    handoffs_are_woken(1);
}

#[test]
fn a_waiter_is_woken_by_the_release_with_3_masters() {
    handoffs_are_woken(3);
}

#[test]
fn a_waiter_is_woken_by_the_release_with_5_masters() {
    handoffs_are_woken(5);
}

/// `lock()` waits the same way (without a time limit by default).
#[test]
fn lock_waits_for_the_release_too() {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let waiter = Redlock::builder()
        .nodes(cluster.urls())
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let lock = holder.lock("job", TTL).unwrap();
    let waiting = thread::spawn(move || {
        let lock = waiter.lock("job", TTL).expect("acquired");
        let at = Instant::now();
        lock.unlock().unwrap();
        at
    });
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    wait_for_subscribers(&servers, "job", 1);
    let released = Instant::now();
    lock.unlock().unwrap();
    let acquired = waiting.join().unwrap();
    let after = acquired.saturating_duration_since(released);
    assert!(after < Duration::from_secs(1), "took {after:?}");
}

/// `Ok(None)` when the lock is still held at the end of the wait, after
/// that long, and not after the fallback pause (30 s). (A round more or
/// less past the end, a millisecond with these masters, is more than a
/// clock can tell on a loaded machine: 1 s is allowed for its delays.)
#[test]
fn a_wait_that_runs_out_returns_none() {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let _lock = holder.lock("job", TTL).unwrap();
    let start = Instant::now();
    let got = waiter
        .try_lock_for("job", TTL, Duration::from_millis(300))
        .expect("no error");
    assert!(got.is_none(), "the lock is held");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1_300),
        "waited {waited:?}"
    );
}

/// Under an ACL user without channel rights (Redis 7's default for new
/// users), SUBSCRIBE is refused and the release script's PUBLISH fails
/// inside `pcall`: releases still report success and delete the key, and a
/// waiter still gets the lock, by the retry timer.
#[test]
fn without_channel_rights_waiters_poll_and_releases_succeed() {
    let cluster = Cluster::start_with(3, &["--user", "locker on >pw ~* resetchannels +@all"]);
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", s.port()))
        .collect();
    let polling = |urls: Vec<String>| {
        Redlock::builder()
            .nodes(urls)
            .retry_delay(Duration::from_millis(100))
            .retry_jitter(Duration::from_millis(50))
            .build()
            .unwrap()
    };
    let holder = polling(urls.clone());
    let waiter = polling(urls);
    let lock = holder.lock("job", TTL).unwrap();
    let waiting = thread::spawn(move || {
        let lock = waiter
            .try_lock_for("job", TTL, Duration::from_secs(30))
            .expect("no error")
            .expect("acquired within the wait");
        let at = Instant::now();
        lock.unlock()
            .expect("a release without PUBLISH rights succeeds");
        at
    });
    thread::sleep(Duration::from_millis(300)); // the waiter polls meanwhile
    let released = Instant::now();
    lock.unlock()
        .expect("a release without PUBLISH rights succeeds");
    let acquired = waiting.join().unwrap();
    let after = acquired.saturating_duration_since(released);
    // One polling period (100-150 ms) and a round, with a wide margin.
    assert!(after < Duration::from_secs(3), "took {after:?}");
    assert_eq!(cluster.total_keys(), 0, "every release deleted its key");
    // Nobody could subscribe.
    for server in &cluster.servers {
        assert_eq!(
            server.cmd(&["PUBSUB", "NUMSUB", &release_channel("job")]),
            OwnedReply::Array(vec![
                OwnedReply::Bulk(release_channel("job").into_bytes()),
                OwnedReply::Integer(0)
            ])
        );
    }
}

/// A master frozen (SIGSTOP), each of the three in turn (one of them
/// orders the queue): the release notices of the others still wake the
/// waiter. Frozen once the waiter listens, or from before its first try
/// (so that it tries and subscribes while the master cannot answer).
fn a_waiter_is_woken_with_one_master_frozen(before_the_first_try: bool) {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    for frozen in 0..3 {
        let lock = holder.lock("job", TTL).expect("free");
        let paused = before_the_first_try.then(|| cluster.servers[frozen].pause());
        let waiting = {
            let waiter = waiter.clone();
            thread::spawn(move || {
                let lock = waiter
                    .try_lock_for("job", TTL, Duration::from_secs(60))
                    .expect("no error")
                    .expect("acquired within the wait");
                let at = Instant::now();
                drop(lock); // released (best effort) while the master is frozen
                at
            })
        };
        let listening: Vec<&RedisServer> = (0..3)
            .filter(|&i| !before_the_first_try || i != frozen)
            .map(|i| servers[i])
            .collect();
        wait_for_subscribers(&listening, "job", 1);
        thread::sleep(Duration::from_millis(100));
        let paused = paused.unwrap_or_else(|| cluster.servers[frozen].pause());
        let released = Instant::now();
        lock.unlock().expect("two of three release");
        let acquired = waiting.join().unwrap();
        let after = acquired.saturating_duration_since(released);
        assert!(
            after < Duration::from_secs(1),
            "master {frozen} frozen: the waiter took {after:?}"
        );
        drop(paused);
        // The frozen master runs what it was sent once resumed.
        let limit = Instant::now() + Duration::from_secs(10);
        while cluster.total_keys() != 0 {
            assert!(Instant::now() < limit, "keys left behind");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_waiter_is_woken_with_any_one_master_frozen() {
    a_waiter_is_woken_with_one_master_frozen(false);
}

#[test]
fn a_waiter_is_woken_with_any_one_master_frozen_from_before_its_first_try() {
    a_waiter_is_woken_with_one_master_frozen(true);
}

/// A master killed while a waiter waits, each of the three in turn (on a
/// fresh cluster each time): the others' notices wake the waiter.
#[test]
fn a_waiter_is_woken_with_any_one_master_killed() {
    for killed in 0..3 {
        let mut cluster = Cluster::start(3);
        let holder = woken_only(cluster.urls());
        let waiter = woken_only(cluster.urls());
        let lock = holder.lock("job", TTL).expect("free");
        let waiting = thread::spawn(move || {
            let lock = waiter
                .try_lock_for("job", TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let at = Instant::now();
            lock.unlock().expect("two of three release");
            at
        });
        let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
        wait_for_subscribers(&servers, "job", 1);
        cluster.servers[killed].kill();
        let released = Instant::now();
        lock.unlock().expect("two of three release");
        let acquired = waiting.join().unwrap();
        let after = acquired.saturating_duration_since(released);
        assert!(
            after < Duration::from_secs(1),
            "master {killed} killed: the waiter took {after:?}"
        );
    }
}

/// 32 threads (4 clients of 8 threads, as 4 processes would be) take turns
/// on one lock for 4 s, holding it 1 ms each time. The referee sees no two
/// holders at once; the lock never sits free for long (every release is
/// followed by a new holder, with the retry timer at 30 s); and the
/// commands the masters run per handoff stay bounded.
#[test]
fn thirty_two_threads_take_turns_without_overlap_or_stall() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    // A node timeout of 1 s: 32 threads and 3 servers on a loaded machine
    // can miss 50 ms, and a failed release would leave the lock to expire.
    let clients: Vec<Redlock> = (0..4)
        .map(|_| {
            Redlock::builder()
                .nodes(cluster.urls())
                .node_timeout(Duration::from_secs(1))
                .retry_delay(NEVER)
                .retry_jitter(Duration::ZERO)
                .build()
                .expect("valid configuration")
        })
        .collect();
    let holder = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    // (acquired, released) instants of every hold.
    let holds = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::new()));
    let commands_before = commands_run(&servers);
    let end = Instant::now() + Duration::from_secs(4);
    let threads: Vec<_> = (0..32)
        .map(|t| {
            let client = clients[t % 4].clone();
            let (holder, overlaps, holds) = (
                Arc::clone(&holder),
                Arc::clone(&overlaps),
                Arc::clone(&holds),
            );
            thread::spawn(move || {
                let mut mine = 0;
                while Instant::now() < end {
                    let Some(lock) = client
                        .try_lock_for("hot", TTL, Duration::from_secs(20))
                        .expect("no error")
                    else {
                        panic!("thread {t}: no turn in 20 s");
                    };
                    let acquired = Instant::now();
                    if holder.swap(t + 1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::sleep(Duration::from_millis(1));
                    holder.store(0, Ordering::SeqCst);
                    let released = Instant::now();
                    lock.unlock().expect("released");
                    holds.lock().unwrap().push((acquired, released));
                    mine += 1;
                }
                mine
            })
        })
        .collect();
    let per_thread: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let commands = commands_run(&servers) - commands_before;
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    let mut holds = holds.lock().unwrap().clone();
    holds.sort();
    let handoffs = holds.len();
    let longest_free = holds
        .windows(2)
        .map(|w| w[1].0.saturating_duration_since(w[0].1))
        .max()
        .unwrap_or_default();
    let per_handoff = commands as f64 / handoffs as f64;
    eprintln!(
        "32 threads, 3 masters: {handoffs} handoffs in 4 s, longest free stretch {longest_free:?}, \
         {per_handoff:.1} commands per handoff on all masters, per thread min {} max {}",
        per_thread.iter().min().unwrap(),
        per_thread.iter().max().unwrap()
    );
    assert!(handoffs >= 200, "only {handoffs} handoffs in 4 s");
    // Polling would leave the lock free for up to 30 s.
    assert!(
        longest_free < Duration::from_secs(2),
        "the lock sat free for {longest_free:?}"
    );
    // A handoff is a release (5 commands per master, with its PUBLISH and
    // ECHO) and an acquisition (SET and ECHO): 21 on 3 masters, plus the
    // queue's messages. Losing tries by a herd would multiply it.
    assert!(per_handoff < 60.0, "{per_handoff:.1} commands per handoff");
    assert_eq!(cluster.total_keys(), 0);
}

/// Publishes, pipelined and without reading replies (`CLIENT REPLY OFF`),
/// every payload of `payloads` on `channel` at `port`, over and over until
/// `stop`. Returns how many messages it sent.
fn flood(port: u16, channel: String, payloads: Vec<Vec<u8>>, stop: Arc<AtomicBool>) -> usize {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .write_all(&encode_command(&[b"CLIENT", b"REPLY", b"OFF"]))
        .unwrap();
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut batch = Vec::new();
        for payload in &payloads {
            batch.extend(encode_command(&[b"PUBLISH", channel.as_bytes(), payload]));
        }
        if stream.write_all(&batch).is_err() {
            break;
        }
        sent += payloads.len();
    }
    sent
}

/// Messages a hostile or broken master might publish on a lock's channel:
/// garbage, empty and huge payloads, forged release notices (new ones each
/// time), forged waiters filling the queue, forged takers and leavers.
fn forged_payloads(round: usize) -> Vec<Vec<u8>> {
    let mut payloads = vec![
        b"".to_vec(),
        b"garbage".to_vec(),
        vec![b'r'; 10_000],
        b"t0123456789abcdef".to_vec(),
    ];
    for i in 0..50 {
        let id = format!("{:016x}", round * 1_000 + i);
        payloads.push(format!("r{id}").into_bytes());
        payloads.push(format!("w{id}").into_bytes());
        payloads.push(format!("t{id}{id}").into_bytes());
        payloads.push(format!("g{id}").into_bytes());
    }
    payloads
}

/// Every master floods the channel with forged and garbage messages while
/// the lock is held: the waiter never returns a lock it does not hold (the
/// holder still holds it, as the referee sees), its tries stay few (forged
/// notices are rate-limited), and memory does not grow with the flood.
/// Once the real release comes, the waiter takes the lock.
#[test]
fn a_flood_of_forged_messages_cannot_grant_or_grow_anything() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    // A node timeout of 1 s: the flooded masters answer the lock's own
    // rounds late on a loaded machine.
    let client = |urls| {
        Redlock::builder()
            .nodes(urls)
            .node_timeout(Duration::from_secs(1))
            .retry_delay(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let holder = client(cluster.urls());
    let waiter = client(cluster.urls());
    let lock = holder.lock("job", TTL).unwrap();
    let holding = Arc::new(AtomicBool::new(true));
    let waiting = {
        let holding = Arc::clone(&holding);
        thread::spawn(move || {
            let lock = waiter
                .try_lock_for("job", TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            assert!(
                !holding.load(Ordering::SeqCst),
                "the waiter returned a lock that was still held"
            );
            let at = Instant::now();
            lock.unlock().unwrap();
            at
        })
    };
    wait_for_subscribers(&servers, "job", 1);
    let sets_before = set_calls(&servers);
    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<_> = cluster
        .servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let (port, stop) = (server.port(), Arc::clone(&stop));
            thread::spawn(move || flood(port, release_channel("job"), forged_payloads(i), stop))
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let live_early = live_bytes();
    thread::sleep(Duration::from_millis(2_000));
    let live_late = live_bytes();
    let sets = set_calls(&servers) - sets_before;
    // The real release, while the flood goes on.
    holding.store(false, Ordering::SeqCst);
    let released = Instant::now();
    lock.unlock().unwrap();
    let acquired = waiting.join().expect("waiter");
    stop.store(true, Ordering::Relaxed);
    let sent: usize = flooders.into_iter().map(|f| f.join().unwrap()).sum();
    let after = acquired.saturating_duration_since(released);
    eprintln!(
        "flood: {sent} forged messages; {sets} SETs ({} tries) in 2.5 s; live bytes {live_early} -> {live_late}; \
         acquired {after:?} after the release",
        sets / 3
    );
    assert!(
        sent > 10_000,
        "the flood was too weak to show anything: {sent}"
    );
    // Rate-limited: a handful of quick tries, then about one per second.
    assert!(sets / 3 <= 40, "{} tries during the flood", sets / 3);
    assert!(
        live_late - live_early < 1 << 20,
        "memory grew by {} bytes during the flood",
        live_late - live_early
    );
    assert!(
        after < Duration::from_secs(3),
        "took {after:?} after the release"
    );
}

/// A master whose subscriber connections get garbage (an unknown reply, an
/// over-long length) instead of subscription confirmations: the connection
/// is dropped and re-dialled with a backoff, and the other two masters'
/// notices still wake the waiter.
#[test]
fn a_master_answering_subscriptions_with_garbage_does_not_stop_waking() {
    for garbage in [&b"*3\r\n$7\r\nmessage\r\n:1\r\n"[..], b"$999999999999\r\n"] {
        let fake = FakeNode::start(lock_server(move |call| match call {
            // Lock commands: this master never answers (it fails each round).
            Call::Acquire { .. } | Call::Release { .. } | Call::Extend { .. } => Action::Silence,
            _ => Action::Reply(garbage.to_vec()),
        }));
        let cluster = Cluster::start(2);
        let mut urls = cluster.urls();
        urls.push(fake.url());
        let holder = woken_only(urls.clone());
        let waiter = woken_only(urls);
        let lock = holder.lock("job", TTL).expect("two of three");
        let waiting = thread::spawn(move || {
            let lock = waiter
                .try_lock_for("job", TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let at = Instant::now();
            lock.unlock().unwrap();
            at
        });
        let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
        wait_for_subscribers(&servers, "job", 1);
        thread::sleep(Duration::from_millis(500)); // the garbage master is re-dialled meanwhile
        let released = Instant::now();
        lock.unlock().expect("two of three release");
        let acquired = waiting.join().unwrap();
        let after = acquired.saturating_duration_since(released);
        assert!(after < Duration::from_secs(1), "took {after:?}");
        // Re-dialled with a backoff, not in a loop.
        let dials = fake.connections();
        assert!(dials < 40, "{dials} connections to the garbage master");
    }
}

/// Threads of one client waiting on one lock share the subscriber
/// connections: each master sees one subscriber connection per client,
/// however many threads wait.
#[test]
fn one_subscriber_connection_per_master_per_client() {
    let cluster = Cluster::start(3);
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let lock = holder.lock("job", TTL).unwrap();
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let waiter = waiter.clone();
            thread::spawn(move || {
                let lock = waiter
                    .try_lock_for("job", TTL, Duration::from_secs(60))
                    .expect("no error")
                    .expect("acquired within the wait");
                lock.unlock().unwrap();
            })
        })
        .collect();
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    wait_for_subscribers(&servers, "job", 1);
    thread::sleep(Duration::from_millis(200)); // all eight are waiting
    for server in &cluster.servers {
        let OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]) else {
            panic!("CLIENT LIST")
        };
        let connections = String::from_utf8_lossy(&list).lines().count();
        assert_eq!(connections, 1, "pub/sub connections: {connections}");
    }
    lock.unlock().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(cluster.total_keys(), 0);
}

/// A thread of `waiter` waiting for "job" with `try_lock_for` (60 s): it
/// returns when it took the lock, which it then releases.
fn waiting_for_job(waiter: Redlock) -> thread::JoinHandle<Instant> {
    thread::spawn(move || {
        let lock = waiter
            .try_lock_for("job", TTL, Duration::from_secs(60))
            .expect("no error")
            .expect("acquired within the wait");
        let at = Instant::now();
        lock.unlock().expect("released");
        at
    })
}

/// Releases `lock`; returns how long after that `waiting` took it.
fn taken_after_release(lock: Lock, waiting: thread::JoinHandle<Instant>) -> Duration {
    let released = Instant::now();
    lock.unlock().expect("released");
    let acquired = waiting.join().expect("waiter");
    acquired.saturating_duration_since(released)
}

/// The lock "job" held by one client of `cluster`, and a thread of another
/// client (retry timer 30 s) waiting for it with `try_lock_for`, which
/// returns when it took the lock (it then releases it). Returns once the
/// waiter listens on every master and is waiting for a release. Both
/// clients' rounds get `node_timeout` per master.
fn a_held_lock_and_a_waiter(
    cluster: &Cluster,
    node_timeout: Duration,
) -> (Lock, thread::JoinHandle<Instant>) {
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let holder = woken_only_with(cluster.urls(), node_timeout);
    let waiter = woken_only_with(cluster.urls(), node_timeout);
    let lock = holder.lock("job", TTL).expect("free");
    let waiting = waiting_for_job(waiter);
    wait_for_subscribers(&servers, "job", 1);
    thread::sleep(Duration::from_millis(20));
    (lock, waiting)
}

/// The payload of the release notice the masters publish when they delete
/// the lock whose value is `value` (`r` and the value's first 16 bytes).
fn release_notice_of(value: &[u8]) -> Vec<u8> {
    let mut payload = b"r".to_vec();
    payload.extend_from_slice(&value[..16]);
    payload
}

/// Runs on one master what the release script does there: deletes the key
/// and (if `publish`) publishes the release notice.
fn release_on(server: &RedisServer, notice: &[u8], publish: bool) {
    let channel = release_channel("job");
    assert_eq!(server.cmd(&["DEL", "job"]), OwnedReply::Integer(1));
    if publish {
        server
            .command(&[b"PUBLISH", channel.as_bytes(), notice])
            .expect("published");
    }
}

/// A release that runs on one master 300 ms before the other two (they
/// lag): the waiter's tries started by the first master's notice find the
/// key still held on the others. Once those have deleted it, the waiter
/// (set to retry only every 30 s) takes the lock within a second: woken by
/// their copies of the notice (`publish_late`), or by the short pauses
/// after a try that a master not heard to run the release refused (their
/// copies lost).
fn a_try_that_beat_a_lagging_release_is_tried_again(publish_late: bool) {
    let cluster = Cluster::start(3);
    let (lock, waiting) = a_held_lock_and_a_waiter(&cluster, PATIENT);
    let value = cluster.servers[0].get(b"job").expect("held");
    let notice = release_notice_of(&value);
    // The lock runs out on the masters from here on (the test deleted it).
    lock.let_expire();
    release_on(&cluster.servers[0], &notice, true);
    thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    release_on(&cluster.servers[1], &notice, publish_late);
    release_on(&cluster.servers[2], &notice, publish_late);
    let acquired = waiting.join().expect("waiter");
    let after = acquired.saturating_duration_since(released);
    assert!(
        after < Duration::from_secs(1),
        "took {after:?} after the lagging masters deleted the key"
    );
    assert_eq!(cluster.total_keys(), 0);
}

#[test]
fn a_try_that_beat_a_lagging_release_is_tried_again_on_its_notice() {
    a_try_that_beat_a_lagging_release_is_tried_again(true);
}

#[test]
fn a_try_that_beat_a_lagging_release_is_tried_again_without_its_notice() {
    a_try_that_beat_a_lagging_release_is_tried_again(false);
}

/// A try that finds no quorum (two of three masters frozen) does not put
/// the waiter to sleep for the whole fallback pause: the release that
/// follows once they are resumed wakes it, and it takes the lock within a
/// second (the fallback is 30 s).
#[test]
fn a_try_without_quorum_still_wakes_on_the_next_release() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    // The default node timeout: the try below must fail soon.
    let (lock, waiting) = a_held_lock_and_a_waiter(&cluster, Duration::from_millis(50));
    let sets_before = set_calls(&servers[..1]);
    {
        let _frozen = (cluster.servers[1].pause(), cluster.servers[2].pause());
        // A notice (forged, on the master that still answers) starts a try;
        // the frozen masters do not answer it within the node timeout.
        let channel = release_channel("job");
        cluster.servers[0].cmd(&["PUBLISH", &channel, "r0123456789abcdef"]);
        let limit = Instant::now() + Duration::from_secs(10);
        while set_calls(&servers[..1]) == sets_before {
            assert!(Instant::now() < limit, "the notice started no try");
            thread::sleep(Duration::from_millis(2));
        }
        // Well past the 50 ms node timeout: the try has failed.
        thread::sleep(Duration::from_millis(300));
    }
    let after = taken_after_release(lock, waiting);
    assert!(
        after < Duration::from_secs(1),
        "took {after:?} after the release"
    );
}

/// Releases heard from every master are real, however many races for them
/// the waiter loses: each one is tried at once, not spaced out like
/// notices from a minority of masters (which may be forged). Here the
/// same notice, published on all three masters, stands for a real release
/// the waiter loses: 100 of them, 20 ms apart, while the lock is held.
/// The waiter tries after (nearly) each, and still takes the lock within a
/// second of the real release (its fallback is 30 s).
#[test]
fn lost_races_for_real_releases_do_not_slow_the_waiter_down() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let (lock, waiting) = a_held_lock_and_a_waiter(&cluster, PATIENT);
    let sets_before = set_calls(&servers);
    let channel = release_channel("job");
    for round in 0..100 {
        let notice = format!("r{round:016x}");
        for server in &servers {
            server.cmd(&["PUBLISH", &channel, &notice]);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let tries = (set_calls(&servers) - sets_before) / 3;
    let after = taken_after_release(lock, waiting);
    eprintln!("{tries} tries for 100 lost releases; acquired {after:?} after the real one");
    assert!(tries >= 60, "only {tries} tries for 100 releases");
    assert!(
        after < Duration::from_secs(1),
        "took {after:?} after the release"
    );
}

/// Forged release notices from one master, 1 s apart, while the lock is
/// held on every master: each starts a try, which wins nothing. The short
/// pauses that follow a try refused by masters not heard to run the
/// release (they might lag) double with every fruitless try, so a forged
/// notice cannot buy a fresh series of quick tries each time (before,
/// it bought up to 8 within the second: 16 tries in all were seen; now 7,
/// and at most 10 by the doubling). The waiter's fallback is 30 s.
#[test]
fn forged_notices_from_one_master_buy_few_quick_tries() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let (lock, waiting) = a_held_lock_and_a_waiter(&cluster, PATIENT);
    let sets_before = set_calls(&servers);
    let channel = release_channel("job");
    for round in 0..3 {
        let notice = format!("r{round:016x}");
        cluster.servers[0].cmd(&["PUBLISH", &channel, &notice]);
        thread::sleep(Duration::from_secs(1));
    }
    let tries = (set_calls(&servers) - sets_before) / 3;
    lock.unlock().expect("released");
    waiting.join().expect("waiter");
    eprintln!("{tries} tries for 3 forged notices");
    assert!(tries <= 11, "{tries} tries for 3 forged notices");
}

/// A waiter whose first try finds no quorum (two of three masters frozen
/// while it tries) subscribes all the same: once the masters are resumed,
/// the release wakes it, and it takes the lock within a second (its
/// fallback pause is 30 s, its wait 10 s).
#[test]
fn a_waiter_whose_first_try_found_no_quorum_is_woken_by_the_release() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let lock = holder.lock("job", TTL).expect("free");
    let sets_before = set_calls(&servers[..1]);
    let waiting = {
        let frozen = (cluster.servers[1].pause(), cluster.servers[2].pause());
        let waiting = thread::spawn(move || {
            let got = waiter.try_lock_for("job", TTL, Duration::from_secs(10));
            let at = Instant::now();
            (got.map(|lock| lock.map(Lock::unlock)), at)
        });
        // The first try reached the master that answers...
        let limit = Instant::now() + Duration::from_secs(10);
        while set_calls(&servers[..1]) == sets_before {
            assert!(Instant::now() < limit, "no try");
            thread::sleep(Duration::from_millis(2));
        }
        // ...and failed for want of a quorum (node timeout 50 ms) long ago.
        thread::sleep(Duration::from_millis(300));
        drop(frozen);
        waiting
    };
    thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    lock.unlock().expect("released");
    let (got, acquired) = waiting.join().expect("waiter");
    let after = acquired.saturating_duration_since(released);
    match got {
        Ok(Some(Ok(()))) => {}
        other => panic!("after {after:?}: {other:?}"),
    }
    assert!(
        after < Duration::from_secs(1),
        "took {after:?} after the release"
    );
}

/// The ids of `server`'s pub/sub connections (a new connection gets a
/// new id).
fn pubsub_connections(server: &RedisServer) -> Vec<u64> {
    let OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]) else {
        panic!("CLIENT LIST")
    };
    String::from_utf8_lossy(&list)
        .lines()
        .filter_map(|line| line.strip_prefix("id=")?.split(' ').next()?.parse().ok())
        .collect()
}

/// Subscribers of each of `channels` on `server` (`PUBSUB NUMSUB`, in
/// chunks the test's decoder reads).
fn subscriber_counts(server: &RedisServer, channels: &[String]) -> Vec<i64> {
    let mut counts = Vec::with_capacity(channels.len());
    for chunk in channels.chunks(400) {
        let mut args: Vec<&[u8]> = vec![b"PUBSUB", b"NUMSUB"];
        args.extend(chunk.iter().map(|c| c.as_bytes()));
        let Ok(OwnedReply::Array(items)) = server.command(&args) else {
            panic!("PUBSUB NUMSUB")
        };
        counts.extend(items.iter().skip(1).step_by(2).map(|n| match n {
            OwnedReply::Integer(n) => *n,
            other => panic!("PUBSUB NUMSUB: {other:?}"),
        }));
    }
    counts
}

/// More channels than a subscriber connection may have unanswered
/// subscriptions (1024): 1100 threads of one handle wait (15 s) on as many
/// locks. The masters drop the handle's subscriber connections (`CLIENT
/// KILL TYPE pubsub`), so every channel must be subscribed again at once:
/// that costs each master one new subscriber connection (not a reconnect
/// loop, watched for a second at least), and every channel is subscribed
/// again, while the waits last.
/// (Rounds get a node timeout of 1 s: the waiters all try at once when
/// their subscriptions come back, which loads a small machine.)
#[test]
fn a_thousand_channels_resubscribe_without_harming_the_connection() {
    const LOCKS: usize = 1100;
    const WAIT: Duration = Duration::from_secs(15);
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let patient = |urls: Vec<String>| {
        Redlock::builder()
            .nodes(urls)
            .node_timeout(Duration::from_secs(1))
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO)
            .build()
            .expect("valid configuration")
    };
    let holder = patient(cluster.urls());
    let waiter = patient(cluster.urls());
    let held: Vec<Lock> = (0..LOCKS)
        .map(|i| holder.lock(format!("many:{i}"), 4 * WAIT).expect("free"))
        .collect();
    let waiting_since = Instant::now();
    let many: Vec<_> = (0..LOCKS)
        .map(|i| {
            let waiter = waiter.clone();
            let spawned = thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    // Still held when the wait runs out (the locks' TTL is
                    // longer): it ends with `Ok(None)`, or an error if the
                    // last round failed on a loaded machine.
                    let _ = waiter.try_lock_for(format!("many:{i}"), TTL, WAIT);
                })
                .expect("thread");
            if i % 100 == 99 {
                thread::sleep(Duration::from_millis(20));
            }
            spawned
        })
        .collect();
    let channels: Vec<String> = (0..LOCKS)
        .map(|i| release_channel(&format!("many:{i}")))
        .collect();
    // Every channel subscribed before the kill (a fixed pause after the
    // last one's first subscriber was not always enough on a busy machine).
    let not_subscribed = |server: &RedisServer| {
        subscriber_counts(server, &channels)
            .iter()
            .filter(|&&n| n != 1)
            .count()
    };
    let limit = Instant::now() + Duration::from_secs(10);
    while servers.iter().any(|s| not_subscribed(s) != 0) {
        assert!(Instant::now() < limit, "the waiters never all subscribed");
        thread::sleep(Duration::from_millis(20));
    }
    let mut seen: Vec<std::collections::HashSet<u64>> = vec![Default::default(); servers.len()];
    for server in &servers {
        server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }
    // Watched for a second at least, and until every channel is subscribed
    // again (which takes a busy machine longer: 336 of 1100 channels were
    // seen still unsubscribed after one second), or until the waits come
    // near their end.
    let end = Instant::now() + Duration::from_secs(1);
    let unsubscribed = loop {
        for (ids, server) in seen.iter_mut().zip(&servers) {
            ids.extend(pubsub_connections(server));
        }
        let unsubscribed: Vec<usize> = servers.iter().map(|s| not_subscribed(s)).collect();
        let resubscribed = unsubscribed.iter().all(|&n| n == 0);
        if (resubscribed && Instant::now() >= end)
            || waiting_since.elapsed() + Duration::from_secs(2) >= WAIT
        {
            break unsubscribed;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let reconnections: Vec<usize> = seen.iter().map(|ids| ids.len()).collect();
    let checked_after = waiting_since.elapsed();
    eprintln!(
        "subscriber connections after the kill: {reconnections:?}; channels not subscribed \
         again then: {unsubscribed:?}; checked {checked_after:?} into the wait"
    );
    assert!(
        checked_after < WAIT,
        "the set-up took the whole wait: nothing was checked"
    );
    assert!(
        reconnections.iter().all(|&n| n == 1),
        "subscriber connections per master: {reconnections:?}"
    );
    assert!(
        unsubscribed.iter().all(|&n| n == 0),
        "channels not subscribed again, per master: {unsubscribed:?}"
    );
    for thread in many {
        thread.join().expect("waiter");
    }
    drop(held);
}

/// A master that acknowledges a subscriber connection's first SUBSCRIBE
/// and answers the second with garbage: the acknowledgement must not reset
/// the reconnect backoff, or the connection is re-dialled in a loop (each
/// one fails the same way). Two threads of one handle wait on two locks
/// for 1.5 s; the fake master sees few connections.
#[test]
fn an_acknowledgement_does_not_reset_the_backoff_of_a_failing_connection() {
    let fake = FakeNode::start(move |args, index| {
        if args[0].eq_ignore_ascii_case(b"SUBSCRIBE") {
            return Action::Reply(if index == 0 {
                let channel = &args[1];
                let mut ack =
                    format!("*3\r\n$9\r\nsubscribe\r\n${}\r\n", channel.len()).into_bytes();
                ack.extend_from_slice(channel);
                ack.extend_from_slice(b"\r\n:1\r\n");
                ack
            } else {
                b":1\r\n".to_vec() // no pub/sub reply
            });
        }
        lock_server(|call| match call {
            // Lock commands: this master never answers (it fails each round).
            Call::Acquire { .. } | Call::Release { .. } | Call::Extend { .. } => Action::Silence,
            _ => Action::Reply(b"-ERR unexpected\r\n".to_vec()),
        })(args, index)
    });
    let cluster = Cluster::start(2);
    let mut urls = cluster.urls();
    urls.push(fake.url());
    let holder = woken_only(urls.clone());
    let waiter = woken_only(urls);
    let locks = [
        holder.lock("a", TTL).expect("two of three"),
        holder.lock("b", TTL).expect("two of three"),
    ];
    let waiting: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|resource| {
            let waiter = waiter.clone();
            thread::spawn(move || {
                waiter
                    .try_lock_for(resource, TTL, Duration::from_millis(1500))
                    .expect("no error")
                    .is_none()
            })
        })
        .collect();
    for w in waiting {
        assert!(w.join().expect("waiter"), "still held");
    }
    let dials = fake.connections();
    eprintln!("{dials} connections to the master that fails the second SUBSCRIBE");
    assert!(dials < 40, "{dials} connections in 1.5 s");
    drop(locks);
}

/// The same notice published on all five masters stands for a real
/// release: it is heard from a quorum. Publishes `rounds` of them, 50 ms
/// apart, and returns how many tries (SETs on master `count_on`) they
/// started.
fn releases_heard_from_every_master(cluster: &Cluster, rounds: usize, count_on: usize) -> u64 {
    let channel = release_channel("job");
    let sets_before = cluster.servers[count_on].calls_of("set");
    for round in 0..rounds {
        let notice = format!("r{:016x}", 0xfeed_0000 + round);
        for server in &cluster.servers {
            server.cmd(&["PUBLISH", &channel, &notice]);
        }
        thread::sleep(Duration::from_millis(50));
    }
    cluster.servers[count_on].calls_of("set") - sets_before
}

/// A flood of forged release notices on two of five masters (nothing else
/// is published there) must not make the waiter miss real releases: the
/// forged ones are rate-limited, but each release heard from a quorum of
/// masters is tried at once however many forgeries came before. After 2 s
/// of flood, 20 releases heard from all five masters (here, lost races: the
/// lock stays held) start nearly 20 tries, and the real release that
/// follows is taken within a second (fallback 30 s). The flood goes on
/// throughout. (Rounds get a node timeout of 1 s: the flood loads the
/// machine, and a failed round is not what this checks; seen once at
/// 50 ms under load, every master's reply timed out.)
#[test]
fn forged_notices_on_a_minority_do_not_make_the_waiter_miss_real_releases() {
    let cluster = Cluster::start(5);
    let (lock, waiting) = a_held_lock_and_a_waiter(&cluster, PATIENT);
    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<_> = cluster.servers[..2]
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let (port, stop) = (server.port(), Arc::clone(&stop));
            let payloads = (0..200)
                .map(|n| format!("r{:016x}", (i + 1) * 1_000_000 + n).into_bytes())
                .collect();
            thread::spawn(move || flood(port, release_channel("job"), payloads, stop))
        })
        .collect();
    let sets_before = cluster.servers[2].calls_of("set");
    thread::sleep(Duration::from_secs(2));
    let flood_tries = cluster.servers[2].calls_of("set") - sets_before;
    let tries = releases_heard_from_every_master(&cluster, 20, 2);
    let after = taken_after_release(lock, waiting);
    stop.store(true, Ordering::Relaxed);
    let sent: usize = flooders.into_iter().map(|f| f.join().unwrap()).sum();
    eprintln!(
        "{sent} forged notices; {flood_tries} tries in 2 s of flood; {tries} tries for 20 \
         releases heard from every master; the real release taken {after:?} after it"
    );
    assert!(sent > 10_000, "the flood was too weak: {sent}");
    assert!(flood_tries <= 40, "{flood_tries} tries in 2 s of flood");
    assert!(tries >= 15, "only {tries} tries for 20 releases");
    assert!(
        after < Duration::from_secs(1),
        "took {after:?} after the release"
    );
}

/// Waits once on "job" (the holder releases it at once), so that the
/// handle's subscription lingers; returns the lock it took then.
fn a_lingering_subscription(cluster: &Cluster, waiter: &Redlock, ttl: Duration) -> Lock {
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let holder = woken_only(cluster.urls());
    let lock = holder.lock("job", TTL).expect("free");
    let waiting = {
        let waiter = waiter.clone();
        thread::spawn(move || {
            waiter
                .try_lock_for("job", ttl, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait")
        })
    };
    wait_for_subscribers(&servers, "job", 1);
    lock.unlock().expect("released");
    waiting.join().expect("waiter")
}

/// Subscribers of "job"'s channel on `server`.
fn subscribers(server: &RedisServer) -> i64 {
    match server.cmd(&["PUBSUB", "NUMSUB", &release_channel("job")]) {
        OwnedReply::Array(items) => match items.get(1) {
            Some(OwnedReply::Integer(count)) => *count,
            other => panic!("PUBSUB NUMSUB: {other:?}"),
        },
        other => panic!("PUBSUB NUMSUB: {other:?}"),
    }
}

/// After a wait, the channel stays subscribed for 2 s; then `call` (any
/// call of the handle) drops it: within a second every master counts no
/// subscriber. `call` gets the lock the wait took (TTL 10 s: still valid
/// after the linger, however long a busy machine takes to get there).
fn a_lingering_subscription_is_dropped_by(what: &str, call: impl FnOnce(&Redlock, Lock)) {
    let cluster = Cluster::start(3);
    let waiter = woken_only(cluster.urls());
    let lock = a_lingering_subscription(&cluster, &waiter, TTL);
    assert_eq!(subscribers(&cluster.servers[0]), 1, "lingers at first");
    thread::sleep(Duration::from_millis(2_300)); // past the 2 s linger
    call(&waiter, lock);
    let limit = Instant::now() + Duration::from_secs(5);
    for server in &cluster.servers {
        while subscribers(server) != 0 {
            assert!(Instant::now() < limit, "{what}: still subscribed 5 s later");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_lingering_subscription_is_dropped_by_extend() {
    a_lingering_subscription_is_dropped_by("extend", |_, mut lock| {
        lock.extend(Duration::from_secs(3)).expect("extended");
        lock.let_expire(); // no unlock, which would be a call of its own
    });
}

#[test]
fn a_lingering_subscription_is_dropped_by_unlock() {
    a_lingering_subscription_is_dropped_by("unlock", |_, lock| {
        lock.unlock().expect("released");
    });
}

#[test]
fn a_lingering_subscription_is_dropped_by_ping() {
    a_lingering_subscription_is_dropped_by("ping", |redlock, lock| {
        redlock.ping().expect("every master answers");
        lock.let_expire();
    });
}

/// A master frozen while the waiter subscribes confirms the subscription
/// only after the waiter took the lock and left (nobody reads that
/// confirmation): the handle's next call after the linger unsubscribes it
/// there too.
#[test]
fn a_lingering_subscription_confirmed_late_is_dropped_too() {
    let cluster = Cluster::start(3);
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let holder = woken_only(cluster.urls());
    let waiter = woken_only(cluster.urls());
    let lock = holder.lock("job", TTL).expect("free");
    let taken = {
        let _frozen = cluster.servers[2].pause();
        let waiting = {
            let waiter = waiter.clone();
            thread::spawn(move || {
                waiter
                    .try_lock_for("job", TTL, Duration::from_secs(60))
                    .expect("no error")
                    .expect("acquired within the wait")
            })
        };
        wait_for_subscribers(&servers[..2], "job", 1);
        thread::sleep(Duration::from_millis(100));
        lock.unlock().expect("two of three release");
        waiting.join().expect("waiter")
    };
    // Resumed: it runs the SUBSCRIBE it was sent.
    wait_for_subscribers(&servers[2..], "job", 1);
    thread::sleep(Duration::from_millis(2_300)); // past the 2 s linger
    waiter.ping().expect("every master answers");
    let limit = Instant::now() + Duration::from_secs(5);
    for server in &cluster.servers {
        while subscribers(server) != 0 {
            assert!(
                Instant::now() < limit,
                "still subscribed on :{} 5 s later",
                server.port()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
    taken.unlock().expect("released");
}

/// A handle that waited once and then only holds a lease: the renewal
/// rounds drop the lingering subscription.
#[test]
fn a_lingering_subscription_is_dropped_by_the_renewer() {
    let cluster = Cluster::start(3);
    let waiter = woken_only(cluster.urls());
    let lock = a_lingering_subscription(&cluster, &waiter, Duration::from_secs(3));
    // Renewed when a third of the TTL is left: after 2 s, 4 s...
    let lease = lock.keep_alive(Duration::from_secs(60)).expect("lease");
    let limit = Instant::now() + Duration::from_secs(8);
    for server in &cluster.servers {
        while subscribers(server) != 0 {
            assert!(Instant::now() < limit, "still subscribed 8 s later");
            thread::sleep(Duration::from_millis(10));
        }
    }
    assert!(lease.check().is_ok(), "renewed meanwhile");
    lease.unlock().expect("released");
}

// ---- The ways to wait beside `lock` and `try_lock_for`, and shutdown ----
//
// `try_lock_until` (a deadline), `lock_waiting` with each `Wait`,
// `with_lock_waiting` (a wait per call), a wait with no time limit; and
// `Redlock::shutdown`, which ends them from another thread.

/// Generous: the machine may be busy.
const PROMPTLY: Duration = Duration::from_secs(5);

fn servers(cluster: &Cluster) -> Vec<&RedisServer> {
    cluster.servers.iter().collect()
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
        Ok(r.with_lock_waiting(key, TTL, TTL, Wait::NoLimit, |lease| lease.check().is_ok())?)
    }),
    ("with_lock_waiting(Wait::For)", |r, key| {
        let wait = Wait::For(Duration::from_secs(20));
        Ok(r.with_lock_waiting(key, TTL, TTL, wait, |lease| lease.check().is_ok())?)
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
        wait_for_subscribers(&servers(&cluster), &key, 1);
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

/// `Wait::NoLimit` waits past the handle's configured wait (`lock_wait`,
/// 0.9 s here), which `lock` gives up after: released after 2.5 s, the
/// lock goes to the unlimited waiter.
#[test]
fn a_wait_without_limit_outlasts_the_configured_wait() {
    let cluster = Cluster::start(3);
    let holder = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let waiter = Redlock::builder()
        .nodes(cluster.urls())
        .lock_wait(Duration::from_millis(900))
        .build()
        .unwrap();
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
            wait_for_subscribers(&servers(&cluster), "job", 1);
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

/// A raw subscriber to `resource`'s channel on `server`, confirmed before
/// this returns: the thread gives back the kind (first letter) of every
/// message it heard until `stop`.
fn message_kinds(
    server: &RedisServer,
    resource: &str,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Vec<u8>> {
    use std::io::Read;
    let mut stream = TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    let channel = release_channel(resource);
    stream
        .write_all(&encode_command(&[b"SUBSCRIBE", channel.as_bytes()]))
        .expect("subscribe");
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let mut input = Vec::new();
    let mut chunk = [0u8; 4096];
    // The confirmation first: from then on, every message is heard.
    let limit = Instant::now() + Duration::from_secs(10);
    let confirmed = loop {
        if let Ok(n @ 1..) = stream.read(&mut chunk) {
            input.extend_from_slice(&chunk[..n]);
        }
        if let Ok(Some((reply, used))) = support::resp::parse(&input) {
            input.drain(..used);
            break reply;
        }
        assert!(Instant::now() < limit, "no SUBSCRIBE confirmation");
    };
    assert!(matches!(confirmed, OwnedReply::Array(_)), "{confirmed:?}");
    thread::spawn(move || {
        let mut kinds = Vec::new();
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            if let Ok(n @ 1..) = stream.read(&mut chunk) {
                input.extend_from_slice(&chunk[..n]);
            }
            while let Ok(Some((reply, used))) = support::resp::parse(&input) {
                input.drain(..used);
                if let OwnedReply::Array(items) = reply {
                    if let [OwnedReply::Bulk(kind), _, OwnedReply::Bulk(payload)] = &items[..] {
                        if kind == b"message" {
                            kinds.push(payload.first().copied().unwrap_or(b'?'));
                        }
                    }
                }
            }
            if stopping {
                return kinds;
            }
        }
    })
}

/// One handoff from a holder to a waiter of another client whose retry
/// timer is 30 s, with `fair_waiting(fair)` on the waiter; returns how long
/// after the release it took the lock, and the kinds of the messages heard
/// on the resource's channel on every master meanwhile.
fn one_handoff(cluster: &Cluster, resource: &'static str, fair: bool) -> (Duration, Vec<u8>) {
    let servers: Vec<&RedisServer> = cluster.servers.iter().collect();
    let stop = Arc::new(AtomicBool::new(false));
    let listeners: Vec<_> = servers
        .iter()
        .map(|server| message_kinds(server, resource, stop.clone()))
        .collect();
    let holder = woken_only(cluster.urls());
    let waiter = Redlock::builder()
        .nodes(cluster.urls())
        .retry_delay(NEVER)
        .retry_jitter(Duration::ZERO)
        .fair_waiting(fair)
        .build()
        .expect("valid configuration");
    let lock = holder.lock(resource, TTL).expect("free");
    let waiting = thread::spawn(move || {
        let lock = waiter
            .try_lock_for(resource, TTL, Duration::from_secs(60))
            .expect("no error")
            .expect("acquired within the wait");
        let at = Instant::now();
        lock.unlock().expect("released");
        at
    });
    // Our listener and the waiter.
    wait_for_subscribers(&servers, resource, 2);
    thread::sleep(Duration::from_millis(50));
    let taken_after = taken_after_release(lock, waiting);
    thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let kinds = listeners
        .into_iter()
        .flat_map(|listener| listener.join().expect("listener"))
        .collect();
    (taken_after, kinds)
}

#[test]
fn a_waiter_that_does_not_take_turns_says_nothing_on_the_queue_and_is_woken() {
    let cluster = Cluster::start(3);
    // The contrast: a fair waiter announces itself (`w`) and says it took
    // the lock (`t`) on the queue's master.
    let (fair_taken_after, fair_kinds) = one_handoff(&cluster, "fair-job", true);
    assert!(
        fair_kinds.contains(&b'w') && fair_kinds.contains(&b't'),
        "a fair waiter queues: {:?}",
        fair_kinds.escape_ascii().to_string()
    );
    let (taken_after, kinds) = one_handoff(&cluster, "racing-job", false);
    assert!(
        kinds.contains(&b'r') && kinds.iter().all(|&kind| kind == b'r'),
        "only release notices: {:?}",
        kinds.escape_ascii().to_string()
    );
    // Woken by the notice: its retry timer is 30 s.
    for taken_after in [fair_taken_after, taken_after] {
        assert!(taken_after < Duration::from_secs(5), "{taken_after:?}");
    }
}
