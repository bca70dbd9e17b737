//! Fault 6: hostile or broken servers, played by scripted fake nodes that
//! form a majority. Every behaviour must give a typed error within the node
//! deadline: no panic, no hang, no lock, and memory that stays small.
//!
//! Memory is measured with the support module's counting allocator, which
//! tallies the bytes allocated by the calling thread (the fake nodes'
//! threads are not counted): a client that believed a header announcing
//! gigabytes would show it here.

use crate::serial;
use crate::support::alloc::{counted, CountingAllocator};
use crate::support::{handshake_reply, lock_server, silent, Action, Call, FakeNode, RedisServer};
use redlock_sync::{Error, NodeError, NodeOutcome, ProtocolError, Redlock};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Bytes allocated by this thread while running `f`.
fn allocated_during<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let (result, counts) = counted(f);
    (result, counts.bytes)
}

/// Long enough that the fakes (threads of this test process) answer the
/// set-up in time on a busy machine: with 100 ms, handshakes timed out
/// under load and hid the fault each test expects.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);
const TTL: Duration = Duration::from_secs(10);
/// Far more than the client ever needs (its largest buffer is 1 MiB per
/// connection), far less than a believed "gigabyte" header.
const MEMORY_LIMIT: u64 = 8 << 20;

/// A fake that handles the connection set-up like a server without
/// scripting (the client then sends scripts by body) and answers every
/// other command (lock commands and their `ECHO` tags) with `action`.
fn fake(action: Action) -> FakeNode {
    FakeNode::start(move |args: &[Vec<u8>], _| match Call::parse(args) {
        Call::Handshake => Action::Reply(handshake_reply(args)),
        _ => action.clone(),
    })
}

/// Two fakes and one real server: the fakes are a majority of three.
fn cluster_with(fakes: &[FakeNode; 2], real: &RedisServer) -> Redlock {
    Redlock::builder()
        .nodes([fakes[0].url(), fakes[1].url(), real.url()])
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap()
}

/// Runs three `try_lock` calls against the fake majority and checks each:
/// an error of the expected kind on the fakes, within the deadline, with
/// little memory. Returns what the fakes' nodes reported on the last call.
fn assert_rejected(name: &str, action: Action, expected: impl Fn(&NodeError) -> bool) {
    let real = RedisServer::start();
    let fakes = [fake(action.clone()), fake(action)];
    let redlock = cluster_with(&fakes, &real);
    for attempt in 0..3 {
        let started = Instant::now();
        let (result, bytes) = allocated_during(|| redlock.try_lock("hostile", TTL));
        let took = started.elapsed();
        assert!(
            took < NODE_TIMEOUT + Duration::from_secs(1),
            "{name}: call {attempt} took {took:?}"
        );
        assert!(
            bytes < MEMORY_LIMIT,
            "{name}: call {attempt} allocated {bytes} bytes"
        );
        let err = match result {
            Ok(Some(_)) => panic!("{name}: a hostile majority granted a lock"),
            Ok(None) => panic!("{name}: reported as contention"),
            Err(e) => e,
        };
        assert!(err.is_no_quorum(), "{name}: {err}");
        let report = err.nodes().expect("report");
        for status in report.iter().take(2) {
            match status.outcome() {
                NodeOutcome::Failed(e) if expected(e) => {}
                // After a failure the node may be in its reconnect backoff,
                // or (after a timeout) still owe overdue replies, in which
                // case it is not sent another acquisition.
                NodeOutcome::Failed(NodeError::Backoff { .. } | NodeError::Backlogged)
                    if attempt > 0 => {}
                other => panic!("{name}: call {attempt}: unexpected {other:?} in {err}"),
            }
        }
    }
    // The real master was released after each failed attempt.
    let deadline = Instant::now() + Duration::from_secs(2);
    while real.dbsize() != 0 {
        assert!(
            Instant::now() < deadline,
            "{name}: keys left on the real master"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn protocol(e: &NodeError) -> bool {
    matches!(e, NodeError::Protocol(_))
}

#[test]
fn garbage_bytes() {
    let _serial = serial();
    assert_rejected(
        "garbage",
        Action::Reply(b"\x00\xffHTTP/1.1 400\r\n".to_vec()),
        protocol,
    );
}

#[test]
fn a_bulk_length_of_gigabytes() {
    let _serial = serial();
    assert_rejected(
        "huge bulk",
        Action::Reply(b"$4294967296\r\n".to_vec()),
        |e| {
            matches!(
                e,
                NodeError::Protocol(ProtocolError::Malformed(
                    redlock_sync::DecodeError::BulkTooLong(_)
                ))
            )
        },
    );
}

#[test]
fn an_array_of_billions_of_elements() {
    let _serial = serial();
    assert_rejected(
        "huge array",
        Action::Reply(b"*3000000000\r\n".to_vec()),
        |e| {
            matches!(
                e,
                NodeError::Protocol(ProtocolError::Malformed(
                    redlock_sync::DecodeError::ArrayTooLong(_)
                ))
            )
        },
    );
}

#[test]
fn a_line_that_never_ends() {
    let _serial = serial();
    // Sent at once: the line limit is hit long before the deadline.
    let mut endless = b"+".to_vec();
    endless.resize(200_000, b'a');
    assert_rejected("endless line", Action::Reply(endless), |e| {
        matches!(
            e,
            NodeError::Protocol(ProtocolError::Malformed(
                redlock_sync::DecodeError::LineTooLong
            ))
        )
    });
    // Trickled: the deadline comes first.
    let slow = [b"+".as_slice(), &[b'a'; 1000]].concat();
    assert_rejected(
        "trickled line",
        Action::Trickle(slow, Duration::from_millis(5)),
        |e| matches!(e, NodeError::TimedOut(_)),
    );
}

#[test]
fn accepting_and_never_replying() {
    let _serial = serial();
    let real = RedisServer::start();
    let fakes = [FakeNode::start(silent()), FakeNode::start(silent())];
    let redlock = cluster_with(&fakes, &real);
    let started = Instant::now();
    let err = redlock.try_lock("hostile", TTL).expect_err("no quorum");
    let took = started.elapsed();
    assert!(
        took >= NODE_TIMEOUT && took < NODE_TIMEOUT + Duration::from_secs(1),
        "{took:?}"
    );
    assert!(err.is_no_quorum(), "{err}");
    assert_rejected("silence", Action::Silence, |e| {
        matches!(e, NodeError::TimedOut(_))
    });
}

#[test]
fn closing_mid_reply() {
    let _serial = serial();
    assert_rejected(
        "half a reply",
        Action::ReplyThenClose(b"$10\r\nabc".to_vec()),
        |e| matches!(e, NodeError::Closed),
    );
    assert_rejected("close", Action::Close, |e| matches!(e, NodeError::Closed));
}

#[test]
fn a_reply_of_the_wrong_type() {
    let _serial = serial();
    assert_rejected("integer to SET", Action::Reply(b":1\r\n".to_vec()), |e| {
        matches!(e, NodeError::Protocol(ProtocolError::UnexpectedReply(_)))
    });
    assert_rejected(
        "array to SET",
        Action::Reply(b"*1\r\n+OK\r\n".to_vec()),
        |e| matches!(e, NodeError::Protocol(ProtocolError::UnexpectedReply(_))),
    );
}

#[test]
fn extra_unsolicited_replies() {
    let _serial = serial();
    // "held", then an unasked-for "+OK" that must never count as a yes:
    // first in the same segment, then in a segment of its own a moment
    // later, so that it can arrive after the next command went out. The
    // surplus is caught as unsolicited, or fails the tag check of the
    // command it would be read for.
    let surplus = |e: &NodeError| {
        matches!(
            e,
            NodeError::Protocol(ProtocolError::Unsolicited | ProtocolError::UnexpectedReply(_))
        )
    };
    assert_rejected(
        "extra reply, same segment",
        Action::Reply(b"$-1\r\n+OK\r\n".to_vec()),
        surplus,
    );
    let real = RedisServer::start();
    let later = || {
        FakeNode::start(lock_server(|call| {
            Action::ReplyThenLater(call.no(), Duration::from_micros(300), b"+OK\r\n".to_vec())
        }))
    };
    let fakes = [later(), later()];
    let redlock = cluster_with(&fakes, &real);
    for attempt in 0..30 {
        match redlock.try_lock("hostile", TTL) {
            Ok(Some(_)) => panic!("attempt {attempt}: a surplus +OK granted a lock"),
            Ok(None) => {}
            Err(e) => assert!(e.is_no_quorum(), "attempt {attempt}: {e}"),
        }
    }
}

#[test]
fn a_wrong_reply_to_the_release_is_an_error_not_a_success() {
    let _serial = serial();
    let real = RedisServer::start();
    // The fakes grant the acquisition, then answer the release script with
    // "+OK" (it returns a tagged integer): unlock cannot count that as done.
    let script = || {
        lock_server(|call| match call {
            Call::Acquire { .. } => Action::Reply(call.yes()),
            _ => Action::Reply(b"+OK\r\n".to_vec()),
        })
    };
    let fakes = [FakeNode::start(script()), FakeNode::start(script())];
    let redlock = cluster_with(&fakes, &real);
    let lock = redlock
        .try_lock("hostile", TTL)
        .unwrap()
        .expect("granted by the majority");
    let err = lock.unlock().expect_err("the release was not confirmed");
    assert!(matches!(err, Error::NoQuorum(_)), "{err}");
    assert!(err.to_string().contains("unexpected reply"), "{err}");
}
