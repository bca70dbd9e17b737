//! One acquisition attempt of a set: what a handle must be for it (checked
//! before any I/O), the names read into the session's buffers, and the
//! single acquisition's round (`lock::acquire`) with the set's command.

use crate::error::{ConfigError, Error, SetUnsupported};
use crate::events::call::name_resources;
use crate::events::Resources;
use crate::handle::Shared;
use crate::lock::acquire::{acquire_on, Acquired};
use crate::names::Names;
use std::time::Duration;

/// One attempt at the set `resources` (see `Redlock::try_lock_many`),
/// its names read into the session's buffer.
///
/// Before any I/O: fails with `Error::ShutDown` once the handle was shut
/// down, and with `Error::Config` for a TTL out of range, a handle that
/// cannot take sets yet (`ResourceSetUnsupported`), a bad name, an empty
/// set or one over the limits.
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
    if let Err(error) = set.fill(resources, Shared::check_resource) {
        session.names = set;
        shared.pool.give_back(session);
        return Err(error.into());
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

/// Why this handle cannot take a set yet, if it cannot. A set is one
/// script per master over all its keys (per slot on a cluster voter: see
/// `round::parts`; a voter of the single-cluster mode writes each key
/// with its own tag); with fencing the set's one token is not built. Without scripts a set is taken by
/// `MSETEX` and released and extended by runs of native commands (see
/// `conn::run`); a master without them fails (`NodeError::CannotLockSets`).
fn unsupported(shared: &Shared) -> Option<SetUnsupported> {
    if shared.fence.is_some() {
        return Some(SetUnsupported::Fencing);
    }
    None
}
