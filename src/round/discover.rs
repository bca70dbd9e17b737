//! Finding the masters of the single-cluster mode when a handle is built
//! (`Builder::cluster_shards`): one round to a seed of the cluster, which
//! learns its slot map, and a voter (see `shards`) per master found.

use super::cluster::ClusterVoter;
use super::health::NodeState;
use super::independence::Independence;
use super::plan::{lag_limit, Masters, Plan};
use super::shards::{ShardVoter, MIN_SHARDS};
use super::voter::Voter;
use super::Session;
use crate::command::Command;
use crate::conn::Node;
use crate::error::ConfigError;
use crate::quorum::NodeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Asks the cluster reached through `seeds` for its masters (one round,
/// within `timeout`, which learns the slot map), and makes one voter of
/// each: at least [`MIN_SHARDS`] of them.
pub(crate) fn shards(seeds: Vec<Node>, timeout: Duration) -> Result<Vec<Voter>, ConfigError> {
    let epoch = Instant::now();
    let cluster = Arc::new(ClusterVoter::new(seeds, epoch)?);
    let asking = [Voter::Shard(ShardVoter::new(Arc::clone(&cluster), 0, 0))];
    let states = [NodeState::new(epoch)];
    let independence = Independence::new(&asking);
    let masters = Masters {
        voters: &asking,
        states: &states,
        lag_limit: lag_limit(timeout),
        independence: &independence,
    };
    let mut session = Session::new(1);
    // A PING on its way to a seed carries the topology request ahead of it
    // (the map is stale, never learnt): its answer is in once the PING's
    // is.
    let plan = Plan::everyone(Command::Ping, NodeSet::all(1), Instant::now() + timeout);
    // The masters named by host are resolved now, as the seeds were (the
    // handle is being built; later, away from the rounds).
    cluster.look_up_inline(true);
    session.run(masters, plan);
    cluster.look_up_inline(false);
    let found = cluster.masters_by_first_slot();
    if found.len() < MIN_SHARDS {
        return Err(ConfigError::TooFewShards {
            cluster: cluster.name().to_string(),
            found: found.len(),
            report: session.report(&asking).to_string(),
        });
    }
    Ok(found
        .into_iter()
        .enumerate()
        .map(|(j, (_, slot))| Voter::Shard(ShardVoter::new(Arc::clone(&cluster), j, slot)))
        .collect())
}
