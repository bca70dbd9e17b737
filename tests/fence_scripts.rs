//! The fencing protocol's scripts (src/fence/*.lua, docs/fencing.md) run
//! directly against a real server, branch by branch: the reply shapes the
//! library will judge, what each writes and what it must not.
//!
//! They run on whatever server the tests start (`REDLOCK_TEST_SERVER`):
//! Redis 7.0, Valkey 8.1 and Valkey 9.1 were checked. What the scripts read
//! of a server's replication (its `master_replid`, new when it is promoted)
//! is checked with real replicas, as each server version behaves.

mod support;

use support::{OwnedReply, RedisServer, Replication, QUICK_SYNC};

const ACQUIRE: &str = include_str!("../src/fence/acquire.lua");
const WRITE_BACK: &str = include_str!("../src/fence/write_back.lua");
const PROBE: &str = include_str!("../src/fence/probe.lua");
const BARRIER: &str = include_str!("../src/fence/barrier.lua");
const ANCHOR: &str = include_str!("../src/fence/anchor.lua");
const REFEREE: &str = include_str!("../src/fence/referee.lua");
const ACQUIRE_SET: &str = include_str!("../src/fence/acquire_set.lua");
const WRITE_BACK_SET: &str = include_str!("../src/fence/write_back_set.lua");

const DOMAIN: &str = "redlock-sync:fence:default";
const LIMIT: i64 = 1 << 53;

/// `EVAL script` with `keys` and `args`.
fn eval(server: &RedisServer, script: &str, keys: &[&str], args: &[&str]) -> OwnedReply {
    let count = keys.len().to_string();
    let mut call = vec!["EVAL", script, &count];
    call.extend_from_slice(keys);
    call.extend_from_slice(args);
    server.cmd(&call)
}

fn int(n: i64) -> OwnedReply {
    OwnedReply::Integer(n)
}

fn ints(ns: &[i64]) -> OwnedReply {
    OwnedReply::Array(ns.iter().map(|&n| int(n)).collect())
}

fn bulk(text: &str) -> OwnedReply {
    OwnedReply::Bulk(text.as_bytes().to_vec())
}

/// Asserts `reply` is an error whose code (first word) is `code`.
fn assert_error(reply: OwnedReply, code: &str) {
    match &reply {
        OwnedReply::Error(line) if line.split(|&b| b == b' ').next() == Some(code.as_bytes()) => {}
        other => panic!("expected a {code} error, got {other:?}"),
    }
}

/// The domain's field `field`, as text.
fn field(server: &RedisServer, field: &str) -> Option<String> {
    match server.cmd(&["HGET", DOMAIN, field]) {
        OwnedReply::Bulk(bytes) => Some(String::from_utf8(bytes).unwrap()),
        OwnedReply::Nil => None,
        other => panic!("HGET: {other:?}"),
    }
}

fn run_id(server: &RedisServer) -> String {
    let OwnedReply::Bulk(info) = server.cmd(&["INFO", "server"]) else {
        panic!("INFO: not a bulk string")
    };
    let info = String::from_utf8(info).unwrap();
    let line = info.lines().find(|l| l.starts_with("run_id:")).unwrap();
    line["run_id:".len()..].trim().to_string()
}

/// The domain id the tests anchor with, and how many members.
const DOMAIN_ID: &str = "77";
const MEMBERS: &str = "3";

/// Anchors the domain with `counter` in `epoch`, as member 1 of 3.
fn anchor(server: &RedisServer, counter: &str, epoch: &str) {
    assert_eq!(anchor_as(server, counter, epoch, "1"), int(1));
}

/// `anchor.lua` with `counter`, `epoch` and `member` (of domain 77, 3 members).
fn anchor_as(server: &RedisServer, counter: &str, epoch: &str, member: &str) -> OwnedReply {
    let args = [counter, epoch, DOMAIN_ID, MEMBERS, member];
    eval(server, ANCHOR, &[DOMAIN], &args)
}

/// `barrier.lua` to `epoch` (of domain 77, 3 members), giving `member` to an
/// anchor without one.
fn barrier(server: &RedisServer, epoch: &str, member: &str) -> OwnedReply {
    eval(
        server,
        BARRIER,
        &[DOMAIN],
        &[epoch, DOMAIN_ID, MEMBERS, member],
    )
}

/// The probe's whole reply: state, counter, epoch, policy, member, members,
/// domain id.
fn probe(server: &RedisServer) -> OwnedReply {
    eval(server, PROBE, &[DOMAIN], &[])
}

/// A probe's reply with `state`, `counter`, `epoch`, the policy `noeviction`
/// and the membership `member` of 3 in domain 77.
fn probed(state: i64, counter: i64, epoch: i64, member: i64) -> OwnedReply {
    let mut items = vec![int(state), int(counter), int(epoch), bulk("noeviction")];
    items.extend([int(member), int(3), int(77)]);
    OwnedReply::Array(items)
}

/// The probe's state: 0 no anchor, 1 valid, 2 restarted, 3 cannot tell, 4
/// another data set (or a replica), 5 the old format.
fn state(server: &RedisServer) -> i64 {
    match eval(server, PROBE, &[DOMAIN], &[]) {
        OwnedReply::Array(items) => match items[0] {
            OwnedReply::Integer(n) => n,
            ref other => panic!("probe state: {other:?}"),
        },
        other => panic!("probe: {other:?}"),
    }
}

/// Round 1's grant: `status`, the counter, the epoch, and the place the
/// anchor records (member 1 of 3 in domain 77, as `anchor` writes it).
fn granted(status: i64, counter: i64, epoch: i64) -> OwnedReply {
    granted_as(status, counter, epoch, 1)
}

/// [`granted`], for member `member`.
fn granted_as(status: i64, counter: i64, epoch: i64, member: i64) -> OwnedReply {
    ints(&[status, counter, epoch, 77, 3, member])
}

fn acquire(server: &RedisServer, key: &str, value: &str) -> OwnedReply {
    eval(server, ACQUIRE, &[key, DOMAIN], &[value, "10000"])
}

#[test]
fn round_one_sets_and_counts_or_writes_nothing() {
    let server = RedisServer::start();
    // No anchor: refused, nothing written (neither the key nor a counter).
    assert_error(acquire(&server, "r", "v"), "NOANCHOR");
    assert_eq!(server.dbsize(), 0);

    anchor(&server, "0", "7");
    assert_eq!(acquire(&server, "r", "v"), granted(1, 1, 7));
    assert_eq!(server.get(b"r").as_deref(), Some(&b"v"[..]));
    let ttl = server.pttl(b"r");
    assert!(ttl > 0 && ttl <= 10_000, "{ttl}");
    // Held: nothing counted.
    assert_eq!(acquire(&server, "r", "w"), ints(&[0]));
    assert_eq!(field(&server, "c").as_deref(), Some("1"));
    // Another resource of the domain: the same counter.
    assert_eq!(acquire(&server, "s", "v"), granted(1, 2, 7));

    // Tagged (a connection without ECHO): 2 * tag + status first.
    let tagged =
        |key: &str, value: &str| eval(&server, ACQUIRE, &[key, DOMAIN], &[value, "10000", "21"]);
    assert_eq!(tagged("t", "v"), granted(43, 3, 7));
    assert_eq!(tagged("t", "w"), ints(&[42]));
    let big_tag = ((1u64 << 52) - 1).to_string();
    let reply = eval(&server, ACQUIRE, &["u", DOMAIN], &["v", "10000", &big_tag]);
    assert_eq!(
        reply,
        granted((1 << 53) - 1, 4, 7),
        "tags below 2^52 are exact"
    );
}

#[test]
fn round_one_stops_at_2_to_the_53() {
    let server = RedisServer::start();
    anchor(&server, &(LIMIT - 1).to_string(), "1");
    // The last token: exact in a reply (and in Lua's doubles).
    assert_eq!(acquire(&server, "r", "v"), granted(1, LIMIT, 1));
    assert_eq!(field(&server, "c"), Some(LIMIT.to_string()));
    // One more would pass 2^53: refused before the key is set.
    assert_error(acquire(&server, "s", "v"), "FENCELIMIT");
    assert_eq!(server.get(b"s"), None);
    assert_eq!(field(&server, "c"), Some(LIMIT.to_string()));
}

#[test]
fn the_write_back_raises_the_counter_only_under_our_key_in_our_epoch() {
    let server = RedisServer::start();
    anchor(&server, "0", "5");
    assert_eq!(acquire(&server, "r", "v"), granted(1, 1, 5));
    let write_back = |value: &str, token: &str, epoch: &str| {
        eval(&server, WRITE_BACK, &["r", DOMAIN], &[value, token, epoch])
    };

    assert_eq!(write_back("v", "9", "5"), int(1));
    assert_eq!(field(&server, "c").as_deref(), Some("9"));
    // Set if greater: a lower token is counted (the counter is above it)
    // but never lowers the counter; the same token again is idempotent.
    assert_eq!(write_back("v", "4", "5"), int(1));
    assert_eq!(write_back("v", "9", "5"), int(1));
    assert_eq!(field(&server, "c").as_deref(), Some("9"));
    // Not our key: nothing written.
    assert_eq!(write_back("w", "12", "5"), int(0));
    // Another epoch (a repair came between the rounds): nothing written.
    assert_error(write_back("v", "12", "6"), "FENCEEPOCH");
    assert_eq!(field(&server, "c").as_deref(), Some("9"));
    // Tagged: 2 * tag + status.
    let tagged = |value: &str| {
        eval(
            &server,
            WRITE_BACK,
            &["r", DOMAIN],
            &[value, "10", "5", "3"],
        )
    };
    assert_eq!(tagged("v"), int(7));
    assert_eq!(tagged("w"), int(6));
    assert_eq!(field(&server, "c").as_deref(), Some("10"));
    // Tokens that are not canonical integers in 1..=2^53 are refused.
    let over = (LIMIT + 1).to_string();
    for bad in ["0", "01", "-1", "1.5", "1e3", "", &over] {
        assert_error(write_back("v", bad, "5"), "ERR");
    }
    assert_eq!(write_back("v", &LIMIT.to_string(), "5"), int(1));
    assert_eq!(field(&server, "c"), Some(LIMIT.to_string()));
    // Our key gone (expired, released): not ours.
    server.cmd(&["DEL", "r"]);
    assert_eq!(write_back("v", "20", "5"), int(0));
    // The anchor gone (state lost): refused before anything else.
    server.cmd(&["SET", "r", "v"]);
    server.cmd(&["DEL", DOMAIN]);
    assert_error(write_back("v", "20", "5"), "NOANCHOR");
    assert_eq!(server.cmd(&["EXISTS", DOMAIN]), int(0));
}

#[test]
fn the_probe_tells_anchored_missing_and_stale() {
    let server = RedisServer::start();
    let none = [
        int(0),
        int(0),
        int(0),
        bulk("noeviction"),
        int(0),
        int(0),
        int(0),
    ];
    assert_eq!(probe(&server), OwnedReply::Array(none.to_vec()));
    assert_eq!(anchor_as(&server, "41", "3", "2"), int(1));
    assert_eq!(probe(&server), probed(1, 41, 3, 2));
    // The anchor records the run and the data set (replication id).
    assert_eq!(field(&server, "r"), Some(run_id(&server)));
    assert_eq!(field(&server, "p"), Some(server.replication_id()));
    assert_eq!(field(&server, "d").as_deref(), Some(DOMAIN_ID));
    assert_eq!(field(&server, "n").as_deref(), Some(MEMBERS));
    assert_eq!(field(&server, "m").as_deref(), Some("2"));
    // Without a key (a cluster node's handshake, which cannot name a hash
    // of every slot it serves): the node's part only, state 1 and the
    // policy, whatever hashes it holds.
    let mut node = none.to_vec();
    node[0] = int(1);
    assert_eq!(eval(&server, PROBE, &[], &[]), OwnedReply::Array(node));
}

#[test]
fn the_operators_probe_reads_no_info_for_an_absent_hash_and_no_policy() {
    // ARGV '1': what fence_init and the repair send to every hash (16384
    // per cluster voter): INFO only where there is an anchor to judge, and
    // without its memory section (the policy is each connection's own
    // probe's to read).
    let server = RedisServer::start();
    let lean = |server: &RedisServer| eval(server, PROBE, &[DOMAIN], &["1"]);
    let infos = server.calls_of("info");
    assert_eq!(
        lean(&server),
        OwnedReply::Array(vec![
            int(0),
            int(0),
            int(0),
            bulk(""),
            int(0),
            int(0),
            int(0)
        ])
    );
    assert_eq!(
        server.calls_of("info"),
        infos + 1,
        "only calls_of's own INFO"
    );
    assert_eq!(anchor_as(&server, "41", "3", "2"), int(1));
    let mut anchored = probed(1, 41, 3, 2);
    if let OwnedReply::Array(items) = &mut anchored {
        items[3] = bulk("");
    }
    assert_eq!(lean(&server), anchored);
    // Stale: the same states as the full probe's.
    server.cmd(&["HSET", DOMAIN, "p", "another"]);
    match lean(&server) {
        OwnedReply::Array(items) => assert_eq!(items[0], int(4)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_restart_with_its_data_leaves_a_stale_anchor_and_one_without_none() {
    // Every write on disk before it is acknowledged: the data survives the
    // restart, the run id does not.
    let mut durable = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    anchor(&durable, "41", "3");
    assert_eq!(acquire(&durable, "r", "v"), granted(1, 42, 3));
    durable.restart();
    assert_eq!(
        field(&durable, "c").as_deref(),
        Some("42"),
        "the data survived"
    );
    assert_eq!(
        probe(&durable),
        probed(2, 42, 3, 1),
        "anchored by an earlier run: stale"
    );
    // Round 1 refuses it by itself: a restart also renews the replication id.
    assert_error(acquire(&durable, "s", "v"), "FENCESTALE");
    assert_eq!(durable.get(b"s"), None);
    // A stale master is no barrier member; the repair anchors it again,
    // never lowering its counter.
    assert_error(barrier(&durable, "4", "0"), "FENCESTALE");
    assert_eq!(anchor_as(&durable, "40", "4", "1"), int(1));
    assert_eq!(field(&durable, "c").as_deref(), Some("42"));
    assert_eq!(field(&durable, "e").as_deref(), Some("4"));
    assert_eq!(field(&durable, "r"), Some(run_id(&durable)));
    assert_eq!(state(&durable), 1);

    // Without persistence the anchor is gone: fenced acquisitions are
    // refused until the repair anchors it again.
    let mut volatile = RedisServer::start();
    anchor(&volatile, "41", "3");
    volatile.restart();
    assert_eq!(state(&volatile), 0);
    assert_error(acquire(&volatile, "r", "v"), "NOANCHOR");
    assert_eq!(volatile.dbsize(), 0);
}

#[test]
fn the_barrier_moves_the_epoch_and_reads_the_counter_at_once() {
    let server = RedisServer::start();
    assert_error(barrier(&server, "2", "0"), "NOANCHOR");
    anchor(&server, "5", "1");
    assert_eq!(acquire(&server, "r", "v"), granted(1, 6, 1));
    assert_eq!(barrier(&server, "2", "0"), int(6));
    assert_eq!(field(&server, "e").as_deref(), Some("2"));
    // A write-back decided in the old epoch is refused from now on.
    assert_error(
        eval(&server, WRITE_BACK, &["r", DOMAIN], &["v", "9", "1"]),
        "FENCEEPOCH",
    );
    assert_eq!(field(&server, "c").as_deref(), Some("6"));
    let over = (LIMIT).to_string();
    for bad in ["0", "02", "x", &over] {
        assert_error(barrier(&server, bad, "0"), "ERR");
    }
    // An anchor of another initialisation (another domain id, or another
    // number of members) is no source of this repair.
    let other = eval(&server, BARRIER, &[DOMAIN], &["3", "78", MEMBERS, "0"]);
    assert_error(other, "ERR");
    let other = eval(&server, BARRIER, &[DOMAIN], &["3", DOMAIN_ID, "5", "0"]);
    assert_error(other, "ERR");
    assert_error(barrier(&server, "3", "4"), "ERR"); // member 4 of 3
    assert_eq!(field(&server, "e").as_deref(), Some("2"));
}

#[test]
fn the_anchor_writes_only_where_there_is_none_or_a_stale_one() {
    let server = RedisServer::start();
    assert_eq!(anchor_as(&server, "7", "9", "1"), int(1));
    // Anchored by this run: untouched (an epoch change is the barrier's).
    assert_eq!(anchor_as(&server, "100", "10", "2"), int(0));
    assert_eq!(field(&server, "c").as_deref(), Some("7"));
    assert_eq!(field(&server, "e").as_deref(), Some("9"));
    assert_eq!(field(&server, "m").as_deref(), Some("1"));
    let over = (LIMIT + 1).to_string();
    let other = |args: &[&str]| eval(&server, ANCHOR, &["other"], args);
    for (counter, epoch) in [("-1", "1"), ("x", "1"), (over.as_str(), "1"), ("1", "0")] {
        assert_error(other(&[counter, epoch, "1", "3", "1"]), "ERR");
    }
    for (id, members, member) in [
        ("0", "3", "1"),
        ("1", "0", "1"),
        ("1", "3", "0"),
        ("1", "3", "4"),
    ] {
        assert_error(other(&["1", "1", id, members, member]), "ERR");
    }
    assert_eq!(server.cmd(&["EXISTS", "other"]), int(0));
    assert_eq!(
        other(&[&LIMIT.to_string(), "1", "1", "3", "3"]),
        int(1),
        "2^53 itself is a counter"
    );
}

#[test]
fn without_info_restarts_cannot_be_told_and_the_scripts_say_so() {
    let server = RedisServer::start_with(&["--user", "app on >pw ~* &* +@all -info"])
        .with_admin_auth(&["app", "pw"]);
    assert_error(anchor_as(&server, "0", "1", "1"), "FENCESTALE");
    server.cmd(&[
        "HSET", DOMAIN, "c", "3", "e", "1", "r", "whatever", "p", "x",
    ]);
    let mut blind = vec![int(3), int(3), int(1), bulk(""), int(0), int(0), int(0)];
    assert_eq!(probe(&server), OwnedReply::Array(blind.clone()));
    server.cmd(&["HSET", DOMAIN, "m", "2", "n", "3", "d", "77"]);
    blind.splice(4.., [int(2), int(3), int(77)]);
    assert_eq!(probe(&server), OwnedReply::Array(blind));
    assert_error(barrier(&server, "2", "0"), "FENCESTALE");
    // Round 1 and the write-back read the replication id on every call:
    // without INFO they cannot, and write nothing.
    assert_error(acquire(&server, "r", "v"), "FENCESTALE");
    server.cmd(&["SET", "r", "v"]);
    let write_back = eval(&server, WRITE_BACK, &["r", DOMAIN], &["v", "9", "1"]);
    assert_error(write_back, "FENCESTALE");
    assert_eq!(field(&server, "c").as_deref(), Some("3"));
}

#[test]
fn the_probe_reports_an_eviction_policy_that_can_evict_the_counter() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    anchor(&server, "0", "1");
    let mut expected = vec![int(1), int(0), int(1), bulk("allkeys-lru")];
    expected.extend([int(1), int(3), int(77)]);
    assert_eq!(probe(&server), OwnedReply::Array(expected));
}

#[test]
fn the_referee_accepts_a_token_at_least_the_largest_it_accepted() {
    let server = RedisServer::start();
    let write =
        |token: &str, data: &str| eval(&server, REFEREE, &["fence:res", "res"], &[token, data]);
    assert_eq!(write("5", "a"), int(1));
    assert_eq!(write("5", "b"), int(1), "the same holder writes again");
    assert_eq!(write("4", "stale"), int(0));
    assert_eq!(server.get(b"res").as_deref(), Some(&b"b"[..]));
    assert_eq!(write("6", "c"), int(1));
    assert_eq!(server.get(b"fence:res").as_deref(), Some(&b"6"[..]));
    for bad in ["0", "-3", "07", "2.5"] {
        assert_error(write(bad, "x"), "ERR");
    }
    assert_eq!(server.get(b"res").as_deref(), Some(&b"c"[..]));
}

/// A master that anchored and counted, a replica that copied it (counter
/// 0 when copied), promoted; the master counts on, then fails back: made a
/// replica of the copy and promoted again. Same process, same run id, the
/// copy's counter: its replication id is the only sign, and every script
/// that counts reads it.
#[test]
fn a_master_that_failed_back_is_stale_for_every_script_until_anchored_again() {
    let master = RedisServer::start_with(&QUICK_SYNC);
    let copy = RedisServer::start_with(&QUICK_SYNC);
    // The replica first: its arrival renews the master's replication id
    // (see the next test), so a master is anchored with its replicas.
    copy.replicate(&master);
    anchor(&master, "0", "5");
    let started = std::time::Instant::now();
    while field(&copy, "c").is_none() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the anchor never reached the copy"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(field(&copy, "c").as_deref(), Some("0"), "the copy");
    // A replica's copy is not valid: it names another run.
    assert_eq!(state(&copy), 2);
    copy.promote();
    let run = run_id(&master);
    for (n, key) in ["a", "b", "c"].iter().enumerate() {
        let token = n as i64 + 1;
        assert_eq!(acquire(&master, key, "v"), granted(1, token, 5));
    }
    // Failed back: while a replica, its data is the copy's, and nothing
    // counts there (a replica writes nothing; its data set changed anyway).
    master.replicate(&copy);
    assert_eq!(field(&master, "c").as_deref(), Some("0"), "rolled back");
    assert_eq!(probe(&master), probed(4, 0, 5, 1));
    assert_error(acquire(&master, "d", "v"), "FENCESTALE");
    master.promote();
    assert_eq!(run_id(&master), run, "the same process");
    assert_eq!(
        probe(&master),
        probed(4, 0, 5, 1),
        "stale: another data set"
    );
    // Nothing counts it, and nothing is written.
    assert_error(acquire(&master, "d", "v"), "FENCESTALE");
    assert_eq!(master.get(b"d"), None);
    master.cmd(&["SET", "e", "v"]);
    let write_back = eval(&master, WRITE_BACK, &["e", DOMAIN], &["v", "3", "5"]);
    assert_error(write_back, "FENCESTALE");
    assert_error(barrier(&master, "6", "0"), "FENCESTALE");
    assert_eq!(field(&master, "c").as_deref(), Some("0"));
    // The repair anchors it again, at the counter the barrier read elsewhere.
    assert_eq!(anchor_as(&master, "3", "6", "1"), int(1));
    assert_eq!(probe(&master), probed(1, 3, 6, 1));
    assert_eq!(acquire(&master, "d", "v"), granted(1, 4, 6));
}

/// What else renews a master's replication id, and what does not, on the
/// server under test (docs/fencing.md, "What renews the replication id"):
/// its first replica (the replication backlog is created with a new id)
/// does; DEBUG RELOAD (the same data, saved and loaded) does not.
#[test]
fn a_first_replica_renews_the_replication_id_and_debug_reload_does_not() {
    let mut args = QUICK_SYNC.to_vec();
    args.extend(["--enable-debug-command", "yes"]);
    let master = RedisServer::start_with(&args);
    anchor(&master, "4", "1");
    assert_eq!(
        master.cmd(&["DEBUG", "RELOAD"]),
        OwnedReply::Simple(b"OK".to_vec())
    );
    assert_eq!(state(&master), 1, "DEBUG RELOAD keeps the data set");
    assert_eq!(acquire(&master, "r", "v"), granted(1, 5, 1));
    let before = master.replication_id();
    let replica = RedisServer::start_with(&QUICK_SYNC);
    replica.replicate(&master);
    assert_ne!(master.replication_id(), before, "a new backlog, a new id");
    // Not a rollback, but it cannot be told from one: a repair is needed.
    assert_eq!(state(&master), 4);
    assert_error(acquire(&master, "s", "v"), "FENCESTALE");
}

/// An anchor written by the earlier format (no replication id, no member)
/// counts no more, and a repair's barrier takes it as a source (it names
/// this run) and upgrades it.
#[test]
fn an_anchor_of_the_earlier_format_needs_the_repair_which_upgrades_it() {
    let server = RedisServer::start();
    let run = run_id(&server);
    server.cmd(&["HSET", DOMAIN, "c", "8", "e", "3", "r", &run]);
    let old = vec![
        int(5),
        int(8),
        int(3),
        bulk("noeviction"),
        int(0),
        int(0),
        int(0),
    ];
    assert_eq!(probe(&server), OwnedReply::Array(old));
    assert_error(acquire(&server, "r", "v"), "FENCESTALE");
    assert_eq!(server.get(b"r"), None);
    // The repair must give it a member.
    assert_error(barrier(&server, "4", "0"), "ERR");
    assert_eq!(barrier(&server, "4", "3"), int(8));
    assert_eq!(probe(&server), probed(1, 8, 4, 3));
    assert_eq!(acquire(&server, "r", "v"), granted_as(1, 9, 4, 3));
    // Once it has one, a barrier keeps it.
    assert_eq!(barrier(&server, "5", "2"), int(9));
    assert_eq!(field(&server, "m").as_deref(), Some("3"));
}

/// `acquire_set.lua` on `keys` (the domain's hash added as the last key).
fn acquire_set(server: &RedisServer, keys: &[&str], args: &[&str]) -> OwnedReply {
    let mut all = keys.to_vec();
    all.push(DOMAIN);
    eval(server, ACQUIRE_SET, &all, args)
}

#[test]
fn a_sets_round_one_sets_every_key_and_counts_once_or_writes_nothing() {
    let server = RedisServer::start();
    assert_error(
        acquire_set(&server, &["a", "b"], &["v", "10000"]),
        "NOANCHOR",
    );
    assert_eq!(server.dbsize(), 0);

    anchor(&server, "0", "7");
    assert_eq!(
        acquire_set(&server, &["a", "b", "c"], &["v", "10000"]),
        granted(1, 1, 7),
        "three keys, the counter raised once"
    );
    for key in [&b"a"[..], b"b", b"c"] {
        assert_eq!(server.get(key).as_deref(), Some(&b"v"[..]));
        let ttl = server.pttl(key);
        assert!(ttl > 0 && ttl <= 10_000, "{ttl}");
    }
    // One key held (the last one tried): refused, the keys this run set
    // deleted again, and the counter not moved.
    server.cmd(&["SET", "z", "theirs"]);
    assert_eq!(
        acquire_set(&server, &["x", "y", "z"], &["w", "10000"]),
        ints(&[0])
    );
    assert_eq!(server.get(b"x"), None);
    assert_eq!(server.get(b"y"), None);
    assert_eq!(server.get(b"z").as_deref(), Some(&b"theirs"[..]));
    assert_eq!(field(&server, "c").as_deref(), Some("1"));
    // A single lock of the domain counts on the same counter.
    assert_eq!(acquire(&server, "s", "v"), granted(1, 2, 7));
    // Tagged: 2 * tag + status first.
    assert_eq!(
        acquire_set(&server, &["m", "n"], &["v", "10000", "21"]),
        granted(43, 3, 7)
    );
    assert_eq!(
        acquire_set(&server, &["m", "o"], &["w", "10000", "21"]),
        ints(&[42])
    );
    assert_eq!(server.get(b"o"), None);
    // At 2^53: refused before any key is set.
    server.cmd(&["HSET", DOMAIN, "c", &LIMIT.to_string()]);
    assert_error(
        acquire_set(&server, &["p", "q"], &["v", "10000"]),
        "FENCELIMIT",
    );
    assert_eq!((server.get(b"p"), server.get(b"q")), (None, None));
}

/// The check that makes a set's write-back safe per resource
/// (docs/fencing.md, "Sets"): with any key of the set not ours, the
/// counter is not raised, whichever key it is.
#[test]
fn a_sets_write_back_raises_the_counter_only_while_every_key_is_ours() {
    let server = RedisServer::start();
    anchor(&server, "0", "5");
    let keys = ["a", "b", "c", DOMAIN];
    let write_back = |value: &str, token: &str, epoch: &str| {
        eval(&server, WRITE_BACK_SET, &keys, &[value, token, epoch])
    };
    for key in ["a", "b", "c"] {
        server.cmd(&["SET", key, "v"]);
    }
    assert_eq!(write_back("v", "9", "5"), int(1));
    assert_eq!(field(&server, "c").as_deref(), Some("9"));
    // Each key in turn gone, or another holder's: not ours, nothing written.
    for key in ["a", "b", "c"] {
        server.cmd(&["DEL", key]);
        assert_eq!(write_back("v", "12", "5"), int(0), "{key} gone");
        server.cmd(&["SET", key, "theirs"]);
        assert_eq!(write_back("v", "12", "5"), int(0), "{key} another's");
        assert_eq!(field(&server, "c").as_deref(), Some("9"));
        server.cmd(&["SET", key, "v"]);
    }
    // Set if greater; another epoch refused; tagged.
    assert_eq!(write_back("v", "4", "5"), int(1));
    assert_eq!(field(&server, "c").as_deref(), Some("9"));
    assert_error(write_back("v", "12", "6"), "FENCEEPOCH");
    let tagged = eval(&server, WRITE_BACK_SET, &keys, &["v", "10", "5", "3"]);
    assert_eq!(tagged, int(7));
    assert_eq!(field(&server, "c").as_deref(), Some("10"));
    for bad in ["0", "01", "-1", "1.5", ""] {
        assert_error(write_back("v", bad, "5"), "ERR");
    }
    server.cmd(&["DEL", DOMAIN]);
    assert_error(write_back("v", "20", "5"), "NOANCHOR");
}
