//! The reconnect backoff and the health view, tested without a server.

use super::*;

#[test]
fn doubles_after_the_first_failure_and_resets_on_success() {
    let epoch = Instant::now();
    let b = NodeState::new(epoch);
    let at = |ms| epoch + Duration::from_millis(ms);
    let refused = NodeError::Refused;
    assert!(b.may_connect(at(0)));
    b.failed(at(0), &refused);
    assert!(b.may_connect(at(0)), "first failure: reconnect at once");
    b.failed(at(0), &refused);
    assert!(!b.may_connect(at(49)) && b.may_connect(at(50)));
    b.failed(at(50), &refused);
    assert!(!b.may_connect(at(149)) && b.may_connect(at(150)));
    for _ in 0..40 {
        b.failed(at(150), &refused);
    }
    assert!(
        !b.may_connect(at(1149)) && b.may_connect(at(1150)),
        "capped"
    );
    b.answered(at(150), Duration::from_micros(100));
    assert!(b.may_connect(at(150)));
    assert!(!b.snapshot("h:1", at(150)).is_failing());

    // The first answer is kept even right after the start.
    let fresh = NodeState::new(epoch);
    fresh.answered(epoch + Duration::from_micros(10), Duration::from_micros(7));
    let health = fresh.snapshot("h:1", at(1));
    assert_eq!(health.round_trip(), Some(Duration::from_micros(7)));
}

#[test]
fn a_missed_deadline_shows_in_the_health_view_but_not_in_the_backoff() {
    let epoch = Instant::now();
    let b = NodeState::new(epoch);
    let at = |ms| epoch + Duration::from_millis(ms);
    let late = NodeError::TimedOut(crate::Phase::Reply);
    b.answered(at(0), Duration::from_micros(100));
    b.missed_deadline(at(10), &late);
    b.missed_deadline(at(20), &late);
    let health = b.snapshot("h:1", at(30));
    assert!(health.is_failing(), "{health}");
    assert_eq!(health.consecutive_failures(), 2);
    assert_eq!(
        health.last_failure(),
        Some((&late, Duration::from_millis(10)))
    );
    assert_eq!(health.reconnect_in(), Duration::ZERO);
    assert_eq!(
        health.to_string(),
        "h:1 failing (2 in a row): timed out during reply, 10ms ago"
    );
    // New connections are not delayed, and nothing is failing for good.
    assert!(b.may_connect(at(20)) && b.check(at(20)).is_ok());
    assert_eq!(b.failing_for_good(), None);

    // Its answers to the commands it missed end it.
    b.caught_up();
    assert!(!b.snapshot("h:1", at(40)).is_failing());

    // A backoff keeps naming the failure that started it, and an answer
    // ends both.
    b.failed(at(50), &NodeError::Refused);
    b.failed(at(50), &NodeError::Refused);
    b.missed_deadline(at(60), &late);
    match b.check(at(61)) {
        Err(NodeError::Backoff { cause, .. }) => assert_eq!(*cause, NodeError::Refused),
        other => panic!("{other:?}"),
    }
    let health = b.snapshot("h:1", at(61));
    assert_eq!(health.consecutive_failures(), 3);
    assert_eq!(health.last_failure().map(|(e, _)| e), Some(&late));
    b.caught_up();
    assert!(b.snapshot("h:1", at(61)).is_failing(), "still in backoff");
    b.answered(at(70), Duration::from_micros(100));
    let health = b.snapshot("h:1", at(70));
    assert!(!health.is_failing() && b.may_connect(at(70)), "{health}");
}

#[test]
fn a_node_in_backoff_reports_the_failure_that_put_it_there() {
    let epoch = Instant::now();
    let b = NodeState::new(epoch);
    let at = |ms| epoch + Duration::from_millis(ms);
    b.failed(at(0), &NodeError::Refused);
    b.failed(at(10), &NodeError::Refused);
    match b.check(at(30)) {
        Err(NodeError::Backoff { cause, ago }) => {
            assert_eq!(*cause, NodeError::Refused);
            assert_eq!(ago, Duration::from_millis(20));
        }
        other => panic!("{other:?}"),
    }
    // Being skipped does not replace the cause.
    let skipped = b.check(at(30)).unwrap_err();
    b.failed(at(40), &skipped);
    let Err(NodeError::Backoff { cause, .. }) = b.check(at(41)) else {
        panic!("not in backoff")
    };
    assert_eq!(*cause, NodeError::Refused);

    let health = b.snapshot("h:1", at(41));
    assert_eq!(health.consecutive_failures(), 3);
    assert!(health.is_failing() && health.last_answer().is_none());
    assert_eq!(
        health.to_string(),
        "h:1 failing (3 in a row): connection refused, 31ms ago"
    );
}
