//! Protocol faults from a scripted fake node: things a real server cannot be
//! made to do. (The fault-injection suite covers hostile servers at length.)

mod support;

use redlock_sync::{NodeError, NodeOutcome, Redlock};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{lock_server, Action, Call, FakeNode};

const TTL: Duration = Duration::from_secs(10);

#[test]
fn a_late_ok_is_never_read_as_the_answer_to_a_later_command() {
    // The first acquisition is granted slowly, long after its deadline;
    // every later one is refused. If the late grant were taken as the
    // answer to the second acquisition, that attempt would wrongly succeed.
    // (The grant's bytes 400 ms apart, so that it ends 700 ms or more after
    // a 500 ms deadline; and the later answers, which the fake gives once
    // the grant is out, have 500 ms each on a busy machine.)
    let pause = Duration::from_millis(400);
    let sets = Arc::new(AtomicUsize::new(0));
    let counter = sets.clone();
    let fake = FakeNode::start(lock_server(move |call| match call {
        Call::Acquire { .. } if counter.fetch_add(1, Ordering::SeqCst) == 0 => {
            Action::Trickle(call.yes(), pause)
        }
        Call::Acquire { .. } => Action::Reply(call.no()),
        _ => Action::Reply(call.no()),
    }));
    let redlock = Redlock::builder()
        .nodes([fake.url()])
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap();

    let sent = Instant::now();
    let err = redlock
        .try_lock("r", TTL)
        .expect_err("the first answer is late");
    let status = err.nodes().expect("report").iter().next().unwrap().clone();
    assert!(
        matches!(
            status.outcome(),
            NodeOutcome::Failed(NodeError::TimedOut(_))
        ),
        "{err}"
    );
    // The late grant (four bytes or more) is out no sooner than three
    // pauses after the command was sent; a moment later it has arrived, on
    // a busy machine perhaps not yet (then the next command's answer waits
    // behind it, and the tag tells them apart, as the next test checks).
    std::thread::sleep((sent + pause * 4).saturating_duration_since(Instant::now()));
    for _ in 0..3 {
        assert!(
            redlock.try_lock("r", TTL).expect("an answer").is_none(),
            "a stale +OK was read as a later answer"
        );
    }
    assert_eq!(sets.load(Ordering::SeqCst), 4);
}

#[test]
fn a_silent_majority_costs_one_deadline_and_no_lock() {
    let fakes: Vec<FakeNode> = (0..3).map(|_| FakeNode::start(support::silent())).collect();
    let node_timeout = Duration::from_millis(100);
    let redlock = Redlock::builder()
        .nodes(fakes.iter().map(FakeNode::url))
        .node_timeout(node_timeout)
        .build()
        .unwrap();
    let started = Instant::now();
    let err = redlock.try_lock("r", TTL).expect_err("nobody answers");
    let took = started.elapsed();
    assert!(err.is_no_quorum(), "{err}");
    assert!(
        took >= node_timeout && took < node_timeout + Duration::from_secs(2),
        "{took:?}"
    );
}

#[test]
fn a_late_grant_arriving_after_the_next_command_is_sent_is_never_its_answer() {
    // As above, but the next attempt is made at once, before the late
    // grant arrives, so no look before sending can have read it: only the
    // tag tells the two answers apart.
    let first = Arc::new(AtomicUsize::new(0));
    let counter = first.clone();
    let fake = FakeNode::start(lock_server(move |call| match call {
        Call::Acquire { .. } if counter.fetch_add(1, Ordering::SeqCst) == 0 => {
            Action::Trickle(call.yes(), Duration::from_millis(10))
        }
        _ => Action::Reply(call.no()),
    }));
    let redlock = Redlock::builder()
        .nodes([fake.url()])
        .node_timeout(Duration::from_millis(5))
        .build()
        .unwrap();
    assert!(
        redlock.try_lock("r", TTL).is_err(),
        "the first answer is late"
    );
    for _ in 0..20 {
        if let Ok(Some(_)) = redlock.try_lock("r", TTL) {
            panic!("a late grant was taken as a later answer");
        }
    }
}

#[test]
fn a_surplus_reply_in_its_own_segment_never_grants_a_lock() {
    // The fake answers each release correctly (its reply, then the echo of
    // its tag), then 300 µs later, in a segment of its own, sends an extra
    // "+OK"; it refuses every acquisition. A refused attempt sends its
    // release, unawaited; the next attempt goes out at once, before the
    // surplus arrives, so the surplus comes first in the stream, where
    // that attempt's answer should be. Each round uses a new client: a new
    // connection's second acquisition is the first sent as SET (then ECHO).
    let after_release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = after_release.clone();
    let fake = FakeNode::start(move |args: &[Vec<u8>], _| match Call::parse(args) {
        Call::Handshake => Action::Reply(support::handshake_reply(args)),
        call @ Call::Release { .. } => {
            flag.store(true, Ordering::SeqCst);
            Action::Reply(call.yes())
        }
        call @ Call::Echo { .. } if flag.swap(false, Ordering::SeqCst) => {
            Action::ReplyThenLater(call.yes(), Duration::from_micros(300), b"+OK\r\n".to_vec())
        }
        call @ Call::Echo { .. } => Action::Reply(call.yes()),
        call => Action::Reply(call.no()),
    });
    let mut refused = 0;
    for round in 0..30 {
        let redlock = Redlock::builder()
            .nodes([fake.url()])
            .node_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        for attempt in 0..2 {
            match redlock.try_lock("r", TTL) {
                Ok(Some(_)) => {
                    panic!("round {round}, attempt {attempt}: a surplus +OK granted a lock")
                }
                Ok(None) => refused += 1,
                Err(e) => assert!(e.is_no_quorum(), "round {round}, attempt {attempt}: {e}"),
            }
        }
    }
    assert!(refused > 0, "no attempt reached the fake's refusal");
}

#[test]
fn a_failed_acquisition_is_released_on_a_master_whose_connection_broke() {
    // Master A sits behind a proxy that forwards each acquisition and then
    // cuts the connection: A sets the key, the client sees the connection
    // closed. B and C refuse (the resource is held there) 300 ms later.
    // Each failed attempt must release on A through a new connection, also
    // once A's failures in a row (nothing A answered was awaited since)
    // put it in a reconnect backoff longer than the round: from the fifth
    // attempt, 400 ms. Otherwise the key would stay until its TTL.
    let a = support::RedisServer::start();
    let proxy = support::Proxy::start(a.addr(), |args| {
        matches!(Call::parse(args), Call::Acquire { .. })
    });
    let others = support::Cluster::start(2);
    for server in &others.servers {
        server.cmd(&["SET", "r", "someone-else", "PX", "60000"]);
    }
    let mut urls = vec![proxy.url()];
    urls.extend(others.urls());
    let redlock = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for attempt in 1..=6 {
        for server in &others.servers {
            server.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]);
        }
        let result = redlock.try_lock("r", TTL);
        assert!(matches!(result, Ok(None)), "attempt {attempt}: {result:?}");
        assert_eq!(proxy.cuts(), attempt, "the proxy cut the acquisition");
        let limit = Instant::now() + Duration::from_secs(2);
        while a.get(b"r").is_some() {
            assert!(
                Instant::now() < limit,
                "attempt {attempt}: the key set on A was not released"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
