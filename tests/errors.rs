//! What errors say, and what users can see of the cluster: failures keep
//! their cause through the reconnect backoff, permanent ones are not
//! retried, messages say what is wrong, and the health view, `ping` and
//! `Lock::masters` show failing masters before locking fails.

mod support;

use redlock_sync::{Error, KeyState, NodeError, NodeOutcome, Phase, ProtocolError, Redlock};
use std::time::{Duration, Instant};
use support::{Action, Cluster, FakeNode};

const TTL: Duration = Duration::from_secs(10);

fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap()
}

#[test]
fn killed_masters_keep_saying_connection_refused_through_the_backoff() {
    let mut cluster = Cluster::start(3);
    let redlock = client(&cluster);
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    cluster.servers[0].kill();
    cluster.servers[1].kill();
    // A connection sent on less than a millisecond ago is not looked at
    // before the next send (`fanout::QUIET`): a call that soon would find
    // the dead server's connection closed in its round instead of redialling
    // (and being refused) at once.
    std::thread::sleep(Duration::from_millis(20));
    for call in 0..10 {
        let err = redlock.try_lock("r", TTL).expect_err("no quorum");
        assert!(err.is_no_quorum(), "call {call}: {err}");
        assert!(err.is_connection_refused(), "call {call}: {err}");
        assert!(err.is_retryable(), "call {call}: the masters may come back");
        let shown = err.to_string();
        assert_eq!(
            shown.matches("connection refused").count(),
            2,
            "call {call}: {shown}"
        );
    }
    let health = redlock.health();
    for dead in &health[..2] {
        assert!(dead.is_failing(), "{dead}");
        let (cause, _) = dead.last_failure().expect("a failure");
        assert_eq!(*cause, NodeError::Refused, "{dead}");
        assert!(dead.to_string().contains("connection refused"), "{dead}");
    }
    assert!(!health[2].is_failing(), "{}", health[2]);
}

/// A release returns at quorum, so the slowest master's answer is still
/// owed when the call returns. If that master then dies, the next call reads
/// the late answer, sees the closed connection behind it, and connects
/// afresh (and is refused) instead of sending on the dead connection.
#[test]
fn a_master_that_died_after_answering_late_is_reported_refused() {
    let mut cluster = Cluster::start(3);
    let redlock = client(&cluster);
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    let lock = redlock.lock("r", TTL).unwrap();
    {
        let _paused = cluster.servers[2].pause();
        lock.unlock().unwrap();
    }
    // The release runs once the master resumes: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.servers[2].dbsize() != 0 {
        assert!(Instant::now() < deadline, "the late release never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.servers[2].kill();
    let lock = redlock
        .try_lock("r2", TTL)
        .expect("two masters are a quorum");
    let lock = lock.expect("nobody holds r2");
    let health = redlock.health();
    let (cause, _) = health[2].last_failure().expect("the dead master failed");
    assert_eq!(*cause, NodeError::Refused, "{}", health[2]);
    lock.unlock().unwrap();
}

#[test]
fn a_port_that_is_not_redis_is_named_as_such() {
    let http = FakeNode::start(|_, _| {
        Action::ReplyThenClose(b"<html><body>400 Bad Request</body></html>\r\n".to_vec())
    });
    let redlock = Redlock::builder()
        .nodes([http.url()])
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    let err = redlock.try_lock("r", TTL).expect_err("not a Redis server");
    let status = err.nodes().unwrap().iter().next().unwrap().clone();
    assert!(
        matches!(
            status.outcome(),
            NodeOutcome::Failed(NodeError::Protocol(ProtocolError::NotRedis(_)))
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("is this port a Redis server?"),
        "{err}"
    );
}

#[test]
fn health_shows_a_dead_master_and_its_recovery() {
    let mut cluster = Cluster::start(3);
    let redlock = client(&cluster);
    assert!(
        redlock.health().iter().all(|h| h.last_answer().is_none()),
        "nothing used yet"
    );
    redlock.lock("warm", TTL).unwrap().unlock().unwrap();
    // Rounds return at quorum, so one master's answer may still be unread:
    // a ping waits for every master.
    redlock.ping().expect("every master answers");
    let health = redlock.health();
    assert!(health.iter().all(|h| !h.is_failing()), "{health:?}");
    assert!(
        health.iter().all(|h| h.round_trip().is_some()),
        "{health:?}"
    );

    cluster.servers[1].kill();
    // 2 of 3 still lock; the dead one shows in the health view and on the
    // lock, before any call fails.
    let lock = redlock.lock("a", TTL).expect("2 of 3 are enough");
    let states: Vec<KeyState> = lock.masters().map(|(_, state)| state).collect();
    assert_ne!(states[1], KeyState::Held, "{states:?}");
    lock.unlock().unwrap();
    let dead = &redlock.health()[1];
    assert!(
        dead.is_failing() && dead.consecutive_failures() >= 1,
        "{dead}"
    );

    cluster.servers[1].restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    // The reconnect backoff is at most a second.
    while redlock.health()[1].is_failing() {
        assert!(Instant::now() < deadline, "{}", redlock.health()[1]);
        let _ = redlock.lock("b", TTL).map(|l| l.unlock());
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = &redlock.health()[1];
    assert_eq!(back.consecutive_failures(), 0, "{back}");
    assert!(
        back.last_failure().is_some(),
        "the past failure is kept: {back}"
    );
}

/// The ids of the connections a server has from clients other than the
/// test's own admin connection (`CLIENT LIST`).
fn client_ids(server: &support::RedisServer) -> Vec<String> {
    let support::OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST: not a bulk string")
    };
    String::from_utf8_lossy(&list)
        .lines()
        .filter(|line| !line.contains(" cmd=client"))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_string)
        .collect()
}

/// A frozen master (SIGSTOP: its connections stay open, nothing is
/// answered) is failing in the health view as soon as a round times out on
/// it, not only once its connection is given up (30 s later); but it is not
/// put into the reconnect backoff, and its connection is kept. Its answer
/// ends it.
#[test]
fn health_shows_a_frozen_master_as_failing_at_once_and_keeps_its_connection() {
    let cluster = Cluster::start(3);
    // Generous: the healthy masters must never miss it, even on a loaded
    // machine.
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    redlock.ping().expect("every master answers");
    let connections = client_ids(&cluster.servers[2]);
    assert_eq!(connections.len(), 1, "{connections:?}");
    {
        let _frozen = cluster.servers[2].pause();
        let report = redlock.ping().expect("a quorum answers");
        let third = report.iter().nth(2).unwrap();
        assert!(
            matches!(third.outcome(), NodeOutcome::Failed(NodeError::TimedOut(_))),
            "{report}"
        );
        let health = redlock.health();
        let frozen = &health[2];
        assert!(frozen.is_failing(), "{frozen}");
        assert_eq!(frozen.consecutive_failures(), 1, "{frozen}");
        let (cause, _) = frozen.last_failure().expect("a failure");
        assert!(matches!(cause, NodeError::TimedOut(_)), "{frozen}");
        assert!(frozen.to_string().contains("timed out during"), "{frozen}");
        assert_eq!(
            frozen.reconnect_in(),
            Duration::ZERO,
            "no backoff: {frozen}"
        );
        assert!(
            !health[0].is_failing() && !health[1].is_failing(),
            "{health:?}"
        );

        // It is still sent commands (on the same connection), and each
        // round it misses counts; locking goes on without it.
        redlock.ping().expect("a quorum answers");
        let frozen = &redlock.health()[2];
        assert_eq!(frozen.consecutive_failures(), 2, "{frozen}");
        assert_eq!(
            frozen.reconnect_in(),
            Duration::ZERO,
            "no backoff: {frozen}"
        );
        redlock.lock("r", TTL).expect("2 of 3").unlock().unwrap();
        assert!(redlock.health()[2].is_failing());
    }
    // Resumed: a round it answers ends the failure.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let report = redlock.ping().expect("a quorum answers");
        if report.iter().all(|s| *s.outcome() == NodeOutcome::Agreed) {
            break;
        }
        assert!(Instant::now() < deadline, "never answered again: {report}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = &redlock.health()[2];
    assert!(!back.is_failing(), "{back}");
    assert_eq!(back.consecutive_failures(), 0, "{back}");
    assert_eq!(
        client_ids(&cluster.servers[2]),
        connections,
        "the frozen master's connection was replaced"
    );
}

/// Rounds are decided by a quorum, so under lock traffic alone no round
/// waits for a frozen master: the next round finds its answer overdue, and
/// the health view says so then.
#[test]
fn health_shows_a_master_frozen_under_lock_traffic_as_failing() {
    let cluster = Cluster::start(3);
    let node_timeout = Duration::from_millis(200);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    // Every connection open and idle.
    redlock.ping().expect("every master answers");
    {
        let _frozen = cluster.servers[2].pause();
        redlock.lock("a", TTL).expect("2 of 3").unlock().unwrap();
        // Well past the node timeout: the frozen master's answers are
        // overdue.
        std::thread::sleep(node_timeout * 3);
        redlock.lock("b", TTL).expect("2 of 3").unlock().unwrap();
        let frozen = &redlock.health()[2];
        assert!(frozen.is_failing(), "{frozen}");
        let (cause, _) = frozen.last_failure().expect("a failure");
        assert_eq!(*cause, NodeError::TimedOut(Phase::Reply), "{frozen}");
        assert_eq!(
            frozen.reconnect_in(),
            Duration::ZERO,
            "no backoff: {frozen}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while redlock.health()[2].is_failing() {
        assert!(Instant::now() < deadline, "{}", redlock.health()[2]);
        redlock.lock("c", TTL).expect("2 of 3").unlock().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ping_reports_every_master_and_whether_a_quorum_answers() {
    let mut cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let report = redlock.ping().expect("all up");
    assert!(
        report.iter().all(|s| *s.outcome() == NodeOutcome::Agreed),
        "{report}"
    );

    let frozen = cluster.servers[2].pause();
    let started = Instant::now();
    let report = redlock.ping().expect("a quorum answers");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "waited for all"
    );
    let third = report.iter().nth(2).unwrap();
    assert!(
        matches!(third.outcome(), NodeOutcome::Failed(NodeError::TimedOut(_))),
        "{report}"
    );
    drop(frozen);

    cluster.servers[0].kill();
    cluster.servers[1].kill();
    let err = redlock.ping().expect_err("1 of 3");
    assert!(err.is_no_quorum() && err.is_connection_refused(), "{err}");
}

#[test]
fn a_lock_left_to_expire_keeps_its_key_until_the_ttl() {
    let cluster = Cluster::start(3);
    // A TTL and a node timeout that a busy machine meets: the key is
    // looked at, and tried by a second client, well within the TTL (a TTL
    // of 600 ms and rounds of 50 ms left little room for either).
    let client = || {
        Redlock::builder()
            .nodes(cluster.urls())
            .node_timeout(Duration::from_secs(1))
            .lock_wait(Duration::ZERO)
            .build()
            .unwrap()
    };
    let (first, second) = (client(), client());
    let ttl = Duration::from_secs(2);
    let before = Instant::now();
    let lock = first.lock("cron", ttl).unwrap();
    let left = lock.let_expire();
    assert!(left > Duration::ZERO && left <= ttl);
    // On every master, once it ran the SET (the call returned at quorum).
    let limit = Instant::now() + ttl / 2;
    for server in &cluster.servers {
        loop {
            let pttl = server.pttl(b"cron");
            if pttl > 0 {
                break;
            }
            assert!(Instant::now() < limit, "released: PTTL {pttl}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(
        second.try_lock("cron", ttl).unwrap().is_none(),
        "the key must stay until its TTL"
    );
    // Gone once the TTL has passed (the masters' expiry, polled), and not
    // before: set after `before`, it cannot be seen gone sooner than a TTL
    // from it (10 ms for the masters' clock against this one).
    let limit = Instant::now() + Duration::from_secs(10);
    while cluster.total_keys() != 0 {
        assert!(Instant::now() < limit, "never expired");
        std::thread::sleep(Duration::from_millis(5));
    }
    let gone = before.elapsed();
    assert!(
        gone + Duration::from_millis(10) >= ttl,
        "expired after {gone:?}"
    );
    second
        .try_lock("cron", ttl)
        .unwrap()
        .expect("free after the TTL")
        .unlock()
        .unwrap();
}

#[test]
fn an_auth_failure_is_permanent_and_says_what_to_fix() {
    let server =
        support::RedisServer::start_with(&["--requirepass", "right"]).with_admin_auth(&["right"]);
    let url = format!("redis://:wrong@127.0.0.1:{}", server.port());
    let redlock = Redlock::builder()
        .nodes([&url])
        .retry_delay(Duration::from_secs(1))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = redlock.lock("r", TTL).expect_err("refused");
    // A retry would come after the retry delay (1 s) at the earliest.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "retried a refused password"
    );
    assert!(err.is_auth_failure() && !err.is_retryable(), "{err}");
    let NodeOutcome::Failed(failure) = err.nodes().unwrap().iter().next().unwrap().outcome() else {
        panic!("{err}")
    };
    assert!(failure.is_permanent(), "{failure}");
    assert!(
        err.to_string().contains("set-up refused: WRONGPASS"),
        "{err}"
    );
    // Later calls, in the reconnect backoff or not, still name the cause.
    for _ in 0..5 {
        let err = redlock.try_lock("r", TTL).expect_err("refused");
        assert!(err.is_auth_failure(), "{err}");
        assert!(err.to_string().contains("WRONGPASS"), "{err}");
    }
}

#[test]
fn a_config_error_says_the_limit_once() {
    let redlock = Redlock::builder()
        .nodes(["redis://127.0.0.1:1"])
        .build()
        .unwrap();
    let err = redlock
        .lock("r", Duration::from_micros(500))
        .expect_err("too short");
    assert!(err.is_config() && !err.is_retryable(), "{err}");
    assert!(err.to_string().contains("at least 3ms"), "{err}");
    assert!(std::error::Error::source(&err).is_none(), "said twice");
    let err = Redlock::builder().build().expect_err("no nodes");
    let text = err.to_string();
    assert_eq!(text.matches("no nodes given").count(), 1, "{text}");
    assert!(matches!(err, Error::Config(_)));
}

/// The `decide` function the guide's error-handling recipe shows
/// (docs/guide/errors.md), and the one `examples/errors.rs` runs, give the
/// same verdicts in the same order;
/// a lost lock is given up before anything else is looked at (a lost lock
/// whose report also shows a master refusing our password must say "stop",
/// not "fix the configuration").
#[test]
fn the_guide_and_the_errors_example_decide_alike() {
    /// The code of `fn decide` in `file`, without comments or indentation.
    fn decide_in(file: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let start = text
            .find("fn decide(")
            .unwrap_or_else(|| panic!("{file}: no decide"));
        let end = start + text[start..].find("\n}\n").expect("the end of decide");
        text[start..end]
            .lines()
            .map(|line| line.split("//").next().unwrap().trim().to_string())
            .filter(|line| !line.is_empty())
            .collect()
    }
    let guide = decide_in("docs/guide/errors.md");
    let example = decide_in("examples/errors.rs");
    assert_eq!(
        guide, example,
        "docs/guide/errors.md and examples/errors.rs disagree"
    );
    let code = guide.join("\n");
    let position = |what: &str| code.find(what).unwrap_or_else(|| panic!("no {what}"));
    assert!(
        position("is_lock_lost()") < position("is_auth_failure()"),
        "a lost lock must be given up first:\n{code}"
    );
    assert!(position("is_contention()") < position("is_lock_lost()"));
}
