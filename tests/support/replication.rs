//! A standalone master with replicas (`REPLICAOF`), for the replica guard
//! and Sentinel tests: every node a [`RedisServer`] child process, and the
//! operations those tests need: wait until the replicas caught up, cut a
//! replica's link so that it misses writes, promote a replica, make a node
//! (the old master) a replica again.
//!
//! How a link is cut matters. On the replica, `REPLICAOF` to a port where
//! nobody answers drops the master's stream at once: later writes never
//! reach it, and the master's `WAIT` counts it no more ([`Replicated::cut_link`]).
//! `CLIENT PAUSE WRITE` on the replica holds the stream unapplied, and it is
//! discarded if the master dies meanwhile. SIGSTOP or `DEBUG SLEEP` of the
//! replica are no reliable cut: the stream waits in the replica's socket
//! and is usually applied when it resumes (unless the dying master resets
//! the connection). `tests/cluster_support.rs` checks this on each server.

use super::cluster::start_in_parallel;
use super::redis::{how_to_get_a_server, redis_server_available, server_binary, RedisServer};
use super::resp::OwnedReply;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

/// How long replicas may take to connect and catch up (a few ms unloaded).
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the waits poll.
const POLL: Duration = Duration::from_millis(10);

/// Arguments every node gets, before the caller's: full syncs start at
/// once (the default waits 5 s for more replicas to join).
const NODE_ARGS: &[&str] = &["--repl-diskless-sync-delay", "0"];

/// What `ROLE` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A master, with its replication offset.
    Master { offset: i64 },
    /// A replica of the master on `master` (a port), its link up or not,
    /// and the offset it has processed.
    Replica {
        master: u16,
        link_up: bool,
        offset: i64,
    },
}

/// A master and its replicas on 127.0.0.1: node 0 starts as the master,
/// nodes 1..=R as its replicas. Roles change with [`Replicated::promote`]
/// and [`Replicated::replicate`]; [`Replicated::role`] says the current one.
#[derive(Debug)]
pub struct Replicated {
    nodes: Vec<RedisServer>,
    /// A loopback listener that never accepts: a replica pointed at it
    /// connects (into the backlog) and waits for an answer to its first
    /// PING that never comes, its link down, and no other process can take
    /// the port while we hold it.
    dead_end: TcpListener,
}

impl Replicated {
    /// Starts a master with `replicas` replicas and waits until each
    /// replica's link is up and its offset equals the master's.
    pub fn start(replicas: usize) -> Replicated {
        Replicated::start_with(replicas, &[])
    }

    /// Like [`Replicated::start`], with extra `redis-server` arguments for
    /// every node.
    pub fn start_with(replicas: usize, args: &[&str]) -> Replicated {
        Replicated::start_with_auth(replicas, args, &[])
    }

    /// Like [`Replicated::start_with`] for nodes that need a password:
    /// `args` set it (`--requirepass pw --masterauth pw`, or an ACL user
    /// and `--masteruser`), and `auth` is what the admin client sends as
    /// `AUTH <auth..>` (`["pw"]`, or `["user", "pw"]`).
    pub fn start_with_auth(replicas: usize, args: &[&str], auth: &[&str]) -> Replicated {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        Replicated::start_binary(&server_binary(), replicas, args, auth)
    }

    /// Like [`Replicated::start_with_auth`] with another server binary.
    pub fn start_binary(binary: &str, replicas: usize, args: &[&str], auth: &[&str]) -> Replicated {
        let all: Vec<&str> = NODE_ARGS.iter().chain(args).copied().collect();
        let nodes = start_in_parallel(1 + replicas, || {
            RedisServer::start_binary(binary, &all).with_admin_auth(auth)
        });
        let dead_end = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("binding a loopback port for cut links");
        let set = Replicated { nodes, dead_end };
        for replica in 1..set.nodes.len() {
            set.replicaof(replica, Some(set.nodes[0].port()));
        }
        set.wait_synced();
        set
    }

    /// Every node, by index.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Node `index`.
    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    /// Node `index`, to kill, pause or restart it directly.
    pub fn node_mut(&mut self, index: usize) -> &mut RedisServer {
        &mut self.nodes[index]
    }

    /// `redis://127.0.0.1:P` of node `index`.
    pub fn url(&self, index: usize) -> String {
        self.nodes[index].url()
    }

    /// What node `index` says it is (`None`: killed, or no answer).
    pub fn role(&self, index: usize) -> Option<Role> {
        let node = &self.nodes[index];
        if !node.is_running() {
            return None;
        }
        parse_role(&node.command(&[b"ROLE"]).ok()?)
    }

    /// The running nodes that say they are masters.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| matches!(self.role(i), Some(Role::Master { .. })))
            .collect()
    }

    /// The one running master; panics if there are none or several.
    pub fn master(&self) -> usize {
        match self.masters().as_slice() {
            [master] => *master,
            masters => self.fail(&format!("expected one master, found {masters:?}")),
        }
    }

    /// The running nodes that say they are replicas (of whatever master).
    pub fn replicas(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| matches!(self.role(i), Some(Role::Replica { .. })))
            .collect()
    }

    /// Waits until every running replica whose master runs has its link
    /// up and has processed everything its master has (equal offsets).
    pub fn wait_synced(&self) {
        self.wait_until("every replica caught up with its master", |set| {
            (0..set.nodes.len()).all(|i| match set.role(i) {
                Some(Role::Replica {
                    master,
                    link_up,
                    offset,
                }) => match set.index_of(master).and_then(|m| set.role(m)) {
                    Some(Role::Master { offset: wanted }) => link_up && offset == wanted,
                    // A replica of a dead end or of a killed master.
                    _ => true,
                },
                _ => true,
            })
        });
    }

    /// Cuts `replica`'s replication link: it is pointed at a port where
    /// nobody answers (`REPLICAOF`), so it stays a read-only replica
    /// that receives nothing more, and its master no longer counts it in
    /// `WAIT`. Waits until the replica reports its link down. Undo with
    /// [`Replicated::replicate`].
    pub fn cut_link(&self, replica: usize) {
        let dead_end = self
            .dead_end
            .local_addr()
            .expect("the dead end's port")
            .port();
        self.replicaof(replica, Some(dead_end));
        self.wait_until(&format!("node {replica}'s link is down"), |set| {
            matches!(
                set.role(replica),
                Some(Role::Replica { link_up: false, master, .. }) if master == dead_end
            )
        });
    }

    /// Makes `node` a replica of `master` (`REPLICAOF`: a failback of an
    /// old master, or a cut link restored) and waits until it caught up.
    pub fn replicate(&self, node: usize, master: usize) {
        self.replicaof(node, Some(self.nodes[master].port()));
        let port = self.nodes[master].port();
        self.wait_until(&format!("node {node} replicates :{port}"), |set| {
            matches!(
                set.role(node),
                Some(Role::Replica { master: m, link_up: true, .. }) if m == port
            )
        });
        self.wait_synced();
    }

    /// Promotes `replica` (`REPLICAOF NO ONE`) and waits until it says it
    /// is a master. Its former master is left as it is (still a master if
    /// it runs: make it a replica with [`Replicated::replicate`]).
    pub fn promote(&self, replica: usize) {
        self.replicaof(replica, None);
        self.wait_until(&format!("node {replica} is a master"), |set| {
            matches!(set.role(replica), Some(Role::Master { .. }))
        });
    }

    /// `master_replid` of node `index` (`INFO replication`): a promoted
    /// replica starts a new replication history with a new one.
    pub fn replication_id(&self, index: usize) -> String {
        self.info_field(index, "replication", "master_replid")
    }

    /// `run_id` of node `index` (`INFO server`): new at each process start.
    pub fn run_id(&self, index: usize) -> String {
        self.info_field(index, "server", "run_id")
    }

    fn info_field(&self, index: usize, section: &str, field: &str) -> String {
        let OwnedReply::Bulk(info) = self.nodes[index].cmd(&["INFO", section]) else {
            self.fail(&format!(
                "INFO {section} on node {index}: not a bulk string"
            ))
        };
        let prefix = format!("{field}:");
        String::from_utf8_lossy(&info)
            .lines()
            .find_map(|line| line.trim().strip_prefix(&prefix).map(str::to_string))
            .unwrap_or_else(|| self.fail(&format!("INFO {section} has no {field}")))
    }

    /// Every node's log, each under a `---- redis-server :PORT log ----` line.
    pub fn logs(&self) -> String {
        let mut logs = String::new();
        for node in &self.nodes {
            let _ = writeln!(
                logs,
                "---- redis-server :{} log ----\n{}",
                node.port(),
                node.log()
            );
        }
        logs
    }

    fn index_of(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// `REPLICAOF 127.0.0.1 port`, or `REPLICAOF NO ONE`.
    fn replicaof(&self, node: usize, port: Option<u16>) {
        let port = port.map(|p| p.to_string());
        let args: [&str; 3] = match &port {
            Some(port) => ["REPLICAOF", "127.0.0.1", port],
            None => ["REPLICAOF", "NO", "ONE"],
        };
        match self.nodes[node].cmd(&args) {
            OwnedReply::Simple(s) if s.starts_with(b"OK") => {}
            other => self.fail(&format!("{args:?} on node {node}: {other:?}")),
        }
    }

    fn wait_until(&self, what: &str, done: impl Fn(&Replicated) -> bool) {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > SYNC_TIMEOUT {
                let roles: Vec<_> = (0..self.nodes.len())
                    .map(|i| (self.nodes[i].port(), self.role(i)))
                    .collect();
                self.fail(&format!(
                    "timed out after {SYNC_TIMEOUT:?} waiting until {what}; roles: {roles:?}"
                ));
            }
            thread::sleep(POLL);
        }
    }

    fn fail(&self, why: &str) -> ! {
        panic!("replicated set: {why}\n(each node's log follows as the set is dropped)");
    }
}

/// Parses a `ROLE` reply.
pub(super) fn parse_role(reply: &OwnedReply) -> Option<Role> {
    let OwnedReply::Array(fields) = reply else {
        return None;
    };
    match fields.as_slice() {
        [OwnedReply::Bulk(kind), OwnedReply::Integer(offset), ..] if kind == b"master" => {
            Some(Role::Master { offset: *offset })
        }
        [OwnedReply::Bulk(kind), _, OwnedReply::Integer(port), OwnedReply::Bulk(state), OwnedReply::Integer(offset)]
            if kind == b"slave" =>
        {
            Some(Role::Replica {
                master: u16::try_from(*port).ok()?,
                link_up: state == b"connected",
                offset: *offset,
            })
        }
        _ => None,
    }
}
