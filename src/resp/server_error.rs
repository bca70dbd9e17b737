//! Classification of server error replies by their leading code.

use std::fmt;

/// The class of an error reply, from its first word (the "error code").
///
/// ```
/// # use redlock_sync::ServerErrorKind;
/// assert_eq!(ServerErrorKind::from_code(b"NOSCRIPT"), ServerErrorKind::NoScript);
/// assert_eq!(ServerErrorKind::from_code(b"MOVED"), ServerErrorKind::Moved);
/// assert_eq!(ServerErrorKind::from_code(b"EXECABORT"), ServerErrorKind::Other);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerErrorKind {
    /// `ERR`: a generic error (bad arguments, a failing script, ...).
    Err,
    /// `WRONGTYPE`: the key holds a value of another type.
    WrongType,
    /// `NOSCRIPT`: `EVALSHA` named a script the server does not have.
    NoScript,
    /// `NOAUTH`: the server requires authentication.
    NoAuth,
    /// `WRONGPASS`: the user name or password was rejected.
    WrongPass,
    /// `NOPERM`: the ACL user may not run the command or touch the key.
    NoPerm,
    /// `LOADING`: the server is loading its dataset into memory.
    Loading,
    /// `READONLY`: the server is a replica and refuses writes.
    ReadOnly,
    /// `BUSY`: a script is running too long to serve other commands.
    Busy,
    /// `MASTERDOWN`: a replica lost its link to the master.
    MasterDown,
    /// `NOANCHOR`: fencing (`Builder::fencing`): the fence domain has no
    /// anchor on this master (never initialised, or its state was lost:
    /// `Redlock::fence_repair` re-anchors it).
    NoAnchor,
    /// `FENCELIMIT`: fencing: the domain's counter reached 2^53.
    FenceLimit,
    /// `FENCEEPOCH`: fencing: a repair changed the domain's epoch between
    /// an acquisition's two rounds.
    FenceEpoch,
    /// `FENCESTALE`: fencing: the domain's anchor predates a restart of the
    /// master, or `INFO` is refused so that cannot be told.
    FenceStale,
    /// `MOVED`: a cluster node does not own the key's slot; the message
    /// names the slot and the node that does. The command did not run.
    Moved,
    /// `ASK`: the key's slot is migrating and the key is not (or no longer)
    /// on this node; ask the named node, after `ASKING`. The command did
    /// not run.
    Ask,
    /// `TRYAGAIN`: a command on several keys of a slot being migrated, some
    /// of which moved already. The command did not run.
    TryAgain,
    /// `CLUSTERDOWN`: the cluster is down, or the key's slot is served by
    /// no node. The command did not run.
    ClusterDown,
    /// `CROSSSLOT`: the command's keys are in different slots of a
    /// cluster. The command did not run, and never will as written.
    CrossSlot,
    /// Any other code (the code itself is kept next to the kind).
    Other,
}

impl ServerErrorKind {
    /// Classifies an error code (the first word of an error reply).
    pub fn from_code(code: &[u8]) -> ServerErrorKind {
        match code {
            b"ERR" => ServerErrorKind::Err,
            b"WRONGTYPE" => ServerErrorKind::WrongType,
            b"NOSCRIPT" => ServerErrorKind::NoScript,
            b"NOAUTH" => ServerErrorKind::NoAuth,
            b"WRONGPASS" => ServerErrorKind::WrongPass,
            b"NOPERM" => ServerErrorKind::NoPerm,
            b"LOADING" => ServerErrorKind::Loading,
            b"READONLY" => ServerErrorKind::ReadOnly,
            b"BUSY" => ServerErrorKind::Busy,
            b"MASTERDOWN" => ServerErrorKind::MasterDown,
            b"NOANCHOR" => ServerErrorKind::NoAnchor,
            b"FENCELIMIT" => ServerErrorKind::FenceLimit,
            b"FENCEEPOCH" => ServerErrorKind::FenceEpoch,
            b"FENCESTALE" => ServerErrorKind::FenceStale,
            b"MOVED" => ServerErrorKind::Moved,
            b"ASK" => ServerErrorKind::Ask,
            b"TRYAGAIN" => ServerErrorKind::TryAgain,
            b"CLUSTERDOWN" => ServerErrorKind::ClusterDown,
            b"CROSSSLOT" => ServerErrorKind::CrossSlot,
            _ => ServerErrorKind::Other,
        }
    }
}

impl fmt::Display for ServerErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerErrorKind::Err => "ERR",
            ServerErrorKind::WrongType => "WRONGTYPE",
            ServerErrorKind::NoScript => "NOSCRIPT",
            ServerErrorKind::NoAuth => "NOAUTH",
            ServerErrorKind::WrongPass => "WRONGPASS",
            ServerErrorKind::NoPerm => "NOPERM",
            ServerErrorKind::Loading => "LOADING",
            ServerErrorKind::ReadOnly => "READONLY",
            ServerErrorKind::Busy => "BUSY",
            ServerErrorKind::MasterDown => "MASTERDOWN",
            ServerErrorKind::NoAnchor => "NOANCHOR",
            ServerErrorKind::FenceLimit => "FENCELIMIT",
            ServerErrorKind::FenceEpoch => "FENCEEPOCH",
            ServerErrorKind::FenceStale => "FENCESTALE",
            ServerErrorKind::Moved => "MOVED",
            ServerErrorKind::Ask => "ASK",
            ServerErrorKind::TryAgain => "TRYAGAIN",
            ServerErrorKind::ClusterDown => "CLUSTERDOWN",
            ServerErrorKind::CrossSlot => "CROSSSLOT",
            ServerErrorKind::Other => "other",
        })
    }
}

/// Splits the payload of an error reply into its kind, its code and the
/// message after the code: `LOADING Redis is loading ...` gives
/// (`Loading`, `LOADING`, `Redis is loading ...`).
pub fn split_error(line: &[u8]) -> (ServerErrorKind, &[u8], &[u8]) {
    let (code, message) = match line.iter().position(|&b| b == b' ') {
        Some(space) => (&line[..space], &line[space + 1..]),
        None => (line, &line[line.len()..]),
    };
    (ServerErrorKind::from_code(code), code, message)
}
