//! A native release's notice: counted listeners, sent only where it
//! deleted and someone listens, and only by the round's deadline.

use super::*;

/// How long a test looks for bytes that must not have been sent.
const NOTHING_MORE: Duration = Duration::from_millis(100);

/// The notice's `PUBLISH` of a native release on `conn` (channel `ch`,
/// notice `n`), as the server receives it.
const NOTICE: &[u8] = b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$1\r\nn\r\n";

/// `PUBSUB NUMSUB ch`'s answer: `n` subscribers.
fn listeners(n: u8) -> Vec<u8> {
    [&b"*2\r\n$2\r\nch\r\n:"[..], &[b'0' + n], b"\r\n"].concat()
}

/// A connection that releases by `DELIFEQ`, and a release with a notice,
/// tag 3, sent on it with `deadline`.
fn native_release_sent(deadline: Instant) -> (Conn, TcpStream) {
    let (mut conn, mut server) = connected_with([
        b":0\r\n",
        b":0\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
        b"-ERR invalid expire time in 'msetex' command\r\n",
    ]);
    let release = encoded(
        Command::Release {
            resource: b"res",
            value: b"val",
            notify: Some((b"ch", b"n")),
        },
        3,
    );
    conn.send(&release, ROUND, deadline, MAX_OWED, false)
        .unwrap();
    let sent = received(&mut server);
    let expected: &[u8] = b"*3\r\n$7\r\nDELIFEQ\r\n$3\r\nres\r\n$3\r\nval\r\n\
        *3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$2\r\nch\r\n*2\r\n$4\r\nECHO\r\n$1\r\n3\r\n";
    assert_eq!(sent, expected, "{}", sent.escape_ascii());
    (conn, server)
}

/// Answers the release of `native_release_sent` with `deleted` (`:1` or
/// `:0`) and `listening` subscribers (`None`: both answered already), then
/// its tag, reads it all as round 1 (the round that awaits
/// it); returns the votes and what the server received.
fn answer(
    conn: &mut Conn,
    server: &mut TcpStream,
    deleted: &[u8],
    listening: Option<u8>,
) -> (Vec<(u16, Vote)>, Vec<u8>) {
    let count = listening.map(listeners).unwrap_or_default();
    let reply = [deleted, &count, b"$1\r\n3\r\n"].concat();
    server.write_all(&reply).unwrap();
    let mut votes = Vec::new();
    wait_readable(conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
        .unwrap();
    // Nothing is left for the round's end to send.
    assert!(!conn.ledger.has_notices());
    (votes, received_within(server, NOTHING_MORE))
}

#[test]
fn a_native_release_publishes_its_notice_only_if_it_deleted_and_someone_listens() {
    // It deleted, and someone listens: the notice goes out as soon as the
    // tag confirmed the vote, and its answer is owed (and counts for
    // nothing).
    let (mut conn, mut server) = native_release_sent(Instant::now() + DEADLINE);
    server
        .write_all(&[&b":1\r\n"[..], &listeners(2)].concat())
        .unwrap();
    wait_readable(&conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(1), &mut |_, _| {}).unwrap();
    assert!(
        received_within(&mut server, NOTHING_MORE).is_empty(),
        "sent before the tag"
    );
    let (votes, sent) = answer(&mut conn, &mut server, b"", None);
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    assert_eq!(sent, NOTICE, "{}", sent.escape_ascii());
    assert_eq!((conn.owed_len(), conn.settled_tag()), (1, 3));
    assert!(
        conn.awaits_nothing(),
        "a notice's answer is awaited by nobody"
    );
    let mut votes = Vec::new();
    server.write_all(b":2\r\n").unwrap();
    read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
    assert!(votes.is_empty(), "the notice's answer is no vote");

    // The key was not ours (it expired, another holder took it): no
    // notice, whoever listens.
    let (mut conn, mut server) = native_release_sent(Instant::now() + DEADLINE);
    let (votes, sent) = answer(&mut conn, &mut server, b":0\r\n", Some(2));
    assert!(matches!(votes[..], [(0, Vote::No)]), "{votes:?}");
    assert!(
        sent.is_empty(),
        "a notice was sent: {}",
        sent.escape_ascii()
    );
    assert_eq!((conn.owed_len(), conn.ledger.tails.len()), (0, 0));

    // Nobody listens: nothing to tell.
    let (mut conn, mut server) = native_release_sent(Instant::now() + DEADLINE);
    let (votes, sent) = answer(&mut conn, &mut server, b":1\r\n", Some(0));
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    assert!(
        sent.is_empty(),
        "a notice was sent: {}",
        sent.escape_ascii()
    );
    assert_eq!((conn.owed_len(), conn.ledger.tails.len()), (0, 0));
}

#[test]
fn a_deleting_answer_read_after_its_round_publishes_only_by_the_deadline() {
    // Read by a later look (no round waits for it), before the deadline:
    // the notice goes out in the same write as the next command.
    let (mut conn, mut server) = native_release_sent(Instant::now() + DEADLINE);
    let reply = [&b":1\r\n"[..], &listeners(1), b"$1\r\n3\r\n"].concat();
    server.write_all(&reply).unwrap();
    wait_readable(&conn);
    conn.catch_up().unwrap();
    let ping = encoded(Command::Ping, 4);
    conn.send(&ping, ROUND, Instant::now() + DEADLINE, MAX_OWED, false)
        .unwrap();
    assert_eq!(
        received(&mut server),
        [NOTICE, b"*2\r\n$4\r\nPING\r\n$1\r\n4\r\n"].concat()
    );
    server.write_all(b":0\r\n$1\r\n4\r\n").unwrap();
    let mut votes = Vec::new();
    read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");

    // Read after the deadline (the session sat idle): a notice then would
    // announce a release long past; none goes out, and nothing is owed.
    let deadline = Instant::now() + Duration::from_millis(10);
    let (mut conn, mut server) = native_release_sent(deadline);
    server.write_all(&reply).unwrap();
    // The reply has arrived, and is read only once the deadline passed.
    wait_readable(&conn);
    while Instant::now() <= deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    conn.catch_up().unwrap();
    conn.send_notices(Instant::now() + DEADLINE).unwrap();
    assert!(
        received_within(&mut server, NOTHING_MORE).is_empty(),
        "a stale notice was sent"
    );
    assert_eq!((conn.owed_len(), conn.ledger.tails.len()), (0, 0));
}

/// On a cluster node, a native release counts the sharded subscribers of
/// its channel (where its waiters `SSUBSCRIBE`), and its notice is an
/// `SPUBLISH`.
#[test]
fn a_cluster_nodes_native_release_counts_and_publishes_sharded() {
    let (mut conn, mut server) = connected_to(
        [
            b":0\r\n",
            b":0\r\n",
            b"-ERR invalid expire time in 'set' command\r\n",
            b"-ERR invalid expire time in 'msetex' command\r\n",
        ],
        true,
        None,
    );
    let caps = conn.capabilities();
    assert!(caps.sharded && caps.is_cached(ScriptId::ReleaseSharded));
    let command = Command::Release {
        resource: b"res",
        value: b"val",
        notify: Some((b"ch", b"n")),
    };
    let mut release = Encoded::default();
    release.reset(&command, 3);
    release.prepare(&command, caps);
    conn.send(&release, ROUND, Instant::now() + DEADLINE, MAX_OWED, false)
        .unwrap();
    let sent = received(&mut server);
    let expected: &[u8] = b"*3\r\n$7\r\nDELIFEQ\r\n$3\r\nres\r\n$3\r\nval\r\n\
        *3\r\n$6\r\nPUBSUB\r\n$11\r\nSHARDNUMSUB\r\n$2\r\nch\r\n*2\r\n$4\r\nECHO\r\n$1\r\n3\r\n";
    assert_eq!(sent, expected, "{}", sent.escape_ascii());
    let (votes, sent) = answer(&mut conn, &mut server, b":1\r\n", Some(1));
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    let spublish: &[u8] = b"*3\r\n$8\r\nSPUBLISH\r\n$2\r\nch\r\n$1\r\nn\r\n";
    assert_eq!(sent, spublish, "{}", sent.escape_ascii());
}
