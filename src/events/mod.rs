//! What a handle tells the hook installed on it ([`HandleEvent`], given
//! to [`Builder::events`](crate::Builder::events)): each round's end, each
//! wait, each lease's life, each master's change of state. The events are
//! plain data that borrow what the handle already has, so telling them
//! allocates nothing; how they are told (a panicking hook caught, the
//! `log` feature's lines) is in `tell`, the `metrics` feature's records
//! in `metrics`, the `tracing` feature's events in `trace` (and the span
//! of each public call in `call`).
//!
//! The rules for a hook (the thread each method runs on, what it must
//! not do) are on [`HandleEvent`].

pub(crate) mod call;
#[cfg(any(feature = "metrics", feature = "tracing"))]
mod labels;
#[cfg(feature = "metrics")]
mod metrics;
mod resources;
pub(crate) mod tell;
#[cfg(feature = "tracing")]
mod trace;

use crate::error::{CannotRelease, Error, FenceFault, NodeError, NotAVoter, ServerError};
pub use resources::Resources;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Receives what a [`Redlock`](crate::Redlock) handle does, installed with
/// [`Builder::events`](crate::Builder::events). Every method does nothing
/// by default: implement those you need.
///
/// # On which thread, and what a hook must not do
///
/// Each method runs on the thread that made the event, inside the call
/// that made it, before the call returns:
///
/// - [`HandleEvent::handle_round`]: the thread that called `lock`,
///   `try_lock`, `try_lock_for`, `unlock`, `extend`, ... (or dropped a
///   `Lock` or `Lease`); the renewal thread for the release of a lease it
///   gave up; with [`Builder::group_commit`](crate::Builder::group_commit),
///   for an acquisition that ran in a batch round, the caller that led the
///   batch (after every caller of the batch was given its result);
/// - [`HandleEvent::handle_wait`]: the thread waiting in `lock` or
///   `try_lock_for`;
/// - [`HandleEvent::handle_lease`]: the handle's renewal thread
///   (`redlock-renew`);
/// - [`HandleEvent::handle_master`]: whichever thread's round saw the
///   change (a caller's, or the renewal thread); for a refusal of release
///   notices, the waiting thread that read it; for a node's new address
///   or failed lookup ([`MasterChange::Readdressed`],
///   [`MasterChange::Unresolved`]), the short-lived thread that looked its
///   host name up (`redlock-resolve`).
///
/// So a hook must be quick and must not block: it delays the call that
/// told it (and, on the renewal thread, every lease's renewal; and, with
/// [`Builder::group_commit`](crate::Builder::group_commit), the group's
/// other callers: the caller told of its round holds the group's lead
/// meanwhile, so the next batch waits for the hook). Count,
/// record into atomics or a histogram, or hand the event's data to a
/// channel; do the slow work (writing to a network, a file) elsewhere.
/// A hook must not call back into the handle that told it (`lock`,
/// `unlock`, `health`, dropping a `Lock`, ...): it may run while that
/// handle holds a lock of its own, and would deadlock or recurse.
///
/// A hook that panics does not break the handle: the panic is caught
/// where the hook was called (the default panic hook still prints it), the
/// event is dropped, and the call goes on as if no hook had been
/// installed. A hook is `Send + Sync`: it is called from several threads
/// at once.
///
/// ```
/// use redlock_sync::{HandleEvent, RoundEvent, RoundOutcome};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// #[derive(Default)]
/// struct Contentions(AtomicU64);
///
/// impl HandleEvent for Contentions {
///     fn handle_round(&self, event: RoundEvent<'_>) {
///         if event.outcome() == RoundOutcome::Contended {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
/// ```
pub trait HandleEvent: Send + Sync + 'static {
    /// A round over the masters ended: an acquisition attempt, a release
    /// or an extension (lease renewals are told by
    /// [`HandleEvent::handle_lease`]).
    fn handle_round(&self, event: RoundEvent<'_>) {
        let _ = event;
    }

    /// A waiting call (`lock`, `try_lock_for`) found the lock held, woke
    /// up, took the lock, or gave up.
    fn handle_wait(&self, event: WaitEvent<'_>) {
        let _ = event;
    }

    /// A lease was renewed, a renewal failed, the lease ended (lost,
    /// expired) or reached its hold limit.
    fn handle_lease(&self, event: LeaseEvent<'_>) {
        let _ = event;
    }

    /// A master went down, came back, lacks a right the lock needs,
    /// refused release notices to the waiting threads (a right waiting
    /// needs), (fenced handles) stopped or started again counting for
    /// fencing, or its host name now resolves elsewhere, or not at all.
    fn handle_master(&self, event: MasterEvent<'_>) {
        let _ = event;
    }
}

/// A shared hook is a hook: install an `Arc` of it and keep a clone to
/// read what it gathered.
impl<T: HandleEvent + ?Sized> HandleEvent for std::sync::Arc<T> {
    fn handle_round(&self, event: RoundEvent<'_>) {
        (**self).handle_round(event);
    }

    fn handle_wait(&self, event: WaitEvent<'_>) {
        (**self).handle_wait(event);
    }

    fn handle_lease(&self, event: LeaseEvent<'_>) {
        (**self).handle_lease(event);
    }

    fn handle_master(&self, event: MasterEvent<'_>) {
        (**self).handle_master(event);
    }
}

/// Which call a round served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// One acquisition attempt (`SET NX` everywhere). With fencing, its
    /// write-back round, when it needs one, is part of it: the attempt is
    /// told once, with its final outcome.
    Acquire,
    /// A release (compare-and-delete), by `unlock` or a drop.
    Release,
    /// An extension, by `Lock::extend` or `Lock::renew_if_below`.
    Extend,
}

/// How a round ended, for a hook: the call's result without its report
/// (which [`RoundEvent::masters`] gives without allocating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoundOutcome {
    /// Acquired, released or extended.
    Succeeded,
    /// The lock is held by another client ([`Error::Contended`]).
    Contended,
    /// Too many masters failed ([`Error::NoQuorum`]).
    NoQuorum,
    /// A quorum agreed too late to leave validity ([`Error::TooSlow`]).
    TooSlow,
    /// The lock was found gone on the masters ([`Error::LockLost`]).
    Lost,
    /// The lock's validity ran out first ([`Error::Expired`]).
    Expired,
    /// Another error (see the call's result).
    Failed,
}

impl RoundOutcome {
    /// The outcome of a round whose call failed with `error`.
    pub(crate) fn of(error: &Error) -> RoundOutcome {
        match error {
            Error::Contended(_) => RoundOutcome::Contended,
            Error::NoQuorum(_) => RoundOutcome::NoQuorum,
            Error::TooSlow { .. } => RoundOutcome::TooSlow,
            Error::LockLost(_) => RoundOutcome::Lost,
            Error::Expired { .. } => RoundOutcome::Expired,
            _ => RoundOutcome::Failed,
        }
    }

    /// The outcome of a round whose call returned `result`.
    pub(crate) fn of_result<T>(result: &Result<T, Error>) -> RoundOutcome {
        result
            .as_ref()
            .err()
            .map_or(RoundOutcome::Succeeded, RoundOutcome::of)
    }
}

/// What one master did in a round, borrowed from the round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MasterAnswer<'a> {
    /// Did what was asked.
    Agreed,
    /// Refused: the key is held by another (acquire), or not ours
    /// (release, extend).
    Declined,
    /// Not awaited: the round was decided before it answered.
    Pending,
    /// Not asked in this round.
    NotSent,
    /// Failed.
    Failed(&'a NodeError),
}

/// Each master's answer in a round, as the round keeps them (the round
/// layer implements it): read by [`RoundEvent::masters`] without a copy.
pub(crate) trait Answers {
    /// How many masters.
    fn count(&self) -> usize;
    /// Master `i`'s name and answer.
    fn answer(&self, i: usize) -> (&str, MasterAnswer<'_>);
}

/// A round over the masters ended (see [`HandleEvent::handle_round`]).
#[derive(Clone, Copy)]
pub struct RoundEvent<'a> {
    pub(crate) operation: Operation,
    pub(crate) resources: Resources<'a>,
    pub(crate) outcome: RoundOutcome,
    pub(crate) elapsed: Duration,
    pub(crate) validity: Option<Duration>,
    pub(crate) fence_token: Option<u64>,
    pub(crate) answers: &'a dyn Answers,
}

impl<'a> RoundEvent<'a> {
    /// Which call the round served.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The lock's resource name; a set's first name in order (all of
    /// them: [`RoundEvent::resources`]).
    pub fn resource(&self) -> &'a [u8] {
        self.resources.first()
    }

    /// Every resource of the lock: its one name, or every name of a set
    /// (see [`Resources`]).
    pub fn resources(&self) -> Resources<'a> {
        self.resources
    }

    /// How it ended.
    pub fn outcome(&self) -> RoundOutcome {
        self.outcome
    }

    /// How long the round took, from its start to its decision (a fenced
    /// acquisition's: to the end of its write-back round, if it ran).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The lock's validity after a successful acquisition or extension
    /// (`None` otherwise).
    pub fn validity(&self) -> Option<Duration> {
        self.validity
    }

    /// The fence token a successful acquisition issued, on a fenced
    /// handle ([`Builder::fencing`](crate::Builder::fencing)); `None`
    /// otherwise.
    pub fn fence_token(&self) -> Option<u64> {
        self.fence_token
    }

    /// Each master's name (`host:port`) and answer, in the configured
    /// order. For a fenced acquisition that ran its write-back round, that
    /// round's answers (as in the error's report; a master round 1 did not
    /// count was not sent it).
    pub fn masters(&self) -> impl Iterator<Item = (&'a str, MasterAnswer<'a>)> + 'a {
        let answers = self.answers;
        (0..answers.count()).map(move |i| answers.answer(i))
    }
}

impl fmt::Debug for RoundEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoundEvent")
            .field("operation", &self.operation)
            .field("resources", &self.resources)
            .field("outcome", &self.outcome)
            .field("elapsed", &self.elapsed)
            .field("validity", &self.validity)
            .field("fence_token", &self.fence_token)
            .field("masters", &self.masters().collect::<Vec<_>>())
            .finish()
    }
}

/// What happened to a waiting call (see [`HandleEvent::handle_wait`]).
///
/// Told only of calls that waited: one that took the lock, or failed for
/// good, on its first try (and did not queue behind other waiters) tells
/// nothing, nor does one whose only try ended its wait (`try_lock`,
/// `Duration::ZERO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitChange {
    /// A try found the lock held: the call waits (or retries).
    Contended,
    /// The call woke up to try again.
    Woken(WokenBy),
    /// The call took the lock ([`WaitEvent::waited`] is its whole wait,
    /// first try included).
    Acquired,
    /// The wait ran out, masters out of reach for too long ended it
    /// ([`Builder::unreachable_limit`](crate::Builder::unreachable_limit)),
    /// or an error that retrying cannot fix did: the call returns without
    /// the lock.
    GaveUp,
}

/// What woke a waiting call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WokenBy {
    /// A release notice (its turn after a release was heard).
    Notice,
    /// The fallback timer (nothing was heard), a short pause, or the time
    /// the holder's key was due to expire (its `PTTL`, read after a try
    /// found the lock held).
    Timer,
    /// Its subscription to release notices was confirmed (a release may
    /// have gone unheard before).
    Subscribed,
}

/// A waiting call's progress (see [`HandleEvent::handle_wait`]).
#[derive(Clone, Copy, Debug)]
pub struct WaitEvent<'a> {
    pub(crate) resources: Resources<'a>,
    pub(crate) change: WaitChange,
    pub(crate) waited: Duration,
}

impl<'a> WaitEvent<'a> {
    /// The lock's resource name; a set's first name in order (all of
    /// them: [`WaitEvent::resources`]).
    pub fn resource(&self) -> &'a [u8] {
        self.resources.first()
    }

    /// Every resource waited for: the lock's one name, or every name of
    /// a set (see [`Resources`]).
    pub fn resources(&self) -> Resources<'a> {
        self.resources
    }

    /// What happened.
    pub fn change(&self) -> WaitChange {
        self.change
    }

    /// How long the call has been running.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// What happened to a lease (see [`HandleEvent::handle_lease`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum LeaseChange<'a> {
    /// Renewed: valid for this much from now.
    Renewed {
        /// The validity now.
        validity: Duration,
    },
    /// A renewal failed and will be tried again while validity remains
    /// (no quorum, too slow).
    RenewalFailed(&'a Error),
    /// The lease ended for good: the lock was found gone on the masters
    /// ([`Error::LockLost`]), its validity ran out ([`Error::Expired`]),
    /// or it is a forked child's copy ([`Error::Forked`]).
    Lost(&'a Error),
    /// Held for its `max_hold`: renewal stopped (the lock runs out its
    /// last validity).
    HoldLimit,
}

/// A lease's life (see [`HandleEvent::handle_lease`]).
#[derive(Clone, Copy, Debug)]
pub struct LeaseEvent<'a> {
    pub(crate) resources: Resources<'a>,
    pub(crate) change: LeaseChange<'a>,
}

impl<'a> LeaseEvent<'a> {
    /// The lock's resource name; a set's first name in order (all of
    /// them: [`LeaseEvent::resources`]).
    pub fn resource(&self) -> &'a [u8] {
        self.resources.first()
    }

    /// Every resource of the lease: its one name, or every name of a
    /// set (see [`Resources`]).
    pub fn resources(&self) -> Resources<'a> {
        self.resources
    }

    /// What happened.
    pub fn change(&self) -> LeaseChange<'a> {
        self.change
    }
}

/// A master's change of state (see [`HandleEvent::handle_master`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum MasterChange<'a> {
    /// It failed after answering well (or before ever answering): a
    /// connection refused or broken, an error reply, a missed deadline.
    /// Told once, until it is back.
    Down(&'a NodeError),
    /// It answered well again after being down.
    Back,
    /// It cannot run the release and extension commands (an ACL without
    /// the rights, or renamed commands): no lock is taken there. Told
    /// instead of [`MasterChange::Down`] when that is why it is down, and
    /// again when it turns out so after another failure.
    MissingRight(&'a CannotRelease),
    /// It is refused as a voter (see [`NotAVoter`]: a replica, a KeyDB
    /// active replica, a cluster node given as a standalone master, the
    /// same server, replication set or cluster as an earlier voter): it
    /// never votes. Told
    /// instead of [`MasterChange::Down`] when that is why it is down, and
    /// again when it turns out so after another failure.
    NotAVoter(&'a NotAVoter),
    /// It refused to subscribe a waiting thread to release notices, with
    /// this error: the ACL user has no rights on the channels
    /// `redlock-sync:released:*` (Redis 7 gives new users none). Locking
    /// works, but waiters do not hear the releases it runs: they try again
    /// only after each fallback pause, or when another master's notice
    /// comes. Grant the right: `ACL SETUSER <user>
    /// &redlock-sync:released:*`. Not a failure: no
    /// [`MasterChange::Down`] or [`MasterChange::Back`] goes with it. Told
    /// once, however many threads wait, until the master confirms a
    /// subscription again
    /// ([`NodeHealth::release_notices_refused`](crate::NodeHealth::release_notices_refused)
    /// shows the refusal meanwhile).
    NoticesRefused(&'a ServerError),
    /// Fenced handles ([`Builder::fencing`](crate::Builder::fencing)): it
    /// is left out of fenced acquisitions, for this reason: it lost its
    /// fence anchor (a restart without persistence, `FLUSHALL`), restarted
    /// or rolled back since it was anchored, is in another epoch than the
    /// others, and so on. The lock keeps working while a quorum of masters
    /// counts, so this is the warning before one more failure stops fenced
    /// locking: run [`Redlock::fence_repair`](crate::Redlock::fence_repair)
    /// (`redlock fence repair`). Not a failure: no [`MasterChange::Down`]
    /// goes with it. Told once when the master stops counting (a change
    /// of reason meanwhile shows in
    /// [`NodeHealth::fence_fault`](crate::NodeHealth::fence_fault)), until
    /// [`MasterChange::FenceBack`].
    ///
    /// A cluster voter keeps a fence counter per slot, each left out on
    /// its own (its slot moved to another node, its shard failed over): it
    /// is told when its first slot is left out (the reason: that slot's),
    /// and `FenceBack` when the last one counts again;
    /// [`NodeHealth::fence_slots_left_out`](crate::NodeHealth::fence_slots_left_out)
    /// says in how many slots it is left out.
    FenceLeftOut(&'a FenceFault),
    /// Fenced handles: it counts for fencing again (repaired), after
    /// [`MasterChange::FenceLeftOut`].
    FenceBack,
    /// A node of it named by host (`node`: the master itself, or a node of
    /// a cluster voter) was looked up again, after a connection to it
    /// could not be made or on its cluster's topology refresh, and now
    /// resolves to `to`: new connections dial `to`, those already open
    /// (to `from`) are kept until they fail. Not a failure. Told from the
    /// lookup's own thread (see [`Builder::resolver`](crate::Builder::resolver)).
    Readdressed {
        /// The node's `host:port` as named (never credentials).
        node: &'a str,
        /// The address it had.
        from: SocketAddr,
        /// The address new connections dial.
        to: SocketAddr,
    },
    /// A node of it named by host was looked up again and the lookup
    /// failed (`reason`: the resolver's error), or found only addresses of
    /// other voters' servers (one server never votes twice): it keeps the
    /// address it had (`kept`; `None` for a cluster node met by name that
    /// never resolved). Told once, from the lookup's own thread, until a
    /// lookup succeeds; lookups go on at most once a second while it
    /// cannot be reached.
    Unresolved {
        /// The node's `host:port` as named (never credentials).
        node: &'a str,
        /// Why: the resolver's error, or the address that is taken.
        reason: &'a str,
        /// The address new connections still dial.
        kept: Option<SocketAddr>,
    },
}

impl<'a> MasterChange<'a> {
    /// The change that says why a master that failed with `error` is
    /// down, where one does: [`MasterChange::MissingRight`],
    /// [`MasterChange::NotAVoter`].
    pub(crate) fn why_down(error: &'a NodeError) -> Option<MasterChange<'a>> {
        match error {
            NodeError::CannotRelease(missing) => Some(MasterChange::MissingRight(missing)),
            NodeError::NotAVoter(why) => Some(MasterChange::NotAVoter(why)),
            _ => None,
        }
    }
}

/// A master's change of state (see [`HandleEvent::handle_master`]).
#[derive(Clone, Copy, Debug)]
pub struct MasterEvent<'a> {
    pub(crate) index: usize,
    pub(crate) node: &'a str,
    pub(crate) change: MasterChange<'a>,
}

impl<'a> MasterEvent<'a> {
    /// The master's place in the configured order.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The master's address as configured (`host:port`, never
    /// credentials).
    pub fn node(&self) -> &'a str {
        self.node
    }

    /// What changed.
    pub fn change(&self) -> MasterChange<'a> {
        self.change
    }
}
