//! Release notices on cluster voters, against real Redis/Valkey Clusters
//! (whichever `REDLOCK_TEST_SERVER` names): a waiter is woken by the
//! release's sharded notice (`SPUBLISH` on the node that owns the lock
//! key's slot, which the channel shares), on clusters alone and mixed with
//! a standalone master, and in the single-cluster mode; it follows its
//! channel when the slot moves while it waits (in the single-cluster mode,
//! a voter's channel onto another voter's master), and a release unheard
//! while the slot moved wakes it once it subscribed again; and a release
//! that finds the key not ours publishes nothing.
//!
//! Every waiter retries only every 30 s, so a wake-up within seconds of the
//! release came from a notice, and its hook is asked how it was woken.

mod support;

use redlock_sync::{Builder, Error, HandleEvent, Redlock, WaitChange, WaitEvent, WokenBy};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::resp::{encode_command, parse};
use support::{
    key_slot, native_server_binary, release_channel, shared_clusters, unique_prefix, OwnedReply,
    RedisCluster, RedisServer,
};

const TTL: Duration = Duration::from_secs(10);

/// So long that a waiter that acquires within a few seconds was woken,
/// not polled.
const NEVER: Duration = Duration::from_secs(30);

/// How soon after the release a woken waiter holds the lock: a few round
/// trips, with room for a loaded machine, and far below [`NEVER`].
const WOKEN_WITHIN: Duration = Duration::from_secs(3);

/// The waiters' TTL: a year, whose drift allowance (days) puts off a
/// waiter's look-up of the key's expiry for a node timeout, so that within
/// these tests only notices and re-subscriptions wake a waiter.
const WAITER_TTL: Duration = redlock_sync::MAX_TTL;

/// The voters of a handle: clusters (by their seeds) and standalone
/// masters (by URL), in this order.
#[derive(Clone)]
struct Voters {
    clusters: Vec<Vec<String>>,
    masters: Vec<String>,
}

impl Voters {
    fn of(clusters: &[&RedisCluster], masters: &[&RedisServer]) -> Voters {
        Voters {
            clusters: clusters.iter().map(|c| c.seeds()).collect(),
            masters: masters.iter().map(|m| m.url()).collect(),
        }
    }

    /// A handle on these voters that retries only every 30 s.
    fn builder(&self) -> Builder {
        let mut builder = Redlock::builder()
            .node_timeout(Duration::from_secs(1))
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO);
        for seeds in &self.clusters {
            builder = builder.cluster(seeds.clone());
        }
        if !self.masters.is_empty() {
            builder = builder.nodes(self.masters.clone());
        }
        builder
    }
}

/// How a handle's waiting calls were woken.
#[derive(Default)]
struct Wakes(Mutex<Vec<WokenBy>>);

impl Wakes {
    fn count(&self, by: WokenBy) -> usize {
        self.0.lock().unwrap().iter().filter(|&&w| w == by).count()
    }
}

impl HandleEvent for Wakes {
    fn handle_wait(&self, event: WaitEvent<'_>) {
        if let WaitChange::Woken(by) = event.change() {
            self.0.lock().unwrap().push(by);
        }
    }
}

/// Subscribers of `channel` by `SSUBSCRIBE` on the master of `cluster`
/// that owns its slot (`PUBSUB SHARDNUMSUB`).
fn shard_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    let owner = cluster.master_of_key(channel.as_bytes());
    numsub(cluster.node(owner), "SHARDNUMSUB", channel)
}

/// `PUBSUB <which> channel`'s count on `server`.
fn numsub(server: &RedisServer, which: &str, channel: &str) -> i64 {
    match server.cmd(&["PUBSUB", which, channel]) {
        OwnedReply::Array(items) => match items.get(1) {
            Some(OwnedReply::Integer(count)) => *count,
            other => panic!("PUBSUB {which}: {other:?}"),
        },
        other => panic!("PUBSUB {which}: {other:?}"),
    }
}

/// Waits up to 10 s for `done`, panicking with `what` if it never holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < limit, "after 10 s: {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until every voter has the waiter's subscription to `resource`'s
/// channel: on each cluster, the master that owns its slot (sharded); on
/// each standalone master, by `SUBSCRIBE`.
fn wait_for_subscribers(clusters: &[&RedisCluster], masters: &[&RedisServer], resource: &str) {
    let channel = release_channel(resource);
    for cluster in clusters {
        wait_until("a sharded subscriber on the slot's owner", || {
            shard_subscribers(cluster, &channel) >= 1
        });
    }
    for master in masters {
        wait_until("a subscriber on the master", || {
            numsub(master, "NUMSUB", &channel) >= 1
        });
    }
}

/// A lock on `resource` held by `holder` and a waiter (another handle, as
/// another process would be) waiting for it in a thread: returns when the
/// waiter listens on every voter, and the thread gives how long after the
/// instant the caller puts in the cell (the release, or the slot's move)
/// the waiter held the lock.
fn held_and_awaited(
    holder: &Redlock,
    waiter: &Redlock,
    resource: &str,
    clusters: &[&RedisCluster],
    masters: &[&RedisServer],
) -> (
    redlock_sync::Lock,
    Arc<Mutex<Option<Instant>>>,
    thread::JoinHandle<Duration>,
) {
    let lock = holder.lock(resource, TTL).expect("free");
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let (waiter, released_at) = (waiter.clone(), Arc::clone(&released_at));
        let resource = resource.to_string();
        thread::spawn(move || {
            let lock = waiter
                .try_lock_for(&resource, WAITER_TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let after = released_at
                .lock()
                .unwrap()
                .expect("acquired only after the instant it is timed from")
                .elapsed();
            lock.unlock().expect("released");
            after
        })
    };
    wait_for_subscribers(clusters, masters, resource);
    (lock, released_at, waiting)
}

/// Handoffs from a holder to a waiter on `clusters` and `masters`, over
/// resources whose slots lie on each master of the first cluster: the
/// waiter takes the lock within [`WOKEN_WITHIN`] of each release, woken by
/// the notices, never by its timer.
fn handoffs_are_woken(name: &str, clusters: &[&RedisCluster], masters: &[&RedisServer]) {
    let voters = Voters::of(clusters, masters);
    let holder = voters.builder().build().expect("valid configuration");
    let wakes = Arc::new(Wakes::default());
    let waiter = voters
        .builder()
        .events(Arc::clone(&wakes))
        .build()
        .expect("valid configuration");
    let prefix = unique_prefix(name);
    let first = clusters[0];
    let calls = |command| -> u64 {
        let nodes = clusters.iter().flat_map(|c| c.nodes());
        nodes.map(|node| node.calls_of(command)).sum()
    };
    let (publish_before, spublish_before) = (calls("publish"), calls("spublish"));
    let rounds = first.masters().len();
    for (round, master) in first.masters().into_iter().enumerate() {
        let resource = first.key_on(master, &format!("{prefix}{round}"));
        let (lock, released_at, waiting) =
            held_and_awaited(&holder, &waiter, &resource, clusters, masters);
        thread::sleep(Duration::from_millis(20));
        *released_at.lock().unwrap() = Some(Instant::now());
        lock.unlock().expect("released");
        let after = waiting.join().expect("waiter");
        assert!(
            after < WOKEN_WITHIN,
            "round {round} ({resource}, slot {}): the waiter took {after:?} after the release",
            key_slot(resource.as_bytes())
        );
    }
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
    assert!(
        wakes.count(WokenBy::Notice) >= rounds,
        "woken by the notices"
    );
    // On the clusters, every notice and queue message was sharded: none
    // went by PUBLISH, which a cluster broadcasts to every node.
    assert_eq!(calls("publish"), publish_before, "PUBLISH on a cluster");
    assert!(calls("spublish") >= spublish_before + (rounds * clusters.len()) as u64);
}

#[test]
fn a_waiter_on_three_cluster_voters_is_woken_by_the_release() {
    let clusters: Vec<&RedisCluster> = shared_clusters(3).iter().collect();
    handoffs_are_woken("woken3", &clusters, &[]);
}

#[test]
fn a_waiter_on_two_clusters_and_a_master_is_woken_by_the_release() {
    let clusters: Vec<&RedisCluster> = shared_clusters(2).iter().collect();
    let master = RedisServer::start();
    handoffs_are_woken("woken-mixed", &clusters, &[&master]);
}

/// In the single-cluster mode each master is a voter whose keys carry a
/// tag of their own, and so does its channel (the channel of its own key,
/// in its own slot): the waiter subscribes on each master to that voter's
/// channel, and is woken by the notices the masters' releases send there.
#[test]
fn a_waiter_in_the_single_cluster_mode_is_woken_by_the_release() {
    let cluster = &shared_clusters(1)[0];
    let builder = || {
        Redlock::builder()
            .cluster_shards(cluster.seeds())
            .node_timeout(Duration::from_secs(1))
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO)
    };
    let holder = builder().build().expect("the masters found");
    let wakes = Arc::new(Wakes::default());
    let waiter = builder()
        .events(Arc::clone(&wakes))
        .build()
        .expect("the masters found");
    assert_eq!(waiter.node_count(), cluster.masters().len());
    let resource = unique_prefix("shards") + "job";
    let lock = holder.lock(&resource, TTL).expect("free");
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let (waiter, released_at) = (waiter.clone(), Arc::clone(&released_at));
        let resource = resource.clone();
        thread::spawn(move || {
            let lock = waiter
                .try_lock_for(&resource, WAITER_TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let after = released_at.lock().unwrap().expect("after").elapsed();
            lock.unlock().expect("released");
            after
        })
    };
    // Each master has the channel of its own voter's key (`{TAG}` then the
    // resource, `TAG` in one of its slots) subscribed.
    for master in cluster.masters() {
        wait_until("a voter's own channel subscribed on its master", || {
            match cluster.node(master).cmd(&["PUBSUB", "SHARDCHANNELS", &format!("*}}{resource}")]) {
                OwnedReply::Array(channels) => channels.iter().any(|c| {
                    matches!(c, OwnedReply::Bulk(name) if name.ends_with(format!("}}{resource}").as_bytes()))
                }),
                other => panic!("PUBSUB SHARDCHANNELS: {other:?}"),
            }
        });
    }
    thread::sleep(Duration::from_millis(20));
    *released_at.lock().unwrap() = Some(Instant::now());
    lock.unlock().expect("released");
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the release"
    );
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
    assert!(wakes.count(WokenBy::Notice) >= 1, "woken by the notice");
}

/// The cluster is the only voter, so the waiter hears the release only
/// if it followed its channel to the slot's new owner: the old owner ends
/// the subscription when the slot leaves (an `sunsubscribe` push), and
/// the waiter subscribes again where the slot went (after the old owner's
/// `MOVED`), then is woken by the next release within a few round trips.
#[test]
fn a_waiter_follows_its_channel_when_the_slot_moves_and_is_woken() {
    let cluster = RedisCluster::start(3, 0);
    let voters = Voters::of(&[&cluster], &[]);
    let holder = voters.builder().build().expect("valid configuration");
    let wakes = Arc::new(Wakes::default());
    let waiter = voters
        .builder()
        .events(Arc::clone(&wakes))
        .build()
        .expect("valid configuration");
    let resource = unique_prefix("moved") + "job";
    let channel = release_channel(&resource);
    let slot = key_slot(resource.as_bytes());
    let old_owner = cluster.master_of_slot(slot);
    let new_owner = cluster.other_master(old_owner);
    let (lock, released_at, waiting) =
        held_and_awaited(&holder, &waiter, &resource, &[&cluster], &[]);
    assert_eq!(
        numsub(cluster.node(old_owner), "SHARDNUMSUB", &channel),
        1,
        "subscribed on the slot's owner"
    );
    cluster.move_slot(slot, new_owner);
    wait_until("the waiter subscribed on the slot's new owner", || {
        numsub(cluster.node(new_owner), "SHARDNUMSUB", &channel) >= 1
    });
    assert_eq!(
        numsub(cluster.node(old_owner), "SHARDNUMSUB", &channel),
        0,
        "the old owner ended the subscription"
    );
    *released_at.lock().unwrap() = Some(Instant::now());
    lock.unlock().expect("released on the slot's new owner");
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the release"
    );
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
    assert!(wakes.count(WokenBy::Notice) >= 1, "woken by the notice");
}

/// A release while the slot is being migrated goes unheard: the lock key
/// has gone to the target (the release follows it there by `ASK`), whose
/// notice no waiter hears, as the waiter's subscription is still on the
/// source, which serves the slot's channel until it gives the slot up.
/// When it does, it ends the subscription; the waiter subscribes on the
/// new owner and, as a release may have gone unheard meanwhile, tries
/// once: it holds the lock within a few round trips of the slot's move,
/// not at its timer.
#[test]
fn a_release_unheard_while_the_slot_moved_wakes_the_waiter_after_the_move() {
    let cluster = RedisCluster::start(3, 0);
    let voters = Voters::of(&[&cluster], &[]);
    let holder = voters.builder().build().expect("valid configuration");
    let wakes = Arc::new(Wakes::default());
    // A node timeout of a minute: no look-up of the key's expiry (which
    // would find the released key gone) before the slot's move.
    let waiter = voters
        .builder()
        .node_timeout(Duration::from_secs(60))
        .events(Arc::clone(&wakes))
        .build()
        .expect("valid configuration");
    let resource = unique_prefix("gap") + "job";
    let channel = release_channel(&resource);
    let slot = key_slot(resource.as_bytes());
    let old_owner = cluster.master_of_slot(slot);
    let new_owner = cluster.other_master(old_owner);
    let (lock, moved_at, waiting) = held_and_awaited(&holder, &waiter, &resource, &[&cluster], &[]);
    let migration = cluster.begin_migration(slot, new_owner);
    cluster.migrate_keys(&migration, &[resource.as_bytes()]);
    let keys_in_slot = |node: usize| cluster.keys_in_slot(node, slot).len();
    assert_eq!(keys_in_slot(new_owner), 1, "the key migrated");
    lock.unlock().expect("released on the target, by ASK");
    assert_eq!(keys_in_slot(new_owner), 0, "the key deleted on the target");
    assert_eq!(
        numsub(cluster.node(new_owner), "SHARDNUMSUB", &channel),
        0,
        "a subscriber on the target: the release was heard"
    );
    // Unheard: the waiter still waits.
    thread::sleep(Duration::from_millis(500));
    assert!(!waiting.is_finished(), "the waiter took the lock unwoken");
    *moved_at.lock().unwrap() = Some(Instant::now());
    cluster.finish_migration(migration);
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the slot's move"
    );
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
}

/// The channels subscribed by `SSUBSCRIBE` on `server` that end in
/// `resource` (in the single-cluster mode, each voter's own channel for
/// it: see `a_waiter_in_the_single_cluster_mode_is_woken_by_the_release`).
fn own_channels(server: &RedisServer, resource: &str) -> Vec<String> {
    let pattern = format!("*}}{resource}");
    match server.cmd(&["PUBSUB", "SHARDCHANNELS", &pattern]) {
        OwnedReply::Array(channels) => channels
            .iter()
            .map(|c| match c {
                OwnedReply::Bulk(name) => String::from_utf8_lossy(name).into_owned(),
                other => panic!("PUBSUB SHARDCHANNELS: {other:?}"),
            })
            .filter(|name| name.ends_with(&format!("}}{resource}")))
            .collect(),
        other => panic!("PUBSUB SHARDCHANNELS: {other:?}"),
    }
}

/// In the single-cluster mode, a voter's slot moved onto another voter's
/// master while a lock is waited for: the old master ends that voter's
/// subscription to its own channel, the waiter subscribes to it again on
/// the new master (which then has both voters' channels), and is woken by
/// the release's notice within a few round trips.
#[test]
fn a_waiter_in_the_single_cluster_mode_follows_a_voters_channel_onto_another_master() {
    let cluster = RedisCluster::start(3, 0);
    let builder = || {
        Redlock::builder()
            .cluster_shards(cluster.seeds())
            .node_timeout(Duration::from_secs(1))
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO)
    };
    let holder = builder().build().expect("the masters found");
    let wakes = Arc::new(Wakes::default());
    let waiter = builder()
        .events(Arc::clone(&wakes))
        .build()
        .expect("the masters found");
    let resource = unique_prefix("shards-moved") + "job";
    let lock = holder.lock(&resource, TTL).expect("free");
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let (waiter, released_at) = (waiter.clone(), Arc::clone(&released_at));
        let resource = resource.clone();
        thread::spawn(move || {
            let lock = waiter
                .try_lock_for(&resource, WAITER_TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let after = released_at.lock().unwrap().expect("after").elapsed();
            lock.unlock().expect("released");
            after
        })
    };
    let masters = cluster.masters();
    let (from, onto) = (masters[1], masters[0]);
    for &master in &masters {
        wait_until("a voter's own channel subscribed on its master", || {
            own_channels(cluster.node(master), &resource).len() == 1
        });
    }
    let moved = own_channels(cluster.node(from), &resource).remove(0);
    let slot = key_slot(moved.as_bytes());
    assert_eq!(cluster.master_of_slot(slot), from, "a voter's own slot");
    cluster.move_slot(slot, onto);
    wait_until(
        "the moved voter's channel subscribed on its new master",
        || numsub(cluster.node(onto), "SHARDNUMSUB", &moved) >= 1,
    );
    assert_eq!(own_channels(cluster.node(onto), &resource).len(), 2);
    assert!(own_channels(cluster.node(from), &resource).is_empty());
    thread::sleep(Duration::from_millis(20));
    *released_at.lock().unwrap() = Some(Instant::now());
    lock.unlock().expect("released");
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the release"
    );
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
    assert!(wakes.count(WokenBy::Notice) >= 1, "woken by the notice");
}

/// A raw subscriber to one channel on one server, by `SSUBSCRIBE`
/// (`sharded`) or `SUBSCRIBE`.
struct Listener {
    stream: TcpStream,
    input: Vec<u8>,
}

impl Listener {
    /// Subscribed (the server confirmed it) to `channel` on `server`.
    fn on(server: &RedisServer, channel: &str, sharded: bool) -> Listener {
        let stream = TcpStream::connect(server.addr()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(20)))
            .expect("timeout");
        let mut listener = Listener {
            stream,
            input: Vec::new(),
        };
        let verb: &[u8] = if sharded { b"SSUBSCRIBE" } else { b"SUBSCRIBE" };
        listener.send(&[verb, channel.as_bytes()]);
        let confirmed = listener.next();
        let kind: &[u8] = if sharded { b"ssubscribe" } else { b"subscribe" };
        assert!(
            matches!(&confirmed, OwnedReply::Array(items) if items.first() == Some(&OwnedReply::Bulk(kind.to_vec()))),
            "{confirmed:?}"
        );
        listener
    }

    fn send(&mut self, args: &[&[u8]]) {
        self.stream.write_all(&encode_command(args)).expect("write");
    }

    /// The next reply or push, within 10 s.
    fn next(&mut self) -> OwnedReply {
        let limit = Instant::now() + Duration::from_secs(10);
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((reply, used)) = parse(&self.input).expect("RESP") {
                self.input.drain(..used);
                return reply;
            }
            assert!(Instant::now() < limit, "nothing from the server in 10 s");
            if let Ok(n @ 1..) = self.stream.read(&mut chunk) {
                self.input.extend_from_slice(&chunk[..n]);
            }
        }
    }

    /// The payloads published on the channel since the last call, up to
    /// now: everything before the answer to a `PING` sent now (the server
    /// sends in order what it sends on one connection).
    fn heard(&mut self) -> Vec<Vec<u8>> {
        self.send(&[b"PING"]);
        let mut payloads = Vec::new();
        loop {
            match self.next() {
                OwnedReply::Array(items) => match &items[..] {
                    [OwnedReply::Bulk(kind), ..] if kind == b"pong" => return payloads,
                    [OwnedReply::Bulk(kind), _, OwnedReply::Bulk(payload)]
                        if kind == b"message" || kind == b"smessage" =>
                    {
                        payloads.push(payload.clone())
                    }
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            }
        }
    }
}

/// Listeners to `resource`'s channel on the master of `cluster` that owns
/// its slot (by `SSUBSCRIBE`, and by `SUBSCRIBE`, which must hear
/// nothing: a cluster broadcasts `PUBLISH`) and on `master`.
fn listeners(cluster: &RedisCluster, master: &RedisServer, resource: &str) -> [Listener; 3] {
    let channel = release_channel(resource);
    let owner = owner_of(cluster, resource);
    [
        Listener::on(owner, &channel, true),
        Listener::on(owner, &channel, false),
        Listener::on(master, &channel, false),
    ]
}

/// What each of `listeners` heard since they last said.
fn heard(listeners: &mut [Listener; 3]) -> [Vec<Vec<u8>>; 3] {
    listeners.each_mut().map(Listener::heard)
}

/// A release that finds the key taken by someone else (it expired, and
/// another client set it) deletes nothing and publishes nothing, on a
/// cluster voter as on a standalone master; a release of our own key
/// publishes once per voter (`SPUBLISH` on the cluster). `native`: whether
/// the handle may release natively (`DELIFEQ` where the server has it);
/// `delete`: the command a release must then have run on each voter.
fn a_release_not_ours_publishes_nothing(
    cluster: &RedisCluster,
    master: &RedisServer,
    native: bool,
    delete: &str,
) {
    let redlock = Voters::of(&[cluster], &[master])
        .builder()
        .native_commands(native)
        .build()
        .expect("valid configuration");
    let prefix = unique_prefix("not-ours");
    // Other tests may release on the shared cluster meanwhile: at least.
    let deletes =
        |resource: &str| owner_of(cluster, resource).calls_of(delete) + master.calls_of(delete);

    // Ours: one notice from each voter, the cluster's sharded.
    let resource = format!("{prefix}ours");
    let mut listening = listeners(cluster, master, &resource);
    let lock = redlock.lock(&resource, TTL).expect("free");
    let deleted = deletes(&resource);
    lock.unlock().expect("released");
    assert!(deletes(&resource) >= deleted + 2, "released by {delete}");
    // (A native release's notice goes out once its delete answered: it
    // may reach the server after the call returned.)
    let mut all: [Vec<Vec<u8>>; 3] = Default::default();
    wait_until("a notice from each voter", || {
        for (seen, new) in all.iter_mut().zip(heard(&mut listening)) {
            seen.extend(new);
        }
        !all[0].is_empty() && !all[2].is_empty()
    });
    let notice = |heard: &[Vec<u8>]| heard.len() == 1 && heard[0].first() == Some(&b'r');
    let [sharded, broadcast, standalone] = all;
    assert!(notice(&sharded), "{sharded:?}");
    assert!(broadcast.is_empty(), "PUBLISH on a cluster: {broadcast:?}");
    assert!(notice(&standalone), "{standalone:?}");

    // Not ours: taken by another value on every voter.
    let resource = format!("{prefix}theirs");
    let mut listening = listeners(cluster, master, &resource);
    let lock = redlock.lock(&resource, TTL).expect("free");
    for server in [owner_of(cluster, &resource), master] {
        assert_eq!(
            server.cmd(&["SET", &resource, "someone else"]),
            OwnedReply::Simple("OK".into())
        );
    }
    let deleted = deletes(&resource);
    match lock.unlock() {
        Err(Error::LockLost(_)) => {}
        other => panic!("{other:?}"),
    }
    // Every voter answered the release (the call waits for a quorum, here
    // both): nothing was published, and the other value is still there.
    assert!(deletes(&resource) >= deleted + 2, "released by {delete}");
    let nothing: [Vec<Vec<u8>>; 3] = Default::default();
    assert_eq!(heard(&mut listening), nothing, "published");
    for server in [owner_of(cluster, &resource), master] {
        assert_eq!(
            server.get(resource.as_bytes()),
            Some(b"someone else".to_vec())
        );
    }
}

/// By the release scripts (the sharded one on the cluster).
#[test]
fn a_scripted_release_that_finds_the_key_not_ours_publishes_nothing() {
    let master = RedisServer::start();
    a_release_not_ours_publishes_nothing(&shared_clusters(1)[0], &master, false, "evalsha");
}

/// By `DELIFEQ` (Valkey 9.1, `REDLOCK_TEST_NATIVE_SERVER`; the test stops
/// without it), whose notice the connection sends (`SPUBLISH` on the
/// cluster) only once the delete answered 1.
#[test]
fn a_native_release_that_finds_the_key_not_ours_publishes_nothing() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = RedisCluster::start_binary(&valkey, 1, 3, 0, &[], &[]).remove(0);
    let master = RedisServer::start_binary(&valkey, &[]);
    a_release_not_ours_publishes_nothing(&cluster, &master, true, "delifeq");
}

/// The master of `cluster` that owns `key`'s slot.
fn owner_of<'a>(cluster: &'a RedisCluster, key: &str) -> &'a RedisServer {
    cluster.node(cluster.master_of_key(key.as_bytes()))
}

/// A waiter of a set whose keys lie in three slots on three masters of the
/// first of three cluster voters, held by another handle's set: it takes
/// the set within [`WOKEN_WITHIN`] of the holder's release (its timer is
/// [`NEVER`]: only the notices each part's release sends on its keys'
/// sharded channels can wake it so soon; a set waiter tells no wait
/// events yet), and no notice goes by `PUBLISH` on the clusters.
#[test]
fn a_set_waiter_on_cluster_voters_is_woken_by_the_sets_release() {
    let clusters: Vec<&RedisCluster> = shared_clusters(3).iter().collect();
    let voters = Voters::of(&clusters, &[]);
    let holder = voters.builder().build().expect("valid configuration");
    let waiter = voters.builder().build().expect("valid configuration");
    let prefix = unique_prefix("set-woken");
    let first = clusters[0];
    let names: Vec<String> = first.masters()[..3]
        .iter()
        .enumerate()
        .map(|(i, &master)| first.key_on(master, &format!("{prefix}{i}")))
        .collect();
    let calls = |command| -> u64 {
        let nodes = clusters.iter().flat_map(|c| c.nodes());
        nodes.map(|node| node.calls_of(command)).sum()
    };
    let (publish_before, spublish_before) = (calls("publish"), calls("spublish"));
    let set = holder
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let (names, released_at) = (names.clone(), Arc::clone(&released_at));
        thread::spawn(move || {
            let set = waiter
                .try_lock_many_for(&names, WAITER_TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let after = released_at
                .lock()
                .unwrap()
                .expect("acquired only after the instant it is timed from")
                .elapsed();
            set.unlock().expect("released");
            after
        })
    };
    for name in &names {
        wait_for_subscribers(&clusters, &[], name);
    }
    thread::sleep(Duration::from_millis(20));
    *released_at.lock().unwrap() = Some(Instant::now());
    set.unlock().expect("released");
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the release"
    );
    assert_eq!(calls("publish"), publish_before, "PUBLISH on a cluster");
    // The holder's release told every key's channel on at least the two
    // clusters of its quorum.
    assert!(calls("spublish") >= spublish_before + 2 * names.len() as u64);
}

/// In the single-cluster mode a set's keys carry each voter's own tag,
/// and so do their channels: a set waiter subscribes to every key's own
/// channel on each master and is woken by the set's release there (the
/// fallback pause is 30 s, so only a notice wakes it within 3 s).
#[test]
fn a_set_waiter_in_the_single_cluster_mode_is_woken_by_the_sets_release() {
    let cluster = &shared_clusters(1)[0];
    let builder = || {
        Redlock::builder()
            .cluster_shards(cluster.seeds())
            .node_timeout(Duration::from_secs(1))
            .retry_delay(NEVER)
            .retry_jitter(Duration::ZERO)
    };
    let holder = builder().build().expect("the masters found");
    let wakes = Arc::new(Wakes::default());
    let waiter = builder()
        .events(Arc::clone(&wakes))
        .build()
        .expect("the masters found");
    let prefix = unique_prefix("shards-set");
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{prefix}{n}"))
        .collect();
    let set = holder
        .try_lock_many(&names, TTL)
        .expect("no error")
        .expect("free");
    let released_at = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let (names, released_at) = (names.clone(), Arc::clone(&released_at));
        thread::spawn(move || {
            let set = waiter
                .try_lock_many_for(&names, WAITER_TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("acquired within the wait");
            let after = released_at
                .lock()
                .unwrap()
                .expect("acquired only after the instant it is timed from")
                .elapsed();
            set.unlock().expect("released");
            after
        })
    };
    for master in cluster.masters() {
        for name in &names {
            wait_until(
                "a voter's own channel of each key subscribed on its master",
                || {
                    match cluster.node(master).cmd(&["PUBSUB", "SHARDCHANNELS", &format!("*}}{name}")]) {
                    OwnedReply::Array(channels) => channels.iter().any(|c| {
                        matches!(c, OwnedReply::Bulk(ch) if ch.ends_with(format!("}}{name}").as_bytes()))
                    }),
                    other => panic!("PUBSUB SHARDCHANNELS: {other:?}"),
                }
                },
            );
        }
    }
    thread::sleep(Duration::from_millis(20));
    *released_at.lock().unwrap() = Some(Instant::now());
    set.unlock().expect("released");
    let after = waiting.join().expect("waiter");
    assert!(
        after < WOKEN_WITHIN,
        "the waiter took {after:?} after the release"
    );
    assert_eq!(wakes.count(WokenBy::Timer), 0, "woken by the timer");
    assert!(wakes.count(WokenBy::Notice) >= 1, "woken by the notice");
}
