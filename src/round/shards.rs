//! The single-cluster mode (`Builder::cluster_shards`): one cluster whose
//! M masters are the M voters. Each voter's keys carry a hash tag of a slot
//! its master owned when the handle was built (so every voter's key of a
//! lock lives on its own master), and the masters are found by asking the
//! cluster when the handle is built (see `discover`). After a resharding,
//! two voters may land on one master: the round then counts that master
//! once (see `Connections::shares_master_with`).

use super::cluster::ClusterVoter;
use crate::cluster::{tag_for_slot, TAG_LEN};
use std::sync::Arc;

/// The fewest masters the single-cluster mode accepts: fewer cannot
/// tolerate the loss of one.
pub(crate) const MIN_SHARDS: usize = 3;

/// One master of a cluster counted as a voter of its own, in the
/// single-cluster mode (`Builder::cluster_shards`): its keys carry a hash
/// tag that puts them in a slot it owned when the handle was built, so
/// each voter's key lives on its own master. The cluster (its nodes and
/// slot map) is shared by all its voters.
#[derive(Debug)]
pub(crate) struct ShardVoter {
    pub(crate) cluster: Arc<ClusterVoter>,
    /// The slot the voter's keys live in.
    slot: u16,
    /// `{tag}`: the prefix of every key of the voter.
    prefix: [u8; TAG_LEN + 2],
    name: String,
}

impl ShardVoter {
    /// Voter `index` of `cluster`'s single-cluster mode: its keys in `slot`.
    pub(crate) fn new(cluster: Arc<ClusterVoter>, index: usize, slot: u16) -> ShardVoter {
        let tag = tag_for_slot(slot).expect("a slot below 16384");
        let mut prefix = [b'{'; TAG_LEN + 2];
        prefix[1..=TAG_LEN].copy_from_slice(tag);
        prefix[TAG_LEN + 1] = b'}';
        let name = format!("{} shard {index} (slot {slot})", cluster.name());
        ShardVoter {
            cluster,
            slot,
            prefix,
            name,
        }
    }

    /// The slot the voter's keys live in.
    pub(crate) fn slot(&self) -> u16 {
        self.slot
    }

    /// The `{tag}` every key of the voter starts with.
    pub(crate) fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// How reports and the health view name the voter.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}
