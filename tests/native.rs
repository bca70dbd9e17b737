//! Native compare-and-delete and compare-and-set (`DELIFEQ`, `DELEX …
//! IFEQ`, `SET … IFEQ`): used per master where the server has them, the
//! scripts elsewhere, and only them with `Builder::allow_scripts(false)`.
//!
//! Valkey 9.1 runs as a real server (`REDLOCK_TEST_NATIVE_SERVER`, which CI
//! sets; the tests that need it say so and stop without it). Redis 8.4,
//! which has no binary that installs here, and a master that refuses a
//! form its handshake found, are scripted fake nodes that record what they
//! receive.

mod support;

use redlock_sync::{
    Builder, CannotRelease, CommandForm, ConfigError, Error, NodeError, NodeOutcome, Redlock,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::resp::{encode_command, parse};
use support::{
    handshake_reply, native_server_binary, Action, Call, Cluster, FakeNode, OwnedReply, RedisServer,
};

const TTL: Duration = Duration::from_secs(10);

/// A builder whose rounds give each master 1 s: the default node timeout
/// (50 ms) is what a loaded machine can miss (seen here: a handshake timed
/// out, and a release), and these tests are about which commands go out.
fn patient() -> Builder {
    Redlock::builder().node_timeout(Duration::from_secs(1))
}

/// An ACL user that may do everything but run scripts.
const NO_SCRIPTS: &str = "locker on >pw ~* &* +@all -@scripting";

/// Calls of the script commands on `server`.
fn script_calls(server: &RedisServer) -> u64 {
    server.calls_of("evalsha") + server.calls_of("eval")
}

/// Error replies `server` has sent since it started (`INFO stats`).
fn error_replies(server: &RedisServer) -> u64 {
    let support::OwnedReply::Bulk(info) = server.cmd(&["INFO", "stats"]) else {
        panic!("INFO stats: not a bulk string")
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|line| line.strip_prefix("total_error_replies:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_error_replies in INFO stats")
}

/// Waits (bounded) until every one of `servers` has a subscriber on
/// `resource`'s release channel: a waiter for it listens there, and a
/// release from then on wakes it.
fn wait_until_listening(servers: &[RedisServer], resource: &str) {
    let channel = support::release_channel(resource);
    let limit = Instant::now() + Duration::from_secs(10);
    for server in servers {
        while !matches!(
            server.cmd(&["PUBSUB", "NUMSUB", &channel]),
            support::OwnedReply::Array(items)
                if matches!(items.get(1), Some(support::OwnedReply::Integer(n)) if *n > 0)
        ) {
            assert!(Instant::now() < limit, "no subscriber after 10 s");
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Whether `server` has `DELIFEQ`.
fn has_delifeq(server: &RedisServer) -> bool {
    !matches!(
        server.command(&[b"DELIFEQ", b"k", b"v"]),
        Err(_) | Ok(support::OwnedReply::Error(_))
    )
}

#[test]
fn valkey_9_releases_and_extends_natively_and_says_so() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = Cluster::start_binary(&valkey, 3, &[]);
    let redlock = patient().nodes(cluster.urls()).build().unwrap();
    let mut lock = redlock.lock("native", TTL).expect("locked");
    let scripts_before: Vec<u64> = cluster.servers.iter().map(script_calls).collect();
    let deletes_before: Vec<u64> = cluster
        .servers
        .iter()
        .map(|s| s.calls_of("delifeq"))
        .collect();
    lock.extend(TTL).expect("extended");
    lock.unlock().expect("released");
    for (i, server) in cluster.servers.iter().enumerate() {
        assert_eq!(
            script_calls(server),
            scripts_before[i],
            "no script for the extension and the release"
        );
        assert_eq!(server.calls_of("delifeq"), deletes_before[i] + 1);
        assert_eq!(server.dbsize(), 0);
    }
    for health in redlock.health() {
        assert_eq!(
            health.release_form(),
            Some(CommandForm::DelIfEq),
            "{health}"
        );
        assert_eq!(
            health.extension_form(),
            Some(CommandForm::SetIfEq),
            "{health}"
        );
        assert!(
            health
                .to_string()
                .ends_with("; releases by DELIFEQ, extends by SET … IFEQ"),
            "{health}"
        );
    }
}

#[test]
fn without_native_commands_the_scripts_run_with_no_extra_round() {
    let server = RedisServer::start();
    if has_delifeq(&server) {
        println!("skipped: the test server has DELIFEQ (this test is for servers without)");
        return;
    }
    let redlock = patient().nodes([server.url()]).build().unwrap();
    // The first pair opens the connection (its handshake's probes answer
    // with errors); the second must add none: no native form is tried.
    redlock.lock("r", TTL).unwrap().unlock().unwrap();
    let (errors, evalsha) = (error_replies(&server), server.calls_of("evalsha"));
    let mut lock = redlock.lock("r", TTL).unwrap();
    lock.extend(TTL).unwrap();
    lock.unlock().unwrap();
    assert_eq!(error_replies(&server), errors, "a refused command was sent");
    // The release by script; the extension too, but where SET … IFEQ
    // works (Valkey 8.1).
    let extension = server_set_ifeq(&server);
    let scripts = 1 + u64::from(extension == Some(CommandForm::Script));
    assert_eq!(server.calls_of("evalsha"), evalsha + scripts);
    let health = &redlock.health()[0];
    assert_eq!(health.release_form(), Some(CommandForm::Script), "{health}");
    assert_eq!(
        health.extension_form(),
        server_set_ifeq(&server),
        "{health}"
    );
}

/// How a server extends: `SET … IFEQ` on Valkey 8.1+, else the script.
fn server_set_ifeq(server: &RedisServer) -> Option<CommandForm> {
    let reply = server.command(&[b"SET", b"redlock-test:x", b"v", b"IFEQ", b"v", b"PX", b"0"]);
    match reply {
        Ok(support::OwnedReply::Error(e)) if e.starts_with(b"ERR syntax") => {
            Some(CommandForm::Script)
        }
        _ => Some(CommandForm::SetIfEq),
    }
}

#[test]
fn without_scripts_an_acl_user_without_scripting_rights_locks_extends_releases_and_waits() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = Cluster::start_binary(&valkey, 3, &["--user", NO_SCRIPTS]);
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", s.port()))
        .collect();
    let client = || {
        patient()
            .nodes(urls.clone())
            .allow_scripts(false)
            // Only a release notice can wake the waiter in time.
            .retry_delay(Duration::from_secs(30))
            .retry_jitter(Duration::ZERO)
            .build()
            .unwrap()
    };
    let holder = client();
    assert!(!holder.allows_scripts());
    // The first call on new connections: held back until their
    // handshakes answer, then taken.
    let mut lock = holder.try_lock("acl", TTL).unwrap().expect("free");
    lock.extend(TTL).expect("extended");
    let waiter = client();
    let released = Arc::new(Mutex::new(None::<Instant>));
    let waiting = {
        let released = Arc::clone(&released);
        thread::spawn(move || {
            let lock = waiter
                .try_lock_for("acl", TTL, Duration::from_secs(20))
                .expect("no error")
                .expect("taken once released");
            let gap = released.lock().unwrap().expect("released").elapsed();
            lock.unlock().expect("released");
            gap
        })
    };
    // The waiter listens (a fixed pause could end first on a busy machine,
    // and the release then test nothing of the notice).
    wait_until_listening(&cluster.servers, "acl");
    *released.lock().unwrap() = Some(Instant::now());
    lock.unlock().expect("released");
    let gap = waiting.join().unwrap();
    assert!(
        gap < Duration::from_secs(5),
        "woken {gap:?} after the release"
    );
    for server in &cluster.servers {
        assert_eq!(script_calls(server), 0, "a script was sent");
        assert_eq!(server.calls_of("script|load"), 0);
        assert_eq!(server.dbsize(), 0);
    }
}

/// With a holder label and no scripts: `SET … IFEQ` extends and `DELIFEQ`
/// releases by the whole value (the secret and the label), and another
/// handle's inspection shows the label.
#[test]
fn valkey_9_with_a_holder_label_extends_and_releases_natively_by_the_whole_value() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = Cluster::start_binary(&valkey, 3, &[]);
    let redlock = patient()
        .nodes(cluster.urls())
        .allow_scripts(false)
        .holder_label("worker-7")
        .build()
        .unwrap();
    let mut lock = redlock.try_lock("labelled", TTL).unwrap().expect("free");
    // Set on a quorum at least (a master whose handshake had not answered
    // may have been left out of the round: scripts are off).
    let values: Vec<Vec<u8>> = cluster
        .servers
        .iter()
        .filter_map(|s| s.get(b"labelled"))
        .collect();
    assert!(values.len() >= 2, "{values:?}");
    for value in &values {
        assert_eq!(&value[40..], b"|worker-7", "{value:?}");
    }
    // Without scripts, only `SET … IFEQ` can extend, and only `DELIFEQ`
    // release: both compare the whole value.
    lock.extend(TTL)
        .expect("extended by SET IFEQ on the whole value");
    let seen = patient()
        .nodes(cluster.urls())
        .allow_scripts(false) // its handshake would probe the scripts' rights
        .build()
        .unwrap()
        .inspect("labelled")
        .unwrap();
    assert_eq!(seen.holder_label(), Some("worker-7"), "{seen}");
    lock.unlock()
        .expect("released by DELIFEQ on the whole value");
    let deletes: u64 = cluster.servers.iter().map(|s| s.calls_of("delifeq")).sum();
    assert!(deletes >= 2, "{deletes} DELIFEQ");
    for server in &cluster.servers {
        assert_eq!(script_calls(server), 0, "a script was sent");
        assert_eq!(
            server.get(b"labelled"),
            None,
            "released everywhere it was set"
        );
    }
}

#[test]
fn without_scripts_a_server_without_native_commands_is_refused_by_name() {
    let server = RedisServer::start();
    if has_delifeq(&server) {
        println!("skipped: the test server has DELIFEQ (this test is for servers without)");
        return;
    }
    let redlock = patient()
        .nodes([server.url()])
        .allow_scripts(false)
        .lock_wait(Duration::from_secs(2))
        .build()
        .unwrap();
    let started = Instant::now();
    let error = redlock.lock("r", TTL).expect_err("no native release");
    assert!(started.elapsed() < Duration::from_secs(1), "retried");
    let status = error
        .nodes()
        .expect("a report")
        .iter()
        .next()
        .unwrap()
        .clone();
    match status.outcome() {
        NodeOutcome::Failed(NodeError::CannotRelease(CannotRelease::NativeMissing(what))) => {
            assert!(what.contains("DELIFEQ"), "{what}");
        }
        other => panic!("{other:?}: {error}"),
    }
    assert!(
        error.to_string().contains("allow_scripts(false)"),
        "{error}"
    );
    assert_eq!(server.dbsize(), 0);
    assert_eq!(script_calls(&server), 0);
}

#[test]
fn a_mixed_fleet_uses_each_masters_forms() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let natives = Cluster::start_binary(&valkey, 2, &[]);
    let others = Cluster::start(3);
    if has_delifeq(&others.servers[0]) {
        println!("skipped: the test server has DELIFEQ (the fleet would not be mixed)");
        return;
    }
    let urls: Vec<String> = natives.urls().into_iter().chain(others.urls()).collect();
    let client = || {
        patient()
            .nodes(urls.clone())
            .retry_delay(Duration::from_secs(30))
            .build()
            .unwrap()
    };
    let redlock = client();
    let mut lock = redlock.lock("mixed", TTL).unwrap();
    lock.extend(TTL).unwrap();
    let waiter = client();
    let waiting = thread::spawn(move || {
        let started = Instant::now();
        let lock = waiter
            .try_lock_for("mixed", TTL, Duration::from_secs(20))
            .unwrap()
            .expect("taken once released");
        lock.unlock().unwrap();
        started.elapsed()
    });
    wait_until_listening(&natives.servers, "mixed");
    wait_until_listening(&others.servers, "mixed");
    lock.unlock().unwrap();
    assert!(waiting.join().unwrap() < Duration::from_secs(5));
    let health = redlock.health();
    for h in &health[..2] {
        assert_eq!(h.release_form(), Some(CommandForm::DelIfEq), "{h}");
    }
    for h in &health[2..] {
        assert_eq!(h.release_form(), Some(CommandForm::Script), "{h}");
    }
    for server in natives.servers.iter().chain(&others.servers) {
        assert_eq!(server.dbsize(), 0);
    }
}

/// What a Redis 8.4 server answers the handshake's native probes: no
/// DELIFEQ, but DELEX and SET IFEQ.
fn redis_84_handshake(args: &[Vec<u8>]) -> Vec<u8> {
    match args[0].to_ascii_uppercase().as_slice() {
        b"DELIFEQ" => b"-ERR unknown command 'DELIFEQ'\r\n".to_vec(),
        b"DELEX" => b":0\r\n".to_vec(),
        b"SET" => b"-ERR invalid expire time in 'set' command\r\n".to_vec(),
        b"MSETEX" => b"-ERR invalid expire time in 'msetex' command\r\n".to_vec(),
        _ => handshake_reply(args),
    }
}

#[test]
fn redis_8_4_gets_delex_always_with_ifeq_and_set_ifeq() {
    let fake = FakeNode::start(|args, _| {
        if let Call::Handshake = Call::parse(args) {
            return Action::Reply(redis_84_handshake(args));
        }
        match args[0].to_ascii_uppercase().as_slice() {
            b"DELEX" => Action::Reply(b":1\r\n".to_vec()),
            // Nobody listens for the release's notice.
            b"PUBSUB" => Action::Reply(b"*2\r\n$2\r\nch\r\n:0\r\n".to_vec()),
            // SET (NX or IFEQ), ECHO, and the first acquisition's script.
            _ => Action::Reply(Call::parse(args).yes()),
        }
    });
    let redlock = patient().nodes([fake.url()]).build().unwrap();
    let mut lock = redlock.lock("r84", TTL).unwrap();
    lock.extend(Duration::from_millis(1500)).unwrap();
    lock.unlock().unwrap();
    let commands = fake.commands();
    // The first acquisition on a new connection is the tagged script
    // (EVAL body 1 key value ttl tag); then the extension and the release.
    let sent: Vec<&Vec<Vec<u8>>> = commands
        .iter()
        .filter(|c| c.iter().any(|a| a == b"r84"))
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    let value = sent[0][4].clone();
    let v = |args: &[&[u8]]| args.iter().map(|a| a.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        sent[1..],
        [
            &v(&[b"SET", b"r84", &value, b"IFEQ", &value, b"PX", b"1500"]),
            &v(&[b"DELEX", b"r84", b"IFEQ", &value]),
        ],
    );
    // DELEX, probe included, never goes without IFEQ (a plain DEL).
    for delex in commands.iter().filter(|c| c[0] == b"DELEX") {
        assert_eq!((delex.len(), &delex[2][..]), (4, &b"IFEQ"[..]), "{delex:?}");
    }
    let health = &redlock.health()[0];
    assert_eq!(
        health.release_form(),
        Some(CommandForm::DelExIfEq),
        "{health}"
    );
}

#[test]
fn a_master_that_refuses_its_native_form_falls_back_within_the_round() {
    // The handshake found DELIFEQ; then the master refuses it (downgraded
    // behind a proxy, say): the release goes as the script on the same
    // connection, and the unlock succeeds in its one round.
    let fake = FakeNode::start(|args, _| {
        let call = Call::parse(args);
        if let Call::Handshake = call {
            let reply = match args[0].to_ascii_uppercase().as_slice() {
                b"DELIFEQ" => b":0\r\n".to_vec(),
                b"SET" => b"-ERR invalid expire time in 'set' command\r\n".to_vec(),
                _ => handshake_reply(args),
            };
            return Action::Reply(reply);
        }
        match args[0].to_ascii_uppercase().as_slice() {
            b"DELIFEQ" => Action::Reply(b"-ERR unknown command 'DELIFEQ'\r\n".to_vec()),
            b"PUBSUB" => Action::Reply(b"*2\r\n$2\r\nch\r\n:0\r\n".to_vec()),
            _ => Action::Reply(call.yes()),
        }
    });
    let redlock = patient().nodes([fake.url()]).build().unwrap();
    let lock = redlock.lock("down", TTL).unwrap();
    lock.unlock().expect("released by the script");
    assert_eq!(fake.connections(), 1);
    let names: Vec<Vec<u8>> = fake
        .commands()
        .into_iter()
        .filter(|c| c.iter().any(|a| a == b"down"))
        .map(|c| c[0].clone())
        .collect();
    assert_eq!(
        names,
        // The first acquisition on a new connection is a script.
        [&b"EVAL"[..], b"DELIFEQ", b"EVAL"].map(<[u8]>::to_vec),
        "{:?}",
        names
            .iter()
            .map(|n| String::from_utf8_lossy(n))
            .collect::<Vec<_>>()
    );
    let health = &redlock.health()[0];
    assert_eq!(health.release_form(), Some(CommandForm::Script), "{health}");
}

#[test]
fn scripts_and_native_commands_cannot_both_be_off() {
    let error = Redlock::builder()
        .nodes(["redis://127.0.0.1"])
        .allow_scripts(false)
        .native_commands(false)
        .build()
        .expect_err("nothing could release");
    assert!(matches!(error, Error::Config(_)), "{error}");
}

#[test]
fn valkey_9_renews_leases_natively() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = Cluster::start_binary(&valkey, 3, &[]);
    let redlock = patient().nodes(cluster.urls()).build().unwrap();
    let ttl = Duration::from_secs(1);
    let lock = redlock.lock("lease", ttl).expect("locked");
    let scripts_before: u64 = cluster.servers.iter().map(script_calls).sum();
    let sets_before: u64 = cluster.servers.iter().map(|s| s.calls_of("set")).sum();
    let lease = lock.keep_alive(Duration::from_secs(60)).expect("a lease");
    // Renewed when a third of the TTL is left: two renewals (SET … IFEQ on
    // each master) waited for, not the time they take on a quiet machine.
    let sets = || -> u64 { cluster.servers.iter().map(|s| s.calls_of("set")).sum() };
    let limit = Instant::now() + Duration::from_secs(10);
    while sets() < sets_before + 6 {
        assert!(
            Instant::now() < limit,
            "{sets_before} -> {} SETs in 10 s",
            sets()
        );
        thread::sleep(Duration::from_millis(10));
    }
    lease.check().expect("still held");
    lease.unlock().expect("released");
    let scripts: u64 = cluster.servers.iter().map(script_calls).sum();
    assert_eq!(scripts, scripts_before, "a script renewed or released");
    assert_eq!(cluster.total_keys(), 0);
}

#[test]
fn with_scripts_allowed_a_user_without_scripting_rights_locks_at_once_on_valkey_9() {
    // The first acquisition on a new connection is a script (it guards
    // masters that could not release); refused here, it goes again as SET
    // in the same round, since the master releases natively.
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let server = RedisServer::start_binary(&valkey, &["--user", NO_SCRIPTS]);
    let url = format!("redis://locker:pw@127.0.0.1:{}", server.port());
    let redlock = patient().nodes([url]).build().unwrap();
    let mut lock = redlock.lock("acl", TTL).expect("locked on the first call");
    lock.extend(TTL).expect("extended");
    lock.unlock().expect("released");
    assert_eq!(server.dbsize(), 0);
    let health = &redlock.health()[0];
    assert_eq!(
        health.release_form(),
        Some(CommandForm::DelIfEq),
        "{health}"
    );
}

/// `PUBLISH` calls on all of `cluster`'s masters.
fn publishes(cluster: &Cluster) -> u64 {
    cluster.servers.iter().map(|s| s.calls_of("publish")).sum()
}

/// A raw connection subscribed to `channel` on `server`.
struct Listener {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Listener {
    fn subscribe(server: &RedisServer, channel: &str) -> Listener {
        let mut stream = TcpStream::connect(server.addr()).expect("connect");
        stream
            .write_all(&encode_command(&[b"SUBSCRIBE", channel.as_bytes()]))
            .unwrap();
        let mut listener = Listener {
            stream,
            buf: Vec::new(),
        };
        let confirmed = listener.next(Duration::from_secs(10)).expect("confirmed");
        assert!(
            format!("{confirmed:?}").contains("subscribe"),
            "{confirmed:?}"
        );
        listener
    }

    /// The next message, if one comes within `wait`.
    fn next(&mut self, wait: Duration) -> Option<OwnedReply> {
        let end = Instant::now() + wait;
        loop {
            if let Some((reply, used)) = parse(&self.buf).expect("RESP") {
                self.buf.drain(..used);
                return Some(reply);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("the server closed the subscription"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
}

/// A native release publishes its notice only where it deleted, as the
/// script does: the release of a lock whose key expired and was taken by
/// another holder publishes nothing, though someone listens on the channel
/// (it once sent its `PUBLISH` right behind `DELIFEQ`, whatever `DELIFEQ`
/// found: a spurious wake-up for every waiter); a release that deleted
/// still wakes a waiter of another handle by its notice.
#[test]
fn valkey_9_publishes_a_release_notice_only_where_the_release_deleted() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let cluster = Cluster::start_binary(&valkey, 3, &[]);
    let client = || {
        Redlock::builder()
            .nodes(cluster.urls())
            .node_timeout(Duration::from_millis(500))
            // A waiter woken by the fallback timer would wake after 20 s.
            .retry_delay(Duration::from_secs(20))
            .retry_jitter(Duration::from_millis(1))
            .build()
            .unwrap()
    };
    let (holder, other) = (client(), client());
    let channel = &support::release_channel("notice:expired");
    let mut listeners: Vec<Listener> = cluster
        .servers
        .iter()
        .map(|server| Listener::subscribe(server, channel))
        .collect();

    // The holder's key expires, and another holder takes the lock.
    let lock = holder
        .lock("notice:expired", Duration::from_millis(100))
        .expect("locked");
    thread::sleep(Duration::from_millis(300));
    let taken = other
        .lock("notice:expired", TTL)
        .expect("taken after the expiry");
    let before = publishes(&cluster);
    let released = lock.unlock();
    assert!(
        matches!(released, Err(Error::Expired { .. } | Error::LockLost(_))),
        "{released:?}"
    );
    // Every master has run the release (and would have run a PUBLISH
    // behind it) once another command on the same connection answered.
    holder.ping().expect("every master answers");
    assert_eq!(publishes(&cluster), before, "a notice for a key not ours");
    for listener in &mut listeners {
        let heard = listener.next(Duration::from_millis(200));
        assert!(heard.is_none(), "heard {heard:?}");
    }
    for server in &cluster.servers {
        assert_eq!(server.dbsize(), 1, "the other holder's key stays");
    }
    for health in holder.health() {
        assert_eq!(health.release_form(), Some(CommandForm::DelIfEq));
    }

    // A release that deletes is heard by every listener, and wakes a
    // waiter of another handle by its notice, long before the fallback
    // timer would.
    let waiter = {
        let holder = holder.clone();
        thread::spawn(move || {
            let lock = holder
                .try_lock_for("notice:expired", TTL, Duration::from_secs(60))
                .expect("no error")
                .expect("taken after the release");
            let acquired = Instant::now();
            lock.unlock().expect("released");
            acquired
        })
    };
    // The waiter is subscribed on every master before the release.
    let limit = Instant::now() + Duration::from_secs(30);
    for server in &cluster.servers {
        loop {
            let numsub = server.cmd(&["PUBSUB", "NUMSUB", channel]);
            let OwnedReply::Array(ref reply) = numsub else {
                panic!("PUBSUB NUMSUB: {numsub:?}")
            };
            if matches!(reply.get(1), Some(OwnedReply::Integer(n)) if *n >= 2) {
                break;
            }
            assert!(Instant::now() < limit, "the waiter never subscribed");
            thread::sleep(Duration::from_millis(10));
        }
    }
    let released_at = Instant::now();
    taken.unlock().expect("released");
    let acquired = waiter.join().expect("the waiter");
    let woke_after = acquired.saturating_duration_since(released_at);
    eprintln!("the waiter took the lock {woke_after:?} after the release began");
    assert!(
        woke_after < Duration::from_secs(10),
        "the waiter woke after {woke_after:?}: by the timer, not by a notice"
    );
    // The masters whose delete answered while the release waited (a
    // quorum at least) published its notice.
    let heard = listeners
        .iter_mut()
        .map(|listener| listener.next(Duration::from_secs(2)))
        .filter(|message| format!("{message:?}").contains("message"))
        .count();
    assert!(heard >= 2, "{heard} masters published the notice");
}

#[test]
fn fencing_without_scripts_is_refused_at_build() {
    let error = Redlock::builder()
        .nodes(["redis://127.0.0.1"])
        .allow_scripts(false)
        .fencing(true)
        .build()
        .expect_err("fencing counts by script");
    assert!(
        matches!(error, Error::Config(ConfigError::FencingNeedsScripts)),
        "{error}"
    );
}

/// On a fenced handle's master the fence probe is the set-up's last
/// answer: the set-up is judged there as after any last probe, so the
/// health view shows the forms it found.
#[test]
fn a_fenced_handles_set_up_is_judged_at_its_last_answer() {
    let server = RedisServer::start();
    let redlock = patient()
        .nodes([server.url()])
        .fencing(true)
        .build()
        .unwrap();
    redlock.ping().expect("an answer");
    let health = &redlock.health()[0];
    let expected = if has_delifeq(&server) {
        CommandForm::DelIfEq
    } else {
        CommandForm::Script
    };
    assert_eq!(health.release_form(), Some(expected), "{health}");
}
