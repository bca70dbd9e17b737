use super::node::HandshakeStep;
use super::*;
use crate::command::Command;
use crate::command::ScriptId;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

pub(super) fn encoded(command: Command<'_>, tag: u64) -> Encoded {
    let mut encoded = Encoded::default();
    encoded.reset(&command, tag);
    encoded.prepare(&command, Capabilities::before_handshake(true, true, false));
    let echo = Capabilities {
        echo: true,
        ..Capabilities::before_handshake(true, true, false)
    };
    encoded.prepare(&command, echo);
    encoded
}

fn node(url: &str) -> Node {
    super::node::url(url, true, true, false).expect("valid URL")
}

/// What a server without native commands answers their probes.
const NO_NATIVE: [&[u8]; 4] = [
    b"-ERR unknown command 'DELIFEQ'\r\n",
    b"-ERR unknown command 'DELEX'\r\n",
    b"-ERR syntax error\r\n",
    b"-ERR unknown command 'MSETEX'\r\n",
];

/// A connection to a listener we play the server on, with the
/// handshake already answered (scripts loaded, ECHO works, no native
/// commands).
fn connected() -> (Conn, TcpStream) {
    connected_with(NO_NATIVE)
}

/// The same, with these answers to the native commands' probes.
fn connected_with(native: [&[u8]; 4]) -> (Conn, TcpStream) {
    connected_to(native, false, None)
}

/// A connection as [`connected`] makes, whose node has the replica guard.
pub(super) fn connected_guarded(guard: crate::command::ReplicaAck) -> (Conn, TcpStream) {
    connected_to(NO_NATIVE, false, Some(guard))
}

/// The same, to a cluster voter's node if `cluster`, with the replica
/// guard `guard`.
fn connected_to(
    native: [&[u8]; 4],
    cluster: bool,
    guard: Option<crate::command::ReplicaAck>,
) -> (Conn, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let mut node = super::node::url(&url, true, true, cluster).expect("valid URL");
    if let Some(guard) = guard {
        node.guard_replicas(guard);
    }
    let mut conn = Conn::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    conn.connect(&node, deadline).expect("connect started");
    let (mut server, _) = listener.accept().expect("accept");
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    wait_writable(&mut conn);
    let mut replies = Vec::new();
    for step in node.handshake_steps() {
        match step {
            HandshakeStep::Load(id) => {
                replies.extend_from_slice(b"$40\r\n");
                replies.extend_from_slice(id.script().digest);
                replies.extend_from_slice(b"\r\n");
            }
            HandshakeStep::Probe => replies.extend_from_slice(b"$1\r\n0\r\n"),
            HandshakeStep::Rights(_) => replies
                .extend_from_slice(b"-ERR Number of keys can't be greater than number of args\r\n"),
            HandshakeStep::Native(form) => replies.extend_from_slice(native[*form as usize]),
            HandshakeStep::Identity(_) if cluster => {
                let info = [&b"redis_mode:cluster\r\n"[..], MASTER_INFO].concat();
                replies.extend_from_slice(&bulk(&info))
            }
            HandshakeStep::Identity(_) => replies.extend_from_slice(&bulk(MASTER_INFO)),
            _ => replies.extend_from_slice(b"+OK\r\n"),
        }
    }
    server.write_all(&replies).unwrap();
    read_all(&mut conn, 0, &mut |_, _| {});
    received(&mut server); // the handshake
    assert_eq!(conn.owed_len(), 0);
    let release = conn.ledger.caps.script_for(ScriptId::Release);
    assert!(conn.ledger.caps.echo && conn.ledger.caps.is_cached(release));
    // The server's run id, once.
    assert!(conn.take_identity().is_some());
    assert_eq!(conn.take_identity(), None);
    (conn, server)
}

/// `INFO server` and `INFO replication` of a standalone master, in one
/// text (each probe reads the fields it needs).
const MASTER_INFO: &[u8] =
    b"# Server\r\nredis_mode:standalone\r\nrun_id:1552701f45bc89930404d889ced11b58115477c6\r\n# Replication\r\nrole:master\r\n";

fn bulk(text: &[u8]) -> Vec<u8> {
    let mut reply = format!("${}\r\n", text.len()).into_bytes();
    reply.extend_from_slice(text);
    reply.extend_from_slice(b"\r\n");
    reply
}

fn wait_writable(conn: &mut Conn) {
    let limit = Instant::now() + Duration::from_secs(5);
    while conn.transport.is_connecting() {
        assert!(Instant::now() < limit);
        let _ = conn.on_writable();
        std::thread::sleep(Duration::from_millis(1));
    }
    conn.on_writable().unwrap();
}

/// Reads until nothing more is owed for `round` or 5 s pass.
pub(super) fn read_all(conn: &mut Conn, round: u64, deliver: &mut impl FnMut(u16, Vote)) {
    let limit = Instant::now() + Duration::from_secs(5);
    while conn.owed_len() > 0 {
        assert!(Instant::now() < limit, "still owed: {conn:?}");
        conn.transport.read_once().expect("read");
        conn.take_replies(Some(round), deliver)
            .expect("replies fit");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the client sent: waits (5 s at most) for its first bytes, then
/// takes what follows them until 20 ms pass with nothing more. (A fixed
/// pause before one read took what had arrived by then, which on a busy
/// machine could be nothing yet.)
pub(super) fn received(server: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = vec![0; 65536];
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let n = server.read(&mut chunk).expect("the client's bytes");
    buf.extend_from_slice(&chunk[..n]);
    server
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    while let Ok(n @ 1..) = server.read(&mut chunk) {
        buf.extend_from_slice(&chunk[..n]);
    }
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    buf
}

/// What the client sent within `wait`, possibly nothing: for a test that
/// checks nothing was sent (the client writes before the call that sends
/// returns, so what it sent is already there to read).
pub(super) fn received_within(server: &mut TcpStream, wait: Duration) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = vec![0; 65536];
    server.set_read_timeout(Some(wait)).unwrap();
    while let Ok(n @ 1..) = server.read(&mut chunk) {
        buf.extend_from_slice(&chunk[..n]);
    }
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    buf
}

/// Waits (5 s at most) until the client's socket has something to read:
/// what the test wrote as the server has arrived. (A fixed 20 ms pause
/// stood for this; a busy machine can take longer to deliver.)
fn wait_readable(conn: &Conn) {
    let mut set = crate::os::PollSet::default();
    let slot = set.add(conn.raw_fd().expect("an open connection"), true, false);
    let limit = Instant::now() + Duration::from_secs(5);
    loop {
        set.wait(Duration::from_millis(100)).expect("poll");
        if set.ready(slot).readable {
            return;
        }
        assert!(Instant::now() < limit, "nothing to read after 5 s");
    }
}

pub(super) const DEADLINE: Duration = Duration::from_secs(5);
pub(super) const ROUND: Purpose = Purpose { round: 1, op: 0 };

#[test]
fn debug_output_never_shows_the_handshake_or_values() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "redis://alice:hunter2@{}",
        listener.local_addr().expect("addr")
    );
    let mut conn = Conn::new();
    let deadline = Instant::now() + DEADLINE;
    conn.connect(&node(&url), deadline)
        .expect("connect started");
    let release = Command::Release {
        resource: b"r",
        value: b"secret-value",
        notify: None,
    };
    let _ = conn.send(&encoded(release, 1), ROUND, deadline, MAX_OWED, false);
    let shown = format!("{conn:?}");
    for secret in ["hunter2", "alice", "secret-value"] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn an_acquisition_counts_only_once_its_tag_is_back() {
    let (mut conn, mut server) = connected();
    let acquire = Command::Acquire {
        resource: b"r",
        value: b"v",
        ttl_ms: 1000,
    };
    let deadline = Instant::now() + DEADLINE;
    conn.send(&encoded(acquire, 7), ROUND, deadline, MAX_OWED, false)
        .unwrap();
    assert!(received(&mut server).ends_with(b"$4\r\nECHO\r\n$1\r\n7\r\n"));
    // The SET's answer alone is not a vote.
    server.write_all(b"+OK\r\n").unwrap();
    let mut votes = Vec::new();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
        .unwrap();
    assert!(votes.is_empty());
    server.write_all(b"$1\r\n7\r\n").unwrap();
    read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    assert_eq!(conn.settled_tag(), 7);
}

/// An inspection that reads the holder label: the `GETRANGE`'s label
/// joins the `PTTL`'s answer, which counts once the tag is back; an error
/// in its place (a key that is no string, an ACL) leaves the label unknown
/// and the `PTTL` counted.
#[test]
fn an_inspections_label_joins_its_pttl_and_an_error_leaves_it_unknown() {
    let (mut conn, mut server) = connected();
    let inspect = Command::Inspect {
        resource: b"r",
        holder: true,
    };
    let deadline = Instant::now() + DEADLINE;
    let mut votes = Vec::new();
    for (tag, getrange, label) in [
        (3, &b"$6\r\n|web-3\r\n"[..], Some("web-3")),
        (4, b"-WRONGTYPE Operation against a key\r\n", None),
    ] {
        conn.send(&encoded(inspect, tag), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        assert!(received(&mut server).ends_with(
            format!("$8\r\nGETRANGE\r\n$1\r\nr\r\n$2\r\n40\r\n$3\r\n105\r\n*2\r\n$4\r\nPING\r\n${}\r\n{tag}\r\n", tag.to_string().len()).as_bytes()
        ));
        server.write_all(b":9000\r\n").unwrap();
        server.write_all(getrange).unwrap();
        server.write_all(&bulk(tag.to_string().as_bytes())).unwrap();
        votes.clear();
        read_all(&mut conn, 1, &mut |_, v| votes.push(v));
        let [Vote::Pttl { ms: 9000, holder }] = &votes[..] else {
            panic!("{votes:?}");
        };
        assert_eq!(holder.as_ref().map(|l| l.as_str()), label);
    }
}

#[test]
fn a_surplus_reply_before_the_answer_fails_the_tag_check() {
    let (mut conn, mut server) = connected();
    let acquire = Command::Acquire {
        resource: b"r",
        value: b"v",
        ttl_ms: 1000,
    };
    conn.send(
        &encoded(acquire, 8),
        ROUND,
        Instant::now() + DEADLINE,
        MAX_OWED,
        false,
    )
    .unwrap();
    // A surplus "+OK" arrives first, then the real "held" and its tag.
    server.write_all(b"+OK\r\n$-1\r\n$1\r\n8\r\n").unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    let mut votes = Vec::new();
    let result = conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)));
    assert!(
        matches!(
            result,
            Err(NodeError::Protocol(ProtocolError::UnexpectedReply(_)))
        ),
        "{result:?}"
    );
    assert!(votes.is_empty(), "{votes:?}");
}

#[test]
fn noscript_is_answered_with_eval_even_when_nobody_waits() {
    let (mut conn, mut server) = connected();
    let release = Command::Release {
        resource: b"res",
        value: b"val",
        notify: None,
    };
    // Round 1 sends the release; nobody waits for round 1 any more.
    conn.send(
        &encoded(release, 3),
        ROUND,
        Instant::now() + DEADLINE,
        MAX_OWED,
        false,
    )
    .unwrap();
    let first = received(&mut server);
    assert!(
        first.starts_with(b"*5\r\n$7\r\nEVALSHA\r\n"),
        "{}",
        first.escape_ascii()
    );
    assert!(first.ends_with(b"*2\r\n$4\r\nECHO\r\n$1\r\n3\r\n"));
    server
        .write_all(b"-NOSCRIPT No matching script.\r\n$1\r\n3\r\n")
        .unwrap();
    wait_readable(&conn);
    conn.catch_up().unwrap();
    let resent = received(&mut server);
    let expected = {
        let mut out = Vec::new();
        let release = encoded(release, 3);
        release.encode_script_call(ScriptId::Release, false, &mut out);
        out.extend_from_slice(release.echo());
        out
    };
    assert_eq!(resent, expected, "{}", resent.escape_ascii());
    assert_eq!(conn.owed_len(), 2);
    assert_eq!(conn.settled_tag(), 2, "not settled until EVAL answers");
    server.write_all(b":1\r\n$1\r\n3\r\n").unwrap();
    wait_readable(&conn);
    conn.catch_up().unwrap();
    assert_eq!((conn.owed_len(), conn.settled_tag()), (0, 3));
}

#[test]
fn a_resent_command_keeps_later_ones_from_counting_as_settled() {
    // A release re-sent after NOSCRIPT goes behind a later command:
    // that command's answer must not make the release count as settled.
    let (mut conn, mut server) = connected();
    let release = Command::Release {
        resource: b"res",
        value: b"val",
        notify: None,
    };
    let acquire = Command::Acquire {
        resource: b"other",
        value: b"val",
        ttl_ms: 1000,
    };
    let deadline = Instant::now() + DEADLINE;
    conn.send(&encoded(release, 3), ROUND, deadline, MAX_OWED, false)
        .unwrap();
    conn.send(&encoded(acquire, 4), ROUND, deadline, MAX_OWED, false)
        .unwrap();
    received(&mut server);
    // NOSCRIPT and its echo, then the acquisition's answer and echo.
    server
        .write_all(b"-NOSCRIPT x\r\n$1\r\n3\r\n+OK\r\n$1\r\n4\r\n")
        .unwrap();
    wait_readable(&conn);
    conn.catch_up().unwrap();
    assert_eq!(
        conn.settled_tag(),
        2,
        "the re-sent release (3) is still owed"
    );
    server.write_all(b":1\r\n$1\r\n3\r\n").unwrap();
    wait_readable(&conn);
    conn.catch_up().unwrap();
    assert_eq!(conn.settled_tag(), 4);
}

#[test]
fn tls_records_are_told_from_resp() {
    // An alert and a handshake record, TLS 1.0 to 1.3 headers.
    assert!(looks_like_tls(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]));
    assert!(looks_like_tls(&[0x16, 0x03, 0x03, 0x00]));
    for resp in [
        &b"+OK\r\n"[..],
        b"-ERR x\r\n",
        b"$1\r\n",
        b"\x16",
        b"\x16\x03",
    ] {
        assert!(!looks_like_tls(resp), "{}", resp.escape_ascii());
    }
}

#[test]
fn a_failed_handshake_ends_the_connection_without_echoing_the_password() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://:hunter2@{}", listener.local_addr().unwrap());
    let mut conn = Conn::new();
    conn.connect(&node(&url), Instant::now() + DEADLINE)
        .unwrap();
    let (mut server, _) = listener.accept().unwrap();
    wait_writable(&mut conn);
    server
        .write_all(b"-ERR unknown command 'AUTH', with args beginning with: 'hunter2' \r\n")
        .unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    let err = conn
        .take_replies(None, &mut |_, _| {})
        .expect_err("handshake refused");
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, NodeError::Handshake(_)), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(err.breaks_connection());
    // The refusal was consumed: nothing is judged twice.
    assert!(conn.transport.unread().is_empty());
}

#[test]
fn a_refused_native_release_goes_in_its_next_form_on_the_same_connection() {
    // The handshake found DELIFEQ and DELEX; the server then refuses both
    // (a downgrade behind a proxy, say): the release goes as DELEX, then
    // as the script, each behind the last, and votes once.
    let (mut conn, mut server) = connected_with([
        b":0\r\n",
        b":0\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
        b"-ERR invalid expire time in 'msetex' command\r\n",
    ]);
    let release = Command::Release {
        resource: b"res",
        value: b"val",
        notify: Some((b"ch", b"n")),
    };
    let deadline = Instant::now() + DEADLINE;
    // Encoded for a connection whose native record is not known yet: the
    // DELIFEQ form, as for this one.
    let release = encoded(release, 3);
    conn.send(&release, ROUND, deadline, MAX_OWED, false)
        .unwrap();
    let first = received(&mut server);
    // No notice yet: it goes out once the release deleted.
    let publish_echo: &[u8] =
        b"*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$2\r\nch\r\n*2\r\n$4\r\nECHO\r\n$1\r\n3\r\n";
    assert_eq!(
        first,
        [
            &b"*3\r\n$7\r\nDELIFEQ\r\n$3\r\nres\r\n$3\r\nval\r\n"[..],
            publish_echo
        ]
        .concat(),
        "{}",
        first.escape_ascii()
    );
    let mut votes = Vec::new();
    server
        .write_all(b"-ERR unknown command 'DELIFEQ'\r\n*2\r\n$2\r\nch\r\n:1\r\n$1\r\n3\r\n")
        .unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
        .unwrap();
    let second = received(&mut server);
    assert_eq!(
        second,
        [
            &b"*4\r\n$5\r\nDELEX\r\n$3\r\nres\r\n$4\r\nIFEQ\r\n$3\r\nval\r\n"[..],
            publish_echo
        ]
        .concat(),
        "{}",
        second.escape_ascii()
    );
    assert!(votes.is_empty(), "{votes:?}");
    assert_eq!(conn.settled_tag(), 2, "the release is still owed");
    server
        .write_all(b"-ERR unknown command 'DELEX'\r\n*2\r\n$2\r\nch\r\n:1\r\n$1\r\n3\r\n")
        .unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
        .unwrap();
    let third = received(&mut server);
    let expected = {
        let mut out = Vec::new();
        release.encode_script_call(ScriptId::Release, false, &mut out);
        out.extend_from_slice(release.echo());
        out
    };
    assert_eq!(third, expected, "{}", third.escape_ascii());
    server.write_all(b":1\r\n$1\r\n3\r\n").unwrap();
    read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    assert_eq!(conn.settled_tag(), 3);
    // Both native releases are marked absent on this connection.
    assert_eq!(conn.capabilities().native.release(), None);
}

#[test]
fn a_replica_ends_its_connection_before_the_command_behind_the_handshake_counts() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let node = node(&format!("redis://{}", listener.local_addr().unwrap()));
    let mut conn = Conn::new();
    conn.connect(&node, Instant::now() + DEADLINE).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    wait_writable(&mut conn);
    let acquire = Command::Acquire {
        resource: b"res",
        value: b"val",
        ttl_ms: 1000,
    };
    conn.send(
        &encoded(acquire, 1),
        ROUND,
        Instant::now() + DEADLINE,
        MAX_OWED,
        false,
    )
    .unwrap();
    // The identity probes are the handshake's first answers.
    let mut replies = bulk(MASTER_INFO.split(|&b| b == b'#').nth(1).unwrap());
    replies.extend(bulk(
        b"# Replication\r\nrole:slave\r\nmaster_host:10.1.2.3\r\nmaster_port:6390\r\n",
    ));
    server.write_all(&replies).unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    let mut votes = 0;
    let err = conn
        .take_replies(Some(ROUND.round), &mut |_, _| votes += 1)
        .expect_err("a replica is no voter");
    assert_eq!(
        err,
        NodeError::NotAVoter(crate::NotAVoter::Replica {
            master: "10.1.2.3:6390".into()
        })
    );
    assert!(err.is_permanent() && err.breaks_connection());
    assert_eq!(votes, 0);
    // Discarded, as a round does with a connection that failed: the run
    // id its first probe told is gone with it, never compared.
    conn.discard();
    assert_eq!(conn.take_identity(), None);
}

mod notices;
mod runs;
