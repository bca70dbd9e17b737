//! A cluster redirect followed within the round. A node that answers
//! `MOVED` or `ASK` did not run the command: the round sends the same
//! command to the node named (after `ASKING` for `ASK`), on the session's
//! lane to it, while its deadline allows, at most [`MAX_REDIRECTS`] times
//! per voter per round. A `MOVED` moves the slot in the voter's map at
//! once (and asks for the whole topology); an `ASK` does not (the slot is
//! being migrated, and only this key lives on the target yet).
//!
//! Other cluster refusals are the voter's "no" for the round, never
//! followed here: `TRYAGAIN` (a multi-key command during a migration),
//! `CLUSTERDOWN`; and `LOADING`, `MASTERDOWN`, `READONLY`, which also
//! suggest that the topology changed.

use super::cluster::host_of;
use super::voter::Voter;
use crate::cluster::{EndpointRef, Redirect, RedirectKind};
use crate::error::ServerError;
use crate::resp::ServerErrorKind;

/// Most redirects a voter's command follows in one round: a slot moved
/// while being migrated takes two; more is a loop (nodes that disagree on
/// the owner), which the round's deadline would end anyway.
pub(super) const MAX_REDIRECTS: u8 = 4;

/// Where voter `voter`'s command goes after `error`, answered by its node
/// `from`: the node to send it to, and whether `ASKING` goes first. `None`
/// if the error is no redirect, the voter is no cluster (a standalone
/// master that redirects is misconfigured: a cluster node given to
/// `Builder::nodes`), or the node named cannot be added. A `MOVED` moves
/// the slot in the voter's map. (Also for a subscription to release
/// notices that a node redirected: see `handle::notify`.)
pub(crate) fn target(voter: &Voter, from: usize, error: &ServerError) -> Option<(usize, bool)> {
    let cluster = voter.cluster()?;
    if !matches!(error.kind(), ServerErrorKind::Moved | ServerErrorKind::Ask) {
        return None;
    }
    let line = error.to_string();
    let Ok(redirect) = Redirect::parse(line.as_bytes()) else {
        cluster.suspect();
        return None;
    };
    let host = match redirect.endpoint {
        EndpointRef::Host(host) => host,
        EndpointRef::SameAsAsked => host_of(&voter.node(from)?.name),
        EndpointRef::Unknown => {
            cluster.suspect();
            return None;
        }
    };
    let k = cluster.node_at(host, redirect.port)?;
    match redirect.kind {
        RedirectKind::Moved => {
            cluster.moved(redirect.slot, k);
            Some((k, false))
        }
        RedirectKind::Ask => Some((k, true)),
    }
}

/// Whether `error` from a cluster node suggests its topology changed.
pub(super) fn suggests_new_topology(error: &ServerError) -> bool {
    matches!(
        error.kind(),
        ServerErrorKind::Loading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::ClusterDown
    )
}
