//! One acquisition attempt of a set: what a handle must be for it (checked
//! before any I/O), the names read into the session's buffers, and the
//! single acquisition's round (`lock::acquire`) with the set's command.

use crate::error::{ConfigError, Error, SetUnsupported};
use crate::events::call::name_resources;
use crate::events::Resources;
use crate::handle::Shared;
use crate::lock::acquire::{acquire_on, Acquired};
use crate::names::Names;
use crate::round::set_runs_in_parts;
use std::time::Duration;

/// One attempt at the set `resources` (see `Redlock::try_lock_many`),
/// its names read into the session's buffer.
///
/// Before any I/O: fails with `Error::ShutDown` once the handle was shut
/// down, and with `Error::Config` for a TTL out of range, a bad name, an
/// empty set or one over the limits, and a fenced set whose keys span hash slots
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
/// reads the names: not shut down, and the TTL (in ms, returned). Every
/// handle takes sets (see [`check_names`] for the one refusal).
pub(crate) fn check_handle(shared: &Shared, ttl: Duration) -> Result<u64, Error> {
    if shared.stop.is_set() {
        return Err(Error::ShutDown);
    }
    Ok(shared.ttl_millis(ttl)?)
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
