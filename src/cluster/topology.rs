//! A cluster's topology, as one of its nodes described it: its shards,
//! each with the slot ranges it owns, the master that serves them and its
//! replicas, and where each node can be reached. Read from `CLUSTER
//! SHARDS` (Redis and Valkey 7.0 and later; `shards.rs`) or `CLUSTER SLOTS`
//! (older servers; `slots_reply.rs`), and checked here the same way for
//! both: every range within the 16384 slots and in order, no slot owned
//! twice, no node listed twice, one owner per shard that owns slots. A
//! reply that fails a check is refused whole, with a typed reason: the
//! caller keeps the map it had and asks again later, rather than routing
//! by half a topology.

use super::endpoint::{Endpoint, HostError};
use super::slot::SLOTS;
use crate::resp::{DecodeError, ServerErrorKind};

/// A run of slots, both ends included, as the servers write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotRange {
    /// The first slot.
    pub start: u16,
    /// The last slot (at least `start`, below 16384).
    pub end: u16,
}

impl SlotRange {
    /// Whether `slot` is in the range.
    pub fn contains(&self, slot: u16) -> bool {
        (self.start..=self.end).contains(&slot)
    }

    /// How many slots the range holds (at least one).
    pub fn slot_count(&self) -> usize {
        usize::from(self.end - self.start) + 1
    }
}

/// A node's replication role, as the reply says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A master (Valkey's "primary"): it serves its shard's slots, unless
    /// it failed and a replica took over.
    Master,
    /// A replica of its shard's master.
    Replica,
}

/// A node's health, as `CLUSTER SHARDS` says (`CLUSTER SLOTS` lists only
/// nodes that are available, so all its nodes are `Online`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Health {
    /// `online`: serving.
    Online,
    /// `fail`: the cluster agreed that the node is down.
    Failed,
    /// `loading`: a replica that has not finished its first sync.
    Loading,
    /// A word this client does not know (a later server's): not online.
    Other,
}

/// One node of the cluster, as the reply described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's id (40 hex digits on Redis and Valkey): the same across
    /// its address changes, so it is what tells two nodes apart.
    pub id: String,
    /// Where to reach it, as the server's preferred endpoint type says.
    pub endpoint: Endpoint,
    /// Its IP address as announced (IPv6 bare), when the reply gives it and
    /// it is not empty.
    pub ip: Option<String>,
    /// Its announced host name (`cluster-announce-hostname`), if any.
    pub hostname: Option<String>,
    /// Its plain TCP port, if it has one.
    pub port: Option<u16>,
    /// Its TLS port, if it has one.
    pub tls_port: Option<u16>,
    /// Master or replica.
    pub role: Role,
    /// Online, failed or loading.
    pub health: Health,
    /// Its replication offset (`CLUSTER SHARDS` only): which replica is
    /// the most up to date.
    pub replication_offset: Option<i64>,
}

impl ClusterNode {
    /// The port to dial over plain TCP (`tls` false) or TLS (`tls` true).
    pub fn port_for(&self, tls: bool) -> Option<u16> {
        if tls {
            self.tls_port
        } else {
            self.port
        }
    }

    /// The host to dial: the endpoint's host, or `asked` (the host of the
    /// node that gave the reply) for [`Endpoint::SameAsAsked`]; `None` when
    /// the endpoint is unknown.
    pub fn dial_host<'a>(&'a self, asked: &'a str) -> Option<&'a str> {
        match &self.endpoint {
            Endpoint::Host(host) => Some(host),
            Endpoint::SameAsAsked => Some(asked),
            Endpoint::Unknown => None,
        }
    }

    /// Whether a round may send to this node: it is online, has an
    /// endpoint a client can dial and a port for this transport. A node
    /// that is not usable stays in the topology (its id still counts for
    /// telling voters apart); a later refresh may find it usable.
    pub fn is_usable(&self, tls: bool) -> bool {
        self.health == Health::Online && self.endpoint.is_dialable() && self.port_for(tls).is_some()
    }
}

/// One shard: the slots it owns, the nodes that replicate them, and which
/// of them is the owner: its one master that has not failed; failing that,
/// its one master (a failed master whose replica has not taken over still
/// owns the slots: the cluster answers `CLUSTERDOWN` for them). After a
/// failover Valkey lists the failed old master and the new one in one
/// shard; Redis 7.0 moves the old one to a shard of its own without slots.
/// A shard that owns slots with no master, or with several live ones, is
/// refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    id: Option<String>,
    ranges: Vec<SlotRange>,
    nodes: Vec<ClusterNode>,
    master: Option<usize>,
}

impl Shard {
    /// A shard of these nodes owning these ranges, its owner found as the
    /// type's docs say.
    pub(super) fn new(
        id: Option<String>,
        ranges: Vec<SlotRange>,
        nodes: Vec<ClusterNode>,
    ) -> Result<Shard, TopologyError> {
        // A node twice is that error, not two owners (the topology checks
        // ids across shards too).
        let mut ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(TopologyError::DuplicateNode);
        }
        let masters = || {
            nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.role == Role::Master)
        };
        let alive = || masters().filter(|(_, n)| n.health != Health::Failed);
        let master = match (alive().count(), masters().count()) {
            (1, _) => alive().next().map(|(i, _)| i),
            (0, 1) => masters().next().map(|(i, _)| i),
            // Without slots, which master is listed first does not matter.
            _ if ranges.is_empty() => alive().chain(masters()).next().map(|(i, _)| i),
            (0, 0) => return Err(TopologyError::NoOwner),
            _ => return Err(TopologyError::ManyOwners),
        };
        Ok(Shard {
            id,
            ranges,
            nodes,
            master,
        })
    }

    /// The shard's id (`CLUSTER SHARDS` on Valkey 9; `CLUSTER MYSHARDID`
    /// tells it elsewhere), if the reply gave it.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The slot ranges the shard owns, in the reply's order (possibly none).
    pub fn ranges(&self) -> &[SlotRange] {
        &self.ranges
    }

    /// Every node of the shard, in the reply's order.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// The node that serves the shard's slots (see [`Shard`]); `None` only
    /// for a shard without slots and without a master.
    pub fn master(&self) -> Option<&ClusterNode> {
        self.master.map(|i| &self.nodes[i])
    }

    /// The shard's replicas.
    pub fn replicas(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().filter(|n| n.role == Role::Replica)
    }

    /// Whether the shard owns `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.ranges.iter().any(|r| r.contains(slot))
    }
}

/// Checks that every range is within the slots, in order, and that no two
/// include the same slot: the first range that is not, in `ranges`' order,
/// is the error (an overlap names its lowest slot owned before). Marks the
/// slots 64 at a time, so that a refresh costs a few hundred steps, not one
/// per slot.
pub(super) fn check_ranges<'a>(
    ranges: impl Iterator<Item = &'a SlotRange>,
) -> Result<(), TopologyError> {
    let mut owned = [0u64; SLOTS / 64];
    for range in ranges {
        if range.start > range.end || usize::from(range.end) >= SLOTS {
            return Err(TopologyError::BadRange {
                start: range.start,
                end: range.end,
            });
        }
        let (start, end) = (usize::from(range.start), usize::from(range.end));
        let (first, last) = (start / 64, end / 64);
        for (word, bits) in (first..=last).zip(&mut owned[first..=last]) {
            // The range's bits in this word: from `low` to `high`.
            let low = if word == first { start % 64 } else { 0 };
            let high = if word == last { end % 64 } else { 63 };
            let mask = (u64::MAX << low) & (u64::MAX >> (63 - high));
            let taken = *bits & mask;
            if taken != 0 {
                let slot = word * 64 + taken.trailing_zeros() as usize;
                return Err(TopologyError::Overlap { slot: slot as u16 });
            }
            *bits |= mask;
        }
    }
    Ok(())
}

/// A checked topology: shards whose ranges do not overlap and whose nodes
/// are listed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    shards: Vec<Shard>,
}

/// The most shards with a master a topology may have: a slot map stores
/// an owner as a `u16` index, with `u16::MAX` for "unknown".
pub const MAX_MASTERS: usize = u16::MAX as usize;

impl Topology {
    /// Checks shards read from a reply and makes them a topology.
    pub(super) fn checked(shards: Vec<Shard>) -> Result<Topology, TopologyError> {
        check_ranges(shards.iter().flat_map(|s| &s.ranges))?;
        let mut ids: Vec<&str> = shards
            .iter()
            .flat_map(|s| &s.nodes)
            .map(|n| n.id.as_str())
            .collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(TopologyError::DuplicateNode);
        }
        if shards.iter().filter(|s| s.master.is_some()).count() > MAX_MASTERS {
            return Err(TopologyError::TooManyMasters);
        }
        Ok(Topology { shards })
    }

    /// The shards, in the reply's order.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The masters that own slots, each with its shard.
    pub fn masters(&self) -> impl Iterator<Item = (&Shard, &ClusterNode)> {
        self.shards
            .iter()
            .filter(|s| !s.ranges.is_empty())
            .filter_map(|s| Some((s, s.master()?)))
    }

    /// The shard that owns `slot`, if any (a scan: for set-up and tests;
    /// rounds read the slot map).
    pub fn owner_of(&self, slot: u16) -> Option<&Shard> {
        self.shards.iter().find(|s| s.owns(slot))
    }

    /// The node with this id, and its shard.
    pub fn node(&self, id: &str) -> Option<(&Shard, &ClusterNode)> {
        self.shards
            .iter()
            .find_map(|s| Some((s, s.nodes.iter().find(|n| n.id == id)?)))
    }

    /// How many of the 16384 slots some shard owns (all of them in a
    /// healthy cluster).
    pub fn owned_slots(&self) -> usize {
        self.shards
            .iter()
            .flat_map(|s| &s.ranges)
            .map(SlotRange::slot_count)
            .sum()
    }
}

/// Why a reply is not a topology this client can route by. The caller
/// keeps its previous map (if any) and asks again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// The bytes are not a RESP2 reply within the topology bounds (made
    /// by the caller that decoded them, from a
    /// [`crate::resp::decode_topology`] error, with `?` or `From`).
    #[error("the topology reply is malformed: {0}")]
    Decode(#[from] DecodeError),
    /// The node answered with an error (an older server without `CLUSTER
    /// SHARDS`, a node with cluster support disabled, an ACL refusal).
    #[error("the node refused the topology command ({0})")]
    Refused(ServerErrorKind),
    /// An element is not of the type the format has there (the name says
    /// which element).
    #[error("the topology reply's {0} is not of the expected type")]
    WrongType(&'static str),
    /// A required element is missing.
    #[error("the topology reply has no {0}")]
    Missing(&'static str),
    /// A field appears twice in one map.
    #[error("the topology reply has {0} twice in one map")]
    Duplicate(&'static str),
    /// A number is out of its range (a slot of 16384 or more, a port above
    /// 65535, a negative one).
    #[error("the topology reply's {0} is out of range")]
    OutOfRange(&'static str),
    /// A slot range that ends before it starts, or past the last slot.
    #[error("the slot range {start}-{end} is not within 0-16383 in order")]
    BadRange {
        /// Its first slot.
        start: u16,
        /// Its last slot.
        end: u16,
    },
    /// Two ranges include the same slot.
    #[error("slot {slot} is owned twice")]
    Overlap {
        /// The first slot found twice.
        slot: u16,
    },
    /// A node id that is empty, longer than 64 bytes, or not letters,
    /// digits, `-` and `_`.
    #[error("a node id is malformed")]
    BadNodeId,
    /// A host or an IP address that is not one.
    #[error("a node's address is malformed: {0}")]
    BadHost(HostError),
    /// A host name or shard id that is not printable ASCII.
    #[error("the topology reply's {0} is not printable ASCII")]
    BadText(&'static str),
    /// A role that is neither master nor replica.
    #[error("a node's role is neither master nor replica")]
    UnknownRole,
    /// The same node is listed twice (in two shards, or twice in one).
    #[error("a node is listed twice")]
    DuplicateNode,
    /// A shard owns slots but lists no master.
    #[error("a shard owns slots but has no master")]
    NoOwner,
    /// A shard owns slots and lists several masters that have not failed.
    #[error("a shard owns slots and has several live masters")]
    ManyOwners,
    /// More than 65535 masters own slots.
    #[error("more masters than a slot map can index")]
    TooManyMasters,
}
