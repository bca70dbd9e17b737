//! The voters a round talks to. A voter is what casts one vote in the
//! quorum: a standalone master, one node; or (see `cluster`) a Redis or
//! Valkey Cluster, whose node for a key is the master that owns the key's
//! slot; or (see `sentinel`) a master that Sentinels watch, whose node is
//! the master they name. A round sends each voter's command to that
//! voter's node for the command's key (see `Connections::route`), on the session's connection
//! to that node.

use super::cluster::ClusterVoter;
use super::health::NodeState;
use super::sentinel::SentinelVoter;
use super::shards::ShardVoter;
use crate::command::{Capabilities, Command, Encoded};
use crate::conn::Node;
use crate::error::NodeError;
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

    /// The node a command for `key` goes to at `now` (`None`: a command
    /// without a key).
    #[inline]
    pub(crate) fn route(&self, key: Option<&[u8]>, now: Instant) -> usize {
        match self {
            Voter::Standalone(_) => 0,
            Voter::Cluster(cluster) => cluster.route(key, now),
            // Every key of the voter is in its slot.
            Voter::Shard(shard) => shard.cluster.route_slot(Some(shard.slot()), now),
            Voter::Sentinel(sentinel) => sentinel.route(),
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

/// The buffers a voter whose keys carry a prefix of their own (see
/// [`ShardVoter`]) sends its commands from: the key, and the commands
/// encoded with it. Kept by the session, so that their room is reused.
#[derive(Debug, Default)]
pub(crate) struct OwnKeys {
    key: Vec<u8>,
    /// The key's release channel (see `Command::with_key_prefix`).
    channel: Vec<u8>,
    encoded: [Encoded; 2],
}

/// Command `which` of a round (`command`, encoded once for every voter in
/// `shared`) in the form a connection with `caps` sends: `shared`'s, or,
/// for a voter with a key prefix of its own, encoded again with its key
/// (into `own`, with the same tag).
#[inline]
pub(crate) fn encoded_for<'e>(
    voter: &Voter,
    shared: &'e mut Encoded,
    own: &'e mut OwnKeys,
    which: usize,
    command: &Command<'_>,
    caps: Capabilities,
) -> &'e Encoded {
    match voter.key_prefix() {
        None => {
            shared.prepare(command, caps);
            shared
        }
        Some(prefix) => {
            let OwnKeys {
                key,
                channel,
                encoded,
            } = own;
            let command = command.with_key_prefix(prefix, key, channel);
            encoded[which].reset(&command, shared.tag());
            encoded[which].prepare(&command, caps);
            &encoded[which]
        }
    }
}
