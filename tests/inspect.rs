//! `Redlock::inspect`: a resource's lock looked at without taking it, one
//! round of `PTTL` per master, against real servers: free, held, held
//! without expiry, neither held nor free on a quorum, no quorum; and never
//! the lock's value.

mod support;

use redlock_sync::{Error, KeyOnMaster, Redlock};
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
