//! Fenced sets end to end (`Builder::fencing` with `try_lock_many`,
//! docs/fencing.md "Sets"), on real servers: one token for the set from
//! the handle's fence domain, above each of its resources' earlier tokens
//! and below their later ones, the counter raised once per master; a
//! master where one key is held grants nothing and counts nothing; the
//! write-back when counters differ; sets and single locks contending on
//! overlapping resources, each write checked by a referee per resource.

mod support;

use redlock_sync::{
    Error, EvictingPolicy, FenceFault, NodeError, NodeOutcome, Redlock, REFEREE_LUA,
};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};
use support::resp::{encode_command, parse};
use support::{Cluster, OwnedReply, RedisServer};

/// The fence domain's hash on each master (the default domain).
const DOMAIN: &str = "redlock-sync:fence:default";
const TTL: Duration = Duration::from_secs(10);

fn fenced(urls: &[String]) -> Redlock {
    Redlock::builder()
        .nodes(urls)
        .fencing(true)
        .node_timeout(Duration::from_millis(500))
        .lock_wait(Duration::from_secs(60))
        .build()
        .expect("valid configuration")
}

/// Three masters with the default domain initialised, and a fenced handle.
fn initialised() -> (Cluster, Redlock) {
    let cluster = Cluster::start(3);
    let redlock = fenced(&cluster.urls());
    redlock.fence_init(0).expect("fence_init on fresh masters");
    (cluster, redlock)
}

/// The domain's counter on one master.
fn counter(server: &RedisServer) -> u64 {
    match server.cmd(&["HGET", DOMAIN, "c"]) {
        OwnedReply::Bulk(n) => String::from_utf8(n).unwrap().parse().unwrap(),
        other => panic!("HGET {DOMAIN} c: {other:?}"),
    }
}

fn counters(cluster: &Cluster) -> Vec<u64> {
    cluster.servers.iter().map(counter).collect()
}

/// Waits (up to 5 s) until only the domain's three hashes are left: a
/// release is decided by a quorum, and the last master's may come after.
fn only_hashes_left(cluster: &Cluster) {
    let limit = Instant::now() + Duration::from_secs(5);
    while cluster.total_keys() != 3 {
        assert!(
            Instant::now() < limit,
            "only the domain's hashes should be left: {} keys",
            cluster.total_keys()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

fn lock_token(redlock: &Redlock, resource: &str) -> u64 {
    let lock = redlock.try_lock(resource, TTL).unwrap().expect("free");
    let token = lock.fence_token().expect("a token");
    lock.unlock().unwrap();
    token
}

#[test]
fn a_sets_token_is_above_each_resources_earlier_token_below_the_next_and_counted_once() {
    let (cluster, redlock) = initialised();
    let before_a = lock_token(&redlock, "a");
    let before_b = lock_token(&redlock, "b");
    let counted = counters(&cluster);
    let mut set = redlock
        .try_lock_many(["b", "a"], TTL)
        .unwrap()
        .expect("free");
    let token = set
        .fence_token()
        .expect("a fenced handle's set has a token");
    assert!(
        token > before_a && token > before_b,
        "{token}: {before_a}, {before_b}"
    );
    // Round 1 raised each master's counter once for the two keys.
    let after: Vec<u64> = counters(&cluster);
    let raised: Vec<u64> = after.iter().zip(&counted).map(|(a, b)| a - b).collect();
    assert_eq!(raised, [1, 1, 1], "{counted:?} -> {after:?}");
    for server in &cluster.servers {
        let a = server.get(b"a").expect("a set");
        assert_eq!(server.get(b"b"), Some(a), "one value for the set");
    }
    set.extend(TTL).unwrap();
    assert_eq!(set.fence_token(), Some(token), "extending keeps the token");
    assert_eq!(counters(&cluster), after, "an extension counts nothing");
    let lease = set.keep_alive(Duration::from_secs(60)).unwrap();
    assert_eq!(lease.fence_token(), Some(token), "a lease keeps the token");
    lease.unlock().unwrap();
    assert_eq!(counters(&cluster), after, "a release counts nothing");
    only_hashes_left(&cluster);
    let after_a = lock_token(&redlock, "a");
    let after_b = lock_token(&redlock, "b");
    assert!(
        after_a > token && after_b > token,
        "{token}: {after_a}, {after_b}"
    );
    // The waiting forms carry the token too.
    let waited = redlock.lock_many(["a", "c"], TTL).unwrap();
    assert!(waited.fence_token().unwrap() > after_b);
    waited.unlock().unwrap();
}

#[test]
fn a_set_refused_where_one_key_is_held_leaves_no_key_there_and_does_not_move_its_counter() {
    let (cluster, redlock) = initialised();
    let held = &cluster.servers[0];
    held.cmd(&["SET", "b", "theirs"]);
    let before = counters(&cluster);
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("granted by the two others");
    assert!(set.fence_token().is_some());
    assert_eq!(held.get(b"a"), None, "no key of the set left where refused");
    assert_eq!(held.get(b"b").as_deref(), Some(&b"theirs"[..]));
    let after = counters(&cluster);
    assert_eq!(after[0], before[0], "the refusing master counted nothing");
    assert_eq!((after[1], after[2]), (before[1] + 1, before[2] + 1));
    set.unlock().unwrap();
    // Refused everywhere: no set, no key, no count.
    for server in &cluster.servers[1..] {
        server.cmd(&["SET", "b", "theirs"]);
    }
    let before = counters(&cluster);
    assert!(redlock.try_lock_many(["a", "b"], TTL).unwrap().is_none());
    assert_eq!(counters(&cluster), before);
    for server in &cluster.servers {
        assert_eq!(server.get(b"a"), None);
    }
}

#[test]
fn a_sets_token_is_made_final_by_the_write_back_when_one_master_is_far_ahead() {
    let (cluster, redlock) = initialised();
    let ahead = &cluster.servers[0];
    ahead.cmd(&["HSET", DOMAIN, "c", "1000000"]);
    let set_token = {
        // Masters 0 and 1 grant: the token is master 0's counter, and
        // master 1, behind, must be written back to it.
        let _paused = cluster.servers[2].pause();
        let set = redlock
            .try_lock_many(["a", "b"], TTL)
            .unwrap()
            .expect("free");
        let token = set.fence_token().unwrap();
        set.unlock().unwrap();
        token
    };
    assert!(
        set_token > 1_000_000,
        "the master ahead counted: {set_token}"
    );
    assert!(
        counter(&cluster.servers[1]) >= set_token,
        "master 1 written back"
    );
    redlock.ping().expect("master 2 caught up");
    // Without the master ahead, a single lock of either resource still
    // rises above the set's token: master 1 holds it.
    let _paused = ahead.pause();
    for resource in ["a", "b"] {
        let token = lock_token(&redlock, resource);
        assert!(token > set_token, "{resource}: {token} after {set_token}");
    }
}

/// A set's round 1 is screened as a single lock's: a grant from a master
/// whose connection's probe left it out of fencing (here an `allkeys-*`
/// policy, which may evict the counter) does not count, so its counter,
/// far ahead, is not the set's token; with that master needed for a
/// quorum the set fails, saying why.
#[test]
fn a_sets_grant_from_a_master_left_out_of_fencing_does_not_count() {
    let (cluster, _) = initialised();
    let evicting = &cluster.servers[0];
    evicting.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    evicting.cmd(&["HSET", DOMAIN, "c", "1000000"]);
    // A new handle: the policy is read by each new connection's probe.
    let redlock = fenced(&cluster.urls());
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("the two other masters make the quorum");
    let token = set.fence_token().unwrap();
    assert!(token < 1_000_000, "the evicting master counted: {token}");
    set.unlock().unwrap();
    let _stopped = cluster.servers[2].pause();
    let error = redlock.try_lock_many(["a", "b"], TTL).unwrap_err();
    let report = error.nodes().expect("a report");
    let policy = FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLru);
    assert_eq!(
        report.iter().next().unwrap().outcome(),
        &NodeOutcome::Failed(NodeError::Fence(policy)),
        "{report}"
    );
}

/// Masters left in different epochs (a repair whose barrier reached one
/// master): a set's failed write-back is told apart from a race lost as a
/// single lock's is, by probing the hash it named, and the set fails with
/// `FenceEpochsSplit` (the operator's to fix), nothing held.
#[test]
fn a_set_on_masters_left_in_different_epochs_says_so_until_repaired() {
    let (mut cluster, redlock) = initialised();
    lock_token(&redlock, "a");
    cluster.servers[2].restart(); // without persistence: no anchor
    let _ = redlock.ping();
    {
        // The barrier moves master 0 only: not a quorum.
        let _stopped = cluster.servers[1].pause();
        assert!(matches!(redlock.fence_repair(), Err(Error::NoQuorum(_))));
    }
    let _ = redlock.ping();
    match redlock.try_lock_many(["a", "b"], TTL) {
        Err(Error::FenceEpochsSplit(report)) => {
            let faults: Vec<_> = report
                .iter()
                .map(|s| match s.outcome() {
                    NodeOutcome::Failed(e) => e.fence_fault(),
                    _ => None,
                })
                .collect();
            let expected = [
                FenceFault::OtherEpoch,
                FenceFault::OtherEpoch,
                FenceFault::Unanchored,
            ];
            assert_eq!(faults, expected.map(Some), "{report}");
        }
        other => panic!("expected FenceEpochsSplit, got {:?}", other.map(|_| ())),
    }
    redlock.fence_repair().expect("every master answers");
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("free");
    assert!(set.fence_token().unwrap() >= 2);
    set.unlock().unwrap();
    only_hashes_left(&cluster);
}

/// A resource kept in Redis that runs `REFEREE_LUA` for every write: one
/// pair of keys per resource.
struct Referee {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Referee {
    fn connect(addr: SocketAddr) -> Referee {
        let stream = TcpStream::connect(addr).expect("referee: connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Referee {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes to `resource` with `token`: true if accepted.
    fn write(&mut self, resource: &str, token: u64) -> bool {
        let token = token.to_string();
        let (largest, data) = (format!("{resource}:largest"), format!("{resource}:data"));
        let call: [&[u8]; 7] = [
            b"EVAL",
            REFEREE_LUA.as_bytes(),
            b"2",
            largest.as_bytes(),
            data.as_bytes(),
            token.as_bytes(),
            b"x",
        ];
        self.stream.write_all(&encode_command(&call)).unwrap();
        loop {
            if let Some((reply, used)) = parse(&self.buf).expect("referee: a reply") {
                self.buf.drain(..used);
                return match reply {
                    OwnedReply::Integer(1) => true,
                    OwnedReply::Integer(0) => false,
                    other => panic!("referee: {other:?}"),
                };
            }
            let mut chunk = [0u8; 512];
            let n = self.stream.read(&mut chunk).expect("referee: read");
            assert!(n > 0, "referee closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

const THREADS: usize = 6;
const PER_THREAD: usize = 60;
/// What the threads take: sets over overlapping resources and single
/// locks of each.
const CHOICES: [&[&str]; 7] = [
    &["a", "b"],
    &["b", "c"],
    &["a", "c"],
    &["a", "b", "c"],
    &["a"],
    &["b"],
    &["c"],
];

#[test]
fn sets_and_single_locks_on_overlapping_resources_get_tokens_no_referee_turns_away() {
    let (cluster, redlock) = initialised();
    let resource = RedisServer::start();
    let taken = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for t in 0..THREADS {
            let (redlock, taken) = (&redlock, &taken);
            let addr = resource.addr();
            scope.spawn(move || {
                let mut referee = Referee::connect(addr);
                let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (t as u64 + 1);
                for _ in 0..PER_THREAD {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let names = CHOICES[(seed % CHOICES.len() as u64) as usize];
                    let (token, release): (u64, Box<dyn FnOnce()>) = if names.len() == 1 {
                        let lock = redlock.lock(names[0], TTL).expect("lock within the wait");
                        (
                            lock.fence_token().unwrap(),
                            Box::new(|| lock.unlock().unwrap()),
                        )
                    } else {
                        let set = redlock.lock_many(names, TTL).expect("set within the wait");
                        (
                            set.fence_token().unwrap(),
                            Box::new(|| set.unlock().unwrap()),
                        )
                    };
                    for name in names {
                        assert!(
                            referee.write(name, token),
                            "the referee of {name} refused {names:?}'s token {token}"
                        );
                    }
                    release();
                    taken.lock().unwrap().push((names, token));
                }
            });
        }
    });
    let taken = taken.into_inner().unwrap();
    assert_eq!(taken.len(), THREADS * PER_THREAD);
    let mut per_resource: HashMap<&str, HashSet<u64>> = HashMap::new();
    let mut sets = 0;
    for (names, token) in &taken {
        sets += usize::from(names.len() > 1);
        for name in *names {
            assert!(
                per_resource.entry(name).or_default().insert(*token),
                "token {token} given twice for {name}"
            );
        }
    }
    assert!(sets > 0 && sets < taken.len(), "both kinds ran: {sets}");
    for (name, tokens) in &per_resource {
        let largest = tokens.iter().max().unwrap().to_string().into_bytes();
        let key = format!("{name}:largest");
        assert_eq!(resource.get(key.as_bytes()), Some(largest), "{name}");
    }
    only_hashes_left(&cluster);
}
