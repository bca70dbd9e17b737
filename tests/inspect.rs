//! `Redlock::inspect`: a resource's lock looked at without taking it, one
//! round of `PTTL` per master, against real servers: free, held, held
//! without expiry, neither held nor free on a quorum, no quorum; and never
//! the lock's value. The holder label (`Builder::holder_label`): seen by
//! another handle, the secret never; no label, as before; a bad label, a
//! typed configuration error.

mod support;

use redlock_sync::{ConfigError, Error, KeyOnMaster, Redlock, MAX_HOLDER_LABEL_LEN};
use std::time::Duration;
use support::Cluster;

const TTL: Duration = Duration::from_secs(10);

/// A handle whose rounds give each master 1 s: every master must answer
/// an inspection here, which the default node timeout (50 ms) does not
/// promise on a loaded machine.
fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration")
}

#[test]
fn a_free_resource_is_absent_everywhere() {
    let cluster = Cluster::start(3);
    let seen = client(&cluster).inspect("job").expect("a quorum answers");
    assert!(seen.is_free() && !seen.is_held(), "{seen}");
    assert_eq!((seen.absent_on(), seen.held_on(), seen.quorum()), (3, 0, 2));
    assert!(seen.masters().all(|(_, key)| *key == KeyOnMaster::Absent));
    assert_eq!(seen.held_for(), None);
    assert_eq!(seen.to_string(), "free on 3 of 3 masters (quorum 2)");
    assert_eq!(cluster.total_keys(), 0, "an inspection sets nothing");
}

/// A held lock shows on every master with its time to live, and a quorum's
/// hold; the inspection sends one `PTTL` to each master and nothing that
/// reads the value, which shows nowhere in what it returns.
#[test]
fn a_held_lock_shows_per_master_with_its_time_to_live() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let lock = redlock.lock("job", TTL).expect("free");
    // The call returned at a quorum: the last master may run its SET a
    // moment later.
    let set_at = std::time::Instant::now();
    while !cluster.servers.iter().all(|s| s.get(b"job").is_some()) {
        assert!(
            set_at.elapsed() < Duration::from_secs(10),
            "a master never set the key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let value = cluster.servers[0].get(b"job").expect("the key is set");
    let gets_before: Vec<u64> = cluster.servers.iter().map(|s| s.calls_of("get")).collect();
    let seen = client(&cluster).inspect("job").expect("a quorum answers");
    assert!(seen.is_held() && !seen.is_free(), "{seen}");
    for (server, (name, key)) in cluster.servers.iter().zip(seen.masters()) {
        assert_eq!(name, format!("127.0.0.1:{}", server.port()));
        let KeyOnMaster::Held { expires_in } = key else {
            panic!("{name}: {key:?}");
        };
        assert!(
            *expires_in > TTL - Duration::from_secs(3) && *expires_in <= TTL,
            "{name}: {expires_in:?}"
        );
        assert_eq!(server.calls_of("pttl"), 1, "one PTTL per master");
    }
    let gets_after: Vec<u64> = cluster.servers.iter().map(|s| s.calls_of("get")).collect();
    assert_eq!(gets_before, gets_after, "the value is never read");
    let held_for = seen.held_for().expect("held");
    assert!(
        held_for > TTL - Duration::from_secs(3) && held_for <= TTL,
        "{held_for:?}"
    );
    assert!(seen
        .to_string()
        .starts_with("held on 3 of 3 masters (quorum 2) for at least "));
    let value = String::from_utf8_lossy(&value).into_owned();
    for shown in [format!("{seen}"), format!("{seen:?}")] {
        assert!(!shown.contains(&value), "the value shows: {shown}");
    }
    lock.unlock().expect("released");
    assert!(redlock.inspect("job").unwrap().is_free());
}

/// A key set by hand without expiry on a quorum holds the resource for
/// good; on a minority it leaves the resource free.
#[test]
fn keys_without_expiry_and_on_a_minority() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    for server in &cluster.servers[..2] {
        server.cmd(&["SET", "stuck", "x"]);
    }
    let seen = redlock.inspect("stuck").unwrap();
    assert!(seen.is_held(), "{seen}");
    assert_eq!(seen.held_for(), Some(Duration::MAX));
    assert!(seen.to_string().ends_with("without expiry"), "{seen}");
    let keys: Vec<&KeyOnMaster> = seen.masters().map(|(_, key)| key).collect();
    assert_eq!(
        keys,
        [
            &KeyOnMaster::HeldWithoutExpiry,
            &KeyOnMaster::HeldWithoutExpiry,
            &KeyOnMaster::Absent
        ]
    );
    cluster.servers[0].cmd(&["SET", "minority", "x", "PX", "5000"]);
    let seen = redlock.inspect("minority").unwrap();
    assert!(seen.is_free() && !seen.is_held(), "{seen}");
    assert_eq!(seen.held_on(), 1);
}

/// With one master of three down, a key on one of the others leaves the
/// lock neither held nor free on a quorum; with two down nothing can be
/// said: `NoQuorum`, naming the masters that failed.
#[test]
fn masters_down_leave_it_undecided_or_unknown() {
    let mut cluster = Cluster::start(3);
    let redlock = client(&cluster);
    cluster.servers[1].cmd(&["SET", "job", "x", "PX", "60000"]);
    cluster.servers[2].kill();
    let seen = redlock.inspect("job").expect("two of three answer");
    assert!(!seen.is_held() && !seen.is_free(), "{seen}");
    assert_eq!(seen.held_for(), None);
    let keys: Vec<&KeyOnMaster> = seen.masters().map(|(_, key)| key).collect();
    assert_eq!(keys[0], &KeyOnMaster::Absent);
    assert!(matches!(keys[1], KeyOnMaster::Held { .. }), "{keys:?}");
    assert!(matches!(keys[2], KeyOnMaster::Unknown(_)), "{keys:?}");
    assert!(
        seen.to_string().starts_with("neither held nor free"),
        "{seen}"
    );
    cluster.servers[1].kill();
    let error = redlock.inspect("job").expect_err("one of three answers");
    assert!(matches!(error, Error::NoQuorum(_)), "{error}");
    assert!(error.is_connection_refused(), "{error}");
}

/// Waits (10 s at most) until every master holds `key`: a call returns at
/// a quorum, and the last master may run its command a moment later.
fn on_every_master(cluster: &Cluster, key: &[u8]) {
    let since = std::time::Instant::now();
    while !cluster.servers.iter().all(|s| s.get(key).is_some()) {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "a master never set the key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

const LABEL: &str = "web-3 pid 4242";

/// A handle with a holder label stores it after the value's secret; a
/// handle without one sees it in its inspection (quorum and per master,
/// and in the summary), and the secret nowhere: not in what the
/// inspection returns, its `Display` or its `Debug`. The inspection reads
/// the value with one `GETRANGE` per master from the byte after the secret
/// (no `GET`). Extending and releasing compare the whole value as before.
#[test]
fn a_holder_label_is_seen_by_another_handle_and_the_secret_never_is() {
    let cluster = Cluster::start(3);
    let holder = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .holder_label(LABEL)
        .build()
        .expect("valid configuration");
    let mut lock = holder.lock("job", TTL).expect("free");
    on_every_master(&cluster, b"job");
    let value = cluster.servers[0].get(b"job").expect("the key is set");
    let (secret, tail) = value.split_at(40);
    assert!(secret.iter().all(u8::is_ascii_hexdigit), "{value:?}");
    assert_eq!(tail, format!("|{LABEL}").as_bytes());
    let secret = String::from_utf8(secret.to_vec()).unwrap();

    let gets_before: Vec<u64> = cluster.servers.iter().map(|s| s.calls_of("get")).collect();
    let seen = client(&cluster).inspect("job").expect("a quorum answers");
    let gets_after: Vec<u64> = cluster.servers.iter().map(|s| s.calls_of("get")).collect();
    assert_eq!(gets_before, gets_after, "the value is never read whole");
    for server in &cluster.servers {
        assert_eq!(server.calls_of("getrange"), 1, "one GETRANGE per master");
    }
    assert!(seen.is_held(), "{seen}");
    assert_eq!(seen.holder_label(), Some(LABEL));
    assert!(seen.holder_labels().all(|(_, label)| label == Some(LABEL)));
    assert!(
        seen.to_string().ends_with(&format!(", holder \"{LABEL}\"")),
        "{seen}"
    );
    for shown in [format!("{seen}"), format!("{seen:?}"), format!("{lock:?}")] {
        assert!(!shown.contains(&secret), "the secret shows: {shown}");
        // Nor a piece of it long enough to matter.
        assert!(
            !shown.contains(&secret[20..]),
            "part of the secret: {shown}"
        );
    }
    // The holder's own handle sees the same.
    assert_eq!(holder.inspect("job").unwrap().holder_label(), Some(LABEL));

    lock.extend(TTL)
        .expect("extended: the whole value still matches");
    lock.unlock()
        .expect("released: the whole value still matches");
    let seen = client(&cluster).inspect("job").unwrap();
    assert!(seen.is_free(), "{seen}");
    assert_eq!(seen.holder_label(), None);
}

/// Without a label, the value is the secret alone and an inspection says
/// what it said before: no holder, the same summary.
#[test]
fn without_a_holder_label_the_value_and_the_inspection_are_as_before() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let lock = redlock.lock("job", TTL).expect("free");
    on_every_master(&cluster, b"job");
    let value = cluster.servers[0].get(b"job").expect("the key is set");
    assert_eq!(value.len(), 40, "{value:?}");
    let seen = redlock.inspect("job").unwrap();
    assert!(seen.is_held(), "{seen}");
    assert_eq!(seen.holder_label(), None);
    assert!(seen.holder_labels().all(|(_, label)| label.is_none()));
    let shown = seen.to_string();
    assert!(
        shown.starts_with("held on 3 of 3 masters (quorum 2) for at least ")
            && shown.ends_with('s'),
        "{shown}"
    );
    lock.unlock().expect("released");
}

/// The label on a quorum is the holder's; a minority's other label (a key
/// left by an earlier holder) is shown per master only. Keys that are not
/// a label's: a value without one, a longer value of another client's, a
/// key that is no string (its `GETRANGE` fails: the `PTTL` still counts).
#[test]
fn the_holder_is_the_label_on_a_quorum_and_other_keys_have_none() {
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let secret = "0123456789abcdef0123456789abcdef01234567";
    for (server, label) in cluster.servers.iter().zip(["a", "a", "b"]) {
        server.cmd(&["SET", "job", &format!("{secret}|{label}"), "PX", "60000"]);
    }
    let seen = redlock.inspect("job").unwrap();
    assert_eq!(seen.holder_label(), Some("a"));
    let labels: Vec<Option<&str>> = seen.holder_labels().map(|(_, l)| l).collect();
    assert_eq!(labels, [Some("a"), Some("a"), Some("b")]);

    let longer = format!("{secret}|{}", "x".repeat(MAX_HOLDER_LABEL_LEN + 1));
    cluster.servers[0].cmd(&["SET", "other", "x", "PX", "60000"]);
    cluster.servers[1].cmd(&["SET", "other", &longer, "PX", "60000"]);
    cluster.servers[2].cmd(&["HSET", "other", "f", "v"]);
    cluster.servers[2].cmd(&["PEXPIRE", "other", "60000"]);
    let seen = redlock.inspect("other").expect("every master answers");
    assert!(seen.is_held() && seen.held_on() == 3, "{seen}");
    assert!(seen.holder_labels().all(|(_, label)| label.is_none()));
    assert_eq!(seen.holder_label(), None);
}

/// An ACL user that may not run `GETRANGE` still inspects: the times to
/// live as ever, the label unknown.
#[test]
fn an_acl_that_refuses_getrange_leaves_the_label_unknown() {
    let cluster = Cluster::start(3);
    let holder = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .holder_label(LABEL)
        .build()
        .unwrap();
    let lock = holder.lock("job", TTL).expect("free");
    on_every_master(&cluster, b"job");
    let mut urls = Vec::new();
    for server in &cluster.servers {
        server.cmd(&[
            "ACL",
            "SETUSER",
            "looker",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-getrange",
        ]);
        urls.push(format!("redis://looker:pw@127.0.0.1:{}", server.port()));
    }
    let looker = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let seen = looker.inspect("job").expect("a quorum answers");
    assert!(seen.is_held() && seen.held_on() == 3, "{seen}");
    assert_eq!(seen.holder_label(), None);
    lock.unlock().expect("released");
}

/// A label that is empty, too long, or holds a control character or the
/// separator `|` is refused by `build()` with a typed configuration error,
/// before any connection.
#[test]
fn a_bad_holder_label_is_a_typed_configuration_error() {
    let build = |label: &str| {
        Redlock::builder()
            .nodes(["redis://127.0.0.1:1"])
            .holder_label(label)
            .build()
            .map(|_| ())
    };
    let too_long = "x".repeat(MAX_HOLDER_LABEL_LEN + 1);
    for (label, expected) in [
        ("", ConfigError::HolderLabelEmpty),
        (too_long.as_str(), ConfigError::HolderLabelTooLong(65)),
        ("web|3", ConfigError::HolderLabelCharacter('|')),
        ("web\n3", ConfigError::HolderLabelCharacter('\n')),
        ("web\u{1b}[0m", ConfigError::HolderLabelCharacter('\u{1b}')),
    ] {
        let error = build(label).expect_err(label);
        assert!(error.is_config(), "{error}");
        assert!(
            matches!(&error, Error::Config(e) if *e == expected),
            "{label:?}: {error}"
        );
    }
    let longest = "é".repeat(MAX_HOLDER_LABEL_LEN / 2);
    build(&longest).expect("64 bytes of printable UTF-8");
    assert!(build("x").is_ok());
}
