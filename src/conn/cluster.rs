//! What a connection to a cluster node says beyond the lock commands:
//! `ASKING` before a command an `ASK` redirect sent there, and the
//! topology requests (`CLUSTER SHARDS`, `CLUSTER SLOTS`) whose answers a
//! cluster voter routes by (see `round::cluster`). Neither carries a tag:
//! each is answered in its place in the connection's order, judged by its
//! shape (`ASKING`'s in `expect`, also inside a set's run), and never
//! counts as a vote.

use super::expect::Step;
use crate::cluster::Topology;
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::Reply;

/// `ASKING`, as sent.
pub(super) const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// `CLUSTER SLOTS` (if `slots`) or `CLUSTER SHARDS`, as sent.
pub(super) fn topology_request(slots: bool) -> &'static [u8] {
    if slots {
        b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n"
    } else {
        b"*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n"
    }
}

/// Judges the answer to `CLUSTER SHARDS` (`CLUSTER SLOTS` if `slots`,
/// asked over TLS if `tls`): the topology, or the server's refusal; a
/// reply that does not parse ends the connection like any reply that
/// cannot answer its command.
pub(super) fn judge_topology(slots: bool, tls: bool, reply: &Reply<'_>) -> Result<Step, NodeError> {
    if let Reply::Error(line) = reply {
        return Ok(Step::Topology(Err(ServerError::from_line(line))));
    }
    let parsed = if slots {
        Topology::from_slots(reply, tls)
    } else {
        Topology::from_shards(reply)
    };
    parsed
        .map(|t| Step::Topology(Ok(Box::new(t))))
        .map_err(|e| {
            NodeError::Protocol(ProtocolError::UnexpectedReply(format!(
                "a cluster topology that does not parse: {e}"
            )))
        })
}
