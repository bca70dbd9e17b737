//! Errors: what happened to a call, and to each node in it.

use crate::resp::{split_error, DecodeError, ServerErrorKind};
use std::fmt;
use std::io;
use std::time::Duration;

/// Why a [`Redlock`](crate::Redlock) or [`Lock`](crate::Lock) call failed.
///
/// Variants that involve the masters carry a [`NodeReport`] saying what each
/// node answered. Use the predicates ([`Error::is_contention`],
/// [`Error::is_retryable`], [`Error::is_auth_failure`] and friends) for the
/// common questions.
///
/// ```no_run
/// # use std::time::Duration;
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// match redlock.lock("job", Duration::from_secs(10)) {
///     Ok(lock) => { /* work while lock.validity() allows */ lock.unlock()?; }
///     Err(e) if e.is_contention() => { /* someone else has it: skip */ }
///     Err(e) if e.is_auth_failure() || e.is_config() => panic!("fix the configuration: {e}"),
///     Err(e) => eprintln!("masters unavailable, try later: {e}"),
/// }
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another client holds the lock: enough masters answered "held" that a
    /// quorum was impossible. `Redlock::try_lock` reports this as `Ok(None)`;
    /// `Redlock::lock` returns it once its retries are used up.
    #[error("held by another client: {0}")]
    Contended(NodeReport),
    /// Too many masters failed (refused, timed out, closed, misbehaved or
    /// answered with a server error) for a quorum to be possible. See
    /// [`Error::is_retryable`] for whether trying again can help.
    #[error("no quorum of masters: {0}")]
    NoQuorum(NodeReport),
    /// A quorum agreed, but the round took so long that no validity was left
    /// (`elapsed >= ttl - drift`). Nothing was acquired or extended; keys set
    /// by an acquisition were released.
    #[error(
        "too slow: the round took {} of a {} TTL, leaving no validity",
        rounded(.elapsed),
        rounded(.ttl)
    )]
    TooSlow {
        /// How long the round took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// An extend or unlock found the lock gone (expired, deleted, or taken
    /// by another client after it expired) on enough masters that a quorum
    /// did not hold it any more. After `extend` fails with this, the lock's
    /// validity is zero, and later calls of `extend` and `unlock` on it
    /// return this error again, with the same report (`unlock` still sends
    /// the release, to delete the key where it remains).
    #[error("lock lost: {0}")]
    LockLost(NodeReport),
    /// The lock's validity ran out: before `extend` or `unlock` was called
    /// (`unlock` still sent the release to every master that may hold the
    /// key), or before an extension's quorum was confirmed (the lock stays
    /// expired: an extension counts only if it is confirmed in time), or,
    /// for a [`Lease`](crate::Lease), before a renewal succeeded. A lock
    /// whose validity ran out is never valid again.
    #[error("lock expired {} {}", rounded(.overrun), WhyExpired(.last_extension))]
    Expired {
        /// How long ago the validity ended.
        overrun: Duration,
        /// What the masters answered to the last extension (or lease
        /// renewal) that was not confirmed in time, if one was tried: why
        /// the lock was not kept. `None` when the validity had simply run
        /// out before the call (a holder that acted too late, or was
        /// paused).
        last_extension: Option<NodeReport>,
    },
    /// A [`Lease`](crate::Lease) has been held for its `max_hold`: renewal
    /// stopped, and the lock runs out the validity of its last renewal.
    /// The holder should finish or stop now.
    #[error("lease held for its limit of {}: renewal stopped", rounded(.max_hold))]
    HoldLimit {
        /// The limit given to `keep_alive`.
        max_hold: Duration,
    },
    /// `extend` was called more often than the configured limit
    /// (see [`Builder::max_extensions`](crate::Builder::max_extensions)).
    #[error("extension limit of {0} reached")]
    ExtensionLimit(u32),
    /// The lock was taken by the process this one was forked from. A child
    /// never uses its parent's connections or releases its parent's locks:
    /// the parent still holds the lock.
    #[error("the lock belongs to the parent of this forked process")]
    Forked,
    /// The operating system's random number generator failed, so no lock
    /// value could be made.
    #[error("random number generator failed: {0}")]
    Entropy(io::Error),
    /// The operating system refused something the client needs to start (a
    /// socket pair to wake waiting threads, a fork handler): out of file
    /// descriptors or memory.
    #[error("the operating system refused a resource the client needs: {0}")]
    System(io::Error),
    /// The configuration or an argument is invalid.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
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

    /// The lock is no longer held: lost on the masters or expired locally;
    /// or its lease reached its hold limit (stop using what it protects).
    pub fn is_lock_lost(&self) -> bool {
        matches!(
            self,
            Error::LockLost(_) | Error::Expired { .. } | Error::HoldLimit { .. }
        )
    }

    /// The configuration or an argument is invalid; retrying cannot help.
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config(_))
    }

    /// Whether another attempt may succeed: contention, a round that was
    /// too slow, or a missing quorum that is not caused by failures that
    /// will not go away by themselves (see [`NodeError::is_permanent`]:
    /// a rejected password, a forbidden command, a bad database number).
    /// [`Redlock::lock`](crate::Redlock::lock) retries only these.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Contended(_) | Error::TooSlow { .. } => true,
            Error::NoQuorum(report) => {
                let permanent = report
                    .iter()
                    .filter(|s| matches!(s.outcome(), NodeOutcome::Failed(e) if e.is_permanent()))
                    .count();
                report.len() - permanent > report.len() / 2 // still a possible quorum
            }
            _ => false,
        }
    }

    /// Some master rejected our credentials (`WRONGPASS`, `NOAUTH`), or
    /// over TLS required a client certificate we did not present
    /// ([`TlsError::ClientCertificateRequired`]) or refused ours
    /// ([`TlsError::ClientCertificateRejected`]); now or as the failure
    /// behind its reconnect backoff.
    pub fn is_auth_failure(&self) -> bool {
        self.any_node_error(|e| {
            matches!(
                e,
                NodeError::Tls(
                    TlsError::ClientCertificateRequired | TlsError::ClientCertificateRejected(_)
                )
            ) || matches!(
                e.server_error().map(ServerError::kind),
                Some(ServerErrorKind::WrongPass | ServerErrorKind::NoAuth)
            )
        })
    }

    /// Some master refused a command or key for want of permission
    /// (`NOPERM`: the ACL user lacks a command, key or channel), now or
    /// as the failure behind its reconnect backoff; this includes a master
    /// where no lock is taken because the ACL user may not run what
    /// releases it ([`CannotRelease::ScriptsForbidden`]).
    pub fn is_permission_denied(&self) -> bool {
        self.any_node_error(|e| match e {
            NodeError::CannotRelease(CannotRelease::ScriptsForbidden(_)) => true,
            NodeError::CannotRelease(CannotRelease::Refused(e)) => {
                e.kind() == ServerErrorKind::NoPerm
            }
            _ => e
                .server_error()
                .is_some_and(|s| s.kind() == ServerErrorKind::NoPerm),
        })
    }

    /// Some master did not answer in time (in any phase), now or as the
    /// failure behind its reconnect backoff.
    pub fn is_timeout(&self) -> bool {
        self.any_node_error(|e| matches!(e, NodeError::TimedOut(_)))
    }

    /// Some master refused the TCP connection (nothing listens there), now
    /// or as the failure behind its reconnect backoff.
    pub fn is_connection_refused(&self) -> bool {
        self.any_node_error(|e| matches!(e, NodeError::Refused))
    }

    /// Some node answered with a server error of this kind (for instance
    /// [`ServerErrorKind::WrongPass`] for a rejected password), now or as
    /// the failure behind its reconnect backoff.
    pub fn has_server_error(&self, kind: ServerErrorKind) -> bool {
        self.any_node_error(|e| e.server_error().is_some_and(|s| s.kind() == kind))
    }

    /// What each master answered, for the variants that involve them.
    pub fn nodes(&self) -> Option<&NodeReport> {
        match self {
            Error::Contended(r) | Error::NoQuorum(r) | Error::LockLost(r) => Some(r),
            Error::Expired {
                last_extension: Some(r),
                ..
            } => Some(r),
            _ => None,
        }
    }

    /// The error of a wait that ran out, saying that `masters` refused the
    /// waiter's subscription to release notices with `refusal`.
    pub(crate) fn with_notices_refused(mut self, masters: usize, refusal: ServerError) -> Error {
        if let Error::Contended(report) | Error::NoQuorum(report) = &mut self {
            report.notices_refused = Some((masters, refusal));
        }
        self
    }

    fn any_node_error(&self, f: impl Fn(&NodeError) -> bool) -> bool {
        self.nodes().is_some_and(|report| {
            report.iter().any(|status| match status.outcome() {
                NodeOutcome::Failed(e) => f(e) || e.cause().is_some_and(&f),
                _ => false,
            })
        })
    }
}

/// The end of [`Error::Expired`]'s message: when, and why if an extension
/// was tried.
struct WhyExpired<'a>(&'a Option<NodeReport>);

impl fmt::Display for WhyExpired<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("before the call"),
            Some(report) => write!(
                f,
                "ago, its last extension not confirmed by a quorum in time: {report}"
            ),
        }
    }
}

/// What every master answered in one round, in the order the nodes were
/// configured. Its `Display` is a one-line summary naming each failed node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    nodes: Vec<NodeStatus>,
    /// For a wait that ran out: how many masters refused to subscribe it
    /// to release notices, and the last refusal.
    notices_refused: Option<(usize, ServerError)>,
}

impl NodeReport {
    pub(crate) fn new(nodes: Vec<NodeStatus>) -> NodeReport {
        NodeReport {
            nodes,
            notices_refused: None,
        }
    }

    /// For the error of a wait that ran out ([`Redlock::lock`]): a master's
    /// refusal to subscribe the waiter to the lock's release notices, if
    /// some refused (an ACL user without rights on the channels
    /// `redlock-sync:released:*`; Redis 7 gives new users none). The waiter
    /// then heard no release from them and tried again only after each
    /// fallback pause.
    ///
    /// [`Redlock::lock`]: crate::Redlock::lock
    pub fn release_notices_refused(&self) -> Option<&ServerError> {
        self.notices_refused.as_ref().map(|(_, error)| error)
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
            (
                "not awaited",
                self.count(|o| matches!(o, NodeOutcome::Pending)),
            ),
            (
                "not asked",
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
        if let Some((masters, error)) = &self.notices_refused {
            write!(
                f,
                "; release notices refused by {masters} of {} masters ({error}), so the wait \
                 polled; grant the ACL user &redlock-sync:released:*",
                self.nodes.len()
            )?;
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
    /// The outcome was decided before this node answered, so its answer
    /// was not awaited (it is still read and checked later, before its
    /// connection carries another command).
    Pending,
    /// Not asked in this round: on acquire, the node was still answering
    /// our earlier commands and the others decided without it; on unlock,
    /// the acquisition never sent it the key, so it cannot hold it.
    NotSent,
    /// The node failed.
    Failed(NodeError),
}

/// How one node failed in one round.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The connection was refused: nothing listens on the port (the server
    /// is down, or the URL's port is wrong).
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
    /// The server answered the lock command with an error reply.
    #[error("server error: {0}")]
    Server(ServerError),
    /// The server refused the connection's set-up (`AUTH` with the URL's
    /// credentials, or `SELECT` of its database): the connection is closed,
    /// and trying again will fail the same way until the configuration is
    /// fixed. The message never repeats the credentials.
    #[error("connection set-up refused: {0}")]
    Handshake(ServerError),
    /// Another socket error, with the operating system's own message (such
    /// as "Too many open files").
    #[error("i/o error: {0}")]
    Io(IoError),
    /// Not contacted: the node failed `ago` and its reconnect backoff has
    /// not run out yet (see [`NodeError::cause`] for that failure).
    #[error("not contacted, reconnecting after a failure {} ago: {cause}", rounded(.ago))]
    Backoff {
        /// The failure that started the backoff.
        cause: Box<NodeError>,
        /// How long ago it happened.
        ago: Duration,
    },
    /// Not asked: the node had not yet answered our earlier commands on the
    /// connection this command had to use (it lags behind the others, or is
    /// stalled), and the round was decided without it.
    #[error("not asked: it had not yet answered our earlier commands")]
    Backlogged,
    /// The TLS session with a `rediss://` master failed: its certificate
    /// was rejected, it refused ours, or it does not speak TLS (see
    /// [`TlsError`]). A handshake that did not finish in time is
    /// [`NodeError::TimedOut`] with [`Phase::Tls`], or
    /// [`Phase::TlsUnanswered`] if the server sent nothing back (a
    /// plaintext port, or a stalled server).
    #[error("TLS: {0}")]
    Tls(TlsError),
    /// No lock is taken on this master: one set there could never be
    /// released or extended, because the connection may not run what that
    /// takes (see [`CannotRelease`]: the ACL user lacks scripting rights,
    /// say). Found by the connection's set-up, or by the first release or
    /// extension the server refused; the connection is closed, and each
    /// new one checks again, so granting the right is enough (the next
    /// connection is tried within the reconnect backoff, at most a second).
    /// [Permanent](NodeError::is_permanent) until then.
    #[error("cannot release locks here, so none is taken: {0}")]
    CannotRelease(CannotRelease),
}

/// Why a master cannot release or extend this client's locks (see
/// [`NodeError::CannotRelease`]). Each says what to grant or change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CannotRelease {
    /// The ACL user may not run these commands (`EVALSHA`, `EVAL`, or
    /// both: `NOPERM`, as under `-@scripting`). Releases and extensions are
    /// Lua scripts, run by `EVALSHA`, and by `EVAL` when the server's
    /// script cache lacks them.
    #[error("the ACL user may not run {0}; releases need EVALSHA and EVAL: ACL SETUSER <user> +evalsha +eval")]
    ScriptsForbidden(&'static str),
    /// The server does not know these commands: renamed or disabled
    /// (`rename-command`).
    #[error("the server has no {0} command (renamed or disabled); releases need EVALSHA and EVAL: enable them on the server")]
    ScriptsDisabled(&'static str),
    /// A release or extension was refused for want of a command right
    /// (the ACL changed while the connection was open): the server's
    /// refusal.
    #[error("a release or extension was refused ({0}); releases need EVALSHA and EVAL: ACL SETUSER <user> +evalsha +eval")]
    Refused(ServerError),
}

/// How a TLS session with a `rediss://` master failed (crate feature
/// `tls`). The connection is closed. All but [`TlsError::Other`] are
/// [permanent](NodeError::is_permanent): they repeat until a certificate,
/// the trusted roots or the URL change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The server's certificate is not issued by a trusted CA (see
    /// `Builder::tls_root_ca_pem`).
    #[error("server certificate rejected: not issued by a trusted CA")]
    UnknownIssuer,
    /// The server's certificate has expired (or is not valid yet).
    #[error("server certificate rejected: expired or not yet valid")]
    Expired,
    /// The server's certificate is not valid for the URL's host (a DNS name
    /// or IP address it does not list).
    #[error("server certificate rejected: not valid for the URL's host name")]
    NameMismatch,
    /// The server's certificate was rejected for another reason (a bad
    /// signature, a wrong purpose, an unsupported algorithm...).
    #[error("server certificate rejected: {0}")]
    BadCertificate(String),
    /// The server asks for a client certificate and we sent none (see
    /// `Builder::tls_client_identity_pem`).
    #[error("the server requires a client certificate (Builder::tls_client_identity_pem)")]
    ClientCertificateRequired,
    /// The server rejected our client certificate, with this alert.
    #[error("the server rejected our client certificate ({0})")]
    ClientCertificateRejected(String),
    /// The server's answer to the TLS handshake is not TLS: a plaintext
    /// port behind a `rediss://` URL.
    #[error("the server does not speak TLS: is this a plaintext port? use redis://")]
    NotTls,
    /// Another TLS failure (a protocol violation, no common cipher suite or
    /// version, a decryption error), with rustls's description.
    #[error("{0}")]
    Other(String),
}

impl NodeError {
    pub(crate) fn from_io(e: &io::Error) -> NodeError {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => NodeError::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => NodeError::Closed,
            _ => NodeError::Io(IoError::from(e)),
        }
    }

    /// Whether the connection itself is unusable after this error. A server
    /// error reply to a lock command leaves it in step, a skipped node was
    /// not touched, and a late reply is still read, in order, when it
    /// comes; everything else (and a connect that timed out) breaks it.
    pub(crate) fn breaks_connection(&self) -> bool {
        !matches!(
            self,
            NodeError::Server(_)
                | NodeError::Backoff { .. }
                | NodeError::Backlogged
                | NodeError::TimedOut(Phase::Handshake | Phase::Reply)
        )
    }

    /// Whether this failure will repeat until someone changes the
    /// configuration of the client or the server: rejected credentials, a
    /// refused `SELECT`, a command or key the ACL forbids, a key of the
    /// wrong type. Other failures (down, slow, busy, loading) may pass.
    pub fn is_permanent(&self) -> bool {
        match self {
            NodeError::Handshake(_) | NodeError::CannotRelease(_) => true,
            NodeError::Tls(e) => !matches!(e, TlsError::Other(_)),
            NodeError::Server(e) => matches!(
                e.kind(),
                ServerErrorKind::NoAuth
                    | ServerErrorKind::WrongPass
                    | ServerErrorKind::NoPerm
                    | ServerErrorKind::WrongType
            ),
            NodeError::Backoff { cause, .. } => cause.is_permanent(),
            _ => false,
        }
    }

    /// For a node skipped in its reconnect backoff: the failure that started
    /// it.
    pub fn cause(&self) -> Option<&NodeError> {
        match self {
            NodeError::Backoff { cause, .. } => Some(cause),
            _ => None,
        }
    }

    /// The server's error reply, if this failure is one (to the command or
    /// to the connection's set-up).
    pub fn server_error(&self) -> Option<&ServerError> {
        match self {
            NodeError::Server(e) | NodeError::Handshake(e) => Some(e),
            _ => None,
        }
    }
}

/// An operating-system error on a socket, kept as the OS reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoError {
    kind: io::ErrorKind,
    code: Option<i32>,
}

impl IoError {
    /// The error's kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.kind
    }

    /// The OS error code (`errno`), if the error came from the OS.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.code
    }
}

impl From<&io::Error> for IoError {
    fn from(e: &io::Error) -> IoError {
        IoError {
            kind: e.kind(),
            code: e.raw_os_error(),
        }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => io::Error::from_raw_os_error(code).fmt(f),
            None => io::Error::from(self.kind).fmt(f),
        }
    }
}

/// Where in a node's exchange a deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Establishing the TCP connection.
    Connect,
    /// Waiting for the replies to the connection's set-up (AUTH, SELECT,
    /// SCRIPT LOAD).
    Handshake,
    /// Waiting for the reply to the lock command.
    Reply,
    /// The TLS handshake of a `rediss://` connection (after the TCP
    /// connect, before the connection's set-up commands), once the server
    /// has answered something.
    Tls,
    /// The TLS handshake of a `rediss://` connection before the server
    /// sent back a single byte. A plaintext port does that: redis-server
    /// reads the ClientHello as the start of a command and waits for the
    /// rest, so a plaintext port behind `rediss://` shows as this timeout
    /// (not as [`TlsError::NotTls`], which needs an answer). A stalled
    /// server does it too, so it is not permanent.
    TlsUnanswered,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connect",
            Phase::Handshake => "handshake",
            Phase::Reply => "reply",
            Phase::Tls => "TLS handshake",
            Phase::TlsUnanswered => {
                "TLS handshake, with no answer from the server (is this a plaintext port? then use redis://)"
            }
        })
    }
}

/// How a server broke the protocol. The connection is discarded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The first bytes from the server are not RESP at all: the port is
    /// probably not a Redis server (an HTTP or TLS server, say).
    #[error("the server does not speak the Redis protocol; is this port a Redis server? ({0})")]
    NotRedis(DecodeError),
    /// The bytes are not a RESP2 reply (or exceed a bound).
    #[error("{0}")]
    Malformed(DecodeError),
    /// A valid reply that cannot answer the command it would be matched to:
    /// a type the command never returns, or a tag of another command (the
    /// server sent a reply too many).
    #[error("unexpected reply {0}")]
    UnexpectedReply(String),
    /// The first bytes from the server are a TLS record: the port is a TLS
    /// port behind a `redis://` URL.
    #[error("the server answered with TLS: this looks like a TLS port; use rediss://")]
    LooksLikeTls,
    /// A `redis://` connection was closed by the server before it answered
    /// anything: what a TLS port does with plaintext (a server shutting
    /// down at that moment does it too).
    #[error(
        "the server closed the connection before answering: if this is a TLS port, use rediss://"
    )]
    ClosedBeforeAnswer,
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

    /// For a reply to a command that carried a secret (AUTH): servers quote
    /// the arguments of a command they refuse ("unknown command 'AUTH',
    /// with args beginning with: '<password>'"), so a message that quotes
    /// anything is replaced; the code is kept.
    pub(crate) fn from_line_redacted(line: &[u8]) -> ServerError {
        let mut error = ServerError::from_line(line);
        if error.message.contains(['\'', '"', '`']) {
            error.message = "(message withheld: it quotes the command's arguments)".into();
        }
        error
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

/// An invalid configuration or argument. Each message says what the limit
/// is. Messages name nodes by address and never include a password.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No node URL was given.
    #[error("no nodes given: pass one or more redis:// URLs to Builder::nodes (3 or 5 independent masters)")]
    NoNodes,
    /// Two URLs lead to the same server (same address and port), which would
    /// let one server cast two votes.
    #[error("node {0} is given twice: two URLs reach the same server, which would vote twice")]
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
    #[error("a node timeout of {} is out of range: it must be above zero and at most 60s", rounded(.0))]
    InvalidNodeTimeout(Duration),
    /// The TTL is too short to leave any validity: the lock must outlast
    /// the allowance for clock drift (TTL/100 + 2 ms), so the shortest TTL
    /// is [`MIN_TTL`](crate::MIN_TTL).
    #[error("a TTL of {} leaves no validity: it must be more than the clock-drift allowance of TTL/100 + 2ms, so at least 3ms", rounded(.0))]
    TtlTooShort(Duration),
    /// More than [`MAX_NODES`](crate::MAX_NODES) nodes were given.
    #[error("{0} nodes given; at most 64 are supported")]
    TooManyNodes(usize),
    /// The TTL exceeds [`MAX_TTL`](crate::MAX_TTL).
    #[error("a TTL of {} is longer than the maximum of 365 days", rounded(.0))]
    TtlTooLong(Duration),
    /// A `rediss://` URL in a build without the crate feature `tls`.
    #[error("node URL {0:?} needs TLS, which this build lacks: enable redlock-sync's cargo feature `tls`")]
    TlsNotEnabled(String),
    /// `rediss://` URLs, and no CA to check their certificates against.
    #[error("rediss:// URLs need a trusted CA: call Builder::tls_root_ca_pem with your CA's PEM certificate (or enable the feature tls-webpki-roots or tls-native-roots and call tls_webpki_roots or tls_native_roots)")]
    TlsNoRoots,
    /// Some URLs are `redis://` and others `rediss://`: refused, so that
    /// no master of a TLS deployment is reached in plaintext by a typo.
    #[error("redis:// and rediss:// URLs are mixed: use rediss:// for every master, or for none")]
    MixedSchemes,
    /// TLS settings were given but every URL is `redis://`: refused, so
    /// that a deployment meant to be secured is not silently plaintext.
    #[error("TLS settings were given but no URL is rediss://: use rediss:// URLs")]
    TlsUnused,
    /// A TLS setting is invalid (PEM that does not parse, a key that does
    /// not fit its certificate). The message never shows key material.
    #[error("invalid TLS setting: {0}")]
    InvalidTls(String),
}

/// A duration as messages show it: rounded to the millisecond from a second
/// up (`1.723s`, `10s`), to a tenth of a millisecond from a millisecond up
/// (`723.4ms`, `45ms`), to the microsecond below (`310µs`), and in
/// nanoseconds under half a microsecond. `Debug` of a `Duration` shows every
/// digit (`1.723052501s`), which no reader needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rounded(pub(crate) Duration);

/// `d`, [`Rounded`] for display.
pub(crate) fn rounded(d: &Duration) -> Rounded {
    Rounded(*d)
}

impl fmt::Display for Rounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// `value / 10^places` in decimal, without trailing zeros.
        fn decimal(
            f: &mut fmt::Formatter<'_>,
            value: u128,
            places: usize,
            unit: &str,
        ) -> fmt::Result {
            let scale = 10u128.pow(places as u32);
            let (whole, mut fraction, mut places) = (value / scale, value % scale, places);
            if fraction == 0 {
                return write!(f, "{whole}{unit}");
            }
            while fraction % 10 == 0 {
                fraction /= 10;
                places -= 1;
            }
            write!(f, "{whole}.{fraction:0places$}{unit}")
        }
        let nanos = self.0.as_nanos();
        // Units are chosen after rounding, so that 999.9996 ms shows as 1s.
        let millis = (nanos + 500_000) / 1_000_000;
        if millis >= 1_000 {
            return decimal(f, millis, 3, "s");
        }
        let tenths_of_millis = (nanos + 50_000) / 100_000;
        if tenths_of_millis >= 10 {
            return decimal(f, tenths_of_millis, 1, "ms");
        }
        match (nanos + 500) / 1_000 {
            0 if nanos == 0 => f.write_str("0s"),
            0 => write!(f, "{nanos}ns"),
            micros => write!(f, "{micros}µs"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_shown_rounded() {
        let shown = |d: Duration| Rounded(d).to_string();
        assert_eq!(shown(Duration::from_nanos(1_723_052_501)), "1.723s");
        assert_eq!(shown(Duration::from_nanos(6_119_659_999_999)), "6119.66s");
        assert_eq!(shown(Duration::from_secs(10)), "10s");
        assert_eq!(shown(Duration::from_millis(1_005)), "1.005s");
        assert_eq!(shown(Duration::from_millis(1_050)), "1.05s");
        assert_eq!(shown(Duration::from_nanos(999_999_600)), "1s");
        assert_eq!(shown(Duration::from_micros(999_999_600)), "1000s");
        assert_eq!(shown(Duration::from_micros(999_400)), "999.4ms");
        assert_eq!(shown(Duration::from_micros(723_449)), "723.4ms");
        assert_eq!(shown(Duration::from_millis(45)), "45ms");
        assert_eq!(shown(Duration::from_micros(2_500)), "2.5ms");
        assert_eq!(shown(Duration::from_micros(960)), "1ms");
        assert_eq!(shown(Duration::from_nanos(310_400)), "310µs");
        assert_eq!(shown(Duration::from_nanos(500)), "1µs");
        assert_eq!(shown(Duration::from_nanos(499)), "499ns");
        assert_eq!(shown(Duration::ZERO), "0s");
        assert_eq!(shown(Duration::MAX), "18446744073709551616s");
        let expired = Error::Expired {
            overrun: Duration::from_nanos(1_723_052_501),
            last_extension: None,
        };
        assert_eq!(expired.to_string(), "lock expired 1.723s before the call");
        let renewal_failed = Error::Expired {
            overrun: Duration::from_millis(12),
            last_extension: Some(NodeReport::new(vec![
                status("10.0.0.1:6379", NodeOutcome::Agreed),
                status(
                    "10.0.0.2:6379",
                    NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
                ),
                status(
                    "10.0.0.3:6379",
                    NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
                ),
            ])),
        };
        assert_eq!(
            renewal_failed.to_string(),
            "lock expired 12ms ago, its last extension not confirmed by a quorum in time: \
             1 of 3 agreed, 2 failed; 10.0.0.2:6379: timed out during reply; \
             10.0.0.3:6379: timed out during reply"
        );
        assert!(renewal_failed.is_lock_lost() && renewal_failed.is_timeout());
        let slow = Error::TooSlow {
            elapsed: Duration::from_nanos(10_412_345),
            ttl: Duration::from_millis(10),
        };
        assert_eq!(
            slow.to_string(),
            "too slow: the round took 10.4ms of a 10ms TTL, leaving no validity"
        );
        let skipped = NodeError::Backoff {
            cause: Box::new(NodeError::Refused),
            ago: Duration::from_nanos(31_016_201),
        };
        assert_eq!(
            skipped.to_string(),
            "not contacted, reconnecting after a failure 31ms ago: connection refused"
        );
    }

    fn status(node: &str, outcome: NodeOutcome) -> NodeStatus {
        NodeStatus {
            node: node.into(),
            outcome,
        }
    }

    #[test]
    fn report_display_names_failed_nodes() {
        let report = NodeReport::new(vec![
            status("10.0.0.1:6379", NodeOutcome::Agreed),
            status(
                "10.0.0.2:6379",
                NodeOutcome::Failed(NodeError::TimedOut(Phase::Reply)),
            ),
            status(
                "10.0.0.3:6379",
                NodeOutcome::Failed(NodeError::Handshake(ServerError::from_line(
                    b"WRONGPASS invalid username-password pair",
                ))),
            ),
        ]);
        assert_eq!(
            report.to_string(),
            "1 of 3 agreed, 2 failed; 10.0.0.2:6379: timed out during reply; \
             10.0.0.3:6379: connection set-up refused: WRONGPASS invalid username-password pair"
        );
        let error = Error::NoQuorum(report);
        assert!(error.is_no_quorum() && !error.is_contention());
        assert!(error.has_server_error(ServerErrorKind::WrongPass));
        assert!(error.is_auth_failure() && error.is_timeout());
        assert!(!error.has_server_error(ServerErrorKind::NoAuth));
        // One of three is down for good: the other two can still make a
        // quorum once the slow one answers.
        assert!(error.is_retryable());
    }

    #[test]
    fn permanent_failures_that_prevent_a_quorum_are_not_retryable() {
        let wrongpass = || {
            NodeOutcome::Failed(NodeError::Handshake(ServerError::from_line(
                b"WRONGPASS invalid username-password pair",
            )))
        };
        let in_backoff = NodeOutcome::Failed(NodeError::Backoff {
            cause: Box::new(NodeError::Handshake(ServerError::from_line(b"WRONGPASS x"))),
            ago: Duration::from_millis(3),
        });
        let error = Error::NoQuorum(NodeReport::new(vec![
            status("a:1", wrongpass()),
            status("b:1", in_backoff),
            status("c:1", NodeOutcome::Agreed),
        ]));
        assert!(!error.is_retryable(), "{error}");
        assert!(error.is_auth_failure(), "seen through the backoff");
        assert!(error.to_string().contains("WRONGPASS"), "{error}");
    }

    #[test]
    fn messages_name_the_limit_and_do_not_repeat_themselves() {
        let error = Error::from(ConfigError::NoNodes);
        assert!(std::error::Error::source(&error).is_none());
        assert_eq!(error.to_string().matches("no nodes given").count(), 1);
        let shown = ConfigError::TtlTooShort(Duration::from_micros(500)).to_string();
        assert!(shown.contains("at least 3ms"), "{shown}");
        let shown = ConfigError::InvalidNodeTimeout(Duration::ZERO).to_string();
        assert!(shown.contains("at most 60s"), "{shown}");
        let emfile = IoError {
            kind: io::ErrorKind::Other,
            code: Some(libc::EMFILE),
        };
        let shown = NodeError::Io(emfile).to_string();
        assert!(shown.contains("Too many open files"), "{shown}");
    }

    #[test]
    fn a_refused_auth_never_quotes_its_arguments() {
        let line = b"ERR unknown command 'AUTH', with args beginning with: 'hunter2' ";
        let error = ServerError::from_line_redacted(line);
        assert_eq!(error.code(), "ERR");
        assert!(!error.to_string().contains("hunter2"), "{error}");
        let plain = ServerError::from_line_redacted(b"WRONGPASS invalid username-password pair");
        assert_eq!(plain.message(), "invalid username-password pair");
    }
}
