//! The voters a round talks to. A voter is what casts one vote in the
//! quorum: a standalone master, one node; or (see `cluster`) a Redis or
//! Valkey Cluster, whose node for a key is the master that owns the key's
//! slot; or (see `sentinel`) a master that Sentinels watch, whose node is
//! the master they name. A round sends each voter's command to that
//! voter's node for the command's key (see `Connections::route`), on the session's connection
//! to that node.
//!
//! A voter's keys may differ from the command's (see [`encoded_for`]): a
//! voter of the single-cluster mode prefixes the lock key with a hash tag
//! of its own, and a cluster voter keeps a fence domain's hash per slot
//! (docs/fencing.md, "Fencing on cluster voters"), so that a fenced
//! script's two keys share the lock key's slot.

use super::cluster::ClusterVoter;
use super::health::NodeState;
use super::sentinel::SentinelVoter;
use super::shards::ShardVoter;
use crate::command::{Capabilities, Command, Encoded};
use crate::conn::Node;
use crate::error::NodeError;
use crate::names::Names;
use std::time::Instant;

/// One voter.
#[derive(Debug)]
pub(crate) enum Voter {
    /// A standalone master: one node, always node 0.
    Standalone(Node),
    /// A cluster (see `cluster`).
    Cluster(ClusterVoter),
    /// One master of a cluster, in the single-cluster mode.
    Shard(ShardVoter),
    /// A master that Sentinels watch (see `sentinel`).
    Sentinel(SentinelVoter),
}

impl Voter {
    /// How errors, reports and the health view name the voter.
    pub(crate) fn name(&self) -> &str {
        match self {
            Voter::Standalone(node) => &node.name,
            Voter::Cluster(cluster) => cluster.name(),
            Voter::Shard(shard) => shard.name(),
            Voter::Sentinel(sentinel) => sentinel.name(),
        }
    }

    /// The hash tag every key of the voter starts with, if its keys carry
    /// one of their own (see [`ShardVoter`]).
    #[inline]
    pub(crate) fn key_prefix(&self) -> Option<&[u8]> {
        match self {
            Voter::Shard(shard) => Some(shard.prefix()),
            _ => None,
        }
    }

    /// Node `k` of the voter, if it is known.
    #[inline]
    pub(crate) fn node(&self, k: usize) -> Option<&Node> {
        match self {
            Voter::Standalone(node) => (k == 0).then_some(node),
            Voter::Cluster(cluster) => cluster.node(k).map(|c| &c.node),
            Voter::Shard(shard) => shard.cluster.node(k).map(|c| &c.node),
            Voter::Sentinel(sentinel) => sentinel.node(k).map(|c| &c.node),
        }
    }

    /// Why a round cannot reach node `k`, which the voter does not know:
    /// for a Sentinel voter, no master known yet (its sentinels are asked
    /// again at once); otherwise a node it no longer knows, which counts
    /// as closed.
    pub(crate) fn unknown_node(&self) -> NodeError {
        match self {
            Voter::Sentinel(sentinel) => {
                sentinel.suspect();
                sentinel.no_master()
            }
            _ => NodeError::Closed,
        }
    }

    /// A round saw what a failover looks like on the voter's node (it
    /// failed, or answered `READONLY`, `LOADING`, `MASTERDOWN`, or its
    /// set-up found it is no master): a cluster asks for its topology, a
    /// Sentinel voter asks the sentinels.
    pub(crate) fn suspect(&self) {
        match self {
            Voter::Standalone(_) => {}
            Voter::Cluster(cluster) => cluster.suspect(),
            Voter::Shard(shard) => shard.cluster.suspect(),
            Voter::Sentinel(sentinel) => sentinel.suspect(),
        }
    }

    /// The cluster, if the voter is one.
    #[inline]
    pub(crate) fn cluster(&self) -> Option<&ClusterVoter> {
        match self {
            Voter::Standalone(_) | Voter::Sentinel(_) => None,
            Voter::Cluster(cluster) => Some(cluster),
            Voter::Shard(shard) => Some(&shard.cluster),
        }
    }

    /// The node a command whose keys are in `slot` goes to at `now`
    /// (`None`: a command without a key; see `Command::slot`).
    #[inline]
    pub(crate) fn route(&self, slot: Option<u16>, now: Instant) -> usize {
        match self {
            Voter::Standalone(_) => 0,
            Voter::Cluster(cluster) => cluster.route_slot(slot, now),
            // Every key of the voter is in its slot.
            Voter::Shard(shard) => shard.cluster.route_slot(Some(shard.slot()), now),
            Voter::Sentinel(sentinel) => sentinel.route(),
        }
    }

    /// How the voter's keys for `command` differ from the command's: the
    /// lock key's prefix, and the slot whose fence domain's hash it names
    /// (see `Command::with_keys`); `None` if they do not.
    #[inline]
    fn own_keys(&self, command: &Command<'_>) -> Option<(Option<&[u8]>, Option<u16>)> {
        match self {
            // A Sentinel voter's master is a standalone master.
            Voter::Standalone(_) | Voter::Sentinel(_) => None,
            Voter::Shard(shard) => Some((
                Some(shard.prefix()),
                command.names_domain().then_some(shard.slot()),
            )),
            Voter::Cluster(_) => command.names_domain().then(|| (None, command.slot())),
        }
    }

    /// Whether the voter keeps a fence domain's hash per slot (a cluster
    /// voter; the others keep one).
    #[inline]
    pub(crate) fn fences_per_slot(&self) -> bool {
        matches!(self, Voter::Cluster(_))
    }

    /// The slot of the fence domain's hash that `command` names on this
    /// voter, if it keeps one per slot: the one a fenced answer tells of.
    #[inline]
    pub(crate) fn fence_slot(&self, command: &Command<'_>) -> Option<u16> {
        match self.fences_per_slot() && command.names_domain() {
            true => command.slot(),
            false => None,
        }
    }

    /// The node that stands for the voter where one must (its name in the
    /// subscriber connections, its address in set-up checks).
    pub(crate) fn primary(&self) -> &Node {
        match self {
            Voter::Standalone(node) => node,
            Voter::Cluster(cluster) => &cluster.node(0).expect("a cluster has a seed").node,
            Voter::Shard(shard) => &shard.cluster.node(0).expect("a cluster has a seed").node,
            Voter::Sentinel(sentinel) => sentinel.primary(),
        }
    }

    /// The reconnect backoff of node `k`: a standalone master's is the
    /// voter's own state (`voter_state`), a cluster node's its own.
    #[inline]
    pub(crate) fn backoff<'a>(&'a self, k: usize, voter_state: &'a NodeState) -> &'a NodeState {
        match self {
            Voter::Standalone(_) => voter_state,
            Voter::Cluster(cluster) => cluster.node(k).map_or(voter_state, |c| &c.backoff),
            Voter::Shard(shard) => shard.cluster.node(k).map_or(voter_state, |c| &c.backoff),
            Voter::Sentinel(sentinel) => sentinel.node(k).map_or(voter_state, |c| &c.backoff),
        }
    }
}

/// The buffers a voter whose keys differ from the command's (see
/// [`encoded_for`]) sends its commands from: the lock key, the fence
/// domain's key, and the commands encoded with them. Kept by the session,
/// so that their room is reused: no allocation once they have grown.
#[derive(Debug, Default)]
pub(crate) struct OwnKeys {
    key: Vec<u8>,
    /// The key's release channel (see `Command::with_key_prefix`).
    channel: Vec<u8>,
    /// The fence domain's hash of the command's slot.
    domain: Vec<u8>,
    /// A set's keys, and its release's channels.
    set_keys: Names,
    set_channels: Names,
    encoded: [Encoded; 2],
}

/// Command `which` of a round (`command`, encoded once for every voter in
/// `shared`) in the form a connection with `caps` sends: `shared`'s, or,
/// for a voter whose keys differ (a key prefix of its own; a fence domain's
/// hash per slot), encoded again with its keys (into `own`, with the same
/// tag). A cluster voter's other commands are the shared ones.
#[inline]
pub(crate) fn encoded_for<'e>(
    voter: &Voter,
    shared: &'e mut Encoded,
    own: &'e mut OwnKeys,
    which: usize,
    command: &Command<'_>,
    caps: Capabilities,
) -> &'e Encoded {
    match voter.own_keys(command) {
        None => {
            shared.prepare(command, caps);
            shared
        }
        Some((prefix, slot)) => {
            let OwnKeys {
                key,
                channel,
                domain,
                set_keys,
                set_channels,
                encoded,
            } = own;
            let command = command.with_keys(
                prefix,
                slot,
                [key, channel, domain],
                [set_keys, set_channels],
            );
            encoded[which].reset(&command, shared.tag());
            encoded[which].prepare(&command, caps);
            &encoded[which]
        }
    }
}
