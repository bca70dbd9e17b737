//! A set's acquisition by the native multi-key form, `MSETEX numkeys key
//! value … NX PX ttl` (Valkey 9.1+, Redis 8.4+): one command per master,
//! all keys or none, where the handshake found it; the set's script
//! elsewhere, and when a master refuses it later.
//!
//! Valkey 9.1 runs as a real server (`REDLOCK_TEST_NATIVE_SERVER`, which
//! CI sets; without it, or with a server without `MSETEX`, the tests say
//! so and stop, as tests/native.rs does).

mod support;

use redlock_sync::{Builder, CannotRelease, Error, NodeError, NodeOutcome, Redlock};
use std::time::Duration;
use support::{native_server_binary, Cluster, OwnedReply, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// Rounds that give each master 1 s (see tests/native.rs).
fn patient() -> Builder {
    Redlock::builder().node_timeout(Duration::from_secs(1))
}

/// Calls of the script commands on `server`.
fn script_calls(server: &RedisServer) -> u64 {
    server.calls_of("evalsha") + server.calls_of("eval")
}

/// Whether `server` has `MSETEX` (asked with a zero TTL: refused for it
/// by a server that has the command, nothing set).
fn has_msetex(server: &RedisServer) -> bool {
    match server.command(&[b"MSETEX", b"1", b"k", b"v", b"NX", b"PX", b"0"]) {
        Ok(OwnedReply::Error(line)) => String::from_utf8_lossy(&line).contains("expire time"),
        _ => false,
    }
}

/// Valkey 9.1 servers (a cluster of `n` started with `args`), if the
/// native server is named and has `MSETEX`.
fn valkey_91(n: usize, args: &[&str]) -> Option<Cluster> {
    let valkey = native_server_binary()?;
    let cluster = Cluster::start_binary(&valkey, n, args);
    if !has_msetex(&cluster.servers[0]) {
        println!("skipped: the native server has no MSETEX (Valkey 9.1+ has)");
        return None;
    }
    Some(cluster)
}

/// Takes and releases a single lock, so that every connection's handshake
/// has answered (a new connection's first acquisition is the tagged
/// script, whatever the server has).
fn warm_up(redlock: &Redlock) {
    redlock
        .try_lock("warm-up", TTL)
        .unwrap()
        .expect("free")
        .unlock()
        .expect("released");
}

#[test]
fn valkey_9_1_takes_a_set_by_one_msetex_and_runs_no_script_for_it() {
    let Some(cluster) = valkey_91(3, &[]) else {
        return;
    };
    let redlock = patient().nodes(cluster.urls()).build().unwrap();
    warm_up(&redlock);
    let before: Vec<(u64, u64)> = cluster
        .servers
        .iter()
        .map(|s| (s.calls_of("msetex"), script_calls(s)))
        .collect();
    let mut set = redlock
        .try_lock_many(["c", "a", "b"], TTL)
        .unwrap()
        .expect("free");
    // The last master may answer a moment after the quorum.
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while cluster.servers.iter().any(|s| s.dbsize() < 3) {
        assert!(std::time::Instant::now() < limit, "keys not set in 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    for (server, (msetex, scripts)) in cluster.servers.iter().zip(&before) {
        assert_eq!(server.calls_of("msetex"), msetex + 1, "one MSETEX each");
        assert_eq!(script_calls(server), *scripts, "no script for it");
        for key in [&b"a"[..], b"b", b"c"] {
            let ttl = server.pttl(key);
            assert!(ttl > 0 && ttl <= 10_000, "{ttl}");
        }
    }
    set.extend(TTL).expect("extended");
    set.unlock().expect("released");
    for server in &cluster.servers {
        assert_eq!(server.dbsize(), 0, "no key left");
    }
}

#[test]
fn an_msetex_set_is_all_or_none_on_a_master_that_holds_one_of_its_keys() {
    let Some(cluster) = valkey_91(3, &[]) else {
        return;
    };
    let redlock = patient().nodes(cluster.urls()).build().unwrap();
    warm_up(&redlock);
    // Another holder's key on the first master only: the set is granted
    // by the other two, and sets nothing there.
    cluster.servers[0].cmd(&["SET", "b", "theirs"]);
    let set = redlock
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("granted by a quorum");
    let calls = cluster.servers[0].calls_of("msetex");
    assert!(calls >= 1, "MSETEX reached the first master");
    assert_eq!(cluster.servers[0].keys(), vec![b"b".to_vec()]);
    set.unlock().expect("released");
    assert_eq!(cluster.servers[0].get(b"b"), Some(b"theirs".to_vec()));
    // Held on two masters: refused, and nothing of ours is left.
    cluster.servers[1].cmd(&["SET", "b", "theirs"]);
    assert!(redlock.try_lock_many(["a", "b"], TTL).unwrap().is_none());
    for (i, server) in cluster.servers.iter().enumerate() {
        let expected: Vec<Vec<u8>> = if i < 2 { vec![b"b".to_vec()] } else { vec![] };
        assert_eq!(server.keys(), expected, "master {i}");
    }
}

/// The handshake found `MSETEX`; then the ACL took it away (an operator's
/// change while the connection is open): the refused `MSETEX` set nothing,
/// and the set's acquisition goes again as the script on the same
/// connection within the round, which counts.
#[test]
fn a_master_that_refuses_msetex_after_its_handshake_takes_the_set_by_script_in_the_round() {
    let user = "locker on >pw ~* &* +@all";
    let Some(cluster) = valkey_91(1, &["--user", user]) else {
        return;
    };
    let server = &cluster.servers[0];
    let url = format!("redis://locker:pw@127.0.0.1:{}", server.port());
    let redlock = patient().nodes([url]).build().unwrap();
    warm_up(&redlock);
    server.cmd(&["ACL", "SETUSER", "locker", "-msetex"]);
    let (scripts, msetex) = (script_calls(server), server.calls_of("msetex"));
    let set = redlock
        .try_lock_many(["x", "y"], TTL)
        .unwrap()
        .expect("taken by the script");
    // (The probes count as calls: they ran and failed for the TTL.)
    assert_eq!(server.calls_of("msetex"), msetex, "refused before it ran");
    let rejected = server.cmd(&["INFO", "commandstats"]);
    let OwnedReply::Bulk(stats) = rejected else {
        panic!("INFO commandstats")
    };
    let stats = String::from_utf8_lossy(&stats).into_owned();
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("cmdstat_msetex:") && !l.contains("rejected_calls=0")),
        "the MSETEX was sent and refused: {stats}"
    );
    assert!(script_calls(server) > scripts, "the script ran");
    assert_eq!(server.dbsize(), 2);
    set.unlock().expect("released");
    assert_eq!(server.dbsize(), 0);
    // From then on the connection sends the script at once.
    let set = redlock
        .try_lock_many(["x", "y"], TTL)
        .unwrap()
        .expect("free");
    set.unlock().expect("released");
    assert_eq!(server.dbsize(), 0);
}

/// An ACL user that may do everything but run scripts.
const NO_SCRIPTS: &str = "locker on >pw ~* &* +@all -@scripting";

/// The masters' URLs for the user of [`NO_SCRIPTS`].
fn locker_urls(cluster: &Cluster) -> Vec<String> {
    let port = |s: &RedisServer| s.port();
    cluster
        .servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", port(s)))
        .collect()
}

/// Waits (bounded) until every master's handshake has answered on
/// `redlock`'s connections. A handle without scripts holds an acquisition
/// back from a connection whose handshake has not answered, and gives such
/// a master up when a master declines or the round is decided without it
/// (see `round/collect.rs`): a test that counts what each master got
/// starts with answered handshakes, which inspections (no script, no key
/// written) bring in.
fn handshakes_answered(redlock: &Redlock) {
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let _ = redlock.inspect("handshake-warm-up");
        if redlock.health().iter().all(|h| h.release_form().is_some()) {
            return;
        }
        assert!(
            std::time::Instant::now() < limit,
            "a handshake still unanswered after 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (bounded) until `server` holds `n` keys: a call returns at
/// quorum, and the last master runs the same command a moment later.
fn until_keys(server: &RedisServer, n: i64) {
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while server.dbsize() != n {
        assert!(
            std::time::Instant::now() < limit,
            "{} keys, not {n}",
            server.dbsize()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn without_scripts_valkey_9_1_takes_extends_repairs_and_releases_a_set() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let redlock = patient()
        .nodes(locker_urls(&cluster))
        .allow_scripts(false)
        .build()
        .unwrap();
    handshakes_answered(&redlock);
    // Another holder's key on the first master: the set is granted by the
    // other two and sets nothing there.
    cluster.servers[0].cmd(&["SET", "b", "theirs"]);
    let mut set = redlock
        .try_lock_many(["c", "b", "a"], TTL)
        .unwrap()
        .expect("granted by two masters");
    for server in &cluster.servers[1..] {
        until_keys(server, 3);
        assert_eq!(server.calls_of("msetex"), 2, "its probe, then the set");
    }
    assert_eq!(cluster.servers[0].keys(), vec![b"b".to_vec()]);
    let value = cluster.servers[1].get(b"a").expect("ours");
    // The other holder's key goes: the extension repairs that master (its
    // keys absent, so set), and resets the TTL on the others.
    cluster.servers[0].cmd(&["DEL", "b"]);
    cluster.servers[1].cmd(&["PEXPIRE", "a", "5000"]);
    // A round returns at a quorum, so the first master's no may be read
    // only by a later extension; the repair follows the extension that
    // read it (see `Lock::extend`): extend until it has come, bounded.
    let mut extensions = 0;
    while cluster.servers[0].dbsize() != 3 {
        assert!(extensions < 10, "not repaired in {extensions} extensions");
        set.extend(TTL).expect("extended");
        extensions += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    until_keys(&cluster.servers[0], 3);
    for server in &cluster.servers {
        for key in [&b"a"[..], b"b", b"c"] {
            assert_eq!(server.get(key), Some(value.clone()));
            assert!(server.pttl(key) > 5000, "{}", server.pttl(key));
        }
        assert_eq!(server.calls_of("eval") + server.calls_of("evalsha"), 0);
    }
    // One key another's on one master: that master does not count, and
    // two still do.
    cluster.servers[2].cmd(&["SET", "c", "theirs"]);
    set.extend(TTL).expect("extended by two masters");
    set.unlock().expect("released");
    for server in &cluster.servers[..2] {
        until_keys(server, 0);
    }
    assert_eq!(cluster.servers[2].keys(), vec![b"c".to_vec()]);
    assert_eq!(cluster.servers[2].get(b"c"), Some(b"theirs".to_vec()));
}

/// Regression guard for the set's run: a set of many keys is owed as one
/// entry, whatever K, and the connection stays in step with the replies
/// (a second set on the same connections is taken and released).
#[test]
fn without_scripts_a_set_of_a_thousand_keys_runs_and_the_connection_stays_in_step() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let redlock = patient()
        .nodes(locker_urls(&cluster))
        .allow_scripts(false)
        .build()
        .unwrap();
    let names: Vec<String> = (0..1000).map(|i| format!("k{i:04}")).collect();
    let mut set = redlock.try_lock_many(&names, TTL).unwrap().expect("free");
    set.extend(TTL).expect("extended");
    set.unlock().expect("released");
    for server in &cluster.servers {
        until_keys(server, 0);
    }
    let set = redlock
        .try_lock_many(["x", "y"], TTL)
        .unwrap()
        .expect("free");
    set.unlock().expect("released");
    for server in &cluster.servers {
        until_keys(server, 0);
    }
}

#[test]
fn without_scripts_a_master_without_msetex_fails_by_name_and_the_set_by_quorum() {
    let Some(valkey) = native_server_binary() else {
        return;
    };
    let with = valkey_91(1, &["--user", NO_SCRIPTS]);
    let Some(with) = with else { return };
    let renamed = Cluster::start_binary(
        &valkey,
        2,
        &["--user", NO_SCRIPTS, "--rename-command", "MSETEX", ""],
    );
    let mut urls = locker_urls(&with);
    urls.extend(locker_urls(&renamed));
    let redlock = patient().nodes(urls).allow_scripts(false).build().unwrap();
    // The first call on new connections waits for their handshakes.
    let error = redlock
        .try_lock_many(["a", "b"], TTL)
        .expect_err("two of three masters cannot take sets");
    assert!(matches!(error, Error::NoQuorum(_)), "{error}");
    let report = error.nodes().expect("a report");
    let failed: Vec<_> = report
        .iter()
        .filter_map(|status| match status.outcome() {
            NodeOutcome::Failed(NodeError::CannotLockSets(what)) => Some(*what),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{error}");
    assert!(failed[0].contains("MSETEX"), "{}", failed[0]);
    assert!(error.to_string().contains("MSETEX"), "{error}");
    until_keys(&with.servers[0], 0);
    for server in &renamed.servers {
        assert_eq!(server.dbsize(), 0);
    }
    // Single locks still work there.
    redlock
        .try_lock("one", TTL)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
}

#[test]
fn without_scripts_redis_7_refuses_a_set_per_master_by_name_and_leaves_no_key() {
    let server = RedisServer::start();
    if has_msetex(&server) {
        println!("skipped: the test server has MSETEX (this test is for servers without)");
        return;
    }
    let redlock = patient()
        .nodes([server.url()])
        .allow_scripts(false)
        .build()
        .unwrap();
    let error = redlock
        .try_lock_many(["a", "b"], TTL)
        .expect_err("no native forms");
    assert!(matches!(error, Error::NoQuorum(_)), "{error}");
    let status = error
        .nodes()
        .expect("a report")
        .iter()
        .next()
        .unwrap()
        .clone();
    assert!(
        matches!(
            status.outcome(),
            NodeOutcome::Failed(
                NodeError::CannotRelease(CannotRelease::NativeMissing(_))
                    | NodeError::CannotLockSets(_)
            )
        ),
        "{error}"
    );
    assert_eq!(server.dbsize(), 0);
}

/// Waits (bounded) until `server` has a subscriber on `resource`'s release
/// channel: a waiter for it listens there.
fn until_listening(server: &RedisServer, resource: &str) {
    let channel = support::release_channel(resource);
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while !matches!(
        server.cmd(&["PUBSUB", "NUMSUB", &channel]),
        OwnedReply::Array(items) if matches!(items.get(1), Some(OwnedReply::Integer(n)) if *n > 0)
    ) {
        assert!(
            std::time::Instant::now() < limit,
            "no subscriber after 10 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn without_scripts_a_sets_release_publishes_each_keys_notice_and_wakes_its_waiter() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let client = || {
        patient()
            .nodes(locker_urls(&cluster))
            .allow_scripts(false)
            // Only a release notice can wake the waiter in time.
            .retry_delay(Duration::from_secs(30))
            .retry_jitter(Duration::ZERO)
            .build()
            .unwrap()
    };
    let holder = client();
    let set = holder
        .try_lock_many(["a", "b"], TTL)
        .unwrap()
        .expect("free");
    let waiter = client();
    let waiting = std::thread::spawn(move || {
        let lock = waiter
            .try_lock_for("b", TTL, Duration::from_secs(20))
            .expect("no error");
        (lock.map(|lock| lock.unlock()), std::time::Instant::now())
    });
    for server in &cluster.servers {
        until_listening(server, "b");
    }
    // The waiter tries again once its subscriptions are confirmed (and
    // finds b held): that try is over before the release.
    std::thread::sleep(Duration::from_secs(1));
    let released = std::time::Instant::now();
    set.unlock().expect("released");
    let (lock, woken) = waiting.join().expect("the waiter");
    assert!(matches!(lock, Some(Ok(()))), "the waiter took b");
    let waited = woken.duration_since(released);
    // Well before the key's TTL (10 s) and the waiter's retry (30 s).
    assert!(waited < Duration::from_secs(5), "woken after {waited:?}");
}

/// A server's error in the middle of a run (a key of the wrong type) is
/// that master's answer for the whole set, the run's other commands still
/// run, and the connection stays in step with its replies.
#[test]
fn without_scripts_an_error_inside_a_run_is_the_masters_answer_and_the_connection_stays_in_step() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let redlock = patient()
        .nodes(locker_urls(&cluster))
        .allow_scripts(false)
        .build()
        .unwrap();
    handshakes_answered(&redlock);
    let set = redlock
        .try_lock_many(["a", "b", "c"], TTL)
        .unwrap()
        .expect("free");
    for server in &cluster.servers {
        until_keys(server, 3);
    }
    let first = &cluster.servers[0];
    first.cmd(&["DEL", "b"]);
    first.cmd(&["RPUSH", "b", "not a lock"]);
    set.unlock().expect("released by the other two");
    // The run's other keys went; the list stays.
    until_keys(first, 1);
    assert_eq!(first.keys(), vec![b"b".to_vec()]);
    first.cmd(&["DEL", "b"]);
    // The next set on the same connections is answered in order.
    let set = redlock
        .try_lock_many(["a", "b", "c"], TTL)
        .unwrap()
        .expect("free");
    set.unlock().expect("released");
    for server in &cluster.servers {
        until_keys(server, 0);
    }
}

/// Redis 8.4 has `MSETEX` with Valkey 9.1's syntax and reply (redis.io,
/// "Available since: Redis Open Source 8.4.0"); no binary of it installs
/// here, so a scripted fake node plays its answers: the set goes out as
/// `MSETEX 2 a v b v NX PX ttl`, and its `:1` is the master's yes.
#[test]
fn redis_8_4_gets_a_sets_acquisition_as_msetex_and_its_reply_counts() {
    use support::{handshake_reply, Action, Call, FakeNode};
    let fake = FakeNode::start(|args, _| {
        let call = Call::parse(args);
        if let Call::Handshake = call {
            let reply = match args[0].to_ascii_uppercase().as_slice() {
                b"DELIFEQ" => b"-ERR unknown command 'DELIFEQ'\r\n".to_vec(),
                b"DELEX" => b":0\r\n".to_vec(),
                b"SET" => b"-ERR invalid expire time in 'set' command\r\n".to_vec(),
                b"MSETEX" => b"-ERR invalid expire time in 'msetex' command\r\n".to_vec(),
                _ => handshake_reply(args),
            };
            return Action::Reply(reply);
        }
        match args[0].to_ascii_uppercase().as_slice() {
            b"MSETEX" | b"DELEX" => Action::Reply(b":1\r\n".to_vec()),
            b"PUBSUB" => Action::Reply(b"*2\r\n$2\r\nch\r\n:0\r\n".to_vec()),
            _ => Action::Reply(call.yes()),
        }
    });
    let redlock = patient().nodes([fake.url()]).build().unwrap();
    warm_up(&redlock);
    let set = redlock
        .try_lock_many(["b", "a"], Duration::from_millis(1500))
        .unwrap()
        .expect("MSETEX answered 1");
    // (The fake node does not play the set's release script.)
    set.let_expire();
    let commands = fake.commands();
    let msetex: Vec<&Vec<Vec<u8>>> = commands
        .iter()
        .filter(|c| c[0] == b"MSETEX" && c[2] != b"redlock-sync:probe")
        .collect();
    assert_eq!(msetex.len(), 1, "{msetex:?}");
    let value = msetex[0][3].clone();
    let v = |args: &[&[u8]]| args.iter().map(|a| a.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        *msetex[0],
        v(&[b"MSETEX", b"2", b"a", &value, b"b", &value, b"NX", b"PX", b"1500"])
    );
}

/// A user the server refuses scripts to, on a handle that runs them (the
/// default): the handshake finds scripts refused, so a set is taken by
/// `MSETEX` and, like a single lock there, extended and released by
/// native commands (runs), never by the set's script the server would
/// refuse. The keys are gone after the unlock.
#[test]
fn a_user_refused_scripts_on_a_handle_with_scripts_extends_and_releases_its_set_natively() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let redlock = patient().nodes(locker_urls(&cluster)).build().unwrap();
    handshakes_answered(&redlock);
    let mut set = redlock
        .try_lock_many(["a", "b", "c"], TTL)
        .unwrap()
        .expect("free");
    for server in &cluster.servers {
        until_keys(server, 3);
    }
    set.extend(TTL).expect("extended on every master");
    set.unlock().expect("released");
    for server in &cluster.servers {
        until_keys(server, 0);
        assert_eq!(script_calls(server), 0, "no script ran");
    }
}

/// Regression (review finding 3): the release of a set of 200 keys
/// publishes 200 notices on each master; their answers were owed one
/// entry each, so while a master had not answered them (here a proxy
/// holds the first `PUBLISH` back 500 ms) the next acquisition found it
/// owing more than the lag limit (16) and held it back: never sent the
/// lock, given up at the quorum. Now a release's notices are owed as one
/// entry, as a single lock's release's notice is: the next single lock
/// reaches every master.
#[test]
fn without_scripts_a_large_sets_release_leaves_no_master_lagging() {
    let Some(cluster) = valkey_91(3, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let held = std::sync::atomic::AtomicBool::new(false);
    let proxy = support::Proxy::holding(cluster.servers[0].addr(), move |command| {
        let publish = command
            .first()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"PUBLISH"));
        if publish && !held.swap(true, std::sync::atomic::Ordering::SeqCst) {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        }
    });
    let mut urls = locker_urls(&cluster);
    urls[0] = proxy.url().replace("redis://", "redis://locker:pw@");
    let redlock = patient().nodes(urls).allow_scripts(false).build().unwrap();
    handshakes_answered(&redlock);
    let names: Vec<String> = (0..200).map(|i| format!("k{i:03}")).collect();
    let set = redlock.try_lock_many(&names, TTL).unwrap().expect("free");
    for server in &cluster.servers {
        until_keys(server, 200);
    }
    set.unlock().expect("released");
    // The notices go out by the release's round's end or with the next
    // command; the lock after that one finds them owed.
    let locks = ["one", "two"].map(|name| redlock.try_lock(name, TTL).unwrap().expect("free"));
    // A round returns at a quorum: the first master may answer later.
    for server in &cluster.servers {
        until_keys(server, 2);
    }
    for lock in locks {
        lock.unlock().expect("released");
    }
}

/// The ids of the clients of user `locker` connected to `server`.
fn locker_clients(server: &RedisServer) -> Vec<String> {
    let OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST: not a bulk string")
    };
    String::from_utf8_lossy(&list)
        .lines()
        .filter(|line| line.contains(" user=locker "))
        .filter_map(|line| line.split(' ').next().map(str::to_string))
        .collect()
}

/// Regression (review finding 4): a master whose ACL stops allowing
/// `MSETEX` after the handshake found it, on a handle without scripts:
/// the set's refusal is that master's answer (the server's `NOPERM`) and
/// the connection is kept (it closed, as if the server had broken the
/// protocol); the next set fails there by name (`CannotLockSets`), nothing
/// sent, and single locks still go on the same connection.
#[test]
fn without_scripts_an_msetex_refused_after_the_handshake_fails_the_master_and_keeps_the_connection()
{
    let Some(cluster) = valkey_91(1, &["--user", NO_SCRIPTS]) else {
        return;
    };
    let server = &cluster.servers[0];
    let redlock = patient()
        .nodes(locker_urls(&cluster))
        .allow_scripts(false)
        .build()
        .unwrap();
    handshakes_answered(&redlock);
    let clients = locker_clients(server);
    assert_eq!(clients.len(), 1, "{clients:?}");
    server.cmd(&["ACL", "SETUSER", "locker", "-msetex"]);
    let error = redlock
        .try_lock_many(["a", "b"], TTL)
        .expect_err("the only master refuses MSETEX");
    let refused = error;
    let error = redlock
        .try_lock_many(["a", "b"], TTL)
        .expect_err("no form left");
    let outcome = error
        .nodes()
        .expect("a report")
        .iter()
        .next()
        .unwrap()
        .outcome();
    assert!(
        matches!(outcome, NodeOutcome::Failed(NodeError::CannotLockSets(_))),
        "{error}"
    );
    redlock
        .try_lock("single", TTL)
        .unwrap()
        .expect("free")
        .unlock()
        .expect("released");
    assert_eq!(server.dbsize(), 0);
    assert_eq!(locker_clients(server), clients, "the same connection");
    let report = refused.nodes().expect("a report");
    let outcome = report.iter().next().expect("one master").outcome();
    assert!(
        matches!(outcome, NodeOutcome::Failed(NodeError::Server(e)) if e.code() == "NOPERM"),
        "{refused}"
    );
}

/// A fake master's keys and their values.
type Store = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<Vec<u8>, Vec<u8>>>>;

/// A fake Redis 8.4 master (see above) that keeps its keys: `MSETEX … NX`
/// sets them all or none, `DELEX key IFEQ value` deletes a key that holds
/// the value, `DELIFEQ` is unknown. It closes its connection once a set
/// has been taken (after the set's `ECHO`), so that the set's release goes
/// out on a new connection, behind its handshake's probes.
fn redis_8_4_closing_after_a_set() -> (support::FakeNode, Store) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use support::{handshake_reply, Action, Call, FakeNode};
    let keys = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let (store, taken) = (keys.clone(), Arc::new(AtomicBool::new(false)));
    let fake = FakeNode::start(move |args, _| {
        let call = Call::parse(args);
        let name = args[0].to_ascii_uppercase();
        if let Call::Handshake = call {
            let reply = match name.as_slice() {
                b"DELIFEQ" => b"-ERR unknown command 'DELIFEQ'\r\n".to_vec(),
                b"DELEX" => b":0\r\n".to_vec(),
                b"SET" => b"-ERR invalid expire time in 'set' command\r\n".to_vec(),
                b"MSETEX" => b"-ERR invalid expire time in 'msetex' command\r\n".to_vec(),
                _ => handshake_reply(args),
            };
            return Action::Reply(reply);
        }
        let mut keys = store.lock().unwrap();
        match name.as_slice() {
            b"DELIFEQ" => Action::Reply(b"-ERR unknown command 'DELIFEQ'\r\n".to_vec()),
            b"MSETEX" => {
                let n: usize = std::str::from_utf8(&args[1]).unwrap().parse().unwrap();
                let pairs = args[2..2 + 2 * n].chunks(2);
                if pairs.clone().any(|kv| keys.contains_key(&kv[0])) {
                    return Action::Reply(b":0\r\n".to_vec());
                }
                for kv in pairs {
                    keys.insert(kv[0].clone(), kv[1].clone());
                }
                taken.store(true, Ordering::SeqCst);
                Action::Reply(b":1\r\n".to_vec())
            }
            b"DELEX" => {
                assert_eq!(args[2], b"IFEQ", "DELEX without IFEQ: {args:?}");
                let deleted = keys.get(&args[1]) == Some(&args[3]);
                if deleted {
                    keys.remove(&args[1]);
                }
                Action::Reply(format!(":{}\r\n", u8::from(deleted)).into_bytes())
            }
            b"PUBSUB" => Action::Reply(b"*2\r\n$2\r\nch\r\n:0\r\n".to_vec()),
            b"PUBLISH" => Action::Reply(b":0\r\n".to_vec()),
            // An inspection's (see `handshakes_answered`): no such key,
            // no holder's label.
            b"PTTL" => Action::Reply(b":-2\r\n".to_vec()),
            b"GETRANGE" => Action::Reply(b"$0\r\n\r\n".to_vec()),
            _ if taken.swap(false, Ordering::SeqCst) => Action::ReplyThenClose(call.yes()),
            _ => Action::Reply(call.yes()),
        }
    });
    (fake, keys)
}

/// Regression (issue 36, review finding 2): without scripts, a set's
/// release on a new connection goes out before the handshake's probes
/// have answered, as a run of the first form not yet probed, `DELIFEQ`,
/// which Redis 8.4 does not have. The refused run was each master's
/// failure, the unlock failed and the keys stayed until their TTL; it now
/// goes again as `DELEX … IFEQ` per key in the same round, and no key is
/// left on any master.
#[test]
fn without_scripts_redis_8_4_releases_a_set_on_a_new_connection_by_delex_in_the_same_round() {
    let masters: Vec<_> = (0..3).map(|_| redis_8_4_closing_after_a_set()).collect();
    let redlock = patient()
        .allow_scripts(false)
        .nodes(masters.iter().map(|(fake, _)| fake.url()))
        .build()
        .unwrap();
    // So that every master gets the set (see `handshakes_answered`).
    handshakes_answered(&redlock);
    let set = redlock
        .try_lock_many(["b", "a", "c"], TTL)
        .unwrap()
        .expect("MSETEX answered 1");
    for (fake, keys) in &masters {
        // Every master took the set (the last one a moment after the
        // quorum), and closed the connection it was taken on.
        let limit = std::time::Instant::now() + Duration::from_secs(10);
        while keys.lock().unwrap().len() < 3 || fake.open_connections() > 0 {
            assert!(std::time::Instant::now() < limit, "{:?}", fake.commands());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // A round looks for connections the server closed only on those
    // quiet for a moment (1 ms: `round/look.rs`), as these are by then.
    std::thread::sleep(Duration::from_millis(20));
    set.unlock().expect("released in its one round");
    // The round returns at quorum: the last master's answers are read,
    // and what it refused sent again, by the handle's next calls.
    let limit = std::time::Instant::now() + Duration::from_secs(5);
    while masters
        .iter()
        .any(|(_, keys)| !keys.lock().unwrap().is_empty())
    {
        assert!(
            std::time::Instant::now() < limit,
            "keys left 5 s after the unlock (TTL 10 s)"
        );
        let _ = redlock.inspect("handshake-warm-up");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The release went out before the probes answered, as DELIFEQ per key,
    // refused, then as DELEX … IFEQ: on the masters that made the quorum
    // at least (a master reached after it may have had its probes' answers
    // first, and got DELEX at once).
    let refused_then_delex = masters
        .iter()
        .filter(|(fake, _)| {
            let commands = fake.commands();
            let sent = |name: &[u8]| {
                commands
                    .iter()
                    .filter(|c| c[0] == name && c[1] != b"redlock-sync:probe")
                    .count()
            };
            sent(b"DELIFEQ") == 3 && sent(b"DELEX") == 3
        })
        .count();
    assert!(refused_then_delex >= 2, "{refused_then_delex} of 3 masters");
}
