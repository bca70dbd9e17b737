//! The fencing protocol's scripts (src/fence/*.lua, docs/fencing.md) run
//! directly against a real server, branch by branch: the reply shapes the
//! library will judge, what each writes and what it must not.
//!
//! They run on whatever server the tests start (`REDLOCK_TEST_SERVER`):
//! Redis 7.0, Valkey 8.1 and Valkey 9.1 were checked.

mod support;

use support::{OwnedReply, RedisServer};

const ACQUIRE: &str = include_str!("../src/fence/acquire.lua");
const WRITE_BACK: &str = include_str!("../src/fence/write_back.lua");
const PROBE: &str = include_str!("../src/fence/probe.lua");
const BARRIER: &str = include_str!("../src/fence/barrier.lua");
const ANCHOR: &str = include_str!("../src/fence/anchor.lua");
const REFEREE: &str = include_str!("../src/fence/referee.lua");

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

/// Anchors the domain with `counter` in `epoch`.
fn anchor(server: &RedisServer, counter: &str, epoch: &str) {
    assert_eq!(eval(server, ANCHOR, &[DOMAIN], &[counter, epoch]), int(1));
}

/// The probe's state: 0 no anchor, 1 anchored by this run, 2 stale, 3 cannot tell.
fn state(server: &RedisServer) -> i64 {
    match eval(server, PROBE, &[DOMAIN], &[]) {
        OwnedReply::Array(items) => match items[0] {
            OwnedReply::Integer(n) => n,
            ref other => panic!("probe state: {other:?}"),
        },
        other => panic!("probe: {other:?}"),
    }
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
    assert_eq!(acquire(&server, "r", "v"), ints(&[1, 1, 7]));
    assert_eq!(server.get(b"r").as_deref(), Some(&b"v"[..]));
    let ttl = server.pttl(b"r");
    assert!(ttl > 0 && ttl <= 10_000, "{ttl}");
    // Held: nothing counted.
    assert_eq!(acquire(&server, "r", "w"), ints(&[0]));
    assert_eq!(field(&server, "c").as_deref(), Some("1"));
    // Another resource of the domain: the same counter.
    assert_eq!(acquire(&server, "s", "v"), ints(&[1, 2, 7]));

    // Tagged (a connection without ECHO): 2 * tag + status first.
    let tagged =
        |key: &str, value: &str| eval(&server, ACQUIRE, &[key, DOMAIN], &[value, "10000", "21"]);
    assert_eq!(tagged("t", "v"), ints(&[43, 3, 7]));
    assert_eq!(tagged("t", "w"), ints(&[42]));
    let big_tag = ((1u64 << 52) - 1).to_string();
    let reply = eval(&server, ACQUIRE, &["u", DOMAIN], &["v", "10000", &big_tag]);
    assert_eq!(
        reply,
        ints(&[(1 << 53) - 1, 4, 7]),
        "tags below 2^52 are exact"
    );
}

#[test]
fn round_one_stops_at_2_to_the_53() {
    let server = RedisServer::start();
    anchor(&server, &(LIMIT - 1).to_string(), "1");
    // The last token: exact in a reply (and in Lua's doubles).
    assert_eq!(acquire(&server, "r", "v"), ints(&[1, LIMIT, 1]));
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
    assert_eq!(acquire(&server, "r", "v"), ints(&[1, 1, 5]));
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
    assert_eq!(
        eval(&server, PROBE, &[DOMAIN], &[]),
        OwnedReply::Array(vec![int(0), int(0), int(0), bulk("noeviction")])
    );
    anchor(&server, "41", "3");
    assert_eq!(
        eval(&server, PROBE, &[DOMAIN], &[]),
        OwnedReply::Array(vec![int(1), int(41), int(3), bulk("noeviction")])
    );
    assert_eq!(field(&server, "r"), Some(run_id(&server)));
}

#[test]
fn a_restart_with_its_data_leaves_a_stale_anchor_and_one_without_none() {
    // Every write on disk before it is acknowledged: the data survives the
    // restart, the run id does not.
    let mut durable = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    anchor(&durable, "41", "3");
    assert_eq!(acquire(&durable, "r", "v"), ints(&[1, 42, 3]));
    durable.restart();
    assert_eq!(
        field(&durable, "c").as_deref(),
        Some("42"),
        "the data survived"
    );
    let probe = eval(&durable, PROBE, &[DOMAIN], &[]);
    assert_eq!(
        probe,
        OwnedReply::Array(vec![int(2), int(42), int(3), bulk("noeviction")]),
        "anchored by an earlier run: stale"
    );
    // A stale master is no barrier member; the repair anchors it again,
    // never lowering its counter.
    assert_error(eval(&durable, BARRIER, &[DOMAIN], &["4"]), "FENCESTALE");
    assert_eq!(eval(&durable, ANCHOR, &[DOMAIN], &["40", "4"]), int(1));
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
    assert_error(eval(&server, BARRIER, &[DOMAIN], &["2"]), "NOANCHOR");
    anchor(&server, "5", "1");
    assert_eq!(acquire(&server, "r", "v"), ints(&[1, 6, 1]));
    assert_eq!(eval(&server, BARRIER, &[DOMAIN], &["2"]), int(6));
    assert_eq!(field(&server, "e").as_deref(), Some("2"));
    // A write-back decided in the old epoch is refused from now on.
    assert_error(
        eval(&server, WRITE_BACK, &["r", DOMAIN], &["v", "9", "1"]),
        "FENCEEPOCH",
    );
    assert_eq!(field(&server, "c").as_deref(), Some("6"));
    let over = (LIMIT).to_string();
    for bad in ["0", "02", "x", &over] {
        assert_error(eval(&server, BARRIER, &[DOMAIN], &[bad]), "ERR");
    }
}

#[test]
fn the_anchor_writes_only_where_there_is_none_or_a_stale_one() {
    let server = RedisServer::start();
    assert_eq!(eval(&server, ANCHOR, &[DOMAIN], &["7", "9"]), int(1));
    // Anchored by this run: untouched (an epoch change is the barrier's).
    assert_eq!(eval(&server, ANCHOR, &[DOMAIN], &["100", "10"]), int(0));
    assert_eq!(field(&server, "c").as_deref(), Some("7"));
    assert_eq!(field(&server, "e").as_deref(), Some("9"));
    let over = (LIMIT + 1).to_string();
    for (counter, epoch) in [("-1", "1"), ("x", "1"), (over.as_str(), "1"), ("1", "0")] {
        assert_error(eval(&server, ANCHOR, &["other"], &[counter, epoch]), "ERR");
    }
    assert_eq!(
        eval(&server, ANCHOR, &["other"], &[&LIMIT.to_string(), "1"]),
        int(1),
        "2^53 itself is a counter"
    );
}

#[test]
fn without_info_restarts_cannot_be_told_and_the_scripts_say_so() {
    let server = RedisServer::start_with(&["--user", "app on >pw ~* &* +@all -info"])
        .with_admin_auth(&["app", "pw"]);
    assert_error(eval(&server, ANCHOR, &[DOMAIN], &["0", "1"]), "FENCESTALE");
    server.cmd(&["HSET", DOMAIN, "c", "3", "e", "1", "r", "whatever"]);
    assert_eq!(
        eval(&server, PROBE, &[DOMAIN], &[]),
        OwnedReply::Array(vec![int(3), int(3), int(1), bulk("")])
    );
    assert_error(eval(&server, BARRIER, &[DOMAIN], &["2"]), "FENCESTALE");
    // Round 1 and the write-back need no INFO (the probe is per connection).
    assert_eq!(acquire(&server, "r", "v"), ints(&[1, 4, 1]));
}

#[test]
fn the_probe_reports_an_eviction_policy_that_can_evict_the_counter() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    anchor(&server, "0", "1");
    assert_eq!(
        eval(&server, PROBE, &[DOMAIN], &[]),
        OwnedReply::Array(vec![int(1), int(0), int(1), bulk("allkeys-lru")])
    );
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
