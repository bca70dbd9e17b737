//! A Redis or Valkey Cluster counted as one voter: the nodes it knows,
//! each with its own reconnect backoff, which master owns each slot, and
//! when its topology is asked for again.
//!
//! The slot map is learnt on the lock path, without a thread: a voter that
//! wants its topology (none yet, a `MOVED`, a node that failed) has a round
//! queue `CLUSTER SHARDS` (or `CLUSTER SLOTS`, on servers without it)
//! ahead of its command on the lane it uses, at most once per
//! [`REFRESH_EVERY`]; the answer replaces the map when it arrives. Until
//! then, rounds route by what the map says, and a wrong guess costs one
//! `MOVED`, which moves that slot at once.

use super::health::NodeState;
use crate::cluster::{key_slot, SlotMap, Topology};
use crate::conn::Node;
use crate::error::ConfigError;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Most nodes a cluster voter keeps (the servers' own guidance is a
/// thousand nodes at most; masters and the seeds count, replicas only if a
/// redirect names one).
pub(crate) const MAX_CLUSTER_NODES: usize = 1024;

/// How often a cluster voter asks for its topology at most.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// One node of a cluster voter.
#[derive(Debug)]
pub(crate) struct ClusterNode {
    pub(crate) node: Node,
    /// Its reconnect backoff (the voter's health is kept apart, per voter).
    pub(crate) backoff: NodeState,
}

/// A cluster counted as one voter.
pub(crate) struct ClusterVoter {
    /// `cluster(seed, ...)`: how reports and the health view name it.
    name: String,
    /// The nodes known, in the order they were met: the seeds first.
    /// Append-only, so that a lane's node index stays valid; read without
    /// a lock.
    nodes: Box<[OnceLock<Box<ClusterNode>>]>,
    len: AtomicUsize,
    seeds: usize,
    /// Serialises additions to `nodes`.
    adding: Mutex<()>,
    slots: SlotMap,
    /// Whether the voter wants its topology (none yet, or it changed).
    stale: AtomicBool,
    /// When it last asked for it, in nanoseconds after `epoch` (0: never).
    asked_at: AtomicU64,
    /// Whether its servers lack `CLUSTER SHARDS` (Redis before 7.0): it
    /// asks with `CLUSTER SLOTS`.
    slots_only: AtomicBool,
    epoch: Instant,
}

impl fmt::Debug for ClusterVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterVoter")
            .field("name", &self.name)
            .field("nodes", &self.len.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ClusterVoter {
    /// A cluster voter reached through `seeds` (parsed and resolved URLs of
    /// any of its nodes), whose backoffs count from `epoch`.
    pub(crate) fn new(seeds: Vec<Node>, epoch: Instant) -> Result<ClusterVoter, ConfigError> {
        if seeds.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        let name = format!(
            "cluster({})",
            seeds.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(",")
        );
        let nodes: Box<[OnceLock<Box<ClusterNode>>]> =
            (0..MAX_CLUSTER_NODES).map(|_| OnceLock::new()).collect();
        let count = seeds.len().min(MAX_CLUSTER_NODES);
        for (slot, node) in nodes.iter().zip(seeds) {
            let _ = slot.set(Box::new(ClusterNode {
                node,
                backoff: NodeState::new(epoch),
            }));
        }
        Ok(ClusterVoter {
            name,
            nodes,
            len: AtomicUsize::new(count),
            seeds: count,
            adding: Mutex::new(()),
            slots: SlotMap::new(),
            stale: AtomicBool::new(true),
            asked_at: AtomicU64::new(0),
            slots_only: AtomicBool::new(false),
            epoch,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Node `k`, if known.
    #[inline]
    pub(crate) fn node(&self, k: usize) -> Option<&ClusterNode> {
        self.nodes.get(k)?.get().map(|b| &**b)
    }

    /// How many nodes the voter knows.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The node a command for `key` goes to: the owner of its slot, or,
    /// while the map does not say (not learnt yet), a seed outside its
    /// backoff (which redirects us if it is not the owner). A command
    /// without a key goes to a seed too.
    #[inline]
    pub(crate) fn route(&self, key: Option<&[u8]>, now: Instant) -> usize {
        if let Some(key) = key {
            if let Some(owner) = self.slots.owner(key_slot(key)) {
                return usize::from(owner);
            }
        }
        (0..self.seeds)
            .find(|&k| self.node(k).is_some_and(|n| n.backoff.may_connect(now)))
            .unwrap_or(0)
    }

    /// The node at `addr` (named `host:port`), added (with `template`'s
    /// settings) if the voter does not know it yet. `None` if it cannot be
    /// added: the voter knows [`MAX_CLUSTER_NODES`] already, or the host
    /// does not resolve.
    pub(crate) fn node_at(&self, host: &str, port: u16) -> Option<usize> {
        if let Some(k) = self.find(host, port) {
            return Some(k);
        }
        let _adding = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = self.find(host, port) {
            return Some(k);
        }
        let template = &self.node(0)?.node;
        let node = template.sibling(host, port).ok()?;
        let k = self.len();
        if let Some(by_addr) = self.find_addr(node.addr) {
            return Some(by_addr);
        }
        let slot = self.nodes.get(k)?;
        let _ = slot.set(Box::new(ClusterNode {
            node,
            backoff: NodeState::new(self.epoch),
        }));
        self.len.store(k + 1, Ordering::Release);
        Some(k)
    }

    fn find(&self, host: &str, port: u16) -> Option<usize> {
        (0..self.len()).find(|&k| {
            self.node(k).is_some_and(|n| {
                n.node.name.rsplit_once(':').is_some_and(|(h, p)| {
                    p.parse() == Ok(port) && h.trim_start_matches('[').trim_end_matches(']') == host
                })
            })
        })
    }

    fn find_addr(&self, addr: SocketAddr) -> Option<usize> {
        (0..self.len()).find(|&k| self.node(k).is_some_and(|n| n.node.addr == addr))
    }

    /// Whether the voter waits for a new topology.
    #[inline]
    pub(crate) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// A `MOVED` said that node `k` owns `slot` now.
    pub(crate) fn moved(&self, slot: u16, k: usize) {
        self.slots.set(slot, k as u16);
        self.stale.store(true, Ordering::Relaxed);
    }

    /// Something suggests the topology changed (a node failed, answered
    /// `LOADING`, `MASTERDOWN` or `READONLY`): ask for it again soon.
    pub(crate) fn suspect(&self) {
        if !self.stale.load(Ordering::Relaxed) {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a round at `now` should ask for the topology (and, if so,
    /// the request is counted as made: at most one per [`REFRESH_EVERY`]).
    /// `Some(true)` for `CLUSTER SLOTS`, `Some(false)` for `CLUSTER SHARDS`.
    #[inline]
    pub(crate) fn wants_topology(&self, now: Instant) -> Option<bool> {
        if !self.stale.load(Ordering::Relaxed) {
            return None;
        }
        let at = self.nanos(now).max(1);
        let last = self.asked_at.load(Ordering::Relaxed);
        if last != 0 && at.saturating_sub(last) < REFRESH_EVERY.as_nanos() as u64 {
            return None;
        }
        self.asked_at
            .compare_exchange(last, at, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        Some(self.slots_only.load(Ordering::Relaxed))
    }

    /// The servers refused `CLUSTER SHARDS`: ask with `CLUSTER SLOTS`.
    pub(crate) fn use_slots(&self) {
        self.slots_only.store(true, Ordering::Relaxed);
        self.asked_at.store(0, Ordering::Relaxed);
    }

    /// Replaces the slot map with `topology`'s: each master is found (or
    /// added) among the nodes; slots whose owner cannot be added stay
    /// unknown (routed to a seed, which redirects).
    pub(crate) fn adopt(&self, topology: &Topology) {
        let owners = topology.owners(|host, port| self.node_at(host, port).map(|k| k as u16));
        self.slots.replace(owners);
        self.stale.store(false, Ordering::Relaxed);
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}
