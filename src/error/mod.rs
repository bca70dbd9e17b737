//! Errors: what happened to a call ([`Error`], here), to each node in it
//! (`node`), what every node answered (`report`), and what is wrong with a
//! configuration (`config`).

mod config;
mod fence;
mod io_error;
mod node;
mod report;
mod rounded;

pub use config::{ConfigError, SetUnsupported};
pub use fence::{EvictingPolicy, FenceFault};
pub use io_error::IoError;
pub use node::{CannotRelease, NodeError, NotAVoter, Phase, ProtocolError, ServerError, TlsError};
pub(crate) use report::Waited;
pub use report::{NodeOutcome, NodeReport, NodeStatus};
pub(crate) use rounded::{rounded, Rounded};

use crate::resp::ServerErrorKind;
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
    /// a wait with a time limit returns it when the limit runs out (its
    /// report then says how long it waited: [`Error::waited`]).
    #[error("held by another client: {0}")]
    Contended(NodeReport),
    /// Too many masters failed (refused, timed out, closed, misbehaved or
    /// answered with a server error) for a quorum to be possible. See
    /// [`Error::is_retryable`] for whether trying again can help. A wait
    /// that masters out of reach ended says so in its report
    /// ([`NodeReport::unreachable_for`]).
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
    /// Group commit ([`Builder::group_commit`](crate::Builder::group_commit)):
    /// the acquisition waited in the handle's queue for a round of the
    /// group until the round budget of its TTL was spent, so it was never
    /// sent: nothing was set on any master. Retryable: the group's round
    /// in flight was slow (slow or unreachable masters, or a busy client).
    #[error(
        "not sent: waited {} in the group commit's queue, longer than the round budget of its {} TTL",
        rounded(.waited),
        rounded(.ttl)
    )]
    QueueTimeout {
        /// How long it waited in the queue.
        waited: Duration,
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
    /// Fencing ([`Builder::fencing`](crate::Builder::fencing)): a quorum
    /// granted the lock, but its fence token could not be made final in
    /// time: too few of the masters that granted it still held the key,
    /// in the same epoch, when the token was written back to them (a race
    /// lost to another client, a key that expired, a repair in between).
    /// Nothing is held: the keys it set were released. The waiting entry
    /// points try again, as after contention; [`Redlock::try_lock`](crate::Redlock::try_lock)
    /// returns it.
    #[error(
        "fence token not made final: {counted} of the {needed} masters needed counted it: {report}"
    )]
    FenceUnavailable {
        /// The masters that hold a counter at least the token.
        counted: usize,
        /// The quorum.
        needed: usize,
        /// What each master answered to the write-back.
        report: NodeReport,
    },
    /// Fencing: too few masters have a valid anchor for the fence domain
    /// (never initialised, or their counter was lost or may have gone
    /// back: see [`FenceFault`] and the server errors `NOANCHOR`,
    /// `FENCESTALE` in the report). Nothing is held. It lasts until the
    /// operator acts: [`Redlock::fence_init`](crate::Redlock::fence_init)
    /// for a new domain, [`Redlock::fence_repair`](crate::Redlock::fence_repair)
    /// after a loss (docs/fencing.md, "Counter loss").
    #[error("fencing unavailable until the fence domain is initialised or repaired: {0}")]
    FenceUnanchored(NodeReport),
    /// Fencing: the fence domain's counter reached 2^53 on some master
    /// (`FENCELIMIT`): use another domain ([`Builder::fence_domain`](crate::Builder::fence_domain)),
    /// initialised above the largest token the resources accepted.
    #[error("the fence domain's counter reached 2^53: use another domain: {0}")]
    FenceExhausted(NodeReport),
    /// Fencing: the masters with a valid anchor are in different fence
    /// epochs and none of the epochs has a quorum of them, so no token can
    /// be made final: a repair's barrier missed a master (it did not
    /// answer then), or two repairs ran at once. Nothing is held. It
    /// lasts until the operator runs
    /// [`Redlock::fence_repair`](crate::Redlock::fence_repair) (`redlock
    /// fence repair`) once every master answers, which moves them all to
    /// one epoch; the report shows each master left out
    /// ([`FenceFault::OtherEpoch`] for those in a split epoch). Not
    /// retryable: the waiting entry points stop at once.
    #[error("the masters are in different fence epochs and none has a quorum (a repair missed a master, or two ran at once): run Redlock::fence_repair (redlock fence repair) once every master answers: {0}")]
    FenceEpochsSplit(NodeReport),
    /// [`Redlock::fence_init`](crate::Redlock::fence_init) was refused:
    /// every master must answer and have no anchor for the domain (an
    /// anchored domain is repaired, never initialised again). Nothing was
    /// written. [`Error::is_already_initialised`] tells the two apart: the
    /// report shows anchored masters as declined, and masters that did not
    /// answer as failed.
    #[error("fence_init refused: every master must answer and have no anchor yet: {0}")]
    FenceInitRefused(NodeReport),
    /// The handle was shut down ([`Redlock::shutdown`](crate::Redlock::shutdown),
    /// on it or on a clone): a wait in progress ended, or an acquisition
    /// was refused before any I/O. Locks and leases already held are not
    /// affected.
    #[error("this Redlock handle was shut down (Redlock::shutdown), so it takes no more locks: build a new one to lock again")]
    ShutDown,
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

    /// The handle was shut down ([`Error::ShutDown`]).
    pub fn is_shut_down(&self) -> bool {
        matches!(self, Error::ShutDown)
    }

    /// Whether another attempt may succeed: contention, a round that was
    /// too slow, an acquisition that waited too long in the group commit's
    /// queue, a fence token not made final, or a missing quorum that is not caused by failures that
    /// will not go away by themselves (see [`NodeError::is_permanent`]:
    /// a rejected password, a forbidden command, a bad database number).
    /// [`Redlock::lock`](crate::Redlock::lock) retries only these.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Contended(_)
            | Error::TooSlow { .. }
            | Error::QueueTimeout { .. }
            | Error::FenceUnavailable { .. } => true,
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
            Error::Contended(r)
            | Error::NoQuorum(r)
            | Error::LockLost(r)
            | Error::FenceUnanchored(r)
            | Error::FenceExhausted(r)
            | Error::FenceEpochsSplit(r)
            | Error::FenceInitRefused(r)
            | Error::FenceUnavailable { report: r, .. } => Some(r),
            Error::Expired {
                last_extension: Some(r),
                ..
            } => Some(r),
            _ => None,
        }
    }

    /// For the error of a wait that ended without the lock: how long the
    /// call waited, first attempt included (see [`NodeReport::waited`]).
    /// `None` for a call that made one attempt only, and for errors without
    /// a report.
    pub fn waited(&self) -> Option<Duration> {
        self.nodes().and_then(NodeReport::waited)
    }

    /// [`Redlock::fence_init`](crate::Redlock::fence_init) was refused
    /// because some master already holds an anchor of the domain (it was
    /// initialised before: repair it with
    /// [`Redlock::fence_repair`](crate::Redlock::fence_repair), never
    /// initialise it again). False when it was refused only because masters
    /// did not answer (run it again once they do).
    pub fn is_already_initialised(&self) -> bool {
        match self {
            Error::FenceInitRefused(report) => report
                .iter()
                .any(|s| matches!(s.outcome(), NodeOutcome::Declined)),
            _ => false,
        }
    }

    /// The error of a wait that ran out, saying that `masters` refused the
    /// waiter's subscription to release notices with `refusal`.
    pub(crate) fn with_notices_refused(mut self, masters: usize, refusal: ServerError) -> Error {
        if let Error::Contended(report) | Error::NoQuorum(report) = &mut self {
            report.set_notices_refused(masters, refusal);
        }
        self
    }

    /// The error of a wait that ended without the lock, saying how it went
    /// (in the report of the errors that have one).
    pub(crate) fn with_waited(mut self, waited: Waited) -> Error {
        match &mut self {
            Error::Contended(report)
            | Error::NoQuorum(report)
            | Error::FenceUnavailable { report, .. } => report.set_waited(waited),
            _ => {}
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

#[cfg(test)]
mod tests;
