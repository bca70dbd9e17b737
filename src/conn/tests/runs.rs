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
    // A redirect in place of a command's answer is the master's answer.
    let replies =
        b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n+OK\r\n-MOVED 15495 127.0.0.1:7000\r\n+OK\r\n+OK\r\n$1\r\n5\r\n";
    let votes = asked(&extend, &expected, replies);
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
