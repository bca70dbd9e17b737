//! How one node failed in one round, and what each failure tells the
//! operator to grant or change.

use super::fence::FenceFault;
use super::io_error::IoError;
use super::rounded::rounded;
use crate::resp::{split_error, DecodeError, ServerErrorKind};
use std::fmt;
use std::io;
use std::time::Duration;

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
    /// Not contacted: a cluster node named by host, met during a round,
    /// whose name has not resolved yet. It is looked up away from the
    /// rounds (at most once a second; see
    /// [`Builder::resolver`](crate::Builder::resolver)), and dialled once
    /// it has.
    #[error("not contacted: its host name has not resolved yet (looked up in the background)")]
    Unresolved,
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
    /// Not asked: the node had not answered our earlier commands on the
    /// connection (it lags, or is stalled: it owes too many replies, or too
    /// many bytes of their arguments), and the round was decided without it.
    #[error("skipped: this master was still busy with our earlier commands, and the others decided without it")]
    Backlogged,
    /// Not asked: in the single-cluster mode
    /// ([`Builder::cluster_shards`](crate::Builder::cluster_shards)), this
    /// voter's slot is now served by the same master as an earlier voter's
    /// (the cluster was resharded since the handle was built), and one
    /// master never votes twice. The string names the other voter.
    #[error("skipped: its slot is now on the same master as voter {0}'s (the cluster was resharded), and one master votes once; rebuild the handle to spread the voters again")]
    SharesMaster(String),
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
    /// No set ([`Redlock::try_lock_many`](crate::Redlock::try_lock_many)) is
    /// taken on this master: the handle runs no scripts
    /// ([`Builder::allow_scripts`](crate::Builder::allow_scripts)) and the
    /// server lacks the native command named. Nothing is set there; the
    /// connection is kept. [Permanent](NodeError::is_permanent).
    #[error("cannot take a set of resources here without scripts: the server lacks {0}")]
    CannotLockSets(&'static str),
    /// The master's identity changed under a live connection (its run id
    /// or replication id is not what the set-up found, or it is a replica
    /// now: failed over, failed back, or restarted behind a proxy), found
    /// by the identity read ahead of a command on a connection idle for a
    /// second or more. Its grant does not count (what it set is released
    /// as any failed master's); the connection is set up again first.
    #[error("the master changed identity under this connection (failed over, failed back or restarted): its grant does not count until the connection is checked again")]
    IdentityChanged,
    /// A Sentinel voter's master refused `ROLE` (an ACL without it, or a
    /// renamed command): it cannot be shown to be a master, so no lock goes
    /// to it. [Permanent](NodeError::is_permanent): grant `+role`.
    #[error(
        "ROLE was refused ({0}): a Sentinel voter's master must show that it is one (grant +role)"
    )]
    RoleRefused(ServerError),
    /// A Sentinel voter ([`Builder::sentinel`](crate::Builder::sentinel))
    /// has no master to send to: no sentinel has named one that `ROLE`
    /// shows to be a master yet (the sentinels are down or unreachable, a
    /// failover is under way, or the master's name is unknown to them).
    /// The string says what the last attempt found. The sentinels are asked
    /// again in the background, at most every 100 ms.
    #[error("no master known for this Sentinel voter: {0}")]
    NoMaster(String),
    /// The replica guard ([`Builder::replica_ack`](crate::Builder::replica_ack)):
    /// the master granted, but only `acked` of the `wanted` replicas
    /// confirmed the write within the guard's timeout (`WAIT`, or
    /// `WAITAOF`), so the grant does not count: a failover could lose it.
    /// The key it may have set is released like any failed master's. The
    /// connection is kept.
    #[error("only {acked} of the {wanted} replicas the replica guard waits for confirmed the write in time, so this master's grant does not count")]
    ReplicasBehind {
        /// How many replicas confirmed the write.
        acked: u32,
        /// How many the guard asks for.
        wanted: u32,
    },
    /// The replica guard with `WAITAOF` and `local`
    /// ([`Builder::replica_ack_aof`](crate::Builder::replica_ack_aof)):
    /// the master did not fsync the write to its own append-only file
    /// within the guard's timeout, so the grant does not count.
    #[error("the master did not fsync the write to its append-only file within the replica guard's timeout, so its grant does not count")]
    NotFsynced,
    /// The replica guard's `command` (`WAIT` or `WAITAOF`) was refused:
    /// the server lacks it (`WAITAOF` needs Redis 7.2+ or Valkey), the ACL
    /// user may not run it, or it cannot run there (`WAITAOF` with `local`
    /// on a master without `appendonly yes`; either on a replica). No
    /// grant of this master counts. A command unknown or forbidden is
    /// [permanent](NodeError::is_permanent), and the connection sends no
    /// guarded command again (a new connection tries again).
    #[error("the replica guard's {command} was refused ({error}): the guard needs it on every master (WAITAOF: Redis 7.2+ or Valkey 7.2+, and appendonly yes for a local fsync)")]
    ReplicaAckRefused {
        /// `WAIT` or `WAITAOF`.
        command: &'static str,
        /// The server's refusal.
        error: ServerError,
    },
    /// Fencing (`Builder::fencing`): this master's answers do not count
    /// for a fence token (see [`FenceFault`] for why and what to do). The
    /// connection is kept.
    #[error("left out of fencing: {0}")]
    Fence(FenceFault),
    /// Fencing, a cluster voter (which keeps a fence counter per slot):
    /// its counters of `slots` of its 16384 slots do not count, the first
    /// found for `fault` (a slot moved to another node, a shard failed
    /// over, ...); the others do. Told by the operator's calls, which look
    /// at every slot.
    #[error("left out of fencing in {slots} of its 16384 slots: {fault}")]
    FenceSlots {
        /// Why the first slot found is left out.
        fault: FenceFault,
        /// In how many slots.
        slots: u16,
    },
    /// This voter is refused: it is not an independent master (see
    /// [`NotAVoter`] for why and what to change: a replica, a KeyDB
    /// active replica, a cluster node given as a standalone master, the
    /// same server, replication set or cluster as another voter). Found
    /// when a connection is set up (`INFO server`, `INFO replication`, a
    /// cluster's topology), before any answer on it counts; of two voters
    /// found to be one server, replication set or cluster, the one
    /// configured later is refused, and no round counts both.
    /// [Permanent](NodeError::is_permanent): what a server is can change (a
    /// replica promoted), so each new connection checks again; a voter
    /// found to share another's server, replication set or cluster stays
    /// refused for the handle's life. A Sentinel voter's master found a
    /// replica or a Sentinel (`INFO` or `ROLE`) has its sentinels asked
    /// again at once.
    #[error("refused as a voter: {0}")]
    NotAVoter(NotAVoter),
}

/// Why a configured voter is refused (see [`NodeError::NotAVoter`]): two
/// voters that are one server, or one cluster, would cast two votes with
/// one failure domain, and a node that is not an independent master has no
/// vote of its own. Each says what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotAVoter {
    /// The server given as a standalone master is a replica (`role:slave`
    /// in `INFO replication`) of the master at this address: its keys are
    /// its master's, and it refuses writes.
    #[error("this server is a replica of {master}: a replica holds its master's keys and has no vote of its own; give the master's URL instead (or another independent master)")]
    Replica {
        /// The master's `host:port`, as the replica names it.
        master: String,
    },
    /// The server is a KeyDB active replica (`role:active-replica`) of the
    /// master at this address: both accept writes to one key and copy them
    /// to each other, so two clients could each win one of them.
    #[error("this server is a KeyDB active replica of {master}: both accept writes to one key, so they are not independent; use independent masters (active-replica no)")]
    ActiveReplica {
        /// The master it replicates, `host:port`.
        master: String,
    },
    /// The server is a KeyDB multi-master node: it replicates from several
    /// masters (these, `host:port`) and accepts writes, as they do.
    #[error("this server is a KeyDB multi-master node (its masters: {masters}): they all accept writes to one key, so they are not independent; use independent masters (multi-master no)")]
    MultiMaster {
        /// Its masters, `host:port`, comma-separated (at most eight).
        masters: String,
    },
    /// The server given as a standalone master is a node of a Redis or
    /// Valkey Cluster (`redis_mode:cluster`): it owns some slots only.
    #[error("this server is a cluster node given as a standalone master: give the cluster with Builder::cluster (or Builder::cluster_shards)")]
    ClusterNode,
    /// A node given as a cluster's seed is not a cluster node (`redis_mode`
    /// standalone).
    #[error("this server is not a cluster node but was given to Builder::cluster: give it with Builder::nodes")]
    NotACluster,
    /// The server is a Sentinel, not a master.
    #[error("this server is a Sentinel, not a master: give the URL of a master")]
    Sentinel,
    /// The voter reached a server (same `run_id`) that this earlier voter
    /// reaches too: one server under two addresses, or a standalone master
    /// that is also a node of a cluster voter.
    #[error("it reaches the same server as voter {other} (same run_id): one server votes once; give each server once")]
    SameServer {
        /// The earlier voter, as reports name it.
        other: String,
    },
    /// The voter's server writes one history with this earlier voter's
    /// (their replication ids, `master_replid` and `master_replid2`, say
    /// so): a replica promoted while its master still runs, or a server
    /// restarted from the other's dump. It holds the keys it copied from
    /// the other, so a lock taken before would count on both.
    #[error("it is in the same replication set as voter {other} (a replica promoted from it, or its master: they share a replication id): it holds the keys it copied, so a lock would count twice; give independent masters")]
    SameReplication {
        /// The earlier voter, as reports name it.
        other: String,
    },
    /// The voter's cluster lists nodes (by their cluster node id) that
    /// this earlier voter's cluster lists too: one cluster given as two
    /// voters.
    #[error("it is the same cluster as voter {other} (they share cluster nodes): one cluster votes once; give its seeds to one Builder::cluster call")]
    SameCluster {
        /// The earlier voter, as reports name it.
        other: String,
    },
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
    /// Scripts are off ([`Builder::allow_scripts`](crate::Builder::allow_scripts)),
    /// and the server has no native command for this, or the ACL user may
    /// not run it (`DELIFEQ` or `DELEX … IFEQ` to release, `SET … IFEQ` to
    /// extend, `ECHO` to tag commands): it needs Valkey 9.0+ or Redis 8.4+.
    #[error("scripts are off (Builder::allow_scripts(false)) and the server has no {0} that this user may run: use Valkey 9.0+ or Redis 8.4+ (and grant the command), or allow scripts")]
    NativeMissing(&'static str),
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
                | NodeError::Fence(_)
                | NodeError::FenceSlots { .. }
                | NodeError::Backoff { .. }
                | NodeError::Backlogged
                | NodeError::CannotLockSets(_)
                | NodeError::SharesMaster(_)
                | NodeError::NoMaster(_)
                | NodeError::IdentityChanged
                | NodeError::ReplicasBehind { .. }
                | NodeError::NotFsynced
                | NodeError::ReplicaAckRefused { .. }
                | NodeError::TimedOut(Phase::Handshake | Phase::Reply)
        )
    }

    /// Whether a connection to the node could not be made at all (refused,
    /// unreachable, no answer to the connect, no address yet): it may have
    /// moved, so a node named by host is looked up again.
    pub(crate) fn means_unreachable(&self) -> bool {
        match self {
            NodeError::Refused | NodeError::Unresolved | NodeError::TimedOut(Phase::Connect) => {
                true
            }
            NodeError::Io(e) => matches!(
                e.code,
                Some(
                    libc::EHOSTUNREACH
                        | libc::ENETUNREACH
                        | libc::EHOSTDOWN
                        | libc::ENETDOWN
                        | libc::EADDRNOTAVAIL
                        | libc::ETIMEDOUT
                )
            ),
            _ => false,
        }
    }

    /// Whether this failure will repeat until someone changes the
    /// configuration of the client or the server: rejected credentials, a
    /// refused `SELECT`, a command or key the ACL forbids, a key of the
    /// wrong type. Other failures (down, slow, busy, loading) may pass.
    pub fn is_permanent(&self) -> bool {
        match self {
            NodeError::Handshake(_)
            | NodeError::CannotRelease(_)
            | NodeError::CannotLockSets(_)
            | NodeError::Fence(_)
            | NodeError::RoleRefused(_)
            | NodeError::FenceSlots { .. }
            | NodeError::NotAVoter(_) => true,
            NodeError::Tls(e) => !matches!(e, TlsError::Other(_)),
            NodeError::Server(e) => matches!(
                e.kind(),
                ServerErrorKind::NoAuth
                    | ServerErrorKind::WrongPass
                    | ServerErrorKind::NoPerm
                    | ServerErrorKind::WrongType
                    | ServerErrorKind::NoAnchor
                    | ServerErrorKind::FenceStale
                    | ServerErrorKind::FenceLimit
            ),
            NodeError::Backoff { cause, .. } => cause.is_permanent(),
            // Unknown (renamed, or a server without it) or forbidden.
            NodeError::ReplicaAckRefused { error, .. } => {
                error.kind() == ServerErrorKind::NoPerm
                    || (error.kind() == ServerErrorKind::Err
                        && error.message().starts_with("unknown command"))
            }
            _ => false,
        }
    }

    /// Why this failure left the master out of fencing, if that is what
    /// it says: a fault its connection's probe found, or a fenced
    /// script's `NOANCHOR` or `FENCESTALE`.
    pub fn fence_fault(&self) -> Option<FenceFault> {
        match self {
            NodeError::Fence(fault) | NodeError::FenceSlots { fault, .. } => Some(*fault),
            NodeError::Server(e) => match e.kind() {
                ServerErrorKind::NoAnchor => Some(FenceFault::Unanchored),
                ServerErrorKind::FenceStale => Some(FenceFault::ReplicationChanged),
                _ => None,
            },
            _ => None,
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
    /// with args beginning with: '`<password>`'"), so a message that quotes
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
