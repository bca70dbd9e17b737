use super::*;

#[test]
fn durations_are_shown_rounded() {
    let shown = |d: Duration| Rounded(d).to_string();
    assert_eq!(shown(Duration::from_nanos(1_723_052_501)), "1.723s");
    assert_eq!(shown(Duration::from_nanos(6_119_659_999_999)), "6119.66s");
    assert_eq!(shown(Duration::from_secs(10)), "10s");
    assert_eq!(shown(Duration::from_millis(1_005)), "1.005s");
    assert_eq!(shown(Duration::from_millis(1_050)), "1.05s");
    assert_eq!(shown(Duration::from_nanos(999_999_600)), "1s");
    assert_eq!(shown(Duration::from_micros(999_999_600)), "1000s");
    assert_eq!(shown(Duration::from_micros(999_400)), "999.4ms");
    assert_eq!(shown(Duration::from_micros(723_449)), "723.4ms");
    assert_eq!(shown(Duration::from_millis(45)), "45ms");
    assert_eq!(shown(Duration::from_micros(2_500)), "2.5ms");
    assert_eq!(shown(Duration::from_micros(960)), "1ms");
    assert_eq!(shown(Duration::from_nanos(310_400)), "310µs");
    assert_eq!(shown(Duration::from_nanos(500)), "1µs");
    assert_eq!(shown(Duration::from_nanos(499)), "499ns");
    assert_eq!(shown(Duration::ZERO), "0s");
    assert_eq!(shown(Duration::MAX), "18446744073709551616s");
    let expired = Error::Expired {
        overrun: Duration::from_nanos(1_723_052_501),
        last_extension: None,
    };
    assert_eq!(expired.to_string(), "lock expired 1.723s before the call");
    let renewal_failed = Error::Expired {
        overrun: Duration::from_millis(12),
        last_extension: Some(NodeReport::new(vec![
            status("10.0.0.1:6379", NodeOutcome::Agreed),
            status(
                "10.0.0.2:6379",
                NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
            ),
            status(
                "10.0.0.3:6379",
                NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
            ),
        ])),
    };
    assert_eq!(
        renewal_failed.to_string(),
        "lock expired 12ms ago, its last extension not confirmed by a quorum in time: \
         1 of 3 masters agreed, 2 failed; 10.0.0.2:6379: timed out during reply; \
         10.0.0.3:6379: timed out during reply; a master that times out is down, unreachable or overloaded; if this client's \
         host is busy (many threads on few cores), raise Builder::node_timeout"
    );
    assert!(renewal_failed.is_lock_lost() && renewal_failed.is_timeout());
    let slow = Error::TooSlow {
        elapsed: Duration::from_nanos(10_412_345),
        ttl: Duration::from_millis(10),
    };
    assert_eq!(
        slow.to_string(),
        "too slow: the round took 10.4ms of a 10ms TTL, leaving no validity"
    );
    let queued = Error::QueueTimeout {
        waited: Duration::from_nanos(100_412_345),
        ttl: Duration::from_secs(10),
    };
    assert_eq!(
        queued.to_string(),
        "not sent: waited 100.4ms in the group commit's queue, longer than the round budget of its 10s TTL"
    );
    assert!(queued.is_retryable() && !queued.is_too_slow());
    let skipped = NodeError::Backoff {
        cause: Box::new(NodeError::Refused),
        ago: Duration::from_nanos(31_016_201),
    };
    assert_eq!(
        skipped.to_string(),
        "not contacted, reconnecting after a failure 31ms ago: connection refused"
    );
}

fn status(node: &str, outcome: NodeOutcome) -> NodeStatus {
    NodeStatus {
        node: node.into(),
        outcome,
    }
}

#[test]
fn report_display_names_failed_nodes() {
    let report = NodeReport::new(vec![
        status("10.0.0.1:6379", NodeOutcome::Agreed),
        status(
            "10.0.0.2:6379",
            NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
        ),
        status(
            "10.0.0.3:6379",
            NodeOutcome::Failed(NodeError::Handshake(ServerError::from_line(
                b"WRONGPASS invalid username-password pair",
            ))),
        ),
    ]);
    assert_eq!(
        report.to_string(),
        "1 of 3 masters agreed, 2 failed; 10.0.0.2:6379: timed out during reply; \
         10.0.0.3:6379: connection set-up refused: WRONGPASS invalid username-password pair; \
         a master that times out is down, unreachable or overloaded; if this client's \
         host is busy (many threads on few cores), raise Builder::node_timeout"
    );
    let error = Error::NoQuorum(report);
    assert!(error.is_no_quorum() && !error.is_contention());
    assert!(error.has_server_error(ServerErrorKind::WrongPass));
    assert!(error.is_auth_failure() && error.is_timeout());
    assert!(!error.has_server_error(ServerErrorKind::NoAuth));
    // One of three is down for good: the other two can still make a
    // quorum once the slow one answers.
    assert!(error.is_retryable());
}

#[test]
fn permanent_failures_that_prevent_a_quorum_are_not_retryable() {
    let wrongpass = || {
        NodeOutcome::Failed(NodeError::Handshake(ServerError::from_line(
            b"WRONGPASS invalid username-password pair",
        )))
    };
    let in_backoff = NodeOutcome::Failed(NodeError::Backoff {
        cause: Box::new(NodeError::Handshake(ServerError::from_line(b"WRONGPASS x"))),
        ago: Duration::from_millis(3),
    });
    let error = Error::NoQuorum(NodeReport::new(vec![
        status("a:1", wrongpass()),
        status("b:1", in_backoff),
        status("c:1", NodeOutcome::Agreed),
    ]));
    assert!(!error.is_retryable(), "{error}");
    assert!(error.is_auth_failure(), "seen through the backoff");
    assert!(error.to_string().contains("WRONGPASS"), "{error}");
}

#[test]
fn messages_name_the_limit_and_do_not_repeat_themselves() {
    let error = Error::from(ConfigError::NoNodes);
    assert!(std::error::Error::source(&error).is_none());
    assert_eq!(error.to_string().matches("no nodes given").count(), 1);
    let shown = ConfigError::TtlTooShort(Duration::from_micros(500)).to_string();
    assert!(shown.contains("at least 3ms"), "{shown}");
    let shown = ConfigError::InvalidNodeTimeout(Duration::ZERO).to_string();
    assert!(shown.contains("at most 60s"), "{shown}");
    let emfile = IoError::from(&io::Error::from_raw_os_error(libc::EMFILE));
    let shown = NodeError::Io(emfile).to_string();
    assert!(shown.contains("Too many open files"), "{shown}");
}

#[test]
fn a_refused_auth_never_quotes_its_arguments() {
    let line = b"ERR unknown command 'AUTH', with args beginning with: 'hunter2' ";
    let error = ServerError::from_line_redacted(line);
    assert_eq!(error.code(), "ERR");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    let plain = ServerError::from_line_redacted(b"WRONGPASS invalid username-password pair");
    assert_eq!(plain.message(), "invalid username-password pair");
}

/// The words of a report are plain, and each kind of failure that can be
/// acted on ends it with what to do, once however many masters show it.
#[test]
fn a_report_says_plainly_what_happened_and_what_to_do() {
    let backoff = NodeError::Backoff {
        cause: Box::new(NodeError::Refused),
        ago: Duration::from_millis(5),
    };
    let report = NodeReport::new(vec![
        status("a:1", NodeOutcome::Agreed),
        status("b:1", NodeOutcome::Pending),
        status("c:1", NodeOutcome::NotSent),
        status("d:1", NodeOutcome::Failed(NodeError::Refused)),
        status("e:1", NodeOutcome::Failed(backoff)),
        status("f:1", NodeOutcome::Failed(NodeError::Backlogged)),
    ]);
    let shown = report.to_string();
    for jargon in [
        "not awaited",
        "not asked",
        "earlier commands on the connection",
    ] {
        assert!(!shown.contains(jargon), "{jargon:?} in {shown}");
    }
    for plain in [
        "1 of 6 masters agreed, 3 failed, 1 not waited for (the outcome was already known), \
         1 left out (still busy with earlier commands, or never sent the key)",
        "f:1: skipped: this master was still busy with our earlier commands, and the others \
         decided without it",
        "a master skipped as busy is slow or stalled: check its load and latency",
    ] {
        assert!(shown.contains(plain), "{plain:?} not in {shown}");
    }
    let refused_advice = "where the connection is refused, no server listens: start it, or fix \
                          the URL's host or port";
    assert_eq!(shown.matches(refused_advice).count(), 1, "{shown}");
    assert!(shown.ends_with("check its load and latency"), "{shown}");
}
