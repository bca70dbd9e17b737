//! Voters that are not independent are refused (issue 32 item 6, issue 34
//! item 4), on real servers (whichever `REDLOCK_TEST_SERVER` names) and,
//! for KeyDB, a fake node: one server under two addresses, one cluster
//! given as two voters, a cluster node given as a standalone master, a
//! replica given as a master (alone, or beside its master, and once
//! promoted beside it), a KeyDB active replica or multi-master node.
//! Each is refused with a named error ([`NotAVoter`]), and never counted
//! twice; independent voters are all counted.
//!
//! "Never counted twice" is shown where it would show: an extension, whose
//! compare-and-expire two voters on one server would both grant (two
//! acquisitions of one key on one server cannot both win), with the one
//! independent voter left killed.

mod support;

use redlock_sync::{
    Error, HandleEvent, MasterChange, MasterEvent, NodeError, NodeOutcome, NotAVoter, Redlock,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{shared_clusters, unique_prefix, Action, Call, FakeNode, Proxy, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// What the hook heard: each `MasterChange::NotAVoter`, by voter index.
#[derive(Default)]
struct Refusals(Mutex<Vec<(usize, String)>>);

impl HandleEvent for Refusals {
    fn handle_master(&self, event: MasterEvent<'_>) {
        if let MasterChange::NotAVoter(why) = event.change() {
            let told = (event.index(), why.to_string());
            self.0.lock().unwrap().push(told);
        }
    }
}

impl Refusals {
    fn told(&self) -> Vec<(usize, String)> {
        self.0.lock().unwrap().clone()
    }
}

/// A handle of `builder`'s voters that tells `hook`, with a node timeout
/// generous for a loaded machine.
fn build(builder: redlock_sync::Builder, hook: &Arc<Refusals>) -> Redlock {
    builder
        .node_timeout(Duration::from_secs(1))
        .release_notices(false)
        .events(Arc::clone(hook))
        .build()
        .expect("a valid configuration")
}

/// The refusal of voter `index` in `error`'s report.
fn refusal_in(error: &Error, index: usize) -> NotAVoter {
    let report = error.nodes().expect("a report");
    let status = report.iter().nth(index).expect("the voter");
    match status.outcome() {
        NodeOutcome::Failed(NodeError::NotAVoter(why)) => why.clone(),
        NodeOutcome::Failed(NodeError::Backoff { cause, .. }) => match &**cause {
            NodeError::NotAVoter(why) => why.clone(),
            other => panic!("voter {index} failed otherwise: {other}"),
        },
        other => panic!("voter {index} not refused: {other:?} ({error})"),
    }
}

/// Takes `resource` on `redlock` (the first round may lose it to the
/// refused voter's SET on the shared server: `lock` tries again).
fn take(redlock: &Redlock, resource: &str) -> redlock_sync::Lock {
    redlock
        .lock(resource, TTL)
        .unwrap_or_else(|e| panic!("{resource}: {e}"))
}

/// Voter 1 is the same server as voter 0, through a proxy (a second
/// address): it is refused, naming voter 0, and the hook hears it once.
/// With voter 2 killed, an extension has voter 0 alone: it fails (voters 0
/// and 1 would make a quorum of one server).
#[test]
fn one_server_under_two_addresses_votes_once() {
    let shared = RedisServer::start();
    let proxy = Proxy::start(shared.addr(), |_| false);
    let mut other = RedisServer::start();
    let hook = Arc::new(Refusals::default());
    let builder = Redlock::builder().nodes([shared.url(), proxy.url(), other.url()]);
    let redlock = build(builder, &hook);
    let mut lock = take(&redlock, "one-server");
    // The round returned at a quorum: every voter's connection is set up
    // by one that waits for all.
    let _ = redlock.ping();
    let health = redlock.health();
    assert!(health[1].is_failing(), "{}", health[1]);
    let shown = health[1].to_string();
    let named = format!("same server as voter 127.0.0.1:{}", shared.port());
    assert!(shown.contains(&named), "{shown}");
    assert!(!health[0].is_failing() && !health[2].is_failing());

    other.kill();
    let err = lock.extend(TTL).expect_err("one server is no quorum");
    assert!(err.is_no_quorum(), "{err}");
    assert_eq!(
        refusal_in(&err, 1),
        NotAVoter::SameServer {
            other: format!("127.0.0.1:{}", shared.port())
        }
    );
    assert_eq!(hook.told().len(), 1, "told once: {:?}", hook.told());
    assert_eq!(hook.told()[0].0, 1);
}

/// Voters 0 and 1 are one server behind two proxies that hold
/// acquisitions back (1.5 s and 0.5 s; the node timeout is 4 s): both
/// connections' handshakes answer at once, so voter 1 is refused before its
/// vote comes, but its acquisition runs first and sets the key; voter 0
/// then declines, and the attempt fails (voter 2 alone agrees). The release
/// after it still goes to voter 1: the next attempt finds the resource
/// free, not held for a TTL. (Without it, the second attempt finds the key
/// there.)
#[test]
fn a_key_set_by_a_voter_refused_in_its_round_is_released() {
    let shared = RedisServer::start();
    let holding = |ms: u64| {
        Proxy::holding(shared.addr(), move |command| {
            if matches!(Call::parse(command), Call::Acquire { .. }) {
                Duration::from_millis(ms)
            } else {
                Duration::ZERO
            }
        })
    };
    let (slower, slow) = (holding(1500), holding(500));
    let other = RedisServer::start();
    let hook = Arc::new(Refusals::default());
    let redlock = Redlock::builder()
        .nodes([slower.url(), slow.url(), other.url()])
        .node_timeout(Duration::from_secs(4))
        .release_notices(false)
        .events(Arc::clone(&hook))
        .build()
        .expect("a valid configuration");
    assert!(
        redlock
            .try_lock("refused-round", TTL)
            .expect("no error")
            .is_none(),
        "voter 0 declines: voter 1's key is there"
    );
    let lock = redlock
        .try_lock("refused-round", TTL)
        .expect("no error")
        .expect("free again: the release reached voter 1's key");
    lock.unlock().expect("released");
    assert_eq!(hook.told().len(), 1, "{:?}", hook.told());
}

/// A fake master that says it is the server `run` (`INFO server`), and
/// grants every lock command; `hold` says how long to wait before
/// answering a command (its arguments; those after it on the connection
/// wait too).
fn fake_master(
    run: &'static str,
    hold: impl Fn(&[Vec<u8>]) -> Duration + Send + Sync + 'static,
) -> FakeNode {
    FakeNode::start(move |args, _| {
        std::thread::sleep(hold(args));
        match Call::parse(args) {
            Call::Handshake if args[0].eq_ignore_ascii_case(b"INFO") => {
                let text = if args[1].eq_ignore_ascii_case(b"server") {
                    format!("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nrun_id:{run}\r\n")
                } else {
                    "# Replication\r\nrole:master\r\n".to_string()
                };
                Action::Reply(format!("${}\r\n{text}\r\n", text.len()).into_bytes())
            }
            Call::Handshake => Action::Reply(support::handshake_reply(args)),
            call => Action::Reply(call.yes()),
        }
    })
}

/// Voters 0 and 1 are one server (fake nodes telling one `run_id`): voter
/// 1's handshake answers at once, voter 0's `INFO server` and voter 1's
/// grant both 200 ms later, while the round's thread is held in the hook
/// (voter 2 closed on the acquisition at 100 ms, and the hook sleeps on
/// that news), so that one wake-up reads both: voter 0's answer refuses
/// voter 1, whose grant, read next, must neither count nor show voter 1
/// healthy. It stays failing in the health view, and the hook hears of it
/// once, though the next attempt finds it refused again.
#[test]
fn a_grant_read_after_its_voter_was_refused_does_not_show_it_healthy() {
    const RUN: &str = "5f1d7a0c3b9e4d2a8c6b0e1f2a3b4c5d6e7f8091";
    let hold = Duration::from_millis(200);
    let first = fake_master(RUN, move |args| {
        let info_server = args[0].eq_ignore_ascii_case(b"INFO")
            && args
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"server"));
        if info_server {
            hold
        } else {
            Duration::ZERO
        }
    });
    let second = fake_master(RUN, move |args| match Call::parse(args) {
        Call::Acquire { .. } => hold,
        _ => Duration::ZERO,
    });
    let closing = FakeNode::start(|args, _| match Call::parse(args) {
        Call::Handshake => Action::Reply(support::handshake_reply(args)),
        Call::Acquire { .. } => {
            std::thread::sleep(Duration::from_millis(100));
            Action::Close
        }
        call => Action::Reply(call.yes()),
    });

    /// Records refusals; holds the round's thread 600 ms when voter 2 is
    /// first told down.
    #[derive(Default)]
    struct Holding {
        refusals: Refusals,
        held: std::sync::atomic::AtomicBool,
    }
    impl HandleEvent for Holding {
        fn handle_master(&self, event: MasterEvent<'_>) {
            use std::sync::atomic::Ordering;
            if event.index() == 2
                && matches!(event.change(), MasterChange::Down(_))
                && !self.held.swap(true, Ordering::Relaxed)
            {
                std::thread::sleep(Duration::from_millis(600));
            }
            self.refusals.handle_master(event);
        }
    }
    let hook = Arc::new(Holding::default());
    let redlock = Redlock::builder()
        .nodes([first.url(), second.url(), closing.url()])
        .node_timeout(Duration::from_secs(4))
        .release_notices(false)
        .events(Arc::clone(&hook))
        .build()
        .expect("a valid configuration");
    for attempt in 0..2 {
        let err = redlock
            .try_lock("read-after-refusal", TTL)
            .expect_err("voter 0 alone agrees");
        assert_eq!(
            refusal_in(&err, 1),
            NotAVoter::SameServer {
                other: format!("127.0.0.1:{}", first.addr().port())
            },
            "attempt {attempt}"
        );
        let health = &redlock.health()[1];
        assert!(health.is_failing(), "attempt {attempt}: {health}");
    }
    assert!(hook.held.load(std::sync::atomic::Ordering::Relaxed));
    let told = hook.refusals.told();
    assert_eq!(told.len(), 1, "told once: {told:?}");
}

/// A replica given as a voter is refused with its master's address, at
/// once: a handle of it alone stops `lock` without waiting. Promoted, it is
/// a master: the next connection finds it so.
#[test]
fn a_replica_is_refused_naming_its_master_until_it_is_promoted() {
    let set = support::Replicated::start(1);
    let master = format!("127.0.0.1:{}", set.node(0).port());
    let hook = Arc::new(Refusals::default());
    let redlock = build(
        Redlock::builder()
            .nodes([set.url(1)])
            .lock_wait(Duration::from_secs(20)),
        &hook,
    );
    let started = Instant::now();
    let err = redlock
        .lock("replica", TTL)
        .expect_err("a replica is no voter");
    let took = started.elapsed();
    assert_eq!(
        refusal_in(&err, 0),
        NotAVoter::Replica {
            master: master.clone()
        }
    );
    assert!(err.to_string().contains(&master), "{err}");
    assert!(!err.is_retryable(), "{err}");
    assert!(took < Duration::from_secs(10), "stopped at once: {took:?}");
    assert_eq!(hook.told(), [(0, hook.told()[0].1.clone())]);

    set.promote(1);
    let report = redlock.ping().expect("a master now");
    assert_eq!(report.len(), 1);
    redlock
        .try_lock("replica", TTL)
        .expect("no error")
        .expect("free")
        .unlock()
        .expect("released");
}

/// A master and its replica given as two voters, beside a third master:
/// the replica is refused, naming its master. Promoted while its master
/// still runs, it holds the lock's key it copied, so it is refused again,
/// as the master's replication set (it continues the master's replication
/// id): with the third voter killed, an extension has the master alone and
/// fails, where the copy would have made a second vote.
#[test]
fn a_replica_and_its_master_vote_once_even_once_it_is_promoted() {
    let set = support::Replicated::start(1);
    let master = format!("127.0.0.1:{}", set.node(0).port());
    let mut other = RedisServer::start();
    let hook = Arc::new(Refusals::default());
    let builder = Redlock::builder().nodes([set.url(0), set.url(1), other.url()]);
    let redlock = build(builder, &hook);
    let mut lock = take(&redlock, "replica-and-master");
    let _ = redlock.ping(); // every voter's connection set up
    let health = redlock.health();
    assert!(health[1].is_failing(), "{}", health[1]);
    let shown = health[1].to_string();
    assert!(shown.contains(&format!("replica of {master}")), "{shown}");
    assert!(!health[0].is_failing() && !health[2].is_failing());

    // The replica has the key, with the holder's value; then it is a
    // master, and the next connection to it is refused otherwise.
    set.wait_synced();
    set.promote(1);
    let _ = redlock.ping();
    other.kill();
    let err = lock
        .extend(TTL)
        .expect_err("a master and its copy are no quorum");
    assert!(err.is_no_quorum(), "{err}");
    let shown = redlock.health()[1].to_string();
    let named = format!("same replication set as voter {master}");
    assert!(shown.contains(&named), "{shown}");
    assert_eq!(
        refusal_in(&err, 1),
        NotAVoter::SameReplication { other: master }
    );
    let told = hook.told();
    assert!(
        !told.is_empty() && told.iter().all(|(i, _)| *i == 1),
        "{told:?}"
    );
}

/// A fake node that says, in `INFO replication`, what `replication` says
/// (a KeyDB active replica, a multi-master node), and otherwise grants
/// every lock command.
fn keydb(replication: &'static str) -> FakeNode {
    FakeNode::start(move |args, _| match Call::parse(args) {
        Call::Handshake if args[0].eq_ignore_ascii_case(b"INFO") => {
            let text = if args[1].eq_ignore_ascii_case(b"server") {
                "# Server\r\nredis_version:6.3.4\r\nredis_mode:standalone\r\nrun_id:0123456789012345678901234567890123456789\r\n"
            } else {
                replication
            };
            Action::Reply(format!("${}\r\n{text}\r\n", text.len()).into_bytes())
        }
        Call::Handshake => Action::Reply(support::handshake_reply(args)),
        call => Action::Reply(call.yes()),
    })
}

#[test]
fn keydb_active_replicas_and_multi_master_nodes_are_refused() {
    let active = keydb("# Replication\r\nrole:active-replica\r\nmaster_global_link_status:up\r\nconnected_masters:1\r\nmaster_host:keydb-b\r\nmaster_port:6379\r\nmaster_link_status:up\r\n");
    let multi = keydb("# Replication\r\nrole:active-replica\r\nconnected_masters:2\r\nmaster_host:keydb-b\r\nmaster_port:6379\r\nmaster_1_host:keydb-c\r\nmaster_1_port:6380\r\n");
    let expected = [
        NotAVoter::ActiveReplica {
            master: "keydb-b:6379".into(),
        },
        NotAVoter::MultiMaster {
            masters: "keydb-b:6379, keydb-c:6380".into(),
        },
    ];
    for (fake, expected) in [active, multi].iter().zip(expected) {
        let hook = Arc::new(Refusals::default());
        let redlock = build(Redlock::builder().nodes([fake.url()]), &hook);
        // It grants everything: it must not count.
        for _ in 0..3 {
            let err = redlock
                .try_lock("keydb", TTL)
                .expect_err("no independent master");
            assert_eq!(refusal_in(&err, 0), expected);
            assert!(!err.is_retryable(), "{err}");
        }
        assert_eq!(hook.told(), [(0, expected.to_string())], "told once");
        // The SET sent behind the handshake ran there (and was granted):
        // the failed acquisition's release is sent after it all the same.
        let deadline = Instant::now() + Duration::from_secs(10);
        let released = || {
            let calls = fake.commands();
            calls
                .iter()
                .any(|c| matches!(Call::parse(c), Call::Release { .. }))
        };
        while !released() {
            assert!(Instant::now() < deadline, "never released");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A master of a cluster given to `nodes()` beside that cluster: refused
/// as a cluster node, so with the third voter killed an extension fails
/// (the cluster and its own master would make two votes of one server).
#[test]
fn a_node_of_a_cluster_voter_given_as_a_standalone_master_is_refused() {
    let cluster = &shared_clusters(1)[0];
    let resource = unique_prefix("node-of") + "key";
    let owner = cluster.master_of_key(resource.as_bytes());
    let mut other = RedisServer::start();
    let hook = Arc::new(Refusals::default());
    // The cluster's seeds without that master (an address given twice is
    // refused by `build`).
    let node = cluster.node(owner).url();
    let seeds = cluster.seeds().into_iter().filter(|s| *s != node);
    let builder = Redlock::builder().cluster(seeds).nodes([node, other.url()]);
    let redlock = build(builder, &hook);
    let mut lock = take(&redlock, &resource);
    let _ = redlock.ping(); // every voter's connection set up

    other.kill();
    let err = lock.extend(TTL).expect_err("one server is no quorum");
    assert!(err.is_no_quorum(), "{err}");
    assert!(redlock.health()[1].is_failing(), "{}", redlock.health()[1]);
    assert_eq!(refusal_in(&err, 1), NotAVoter::ClusterNode);
    assert!(err.to_string().contains("Builder::cluster"), "{err}");
    assert_eq!(hook.told().len(), 1, "told once: {:?}", hook.told());
}

/// One cluster given as two cluster voters (through different seeds): the
/// second is refused, naming the first; with the third voter killed an
/// extension fails (the cluster would count twice).
#[test]
fn one_cluster_given_as_two_voters_is_refused_and_never_counted_twice() {
    let cluster = &shared_clusters(1)[0];
    let seeds = cluster.seeds();
    let resource = unique_prefix("twice") + "key";
    let mut other = RedisServer::start();
    let hook = Arc::new(Refusals::default());
    let builder = Redlock::builder()
        .cluster(&seeds[..1])
        .cluster(&seeds[1..])
        .nodes([other.url()]);
    let redlock = build(builder, &hook);
    let first = redlock.health()[0].node().to_string();
    let mut lock = take(&redlock, &resource);
    let _ = redlock.ping(); // every voter's connection set up

    other.kill();
    let err = lock.extend(TTL).expect_err("one cluster is no quorum");
    assert!(err.is_no_quorum(), "{err}");
    let health = redlock.health();
    assert!(health[1].is_failing(), "{}", health[1]);
    assert!(
        health[1]
            .to_string()
            .contains(&format!("same cluster as voter {first}")),
        "{}",
        health[1]
    );
    assert_eq!(refusal_in(&err, 1), NotAVoter::SameCluster { other: first });
    assert_eq!(hook.told().len(), 1, "told once: {:?}", hook.told());
    assert_eq!(hook.told()[0].0, 1);
}

/// Three masters, three clusters, and the single-cluster mode: nothing is
/// refused: every voter answers a `ping` (which waits for all), none is
/// failing, and the hook hears no refusal.
#[test]
fn independent_voters_are_all_counted() {
    let masters = support::Cluster::start(3);
    let clusters = shared_clusters(3);
    let hook = Arc::new(Refusals::default());
    let mut by_clusters = Redlock::builder();
    for cluster in clusters {
        by_clusters = by_clusters.cluster(cluster.seeds());
    }
    let handles = [
        build(Redlock::builder().nodes(masters.urls()), &hook),
        build(by_clusters, &hook),
        build(
            Redlock::builder().cluster_shards(clusters[0].seeds()),
            &hook,
        ),
    ];
    for (h, redlock) in handles.iter().enumerate() {
        assert_eq!(redlock.node_count(), 3);
        let prefix = unique_prefix(&format!("counted{h}"));
        for n in 0..8 {
            take(redlock, &format!("{prefix}{n}"))
                .unlock()
                .expect("released");
        }
        let report = redlock.ping().unwrap_or_else(|e| panic!("handle {h}: {e}"));
        assert_eq!(report.len(), 3);
        for line in redlock.health() {
            assert!(!line.is_failing(), "handle {h}: {line}");
        }
    }
    assert_eq!(hook.told(), []);
}

/// A cluster voter whose seeds include its replicas (and the master they
/// replicate) is one voter: a replica is a member, not refused.
#[test]
fn a_cluster_seeded_by_its_replicas_is_one_voter() {
    let cluster = support::RedisCluster::start(3, 1);
    let replicas: Vec<String> = cluster
        .masters()
        .iter()
        .flat_map(|&m| cluster.replicas_of(m))
        .map(|r| cluster.node(r).url())
        .collect();
    assert_eq!(replicas.len(), 3);
    let mut seeds = replicas.clone();
    seeds.push(cluster.node(cluster.masters()[0]).url());
    let hook = Arc::new(Refusals::default());
    let redlock = build(Redlock::builder().cluster(seeds), &hook);
    for n in 0..8 {
        take(&redlock, &format!("seeded-by-replicas{n}"))
            .unlock()
            .expect("released");
    }
    assert!(!redlock.health()[0].is_failing(), "{}", redlock.health()[0]);
    assert_eq!(hook.told(), []);
}
