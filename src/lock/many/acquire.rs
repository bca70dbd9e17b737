//! One acquisition attempt of a set: what a handle must be for it (checked
//! before any I/O), the names read into the session's buffers, and the
//! single acquisition's round (`lock::acquire`) with the set's command.

use crate::error::{ConfigError, Error, SetUnsupported};
use crate::events::call::name_resources;
use crate::events::Resources;
use crate::handle::Shared;
use crate::lock::acquire::{acquire_on, Acquired};
use crate::names::Names;
use crate::round::{set_runs_in_parts, Voter};
use std::time::Duration;

/// One attempt at the set `resources` (see `Redlock::try_lock_many`),
/// its names read into the session's buffer.
///
/// Before any I/O: fails with `Error::ShutDown` once the handle was shut
/// down, and with `Error::Config` for a TTL out of range, a handle that
/// cannot take sets yet (`ResourceSetUnsupported`), a bad name, an empty
/// set or one over the limits, and a fenced set whose keys span hash slots
/// on a handle with a cluster voter (see [`check_names`]).
pub(crate) fn acquire_set<I, R>(
    shared: &Shared,
    resources: I,
    ttl: Duration,
) -> Result<Acquired, Error>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let ttl_ms = check_handle(shared, ttl)?;
    let mut session = shared.pool.take();
    let mut set = std::mem::take(&mut session.names);
    let read = set
        .fill(resources, Shared::check_resource)
        .map_err(Error::from)
        .and_then(|()| check_names(shared, &set));
    if let Err(error) = read {
        session.names = set;
        shared.pool.give_back(session);
        return Err(error);
    }
    name_resources(Resources::set(set.keys()));
    acquire_on(shared, session, b"", set, ttl_ms)
}

/// One attempt at `names`, read already (a waiting call tries them again
/// and again): copied into the session's buffer.
pub(crate) fn acquire_names(
    shared: &Shared,
    names: &Names,
    ttl_ms: u64,
) -> Result<Acquired, Error> {
    if shared.stop.is_set() {
        return Err(Error::ShutDown);
    }
    let mut session = shared.pool.take();
    let mut set = std::mem::take(&mut session.names);
    set.copy_from(names);
    acquire_on(shared, session, b"", set, ttl_ms)
}

/// What a set's acquisition checks of the handle and the TTL before it
/// reads the names: not shut down, the TTL (in ms, returned), and that the
/// handle can take sets.
pub(crate) fn check_handle(shared: &Shared, ttl: Duration) -> Result<u64, Error> {
    if shared.stop.is_set() {
        return Err(Error::ShutDown);
    }
    let ttl_ms = shared.ttl_millis(ttl)?;
    if let Some(why) = unsupported(shared) {
        return Err(ConfigError::ResourceSetUnsupported(why).into());
    }
    Ok(ttl_ms)
}

/// What a set's acquisition checks of its names, read, before any I/O:
/// with fencing, on a handle with a cluster voter, that they share one
/// hash slot (one fence column: docs/fencing.md, "Sets"); a fenced set
/// whose keys span slots would need a token over several columns, which
/// is not built.
pub(crate) fn check_names(shared: &Shared, names: &Names) -> Result<(), Error> {
    if shared.fence.is_some() && set_runs_in_parts(&shared.voters, names.keys()) {
        let why = SetUnsupported::FencingAcrossSlots;
        return Err(ConfigError::ResourceSetUnsupported(why).into());
    }
    Ok(())
}

/// Why this handle cannot take a set yet, if it cannot. A set is one
/// script per master over all its keys (per slot on a cluster voter: see
/// `round::parts`); on a voter of the single-cluster mode the keys would
/// need the voter's own tag, which is not built; and without scripts the
/// native `MSETEX` form is not built. (A fenced set is one script too,
/// `src/fence/acquire_set.lua`; see [`check_names`] for cluster voters.)
fn unsupported(shared: &Shared) -> Option<SetUnsupported> {
    if !shared.allow_scripts {
        return Some(SetUnsupported::ScriptsOff);
    }
    shared
        .voters
        .iter()
        .any(|voter| matches!(voter, Voter::Shard(_)))
        .then_some(SetUnsupported::ClusterVoter)
}
