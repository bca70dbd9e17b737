//! Real Redis or Valkey Clusters on loopback: `shards` masters with
//! `replicas` replicas each, every node a [`RedisServer`] child process
//! (own port, own cluster bus port, own directory, killed on drop), joined
//! by `redis-cli --cluster create`, and waited for until every node says
//! `cluster_state:ok` and all of them give the same `CLUSTER SLOTS` map.
//!
//! Nodes are named by their index in [`RedisCluster::nodes`]; which of them
//! are masters is read from the cluster each time it is asked (failovers and
//! slot moves change it). The operations that change the cluster (slot
//! moves, migrations, failovers) are in `cluster_ops.rs`.

use super::redis::{
    how_to_get_a_server, redis_server_available, server_binary, Launch, PauseGuard, RedisServer,
};
use super::resp::OwnedReply;
use super::slots::{key_slot, SLOTS};
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// `cluster-node-timeout` of every node (unless the caller's arguments give
/// another): how long a node must be unreachable before it is suspected.
/// With it, a killed master's replica takes over after about 2.5 s on
/// Redis 7.0 and Valkey 8.1, 1.5 s on Valkey 9.1 (500 ms would save 0.5 to
/// 0.9 s of that); a node paused for longer than this is failed over (or,
/// without replicas, takes its cluster down) by the others.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// How long a cluster may take to become ready (about 2 s unloaded: a
/// master waits 2 s after its start before it declares the cluster ok).
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(40);
/// How often the waits poll the nodes.
pub(super) const POLL: Duration = Duration::from_millis(20);
/// How long `redis-cli --cluster create` may take (about 1 s unloaded).
const CREATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments every cluster node gets, before the caller's.
fn node_args() -> [String; 10] {
    [
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        &NODE_TIMEOUT.as_millis().to_string(),
        // A replica may fail over however long its link was down (the
        // default refuses one whose link was down for 10 node timeouts).
        "--cluster-replica-validity-factor",
        "0",
        // Full syncs start at once (the default waits 5 s for more replicas).
        "--repl-diskless-sync-delay",
        "0",
        // In the node's own directory, like everything else of it.
        "--cluster-config-file",
        "nodes.conf",
    ]
    .map(str::to_string)
}

/// A Redis or Valkey Cluster of real server processes on 127.0.0.1.
#[derive(Debug)]
pub struct RedisCluster {
    pub(super) nodes: Vec<RedisServer>,
    shards: usize,
    replicas: usize,
    /// Never dropped (see `shared_clusters`): failures print the logs
    /// themselves, as no drop will.
    pub(super) shared: bool,
}

/// One range of a slot map: slots `start..=end`, the port of their master
/// and the ports of its replicas (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub master: u16,
    pub replicas: Vec<u16>,
}

/// A node's `CLUSTER SLOTS` answer, sorted by slot and normalised (replica
/// order, node ids and host names dropped), so that two nodes' answers
/// compare equal when they agree on who serves what.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlotMap(pub Vec<SlotRange>);

impl SlotMap {
    /// The port of the master serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<u16> {
        self.0
            .iter()
            .find(|r| (r.start..=r.end).contains(&slot))
            .map(|r| r.master)
    }

    /// Whether every slot has a master.
    pub fn covers_all(&self) -> bool {
        let mut next = 0u32;
        for range in &self.0 {
            if u32::from(range.start) != next {
                return false;
            }
            next = u32::from(range.end) + 1;
        }
        next == u32::from(SLOTS)
    }

    /// The masters' ports, in slot order, each once.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = Vec::new();
        for range in &self.0 {
            if !masters.contains(&range.master) {
                masters.push(range.master);
            }
        }
        masters
    }

    /// The replicas of the master on `port` (from its first range).
    pub fn replicas_of(&self, port: u16) -> Vec<u16> {
        self.0
            .iter()
            .find(|r| r.master == port)
            .map(|r| r.replicas.clone())
            .unwrap_or_default()
    }

    /// The slot ranges served by the master on `port`.
    pub fn ranges_of(&self, port: u16) -> Vec<(u16, u16)> {
        self.0
            .iter()
            .filter(|r| r.master == port)
            .map(|r| (r.start, r.end))
            .collect()
    }

    /// Parses a `CLUSTER SLOTS` reply.
    pub fn parse(reply: &OwnedReply) -> Result<SlotMap, String> {
        let OwnedReply::Array(entries) = reply else {
            return Err(format!("CLUSTER SLOTS: not an array: {reply:?}"));
        };
        let mut ranges = Vec::with_capacity(entries.len());
        for entry in entries {
            let bad = || format!("CLUSTER SLOTS: bad entry {entry:?}");
            let OwnedReply::Array(fields) = entry else {
                return Err(bad());
            };
            let (Some(OwnedReply::Integer(start)), Some(OwnedReply::Integer(end))) =
                (fields.first(), fields.get(1))
            else {
                return Err(bad());
            };
            let port = |node: &OwnedReply| match node {
                OwnedReply::Array(node) => match node.get(1) {
                    Some(OwnedReply::Integer(port)) => u16::try_from(*port).ok(),
                    _ => None,
                },
                _ => None,
            };
            let master = fields.get(2).and_then(port).ok_or_else(bad)?;
            let mut replicas = fields[3..]
                .iter()
                .map(|node| port(node).ok_or_else(bad))
                .collect::<Result<Vec<u16>, String>>()?;
            replicas.sort_unstable();
            ranges.push(SlotRange {
                start: u16::try_from(*start).map_err(|_| bad())?,
                end: u16::try_from(*end).map_err(|_| bad())?,
                master,
                replicas,
            });
        }
        ranges.sort_by_key(|r| r.start);
        Ok(SlotMap(ranges))
    }
}

/// What one node says about itself and the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeView {
    /// `cluster_state:ok`.
    pub state_ok: bool,
    pub map: SlotMap,
    /// `ROLE` says master.
    pub is_master: bool,
    /// For a replica: the port of its master and whether the link is up
    /// (`ROLE` state `connected`).
    pub master_link: Option<(u16, bool)>,
}

impl RedisCluster {
    /// Starts a cluster of `shards` masters with `replicas_per_shard`
    /// replicas each and waits until it is ready (see
    /// [`RedisCluster::wait_ready`]). Panics, with every node's log, if it
    /// is not ready in time.
    pub fn start(shards: usize, replicas_per_shard: usize) -> RedisCluster {
        RedisCluster::start_with(shards, replicas_per_shard, &[])
    }

    /// Like [`RedisCluster::start`], with extra `redis-server` arguments
    /// for every node (after the cluster's own, so they win: e.g. another
    /// `--cluster-node-timeout`).
    pub fn start_with(shards: usize, replicas_per_shard: usize, args: &[&str]) -> RedisCluster {
        RedisCluster::start_with_auth(shards, replicas_per_shard, args, &[])
    }

    /// Like [`RedisCluster::start_with`] for nodes that need a password:
    /// `args` set it (`--requirepass pw --masterauth pw`, or an ACL user
    /// and `--masteruser`), and `auth` is what the support's own admin
    /// client, `redis-cli` and `MIGRATE` send (`["pw"]` or `["user", "pw"]`).
    pub fn start_with_auth(
        shards: usize,
        replicas_per_shard: usize,
        args: &[&str],
        auth: &[&str],
    ) -> RedisCluster {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        let binary = server_binary();
        let mut clusters =
            RedisCluster::start_binary(&binary, 1, shards, replicas_per_shard, args, auth);
        clusters.remove(0)
    }

    /// Starts `count` independent clusters at once (all nodes in parallel,
    /// then all joins in parallel), each ready when this returns.
    pub fn start_many(count: usize, shards: usize, replicas_per_shard: usize) -> Vec<RedisCluster> {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        RedisCluster::start_binary(
            &server_binary(),
            count,
            shards,
            replicas_per_shard,
            &[],
            &[],
        )
    }

    /// Starts `count` clusters of `binary` (a redis-server-compatible
    /// server with cluster support), as [`RedisCluster::start_with_auth`]
    /// and [`RedisCluster::start_many`] do.
    pub fn start_binary(
        binary: &str,
        count: usize,
        shards: usize,
        replicas_per_shard: usize,
        args: &[&str],
        auth: &[&str],
    ) -> Vec<RedisCluster> {
        assert!(
            shards >= 3,
            "redis-cli creates clusters of 3 masters or more"
        );
        let per_cluster = shards * (1 + replicas_per_shard);
        let mut all_args: Vec<String> = node_args().to_vec();
        all_args.extend(args.iter().map(|a| a.to_string()));
        let all_args: Vec<&str> = all_args.iter().map(String::as_str).collect();
        let launch = Launch {
            binary,
            args: &all_args,
            port_options: &["--cluster-port"],
            ..Launch::default()
        };
        let mut nodes = start_in_parallel(count * per_cluster, || {
            RedisServer::start_launch(&launch).with_admin_auth(auth)
        })
        .into_iter();
        let clusters: Vec<RedisCluster> = (0..count)
            .map(|_| RedisCluster {
                nodes: nodes.by_ref().take(per_cluster).collect(),
                shards,
                replicas: replicas_per_shard,
                shared: false,
            })
            .collect();
        // Each cluster is dropped (its nodes killed) if another panics.
        let joined = thread::scope(|scope| {
            let joins: Vec<_> = clusters
                .into_iter()
                .map(|cluster| {
                    scope.spawn(move || {
                        cluster.create();
                        cluster
                    })
                })
                .collect();
            joins
                .into_iter()
                .map(|join| join.join())
                .collect::<Vec<_>>()
        });
        let mut ready = Vec::with_capacity(count);
        for result in joined {
            match result {
                Ok(cluster) => ready.push(cluster),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        ready
    }

    /// Joins the nodes with `redis-cli --cluster create` and waits until
    /// the cluster has the shape asked for.
    fn create(&self) {
        let cli = cluster_cli();
        let mut command = Command::new(&cli);
        command.args(["--cluster", "create"]);
        command.args(self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
        command.args([
            "--cluster-replicas",
            &self.replicas.to_string(),
            "--cluster-yes",
        ]);
        match self.nodes[0].admin_auth() {
            [] => {}
            [password] => {
                command.args(["--no-auth-warning", "-a", password]);
            }
            [user, password, ..] => {
                command.args(["--no-auth-warning", "--user", user, "-a", password]);
            }
        }
        let output = run_bounded(command, CREATE_TIMEOUT)
            .unwrap_or_else(|why| self.fail(&format!("`{cli} --cluster create` {why}")));
        let (shards, replicas) = (self.shards, self.replicas);
        if replicas > 0 {
            // CLUSTER SLOTS leaves out a replica whose replication offset
            // is 0 (Redis 7.0, Valkey 8.1): on an empty new cluster, until
            // the master's first replication PING, 10 s later. A FLUSHALL
            // on each master (nothing to flush) moves every offset on.
            self.wait_until("every replica's link is up", READY_TIMEOUT, |views| {
                let linked = views
                    .iter()
                    .flatten()
                    .filter(|v| v.master_link.is_some_and(|(_, up)| up));
                linked.count() == shards * replicas
            })
            .unwrap_or_else(|why| {
                self.fail(&format!(
                    "{why}\n---- {cli} --cluster create ----\n{output}"
                ))
            });
            for node in self.running() {
                if view_of(node).is_some_and(|v| v.is_master) {
                    node.cmd(&["FLUSHALL"]);
                }
            }
        }
        self.wait_until(
            &format!("{shards} masters with {replicas} replicas each are ready"),
            READY_TIMEOUT,
            |views| {
                Self::is_ready(views)
                    && views[0].as_ref().is_some_and(|view| {
                        let masters = view.map.masters();
                        masters.len() == shards
                            && masters
                                .iter()
                                .all(|&m| view.map.replicas_of(m).len() == replicas)
                    })
            },
        )
        .unwrap_or_else(|why| {
            self.fail(&format!(
                "{why}\n---- {cli} --cluster create ----\n{output}"
            ))
        });
    }

    /// Waits until every running node says `cluster_state:ok`, all of them
    /// give the same slot map covering all 16384 slots, and every running
    /// replica's link to its master is up. Panics (with what each node
    /// said, and the logs of a shared cluster) after a generous bound.
    pub fn wait_ready(&self) {
        self.wait_until("the cluster is ready", READY_TIMEOUT, Self::is_ready)
            .unwrap_or_else(|why| self.fail(&why));
    }

    /// The condition of [`RedisCluster::wait_ready`] over the running
    /// nodes' views.
    pub(super) fn is_ready(views: &[Option<NodeView>]) -> bool {
        let Some(first) = views.iter().flatten().next() else {
            return false;
        };
        views.iter().all(|view| {
            view.as_ref().is_some_and(|view| {
                view.state_ok
                    && view.map == first.map
                    && !matches!(view.master_link, Some((_, false)))
            })
        }) && first.map.covers_all()
    }

    /// Polls the running nodes every [`POLL`] until `done` holds for their
    /// views (`None` for a node that did not answer), or fails after
    /// `timeout` with what each node said last.
    pub(super) fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&[Option<NodeView>]) -> bool,
    ) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let views = self.views();
            if done(&views) {
                return Ok(());
            }
            if started.elapsed() > timeout {
                let mut why = format!("timed out after {timeout:?} waiting until {what}; nodes:");
                for (node, view) in self.running().zip(&views) {
                    let _ = write!(why, "\n  :{} {view:?}", node.port());
                }
                return Err(why);
            }
            thread::sleep(POLL);
        }
    }

    /// What each running node says (in the order of [`RedisCluster::running`]).
    pub(super) fn views(&self) -> Vec<Option<NodeView>> {
        self.running().map(view_of).collect()
    }

    /// The nodes that run (not killed; they may be paused).
    pub(super) fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.is_running())
    }

    /// Panics with `why`, and every node's log if the cluster is shared
    /// (otherwise each node prints its log as it is dropped).
    pub(super) fn fail(&self, why: &str) -> ! {
        if self.shared {
            panic!("cluster: {why}\n{}", self.logs());
        }
        panic!("cluster: {why}\n(each node's log follows as the cluster is dropped)");
    }

    /// Every node, by index (its role may change; see [`RedisCluster::masters`]).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Node `index`.
    pub fn node(&self, index: usize) -> &RedisServer {
        &self.nodes[index]
    }

    /// How many masters the cluster was started with.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// `redis://127.0.0.1:P` of every node, masters and replicas, in index
    /// order: the seeds a client is given.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The index of the node on `port`.
    pub fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| self.fail(&format!("no node on port {port}")))
    }

    /// The slot map as the first running node that answers gives it.
    pub fn slot_map(&self) -> SlotMap {
        self.running()
            .find_map(view_of)
            .unwrap_or_else(|| self.fail("no node answers"))
            .map
    }

    /// The slot map as node `index` gives it (`None`: killed, paused, or
    /// no answer).
    pub fn slot_map_seen_by(&self, index: usize) -> Option<SlotMap> {
        let node = &self.nodes[index];
        node.is_running()
            .then(|| view_of(node))
            .flatten()
            .map(|v| v.map)
    }

    /// The masters serving slots, in slot order.
    pub fn masters(&self) -> Vec<usize> {
        let map = self.slot_map();
        map.masters()
            .into_iter()
            .map(|p| self.index_of(p))
            .collect()
    }

    /// A master other than `master`: the next one in slot order (for a
    /// slot move: `move_slot(slot, other_master(master_of_slot(slot)))`).
    pub fn other_master(&self, master: usize) -> usize {
        let masters = self.masters();
        let at = masters.iter().position(|&m| m == master);
        masters[at.map_or(0, |at| (at + 1) % masters.len())]
    }

    /// The master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> usize {
        match self.slot_map().owner(slot) {
            Some(port) => self.index_of(port),
            None => self.fail(&format!("slot {slot} has no master")),
        }
    }

    /// The master serving `key` (its slot computed here: CRC16 and the
    /// hash-tag rule).
    pub fn master_of_key(&self, key: &[u8]) -> usize {
        self.master_of_slot(key_slot(key))
    }

    /// The replicas of `master`, as the slot map lists them (a failed
    /// replica is not listed).
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let port = self.nodes[master].port();
        let map = self.slot_map();
        map.replicas_of(port)
            .into_iter()
            .map(|p| self.index_of(p))
            .collect()
    }

    /// The slot ranges (`start..=end`) that `master` serves.
    pub fn slots_of(&self, master: usize) -> Vec<(u16, u16)> {
        self.slot_map().ranges_of(self.nodes[master].port())
    }

    /// A key served by `master`: `prefix` followed by the first tag `{tN}`
    /// whose slot `master` serves (deterministic for a given map).
    pub fn key_on(&self, master: usize, prefix: &str) -> String {
        assert!(!prefix.contains(['{', '}']), "prefix {prefix:?} has braces");
        let (map, port) = (self.slot_map(), self.nodes[master].port());
        (0..1_000_000u32)
            .map(|n| format!("{prefix}{{t{n}}}"))
            .find(|key| map.owner(key_slot(key.as_bytes())) == Some(port))
            .unwrap_or_else(|| self.fail(&format!("node {master} serves no slot")))
    }

    /// Sends a command to the master serving `key` (no redirection
    /// followed: a `MOVED` or `ASK` is returned as the error reply it is).
    pub fn cmd_for_key(&self, key: &[u8], args: &[&str]) -> OwnedReply {
        self.nodes[self.master_of_key(key)].cmd(args)
    }

    /// Stops node `index` with SIGSTOP until the guard drops. Paused for
    /// longer than [`NODE_TIMEOUT`], the others fail it: its replica takes
    /// over, or without one, its slots are uncovered and the others answer
    /// `CLUSTERDOWN` until it is back.
    pub fn pause_node(&self, index: usize) -> PauseGuard<'_> {
        self.nodes[index].pause()
    }

    /// Kills node `index` with SIGKILL (see `fail_over` in `cluster_ops.rs`
    /// for a master whose replica should take over).
    pub fn kill_node(&mut self, index: usize) {
        assert!(!self.shared, "a shared cluster must not be changed");
        self.nodes[index].kill();
    }

    /// Starts a killed node again on its port with its `nodes.conf` (it
    /// rejoins: a master that was failed over comes back as a replica of
    /// the node that took its slots) and waits until the cluster is ready.
    pub fn restart_node(&mut self, index: usize) {
        assert!(!self.shared, "a shared cluster must not be changed");
        self.nodes[index].restart();
        self.wait_ready();
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
}

/// What `node` says, in one pipelined exchange (`None` if it cannot say:
/// killed, paused past the admin timeout, or an unexpected reply).
pub(super) fn view_of(node: &RedisServer) -> Option<NodeView> {
    let replies = node
        .pipeline(&[&[b"CLUSTER", b"INFO"], &[b"CLUSTER", b"SLOTS"], &[b"ROLE"]])
        .ok()?;
    let OwnedReply::Bulk(info) = &replies[0] else {
        return None;
    };
    let state_ok = String::from_utf8_lossy(info)
        .lines()
        .any(|line| line.trim() == "cluster_state:ok");
    let map = SlotMap::parse(&replies[1]).ok()?;
    let OwnedReply::Array(role) = &replies[2] else {
        return None;
    };
    let (is_master, master_link) = match role.as_slice() {
        [OwnedReply::Bulk(kind), ..] if kind == b"master" => (true, None),
        [OwnedReply::Bulk(kind), _, OwnedReply::Integer(port), OwnedReply::Bulk(state), ..]
            if kind == b"slave" =>
        {
            let port = u16::try_from(*port).ok()?;
            (false, Some((port, state == b"connected")))
        }
        _ => return None,
    };
    Some(NodeView {
        state_ok,
        map,
        is_master,
        master_link,
    })
}

/// Runs `make` `n` times on as many threads; if any panics, the values
/// made are dropped (their processes killed) and the panic goes on.
pub(super) fn start_in_parallel<T: Send>(n: usize, make: impl Fn() -> T + Sync) -> Vec<T> {
    let results: Vec<thread::Result<T>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..n).map(|_| scope.spawn(&make)).collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut made = Vec::with_capacity(n);
    for result in results {
        match result {
            Ok(value) => made.push(value),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    made
}

/// The command-line client that creates clusters: `redis-cli` on the
/// `PATH` (Debian's redis-server package brings it; 7.0 creates Valkey 8.1
/// and 9.1 clusters too), else a `valkey-cli` next to the server binary.
fn cluster_cli() -> String {
    static CLI: OnceLock<String> = OnceLock::new();
    CLI.get_or_init(|| {
        let runs = |cli: &str| {
            Command::new(cli)
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if runs("redis-cli") {
            return "redis-cli".to_string();
        }
        let beside = std::path::Path::new(&server_binary()).with_file_name("valkey-cli");
        let beside = beside.to_string_lossy().into_owned();
        if runs(&beside) {
            return beside;
        }
        panic!(
            "no redis-cli to create clusters with: install Debian's redis-server package \
             (`cargo xtask test` does), which brings redis-cli"
        )
    })
    .clone()
}

/// Runs `command` to completion within `timeout`, returning its output
/// (stdout then stderr) if it succeeded, or why not (killing it on timeout).
pub(super) fn run_bounded(mut command: Command, timeout: Duration) -> Result<String, String> {
    // The output goes through pipes, unread until the end: it is small (a
    // few kB for `--cluster create`), far below a pipe's capacity.
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot be run: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("did not finish within {timeout:?}"));
            }
            Ok(None) => thread::sleep(POLL),
            Err(e) => return Err(format!("cannot be waited for: {e}")),
        }
    };
    let output = child
        .wait_with_output()
        .map_err(|e| format!("reading its output: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if status.success() {
        Ok(text)
    } else {
        Err(format!("failed ({status}):\n{text}"))
    }
}
