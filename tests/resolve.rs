//! Masters whose address changes behind their host name, on real servers:
//! names come from a resolver the test controls (`Builder::resolver`), so
//! no DNS server and no edit of /etc/hosts is needed. A name moved to
//! another address (127.0.0.2 to 127.0.0.1, or another port after a
//! restart) is found by the next calls of the same handle; lookups of a
//! name that keeps failing are rate-limited; a name that stops resolving
//! leaves the old address in use, and says so; an address of another
//! voter's server is never taken.

mod support;

use redlock_sync::{HandleEvent, MasterChange, MasterEvent, Redlock, Resolve};
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::{key_slot, RedisCluster, RedisServer};

const TTL: Duration = Duration::from_secs(10);

/// Names the test sets; each lookup is recorded, with its thread's name.
#[derive(Default)]
struct Names {
    table: Mutex<HashMap<String, Result<SocketAddr, String>>>,
    asked: Mutex<Vec<(String, Instant, Option<String>)>>,
}

impl Names {
    fn set(&self, name: &str, to: SocketAddr) {
        self.table.lock().unwrap().insert(name.into(), Ok(to));
    }

    fn fail(&self, name: &str) {
        let error = "Name or service not known".to_string();
        self.table.lock().unwrap().insert(name.into(), Err(error));
    }

    /// When `name` was looked up (build included), and on which thread.
    fn lookups(&self, name: &str) -> Vec<(Instant, Option<String>)> {
        let asked = self.asked.lock().unwrap();
        asked
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, at, thread)| (*at, thread.clone()))
            .collect()
    }
}

struct Resolver(Arc<Names>);

impl Resolve for Resolver {
    fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        let thread = thread::current().name().map(str::to_string);
        (self.0.asked.lock().unwrap()).push((host.to_string(), Instant::now(), thread));
        match self.0.table.lock().unwrap().get(host) {
            Some(Ok(addr)) => Ok(vec![*addr]),
            Some(Err(e)) => Err(io::Error::new(io::ErrorKind::NotFound, e.clone())),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "unknown name")),
        }
    }
}

/// The address changes told to the hook, as lines.
#[derive(Default)]
struct Told(Mutex<Vec<String>>);

impl Told {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) for a line that contains `text`.
    fn wait_for(&self, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(line) = self.lines().into_iter().find(|l| l.contains(text)) {
                return line;
            }
            assert!(
                Instant::now() < until,
                "never told {text:?}: {:?}",
                self.lines()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl HandleEvent for Told {
    fn handle_master(&self, event: MasterEvent<'_>) {
        let line = match event.change() {
            MasterChange::Readdressed { node, from, to } => {
                format!("{} readdressed {node} {from} -> {to}", event.index())
            }
            MasterChange::Unresolved { node, reason, kept } => {
                format!(
                    "{} unresolved {node} ({reason}) kept {kept:?}",
                    event.index()
                )
            }
            _ => return,
        };
        self.0.lock().unwrap().push(line);
    }
}

fn loopback(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(127, 0, 0, last), port))
}

/// Three voters: `m0.test` (a live server), a master that is down for
/// good (nothing listens on 127.0.0.1:1), and `m2.test`: quorum 2, so a
/// lock is granted only where `m2.test` answered.
fn handle(names: &Arc<Names>, told: &Arc<Told>, ports: (u16, u16)) -> Redlock {
    Redlock::builder()
        .nodes([
            format!("redis://m0.test:{}", ports.0),
            "redis://127.0.0.1:1".to_string(),
            format!("redis://m2.test:{}", ports.1),
        ])
        .resolver(Resolver(Arc::clone(names)))
        .events(Arc::clone(told))
        .node_timeout(Duration::from_millis(500))
        .release_notices(false)
        .build()
        .expect("a valid configuration")
}

/// Tries to lock `resource` until it is granted (at most 10 s), and
/// returns how long that took.
fn lock_once_found(redlock: &Redlock, resource: &str) -> Duration {
    let start = Instant::now();
    loop {
        if let Ok(Some(lock)) = redlock.try_lock(resource, TTL) {
            let took = start.elapsed();
            lock.unlock().expect("released");
            return took;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{resource} never granted"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `server` holds `resource` (locks it, then reads the key).
fn held_on(redlock: &Redlock, resource: &str, server: &RedisServer) -> bool {
    let lock = redlock
        .try_lock(resource, TTL)
        .expect("no error")
        .expect("free");
    let there = server.get(resource.as_bytes()).is_some();
    lock.unlock().expect("released");
    there
}

#[test]
fn a_master_whose_name_moves_is_found_by_the_next_calls_of_the_same_handle() {
    let s0 = RedisServer::start();
    let mut s2 = RedisServer::start();
    let (names, told) = (Arc::new(Names::default()), Arc::new(Told::default()));
    names.set("m0.test", s0.addr());
    // When the handle is built the name gives 127.0.0.2, where nothing
    // listens (the servers listen on 127.0.0.1 only); then it moves.
    names.set("m2.test", loopback(2, s2.port()));
    let redlock = handle(&names, &told, (s0.port(), s2.port()));
    names.set("m2.test", s2.addr());
    assert!(
        redlock.try_lock("moved", TTL).is_err(),
        "m2.test not reached"
    );
    let took = lock_once_found(&redlock, "moved");
    assert!(held_on(&redlock, "moved", &s2));
    let line = told.wait_for("readdressed");
    assert_eq!(
        line,
        format!(
            "2 readdressed m2.test:{0} 127.0.0.2:{0} -> 127.0.0.1:{0}",
            s2.port()
        )
    );
    eprintln!("found at 127.0.0.1 {took:?} after the name moved");

    // The server dies and comes back on another port behind the same
    // name (a container restarted elsewhere).
    s2.kill();
    let s3 = RedisServer::start();
    names.set("m2.test", s3.addr());
    let took = lock_once_found(&redlock, "moved");
    assert!(held_on(&redlock, "moved", &s3));
    assert!(
        told.lines().contains(&format!(
            "2 readdressed m2.test:{} {} -> {}",
            s2.port(),
            s2.addr(),
            s3.addr()
        )),
        "{:?}",
        told.lines()
    );
    // Every lookup after build's ran on a lookup thread of its own.
    let threads: Vec<_> = names.lookups("m2.test")[1..]
        .iter()
        .map(|l| l.1.clone())
        .collect();
    assert!(
        threads
            .iter()
            .all(|t| t.as_deref() == Some("redlock-resolve")),
        "{threads:?}"
    );
    // The rate limit held: lookups of the name at least a second apart.
    let times: Vec<Instant> = names.lookups("m2.test").iter().map(|l| l.0).collect();
    for pair in times[1..].windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(1), "{times:?}");
    }
    eprintln!("found on its new port {took:?} after the restart");
}

#[test]
fn a_name_that_stops_resolving_is_looked_up_once_a_second_and_its_address_kept() {
    let s0 = RedisServer::start();
    let mut s2 = RedisServer::start();
    let (names, told) = (Arc::new(Names::default()), Arc::new(Told::default()));
    names.set("m0.test", s0.addr());
    names.set("m2.test", s2.addr());
    let redlock = handle(&names, &told, (s0.port(), s2.port()));
    assert!(held_on(&redlock, "gone", &s2));
    // The server dies and its name stops resolving: every call fails
    // on it, for three seconds.
    names.fail("m2.test");
    s2.kill();
    let start = Instant::now();
    let mut calls = 0;
    while start.elapsed() < Duration::from_secs(3) {
        assert!(redlock.try_lock("gone", TTL).is_err());
        calls += 1;
        thread::sleep(Duration::from_millis(5));
    }
    let window = start.elapsed();
    let looked_up = names.lookups("m2.test").len() - 1;
    // At most one lookup per second (and a first at once); and it did
    // keep trying.
    let bound = window.as_secs() as usize + 2;
    assert!(
        (2..=bound).contains(&looked_up),
        "{looked_up} lookups in {window:?} ({calls} calls)"
    );
    let line = told.wait_for("unresolved");
    assert_eq!(
        line,
        format!(
            "2 unresolved m2.test:{} (Name or service not known) kept Some({})",
            s2.port(),
            s2.addr()
        )
    );
    assert_eq!(told.lines(), [line], "told once");
    eprintln!("{looked_up} lookups in {window:?} over {calls} calls");

    // The server comes back at its old address: the name still does not
    // resolve, and the address kept is used.
    s2.restart();
    lock_once_found(&redlock, "gone");
    assert!(held_on(&redlock, "gone", &s2));
}

#[test]
fn a_name_that_now_gives_another_voters_server_is_not_taken() {
    let s0 = RedisServer::start();
    let mut s2 = RedisServer::start();
    let (names, told) = (Arc::new(Names::default()), Arc::new(Told::default()));
    names.set("m0.test", s0.addr());
    names.set("m2.test", s2.addr());
    let redlock = handle(&names, &told, (s0.port(), s2.port()));
    assert!(held_on(&redlock, "twice", &s2));
    // m2's server dies and its name now gives m0's server: taking it
    // would let that one server vote twice, and grant the lock alone.
    s2.kill();
    names.set("m2.test", s0.addr());
    let start = Instant::now();
    while told.lines().is_empty() {
        assert!(
            redlock.try_lock("twice", TTL).is_err(),
            "granted by one server"
        );
        assert!(start.elapsed() < Duration::from_secs(10), "no lookup told");
        thread::sleep(Duration::from_millis(5));
    }
    let line = told.wait_for("unresolved");
    assert!(
        line.starts_with(&format!(
            "2 unresolved m2.test:{} (it resolves only to {}, the server of another voter",
            s2.port(),
            s0.addr()
        )),
        "{line}"
    );
    // Later calls still refuse the lock: m2 dials its old address.
    for _ in 0..5 {
        assert!(
            redlock.try_lock("twice", TTL).is_err(),
            "granted by one server"
        );
    }
    assert_eq!(s0.get(b"twice"), None);
}

/// Makes every node of `cluster` announce itself as `n<i>.test`, and
/// waits until every node lists every master by that name.
fn announce_host_names(cluster: &RedisCluster) {
    let count = cluster.nodes().len();
    for (i, node) in cluster.nodes().iter().enumerate() {
        node.cmd(&[
            "CONFIG",
            "SET",
            "cluster-announce-hostname",
            &format!("n{i}.test"),
        ]);
    }
    for node in cluster.nodes() {
        node.cmd(&[
            "CONFIG",
            "SET",
            "cluster-preferred-endpoint-type",
            "hostname",
        ]);
    }
    let until = Instant::now() + Duration::from_secs(20);
    for node in cluster.nodes() {
        loop {
            let shards = format!("{:?}", node.cmd(&["CLUSTER", "SLOTS"]));
            if (0..count).all(|i| shards.contains(&format!("n{i}.test"))) {
                break;
            }
            assert!(Instant::now() < until, "host names not gossiped: {shards}");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_cluster_node_named_by_host_is_looked_up_off_the_round_and_again_when_it_moves() {
    let cluster = RedisCluster::start(3, 0);
    announce_host_names(&cluster);
    let (names, told) = (Arc::new(Names::default()), Arc::new(Told::default()));
    for i in 0..3 {
        names.set(&format!("n{i}.test"), cluster.node(i).addr());
    }
    // One master's name gives 127.0.0.2 at first.
    let moved = cluster.master_of_key(b"anything");
    let moved_name = format!("n{moved}.test");
    names.set(&moved_name, loopback(2, cluster.node(moved).port()));
    // The cluster is the only voter: a lock is granted only where the
    // key's master was reached. Its one seed, by IP, is another master
    // (which redirects to the moved one by name).
    let seed = cluster.other_master(moved);
    let redlock = Redlock::builder()
        .cluster([cluster.node(seed).url()])
        .resolver(Resolver(Arc::clone(&names)))
        .events(Arc::clone(&told))
        .node_timeout(Duration::from_millis(500))
        .release_notices(false)
        .build()
        .expect("a valid configuration");
    let elsewhere = cluster.key_on(seed, "other");
    let on_moved = cluster.key_on(moved, "here");
    lock_once_found(&redlock, &elsewhere);
    // Its master is met by name in the first rounds, looked up away from
    // them, and then dialled at 127.0.0.2: refused.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let error = redlock
            .try_lock(&on_moved, TTL)
            .expect_err("its master at 127.0.0.2");
        if error.to_string().contains("refused") {
            break;
        }
        assert!(Instant::now() < until, "never dialled: {error}");
        thread::sleep(Duration::from_millis(10));
    }
    names.set(&moved_name, cluster.node(moved).addr());
    let took = lock_once_found(&redlock, &on_moved);
    let port = cluster.node(moved).port();
    told.wait_for(&format!(
        "0 readdressed {moved_name}:{port} 127.0.0.2:{port} -> 127.0.0.1:{port}"
    ));
    eprintln!("the cluster's master found {took:?} after its name moved");
    // The seeds are IP addresses: every lookup ran off the rounds, on a
    // lookup thread.
    let all: Vec<_> = (0..3)
        .flat_map(|i| names.lookups(&format!("n{i}.test")))
        .collect();
    assert!(!all.is_empty());
    assert!(
        all.iter()
            .all(|l| l.1.as_deref() == Some("redlock-resolve")),
        "{all:?}"
    );

    // A topology refresh (after a MOVED) looks the masters' names up
    // again, without any connection failing.
    let target = seed;
    let target_name = format!("n{target}.test");
    let before = names.lookups(&target_name).len();
    thread::sleep(Duration::from_millis(1100));
    let slot = key_slot(on_moved.as_bytes());
    cluster.move_slot(slot, target);
    lock_once_found(&redlock, &on_moved);
    let until = Instant::now() + Duration::from_secs(10);
    while names.lookups(&target_name).len() == before {
        assert!(
            Instant::now() < until,
            "{target_name} not looked up on the refresh"
        );
        lock_once_found(&redlock, &on_moved);
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !told.lines().iter().any(|l| l.contains("unresolved")),
        "{:?}",
        told.lines()
    );
}
