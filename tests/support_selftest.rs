//! Checks the test support module itself: real servers (start, pause, kill,
//! restart, auth, clusters) and the scripted fake node.

mod support;

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{always, silent, Action, Cluster, FakeNode, OwnedReply, RedisServer};

/// Generous: these only bound a wait that normally ends at once.
const PATIENCE: Duration = Duration::from_secs(5);

fn ok() -> OwnedReply {
    OwnedReply::Simple(b"OK".to_vec())
}

fn connect(addr: std::net::SocketAddr, read_timeout: Duration) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, PATIENCE).expect("connecting to the node");
    stream
        .set_read_timeout(Some(read_timeout))
        .expect("setting a read timeout");
    stream
}

/// Reads exactly `n` bytes (within [`PATIENCE`]).
fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    stream
        .set_read_timeout(Some(PATIENCE))
        .expect("setting a read timeout");
    let mut buf = vec![0; n];
    stream.read_exact(&mut buf).expect("reading the reply");
    buf
}

/// Whether a read timed out (as opposed to returning data or EOF).
fn times_out(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    stream.read(&mut byte).is_err_and(|e| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    })
}

/// Waits until `condition` holds, panicking with `what` after [`PATIENCE`].
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn ping() -> &'static [u8] {
    b"*1\r\n$4\r\nPING\r\n"
}

#[test]
fn server_set_get_and_inspection() {
    let server = RedisServer::start();
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    assert_eq!(server.addr().port(), server.port());
    assert_eq!(server.cmd(&["PING"]), OwnedReply::Simple(b"PONG".to_vec()));
    assert_eq!(server.dbsize(), 0);

    assert_eq!(server.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(server.cmd(&["SET", "t", "x", "PX", "60000"]), ok());
    assert_eq!(server.get(b"k"), Some(b"v".to_vec()));
    assert_eq!(server.get(b"missing"), None);
    assert_eq!(server.dbsize(), 2);
    let mut keys = server.keys();
    keys.sort();
    assert_eq!(keys, vec![b"k".to_vec(), b"t".to_vec()]);
    assert_eq!(server.pttl(b"k"), -1);
    assert_eq!(server.pttl(b"missing"), -2);
    let ttl = server.pttl(b"t");
    assert!(0 < ttl && ttl <= 60_000, "pttl {ttl}");

    // Error replies are values, not failures.
    let reply = server.cmd(&["NOSUCHCOMMAND"]);
    assert!(
        matches!(&reply, OwnedReply::Error(e) if e.starts_with(b"ERR")),
        "{reply:?}"
    );
    assert!(server.log().contains("Ready to accept connections"));
}

#[test]
fn drop_kills_the_server_and_removes_its_directory() {
    let server = RedisServer::start();
    let (pid, dir): (u32, PathBuf) = (server.pid(), server.dir().to_owned());
    assert!(dir.join("redis.log").exists());
    drop(server);
    assert!(!dir.exists(), "{} still exists", dir.display());
    // Killed and reaped (a zombie would still have a /proc entry).
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists());
}

#[test]
fn pause_blocks_commands_until_the_guard_drops() {
    let server = RedisServer::start();
    assert_eq!(server.cmd(&["SET", "k", "v"]), ok());
    let mut raw = connect(server.addr(), Duration::from_millis(300));
    {
        let _paused = server.pause();
        // The kernel still accepts and buffers, but nobody answers.
        let mut late = connect(server.addr(), Duration::from_millis(300));
        late.write_all(ping()).expect("sending PING");
        assert!(times_out(&mut late), "a paused server answered");
        raw.write_all(ping()).expect("sending PING");
        assert!(times_out(&mut raw), "a paused server answered");
    }
    // Resumed: the PING sent while paused is answered now.
    assert_eq!(read_n(&mut raw, 7), b"+PONG\r\n");
    assert_eq!(server.get(b"k"), Some(b"v".to_vec()));

    // The guard also resumes the server when the test panics.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _paused = server.pause();
        panic!("test failure while paused");
    }));
    assert!(result.is_err());
    assert_eq!(server.get(b"k"), Some(b"v".to_vec()));

    // resume() without the guard.
    let guard = server.pause();
    server.resume();
    assert_eq!(server.get(b"k"), Some(b"v".to_vec()));
    drop(guard);
}

#[test]
fn kill_then_restart_keeps_the_port_and_loses_the_data() {
    let mut server = RedisServer::start();
    let (port, pid) = (server.port(), server.pid());
    assert_eq!(server.cmd(&["SET", "k", "v"]), ok());

    server.kill();
    assert!(!server.is_running());
    let refused = server.command(&[b"PING"]);
    assert!(refused.is_err(), "a killed server answered: {refused:?}");

    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), pid);
    assert_eq!(server.get(b"k"), None);
    assert_eq!(server.dbsize(), 0);

    // Restarting a running server works too.
    assert_eq!(server.cmd(&["SET", "k", "v2"]), ok());
    server.restart();
    assert_eq!(server.port(), port);
    assert_eq!(server.dbsize(), 0);
}

#[test]
fn cluster_of_three_has_distinct_ports() {
    let cluster = Cluster::start(3);
    assert_eq!(cluster.servers.len(), 3);
    let ports: HashSet<u16> = cluster.servers.iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), 3);
    let urls = cluster.urls();
    for (url, server) in urls.iter().zip(&cluster.servers) {
        assert_eq!(url, &server.url());
    }
    assert_eq!(cluster.total_keys(), 0);
    assert_eq!(cluster.servers[1].cmd(&["SET", "a", "1"]), ok());
    assert_eq!(cluster.servers[2].cmd(&["SET", "b", "1"]), ok());
    assert_eq!(cluster.total_keys(), 2);
    let logs = cluster.logs();
    for server in &cluster.servers {
        assert!(logs.contains(&format!("---- redis-server :{} log ----", server.port())));
    }
}

#[test]
fn total_keys_skips_killed_servers() {
    let mut cluster = Cluster::start_with(2, &["--maxmemory", "64mb"]);
    assert_eq!(cluster.servers[0].cmd(&["CONFIG", "GET", "maxmemory"]), {
        OwnedReply::Array(vec![
            OwnedReply::Bulk(b"maxmemory".to_vec()),
            OwnedReply::Bulk(b"67108864".to_vec()),
        ])
    });
    assert_eq!(cluster.servers[0].cmd(&["SET", "a", "1"]), ok());
    assert_eq!(cluster.servers[1].cmd(&["SET", "b", "1"]), ok());
    cluster.servers[0].kill();
    assert_eq!(cluster.total_keys(), 1);
}

#[test]
fn requirepass_with_admin_auth() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let reply = server.command(&[b"GET", b"k"]).expect("exchanging GET");
    assert!(
        matches!(&reply, OwnedReply::Error(e) if e.starts_with(b"NOAUTH")),
        "{reply:?}"
    );

    let wrong = RedisServer::start_with(&["--requirepass", "s3cret"]).with_admin_auth(&["nope"]);
    let refused = wrong
        .command(&[b"PING"])
        .expect_err("AUTH with a wrong password");
    assert!(refused.contains("AUTH refused"), "{refused}");

    let server = server.with_admin_auth(&["s3cret"]);
    assert_eq!(server.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(server.get(b"k"), Some(b"v".to_vec()));
}

#[test]
fn acl_user_with_admin_auth() {
    // The rules may be one string (split by the support module) ...
    let server = RedisServer::start_with(&["--user", "alice on >pw ~* &* +@all"])
        .with_admin_auth(&["alice", "pw"]);
    assert_eq!(
        server.cmd(&["ACL", "WHOAMI"]),
        OwnedReply::Bulk(b"alice".to_vec())
    );
    assert_eq!(server.cmd(&["SET", "k", "v"]), ok());
    // ... or word by word, as redis-server itself wants them.
    let server = RedisServer::start_with(&["--user", "bob", "on", ">pw2", "~*", "+@all"])
        .with_admin_auth(&["bob", "pw2"]);
    assert_eq!(
        server.cmd(&["ACL", "WHOAMI"]),
        OwnedReply::Bulk(b"bob".to_vec())
    );
}

#[test]
fn fake_node_answers_per_script_and_records_commands() {
    let node = FakeNode::start(|args, index| {
        if args[0] == b"PING" {
            Action::Reply(b"+PONG\r\n".to_vec())
        } else {
            Action::Reply(format!(":{index}\r\n").into_bytes())
        }
    });
    assert_eq!(
        node.url(),
        format!("redis://127.0.0.1:{}", node.addr().port())
    );

    let mut first = connect(node.addr(), PATIENCE);
    // Pipelined, and split mid-command to exercise the decoder's Partial path.
    let pipeline =
        b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n";
    first.write_all(&pipeline[..20]).expect("sending");
    first.write_all(&pipeline[20..]).expect("sending");
    assert_eq!(read_n(&mut first, 15), b"+PONG\r\n:1\r\n:2\r\n");

    let mut second = connect(node.addr(), PATIENCE);
    second
        .write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nc\r\n")
        .expect("sending");
    assert_eq!(read_n(&mut second, 4), b":0\r\n");

    assert_eq!(node.connections(), 2);
    let words = |c: &[&str]| c.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
    assert_eq!(
        node.commands(),
        vec![
            words(&["PING"]),
            words(&["GET", "a"]),
            words(&["GET", "b"]),
            words(&["GET", "c"]),
        ]
    );
    assert_eq!(node.open_connections(), 2);
    drop(first);
    drop(second);
    eventually("both connections are closed", || {
        node.open_connections() == 0
    });
}

#[test]
fn fake_node_silence_keeps_the_connection_open() {
    let node = FakeNode::start(silent());
    let mut stream = connect(node.addr(), Duration::from_millis(300));
    stream.write_all(ping()).expect("sending");
    assert!(times_out(&mut stream), "a silent node answered or closed");
    eventually("the command is recorded", || node.commands().len() == 1);
    assert_eq!(node.open_connections(), 1);
    assert!(times_out(&mut stream), "a silent node answered or closed");
    assert_eq!(node.open_connections(), 1);
}

#[test]
fn fake_node_reply_then_close_and_close() {
    let node = FakeNode::start(|_, _| Action::ReplyThenClose(b"$5\r\nhel".to_vec()));
    let mut stream = connect(node.addr(), PATIENCE);
    stream.write_all(ping()).expect("sending");
    let mut received = Vec::new();
    stream
        .read_to_end(&mut received)
        .expect("reading until the node closes");
    assert_eq!(received, b"$5\r\nhel");
    eventually("the connection is closed", || node.open_connections() == 0);

    let node = FakeNode::start(support::closing());
    let mut stream = connect(node.addr(), PATIENCE);
    stream.write_all(ping()).expect("sending");
    let mut received = Vec::new();
    // EOF, or a reset if our PING was still unread when it closed.
    let _ = stream.read_to_end(&mut received);
    assert!(received.is_empty());
    assert_eq!(node.commands().len(), 1);
}

#[test]
fn fake_node_always_and_trickle() {
    let node = FakeNode::start(always(b"+OK\r\n"));
    let mut stream = connect(node.addr(), PATIENCE);
    stream.write_all(ping()).expect("sending");
    stream.write_all(ping()).expect("sending");
    assert_eq!(read_n(&mut stream, 10), b"+OK\r\n+OK\r\n");

    let pause = Duration::from_millis(20);
    let node = FakeNode::start(move |_, _| Action::Trickle(b"+OK\r\n".to_vec(), pause));
    let mut stream = connect(node.addr(), PATIENCE);
    let started = Instant::now();
    stream.write_all(ping()).expect("sending");
    assert_eq!(read_n(&mut stream, 5), b"+OK\r\n");
    // Five bytes, four pauses between them: a lower bound, so never flaky.
    assert!(started.elapsed() >= 4 * pause, "{:?}", started.elapsed());
}

#[test]
fn fake_node_drop_is_prompt_with_blocked_connections() {
    let node = FakeNode::start(|args, _| {
        if args[0] == b"PING" {
            Action::Silence
        } else {
            Action::Trickle(b"+OK\r\n".to_vec(), Duration::from_secs(60))
        }
    });
    let mut silent = connect(node.addr(), PATIENCE);
    silent.write_all(ping()).expect("sending");
    let mut trickled = connect(node.addr(), PATIENCE);
    trickled.write_all(b"*1\r\n$3\r\nGET\r\n").expect("sending");
    assert_eq!(read_n(&mut trickled, 1), b"+");
    eventually("both commands are recorded", || node.commands().len() == 2);

    let started = Instant::now();
    drop(node);
    assert!(
        started.elapsed() < PATIENCE,
        "drop took {:?}",
        started.elapsed()
    );
    // Both connections were closed by the drop.
    let mut rest = Vec::new();
    let _ = silent.read_to_end(&mut rest);
    let _ = trickled.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
}
