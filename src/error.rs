//! Errors: what happened to a call, and to each node in it.

use crate::resp::{split_error, DecodeError, ServerErrorKind};
use std::fmt;
use std::io;
use std::time::Duration;

/// Why a [`Redlock`](crate::Redlock) call failed.
///
/// Variants that involve the masters carry a [`NodeReport`] saying what each
/// node answered. Use the predicates ([`Error::is_contention`] and friends)
/// for the common questions.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another client holds the lock: enough masters answered "held" that a
    /// quorum was impossible. `Redlock::try_lock` reports this as `Ok(None)`;
    /// `Redlock::lock` returns it once its retries are used up.
    #[error("held by another client: {0}")]
    Contended(NodeReport),
    /// Too many masters failed (refused, timed out, closed, misbehaved or
    /// answered with a server error) for a quorum to be possible.
    #[error("no quorum of masters: {0}")]
    NoQuorum(NodeReport),
    /// A quorum agreed, but the round took so long that no validity was left
    /// (`elapsed >= ttl - drift`). Nothing was acquired or extended; keys set
    /// by an acquisition were released.
    #[error("too slow: the round took {elapsed:?} of a {ttl:?} TTL")]
    TooSlow {
        /// How long the round took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// An extend or unlock found the lock gone (expired, or taken by another
    /// client after it expired) on enough masters that a quorum was impossible.
    #[error("lock lost: {0}")]
    LockLost(NodeReport),
    /// The lock's validity had already run out when `extend` or `unlock` was
    /// called. `unlock` still sent the release to every master.
    #[error("lock expired {overrun:?} before the call")]
    Expired {
        /// How long ago the validity ended.
        overrun: Duration,
    },
    /// `extend` was called more often than the configured limit
    /// (see [`Builder::max_extensions`](crate::Builder::max_extensions)).
    #[error("extension limit of {0} reached")]
    ExtensionLimit(u32),
    /// The operating system's random number generator failed, so no lock
    /// value could be made.
    #[error("random number generator failed: {0}")]
    Entropy(io::Error),
    /// The configuration or an argument is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
}

impl Error {
    /// The lock is held by another client.
    pub fn is_contention(&self) -> bool {
        matches!(self, Error::Contended(_))
    }

    /// Too many masters failed for a quorum.
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum(_))
    }

    /// A quorum agreed too slowly for any validity to remain.
    pub fn is_too_slow(&self) -> bool {
        matches!(self, Error::TooSlow { .. })
    }

    /// The lock is no longer held: lost on the masters or expired locally.
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost(_) | Error::Expired { .. })
    }

    /// The configuration or an argument is invalid; retrying cannot help.
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config(_))
    }

    /// Whether a failed acquisition is worth another attempt (contention,
    /// missing quorum, or a round that was too slow).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Contended(_) | Error::NoQuorum(_) | Error::TooSlow { .. }
        )
    }

    /// Some node answered with a server error of this kind (for instance
    /// [`ServerErrorKind::WrongPass`] for a rejected password).
    pub fn has_server_error(&self, kind: ServerErrorKind) -> bool {
        self.nodes().is_some_and(|report| {
            report
                .iter()
                .any(|status| matches!(status.outcome(), NodeOutcome::Failed(NodeError::Server(e)) if e.kind() == kind))
        })
    }

    /// What each master answered, for the variants that involve them.
    pub fn nodes(&self) -> Option<&NodeReport> {
        match self {
            Error::Contended(r) | Error::NoQuorum(r) | Error::LockLost(r) => Some(r),
            _ => None,
        }
    }
}

/// What every master answered in one round, in the order the nodes were
/// configured. Its `Display` is a one-line summary naming each failed node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    nodes: Vec<NodeStatus>,
}

impl NodeReport {
    pub(crate) fn new(nodes: Vec<NodeStatus>) -> NodeReport {
        NodeReport { nodes }
    }

    /// The status of each node.
    pub fn iter(&self) -> std::slice::Iter<'_, NodeStatus> {
        self.nodes.iter()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the report is empty (it never is for a configured client).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes had this outcome (compared without the error detail).
    fn count(&self, f: impl Fn(&NodeOutcome) -> bool) -> usize {
        self.nodes.iter().filter(|s| f(&s.outcome)).count()
    }
}

impl<'a> IntoIterator for &'a NodeReport {
    type Item = &'a NodeStatus;
    type IntoIter = std::slice::Iter<'a, NodeStatus>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let agreed = self.count(|o| matches!(o, NodeOutcome::Agreed));
        write!(f, "{agreed} of {} agreed", self.nodes.len())?;
        let others = [
            (
                "declined",
                self.count(|o| matches!(o, NodeOutcome::Declined)),
            ),
            (
                "failed",
                self.count(|o| matches!(o, NodeOutcome::Failed(_))),
            ),
            ("pending", self.count(|o| matches!(o, NodeOutcome::Pending))),
            (
                "not sent",
                self.count(|o| matches!(o, NodeOutcome::NotSent)),
            ),
        ];
        for (what, n) in others {
            if n > 0 {
                write!(f, ", {n} {what}")?;
            }
        }
        for status in &self.nodes {
            if let NodeOutcome::Failed(e) = &status.outcome {
                write!(f, "; {}: {}", status.node, e)?;
            }
        }
        Ok(())
    }
}

/// One node's part in a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    pub(crate) node: String,
    pub(crate) outcome: NodeOutcome,
}

impl NodeStatus {
    /// The node's address as configured (`host:port`, never credentials).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// What the node answered.
    pub fn outcome(&self) -> &NodeOutcome {
        &self.outcome
    }
}

/// What one node answered in one round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOutcome {
    /// The node did what was asked (set, extended or deleted our key).
    Agreed,
    /// The node refused: on acquire, the key is held by someone else; on
    /// extend or unlock, the key is not ours (expired or taken).
    Declined,
    /// The outcome was decided before this node answered; its reply is read
    /// and checked before its connection carries another command.
    Pending,
    /// Not sent this command: on extend or unlock, the node was not sent
    /// the acquisition (it was busy or unreachable then), so it cannot hold
    /// the key. Counts like [`NodeOutcome::Declined`].
    NotSent,
    /// The node failed.
    Failed(NodeError),
}

/// How one node failed in one round.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The connection was refused (nothing listens on the port).
    #[error("connection refused")]
    Refused,
    /// The node's deadline passed during this phase.
    #[error("timed out during {0}")]
    TimedOut(Phase),
    /// The server closed the connection.
    #[error("connection closed by the server")]
    Closed,
    /// The server sent something that is not a valid answer.
    #[error("protocol violation: {0}")]
    Protocol(ProtocolError),
    /// The server answered with an error reply.
    #[error("server error: {0}")]
    Server(ServerError),
    /// Another socket error.
    #[error("i/o error: {0}")]
    Io(io::ErrorKind),
    /// Not contacted: the node failed recently and its reconnect backoff has
    /// not run out yet.
    #[error("not contacted: reconnect backoff after a recent failure")]
    Backoff,
    /// Not contacted: on acquire, the node had not yet answered our earlier
    /// commands (it lags behind the others, or is stalled), and the round
    /// was decided without queueing a SET behind them; on other commands,
    /// too many replies are owed.
    #[error("not contacted: still busy with earlier commands")]
    Backlogged,
}

impl NodeError {
    pub(crate) fn from_io(e: &io::Error) -> NodeError {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => NodeError::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => NodeError::Closed,
            kind => NodeError::Io(kind),
        }
    }

    /// Whether the connection itself is unusable after this error. A server
    /// error reply leaves it in step, a skipped node was not touched, and a
    /// late reply is still read, in order, when it comes; everything else
    /// (and a connect that timed out) breaks it.
    pub(crate) fn breaks_connection(&self) -> bool {
        !matches!(
            self,
            NodeError::Server(_)
                | NodeError::Backoff
                | NodeError::Backlogged
                | NodeError::TimedOut(Phase::Handshake | Phase::Reply)
        )
    }
}

/// Where in a node's exchange a deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Establishing the TCP connection.
    Connect,
    /// Waiting for the replies to AUTH, SELECT and SCRIPT LOAD.
    Handshake,
    /// Waiting for the reply to the lock command.
    Reply,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connect",
            Phase::Handshake => "handshake",
            Phase::Reply => "reply",
        })
    }
}

/// How a server broke the protocol. The connection is discarded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The bytes are not a RESP2 reply (or exceed a bound).
    #[error("{0}")]
    Malformed(#[from] DecodeError),
    /// A valid reply of a type the command never returns.
    #[error("unexpected reply {0}")]
    UnexpectedReply(String),
    /// A reply arrived when no command was outstanding.
    #[error("reply with no command outstanding")]
    Unsolicited,
}

/// An error reply from a server, classified by its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    kind: ServerErrorKind,
    code: String,
    message: String,
}

impl ServerError {
    pub(crate) fn from_line(line: &[u8]) -> ServerError {
        let (kind, code, message) = split_error(line);
        ServerError {
            kind,
            code: String::from_utf8_lossy(code).into_owned(),
            message: String::from_utf8_lossy(message).into_owned(),
        }
    }

    /// The class of the error.
    pub fn kind(&self) -> ServerErrorKind {
        self.kind
    }

    /// The error code as sent (the first word, such as `NOPERM`).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The message after the code.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.code)
        } else {
            write!(f, "{} {}", self.code, self.message)
        }
    }
}

/// An invalid configuration or argument. Messages name nodes by address and
/// never include a password.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No node URL was given.
    #[error("no nodes given")]
    NoNodes,
    /// Two URLs lead to the same server (same address and port), which would
    /// let one server cast two votes.
    #[error("node {0} is given twice")]
    DuplicateNode(String),
    /// A node URL could not be parsed.
    #[error("invalid node URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL, with any credentials replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A node's host name did not resolve.
    #[error("cannot resolve node {node}: {reason}")]
    Unresolvable {
        /// The node's `host:port`.
        node: String,
        /// The resolver's answer.
        reason: String,
    },
    /// The node timeout is zero or longer than
    /// [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT).
    #[error("a node timeout of {0:?} is out of range")]
    InvalidNodeTimeout(Duration),
    /// The TTL is shorter than one millisecond.
    #[error("the TTL must be at least 1 ms")]
    ZeroTtl,
    /// The TTL is not far above the node timeout (it must be at least
    /// [`MIN_TTL_PER_NODE_TIMEOUT`](crate::MIN_TTL_PER_NODE_TIMEOUT) times it).
    #[error("a TTL of {ttl:?} is too short for a node timeout of {node_timeout:?}")]
    TtlTooShort {
        /// The TTL asked for.
        ttl: Duration,
        /// The configured node timeout.
        node_timeout: Duration,
    },
    /// More than [`MAX_NODES`](crate::MAX_NODES) nodes were given.
    #[error("{0} nodes given; at most 64 are supported")]
    TooManyNodes(usize),
    /// The TTL exceeds [`MAX_TTL`](crate::MAX_TTL).
    #[error("a TTL of {0:?} is longer than the maximum")]
    TtlTooLong(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_display_names_failed_nodes() {
        let report = NodeReport::new(vec![
            NodeStatus {
                node: "10.0.0.1:6379".into(),
                outcome: NodeOutcome::Agreed,
            },
            NodeStatus {
                node: "10.0.0.2:6379".into(),
                outcome: NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
            },
            NodeStatus {
                node: "10.0.0.3:6379".into(),
                outcome: NodeOutcome::Failed(NodeError::Server(ServerError::from_line(
                    b"WRONGPASS invalid username-password pair",
                ))),
            },
        ]);
        assert_eq!(
            report.to_string(),
            "1 of 3 agreed, 2 failed; 10.0.0.2:6379: timed out during reply; \
             10.0.0.3:6379: server error: WRONGPASS invalid username-password pair"
        );
        let error = Error::NoQuorum(report);
        assert!(error.is_no_quorum() && error.is_retryable() && !error.is_contention());
        assert!(error.has_server_error(ServerErrorKind::WrongPass));
        assert!(!error.has_server_error(ServerErrorKind::NoAuth));
    }
}
