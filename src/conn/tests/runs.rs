//! A set's run (see `conn::run`) after an `ASK` redirect: an `ASKING`
//! before each of its commands, their answers read inside the run.

use super::*;
use crate::command::SetCommand;
use crate::names::Names;

/// A connection whose server has every native form, with scripts off.
fn native_only() -> (Conn, TcpStream) {
    let (mut conn, server) = connected_with([
        b":0\r\n",
        b":0\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
        b"-ERR invalid expire time in 'msetex' command\r\n",
    ]);
    conn.ledger.caps.scripts = false;
    (conn, server)
}

/// `command` with `tag`, encoded for `conn`.
fn encoded_for(conn: &Conn, command: &Command<'_>, tag: u64) -> Encoded {
    let mut encoded = Encoded::default();
    encoded.reset(command, tag);
    encoded.prepare(command, conn.capabilities());
    encoded
}

/// Sends `command` behind an `ASKING` (as a round does after `ASK`),
/// checks what the server got (`expected`), answers `replies` and returns
/// the votes.
fn asked(command: &Command<'_>, expected: &[u8], replies: &[u8]) -> Vec<(u16, Vote)> {
    let (mut conn, mut server) = native_only();
    let encoded = encoded_for(&conn, command, 5);
    let deadline = Instant::now() + DEADLINE;
    conn.enqueue_asking(deadline, MAX_OWED).unwrap();
    conn.send(&encoded, ROUND, deadline, MAX_OWED, false)
        .unwrap();
    let sent = received(&mut server);
    assert_eq!(sent, expected, "{}", sent.escape_ascii());
    server.write_all(replies).unwrap();
    let mut votes = Vec::new();
    read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
    assert_eq!(conn.settled_tag(), 5);
    votes
}

const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

#[test]
fn a_release_run_after_ask_sends_asking_before_each_command() {
    let mut names = Names::default();
    names.fill(["a", "b", "c"], |_| Ok(())).unwrap();
    let release = Command::Set(SetCommand::Release {
        keys: names.keys(),
        value: b"val",
        notify: None,
    });
    let delifeq = |key: &str| format!("*3\r\n$7\r\nDELIFEQ\r\n$1\r\n{key}\r\n$3\r\nval\r\n");
    let expected = [
        ASKING,
        delifeq("a").as_bytes(),
        ASKING,
        delifeq("b").as_bytes(),
        ASKING,
        delifeq("c").as_bytes(),
        b"*2\r\n$4\r\nECHO\r\n$1\r\n5\r\n",
    ]
    .concat();
    let replies = b"+OK\r\n:1\r\n+OK\r\n:1\r\n+OK\r\n:1\r\n$1\r\n5\r\n";
    let votes = asked(&release, &expected, replies);
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
}

#[test]
fn a_repairing_extension_run_after_ask_sends_asking_before_each_command() {
    let mut names = Names::default();
    names.fill(["a", "b"], |_| Ok(())).unwrap();
    let extend = Command::Set(SetCommand::Extend {
        keys: names.keys(),
        value: b"v",
        ttl_ms: 100,
        repair: true,
    });
    let ifeq = |key: &str| {
        format!("*7\r\n$3\r\nSET\r\n$1\r\n{key}\r\n$1\r\nv\r\n$4\r\nIFEQ\r\n$1\r\nv\r\n$2\r\nPX\r\n$3\r\n100\r\n")
    };
    let nx = |key: &str| {
        format!(
            "*6\r\n$3\r\nSET\r\n$1\r\n{key}\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n100\r\n"
        )
    };
    let expected = [
        ASKING,
        ifeq("a").as_bytes(),
        ASKING,
        nx("a").as_bytes(),
        ASKING,
        ifeq("b").as_bytes(),
        ASKING,
        nx("b").as_bytes(),
        b"*2\r\n$4\r\nECHO\r\n$1\r\n5\r\n",
    ]
    .concat();
    // a: reset (its NX does nothing); b: absent, set by the NX.
    let replies = b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n+OK\r\n$-1\r\n+OK\r\n+OK\r\n$1\r\n5\r\n";
    let votes = asked(&extend, &expected, replies);
    assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");
    // A redirect met after some commands of the run ran here is not
    // followed: the run would run them twice on the other node (a repair's
    // SET NX making a second copy of a key not yet migrated). TRYAGAIN.
    let replies =
        b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n+OK\r\n-MOVED 15495 127.0.0.1:7000\r\n+OK\r\n+OK\r\n$1\r\n5\r\n";
    let votes = asked(&extend, &expected, replies);
    assert!(
        matches!(&votes[..], [(0, Vote::Failed(NodeError::Server(e)))] if e.code() == "TRYAGAIN"),
        "{votes:?}"
    );
    // A run redirected before any of its commands ran is the redirect (the
    // round follows it: nothing ran here).
    let moved = b"-MOVED 15495 127.0.0.1:7000\r\n";
    let replies = [
        &b"+OK\r\n"[..],
        moved,
        b"+OK\r\n",
        moved,
        b"+OK\r\n",
        moved,
        b"+OK\r\n",
        moved,
        b"$1\r\n5\r\n",
    ]
    .concat();
    let votes = asked(&extend, &expected, &replies);
    assert!(
        matches!(&votes[..], [(0, Vote::Failed(NodeError::Server(e)))] if e.code() == "MOVED"),
        "{votes:?}"
    );
}

/// A notice waiting to go when a command follows an `ASK` is written
/// before the `ASKING`, which then goes right before its command: the
/// notice's `PUBLISH` would otherwise take the `ASKING`, and the command be
/// redirected again (for a single lock's command as for a set's run).
#[test]
fn a_waiting_notice_goes_ahead_of_the_asking_not_between_it_and_its_command() {
    let (mut conn, mut server) = native_only();
    let publish = b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$1\r\nn\r\n";
    let deadline = Instant::now() + DEADLINE;
    let notices = &mut conn.ledger.notices;
    notices.pending.extend_from_slice(publish);
    notices.count = 1;
    notices.deadline = Some(deadline);
    let mut names = Names::default();
    names.fill(["a"], |_| Ok(())).unwrap();
    let release = Command::Set(SetCommand::Release {
        keys: names.keys(),
        value: b"val",
        notify: None,
    });
    let encoded = encoded_for(&conn, &release, 5);
    conn.enqueue_asking(deadline, MAX_OWED).unwrap();
    conn.send(&encoded, ROUND, deadline, MAX_OWED, false)
        .unwrap();
    let sent = received(&mut server);
    let expected = [
        &publish[..],
        ASKING,
        b"*3\r\n$7\r\nDELIFEQ\r\n$1\r\na\r\n$3\r\nval\r\n",
        b"*2\r\n$4\r\nECHO\r\n$1\r\n5\r\n",
    ]
    .concat();
    assert_eq!(sent, expected, "{}", sent.escape_ascii());
}

/// Reads what has come and takes it in, delivering votes to `votes`.
fn take_in(conn: &mut Conn, votes: &mut Vec<(u16, Vote)>) {
    wait_readable(conn);
    conn.transport.read_once().unwrap();
    conn.take_replies(Some(ROUND.round), &mut |op, v| votes.push((op, v)))
        .unwrap();
}

/// Regression (issue 36, review finding 2): a set's release run refused as
/// `DELIFEQ` (a Redis 8.4 has none) was the master's failure, and its keys
/// stayed until their TTL. It goes again as `DELEX … IFEQ` per key, in the
/// same round, on the same connection (after an `ASK`, each behind its
/// `ASKING`); each key it deleted is then told on its channel.
#[test]
fn a_release_run_refused_as_delifeq_goes_again_as_delex_ifeq_per_key() {
    for asks in [false, true] {
        // DELIFEQ looked present to the handshake; DELEX is there.
        let (mut conn, mut server) = native_only();
        let (mut names, mut channels) = (Names::default(), Names::default());
        names.fill(["a", "b"], |_| Ok(())).unwrap();
        channels.fill(["ca", "cb"], |_| Ok(())).unwrap();
        let release = Command::Set(SetCommand::Release {
            keys: names.keys(),
            value: b"val",
            notify: Some((b"rN", channels.keys())),
        });
        let encoded = encoded_for(&conn, &release, 5);
        let deadline = Instant::now() + DEADLINE;
        if asks {
            conn.enqueue_asking(deadline, MAX_OWED).unwrap();
        }
        conn.send(&encoded, ROUND, deadline, MAX_OWED, false)
            .unwrap();
        let asking: &[u8] = if asks { ASKING } else { b"" };
        let echo: &[u8] = b"*2\r\n$4\r\nECHO\r\n$1\r\n5\r\n";
        let delifeq = |key: &str| format!("*3\r\n$7\r\nDELIFEQ\r\n$1\r\n{key}\r\n$3\r\nval\r\n");
        let delex =
            |key: &str| format!("*4\r\n$5\r\nDELEX\r\n$1\r\n{key}\r\n$4\r\nIFEQ\r\n$3\r\nval\r\n");
        let run = |command: &dyn Fn(&str) -> String| {
            let (a, b) = (command("a"), command("b"));
            [asking, a.as_bytes(), asking, b.as_bytes(), echo].concat()
        };
        let sent = received(&mut server);
        assert_eq!(sent, run(&delifeq), "{}", sent.escape_ascii());
        let ok: &[u8] = if asks { b"+OK\r\n" } else { b"" };
        let unknown: &[u8] = b"-ERR unknown command 'DELIFEQ'\r\n";
        let tag: &[u8] = b"$1\r\n5\r\n";
        server
            .write_all(&[ok, unknown, ok, unknown, tag].concat())
            .unwrap();
        let mut votes = Vec::new();
        take_in(&mut conn, &mut votes);
        assert!(votes.is_empty(), "{votes:?}");
        let resent = received(&mut server);
        assert_eq!(resent, run(&delex), "{}", resent.escape_ascii());
        assert_eq!(conn.settled_tag(), 4, "the release is still owed");
        // a deleted, b was not this value's.
        server
            .write_all(&[ok, b":1\r\n", ok, b":0\r\n", tag].concat())
            .unwrap();
        take_in(&mut conn, &mut votes);
        assert!(matches!(votes[..], [(0, Vote::No)]), "{votes:?}");
        let told = received(&mut server);
        assert_eq!(
            told,
            b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nca\r\n$2\r\nrN\r\n",
            "{}",
            told.escape_ascii()
        );
        server.write_all(b":0\r\n").unwrap();
        read_all(&mut conn, ROUND.round, &mut |op, v| votes.push((op, v)));
        assert_eq!(conn.settled_tag(), 5);
        assert_eq!(conn.ledger.kept(), 0, "its arguments are forgotten");
    }
}
