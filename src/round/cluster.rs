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
use crate::cluster::{key_slot, RefreshTicket, SlotMap, Topology};
use crate::conn::{Found, Node, Why};
use crate::error::ConfigError;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

impl ClusterNode {
    /// Whether a connection to it may be made at `now`: outside its
    /// reconnect backoff (or just moved to a new address), with an
    /// address.
    #[inline]
    fn may_dial(&self, now: Instant) -> bool {
        let address = &self.node.address;
        (self.backoff.may_connect(now) || address.is_fresh()) && address.is_resolved()
    }
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
    /// Serialises additions to `nodes`.
    adding: Mutex<()>,
    /// Which node owns each slot, and when a refresh is due.
    slots: SlotMap,
    /// The refresh asked for and not answered yet.
    asked: Mutex<Option<RefreshTicket>>,
    /// Whether its servers lack `CLUSTER SHARDS` (Redis before 7.0): it
    /// asks with `CLUSTER SLOTS`.
    slots_only: AtomicBool,
    /// Whether its nodes are reached over TLS (their TLS ports, then).
    tls: bool,
    /// Whether a node met by host name is looked up at once (while the
    /// handle is built: see `discover`), not away from the round.
    lookups_inline: AtomicBool,
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
            seeds
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        let nodes: Box<[OnceLock<Box<ClusterNode>>]> =
            (0..MAX_CLUSTER_NODES).map(|_| OnceLock::new()).collect();
        let count = seeds.len().min(MAX_CLUSTER_NODES);
        let tls = seeds[0].is_secure();
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
            adding: Mutex::new(()),
            slots: SlotMap::new(epoch, REFRESH_EVERY),
            asked: Mutex::new(None),
            slots_only: AtomicBool::new(false),
            tls,
            lookups_inline: AtomicBool::new(false),
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

    /// The node a command for `key` goes to: the owner of its slot, unless
    /// the map does not say (not learnt yet), the owner is in its
    /// reconnect backoff (it failed again and again: a failover is under
    /// way, or the map is stale) or has no address yet (met by a host name
    /// still being looked up); then a node that may be dialled, the seeds
    /// first, which answers with a redirect to the owner it knows (or runs
    /// the command, if it is the owner under another name). A command
    /// without a key goes to a seed too.
    #[inline]
    pub(crate) fn route(&self, key: Option<&[u8]>, now: Instant) -> usize {
        self.route_slot(key.map(key_slot), now)
    }

    /// [`ClusterVoter::route`] for a key whose slot is `slot` (`None`: no
    /// key): a round computes the slot once for all its cluster voters.
    #[inline]
    pub(crate) fn route_slot(&self, slot: Option<u16>, now: Instant) -> usize {
        if let Some(slot) = slot {
            if let Some(owner) = self.slots.owner(slot) {
                let owner = usize::from(owner);
                if self.node(owner).is_some_and(|n| n.may_dial(now)) {
                    return owner;
                }
            }
        }
        self.any_node(now)
    }

    /// A node that may be dialled at `now`, the seeds first.
    fn any_node(&self, now: Instant) -> usize {
        (0..self.len())
            .find(|&k| self.node(k).is_some_and(|n| n.may_dial(now)))
            .unwrap_or(0)
    }

    /// The owner of `slot` by the map, if known.
    pub(crate) fn owner(&self, slot: u16) -> Option<usize> {
        self.slots.owner(slot).map(usize::from)
    }

    /// The masters of the map, each with the first slot it owns (in slot
    /// order), for the single-cluster mode.
    pub(crate) fn masters_by_first_slot(&self) -> Vec<(usize, u16)> {
        let mut masters: Vec<(usize, u16)> = Vec::new();
        for slot in 0..crate::cluster::SLOTS as u16 {
            if let Some(owner) = self.owner(slot) {
                if !masters.iter().any(|&(k, _)| k == owner) {
                    masters.push((owner, slot));
                }
            }
        }
        masters
    }

    /// Whether a node met by host name is looked up at once (`true` only
    /// while the handle is being built), or away from the round that met
    /// it (see `conn::address`).
    pub(crate) fn look_up_inline(&self, inline: bool) {
        self.lookups_inline.store(inline, Ordering::Relaxed);
    }

    /// The node at `host:port`, added (with `template`'s settings) if the
    /// voter does not know it yet. `None` if it cannot be added: the
    /// voter knows [`MAX_CLUSTER_NODES`] already, or the host is no
    /// address or host name (or, while the handle is built, does not
    /// resolve). A new host name is resolved away from the round (see
    /// `conn::address`), unless a known node has the same host.
    pub(crate) fn node_at(&self, host: &str, port: u16) -> Option<usize> {
        if let Some(k) = self.find(host, port) {
            return Some(k);
        }
        let _adding = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = self.find(host, port) {
            return Some(k);
        }
        let template = &self.node(0)?.node;
        let same_host = (0..self.len()).find_map(|k| {
            let known = &self.node(k)?.node;
            (host_of(&known.name) == host).then(|| known.addr())?
        });
        let found = match same_host {
            Some(addr) => Found::SameHost(addr.ip()),
            None if self.lookups_inline.load(Ordering::Relaxed) => Found::Now,
            None => Found::Later(Instant::now()),
        };
        let node = template.sibling(host, port, found).ok()?;
        let k = self.len();
        if let Some(by_addr) = node.addr().and_then(|addr| self.find_addr(addr)) {
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
            self.node(k)
                .is_some_and(|n| n.node.address.port() == port && host_of(&n.node.name) == host)
        })
    }

    fn find_addr(&self, addr: SocketAddr) -> Option<usize> {
        (0..self.len()).find(|&k| self.node(k).is_some_and(|n| n.node.addr() == Some(addr)))
    }

    /// Whether the voter waits for a new topology.
    #[inline]
    pub(crate) fn is_stale(&self) -> bool {
        self.slots.is_stale()
    }

    /// A `MOVED` said that node `k` owns `slot` now.
    pub(crate) fn moved(&self, slot: u16, k: usize) {
        self.slots.moved(slot, k as u16);
    }

    /// Something suggests the topology changed (a node failed, answered
    /// `LOADING`, `MASTERDOWN`, `READONLY` or `CLUSTERDOWN`): ask for it
    /// again soon.
    pub(crate) fn suspect(&self) {
        self.slots.mark_stale();
    }

    /// Whether a round at `now` should ask for the topology: `Some(true)`
    /// for `CLUSTER SLOTS`, `Some(false)` for `CLUSTER SHARDS`. A yes
    /// claims the refresh (at most one per [`REFRESH_EVERY`]): its answer
    /// is installed by [`ClusterVoter::adopt`].
    #[inline]
    pub(crate) fn wants_topology(&self, now: Instant) -> Option<bool> {
        if !self.slots.refresh_due(now) {
            return None;
        }
        let ticket = self.slots.begin_refresh(now)?;
        *self.asked.lock().unwrap_or_else(PoisonError::into_inner) = Some(ticket);
        Some(self.slots_only.load(Ordering::Relaxed))
    }

    /// The servers refused `CLUSTER SHARDS`: ask with `CLUSTER SLOTS`
    /// from now on.
    pub(crate) fn use_slots(&self) {
        self.slots_only.store(true, Ordering::Relaxed);
    }

    /// Installs `topology`, which node `asked` (by its index) gave: each
    /// master is found, or added, among the nodes (one named by host is
    /// looked up again, away from the round); slots whose master
    /// cannot be reached (no usable endpoint or port, or no room) stay
    /// unknown, and go to a seed, which redirects.
    pub(crate) fn adopt(&self, topology: &Topology, asked: usize) {
        let Some(ticket) = self
            .asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            // Another answer was installed for this request already.
            return;
        };
        let asked_host = self
            .node(asked)
            .map(|n| host_of(&n.node.name))
            .unwrap_or("");
        let now = Instant::now();
        self.slots.install(ticket, topology, |_, master| {
            if !master.is_usable(self.tls) {
                return None;
            }
            let host = master.dial_host(asked_host)?;
            let port = master.port_for(self.tls)?;
            let k = self.node_at(host, port)?;
            // A master named by host may have moved (looked up away from
            // the round, at most once a second; see `conn::address`).
            self.node(k)?.node.address.readdress(Why::Refresh, now);
            Some(k as u16)
        });
    }
}

/// The host part of a node's `host:port` name (an IPv6 address without
/// its brackets).
pub(crate) fn host_of(name: &str) -> &str {
    name.rsplit_once(':')
        .map_or(name, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']')
}
