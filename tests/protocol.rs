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
    let sets = Arc::new(AtomicUsize::new(0));
    let counter = sets.clone();
    let fake = FakeNode::start(lock_server(move |call| match call {
        Call::Acquire { .. } if counter.fetch_add(1, Ordering::SeqCst) == 0 => {
            Action::Trickle(call.yes(), Duration::from_millis(40))
        }
        Call::Acquire { .. } => Action::Reply(call.no()),
        _ => Action::Reply(call.no()),
    }));
    let redlock = Redlock::builder()
        .nodes([fake.url()])
        .node_timeout(Duration::from_millis(20))
        .build()
        .unwrap();

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
    std::thread::sleep(Duration::from_millis(300)); // the late "+OK" arrives
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
