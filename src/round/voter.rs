//! The voters a round talks to. A voter is what casts one vote in the
//! quorum: a standalone master, one node; or (see `cluster`) a Redis or
//! Valkey Cluster, whose node for a key is the master that owns the key's
//! slot. A round sends each voter's command to that voter's node for the
//! command's key (see `Connections::route`), on the session's connection
//! to that node.

use super::cluster::ClusterVoter;
use super::health::NodeState;
use crate::conn::Node;
use std::time::Instant;

/// One voter.
#[derive(Debug)]
pub(crate) enum Voter {
    /// A standalone master: one node, always node 0.
    Standalone(Node),
    /// A cluster (see `cluster`).
    Cluster(ClusterVoter),
}

impl Voter {
    /// How errors, reports and the health view name the voter.
    pub(crate) fn name(&self) -> &str {
        match self {
            Voter::Standalone(node) => &node.name,
            Voter::Cluster(cluster) => cluster.name(),
        }
    }

    /// Node `k` of the voter, if it is known.
    #[inline]
    pub(crate) fn node(&self, k: usize) -> Option<&Node> {
        match self {
            Voter::Standalone(node) => (k == 0).then_some(node),
            Voter::Cluster(cluster) => cluster.node(k).map(|c| &c.node),
        }
    }

    /// The cluster, if the voter is one.
    #[inline]
    pub(crate) fn cluster(&self) -> Option<&ClusterVoter> {
        match self {
            Voter::Standalone(_) => None,
            Voter::Cluster(cluster) => Some(cluster),
        }
    }

    /// The node a command for `key` goes to at `now` (`None`: a command
    /// without a key).
    #[inline]
    pub(crate) fn route(&self, key: Option<&[u8]>, now: Instant) -> usize {
        match self {
            Voter::Standalone(_) => 0,
            Voter::Cluster(cluster) => cluster.route(key, now),
        }
    }

    /// The node that stands for the voter where one must (its name in the
    /// subscriber connections, its address in set-up checks).
    pub(crate) fn primary(&self) -> &Node {
        match self {
            Voter::Standalone(node) => node,
            Voter::Cluster(cluster) => &cluster.node(0).expect("a cluster has a seed").node,
        }
    }

    /// The reconnect backoff of node `k`: a standalone master's is the
    /// voter's own state (`voter_state`), a cluster node's its own.
    #[inline]
    pub(crate) fn backoff<'a>(&'a self, k: usize, voter_state: &'a NodeState) -> &'a NodeState {
        match self {
            Voter::Standalone(_) => voter_state,
            Voter::Cluster(cluster) => cluster.node(k).map_or(voter_state, |c| &c.backoff),
        }
    }
}
