//! The blocking API's entry points: [`Redlock`] (its [`Builder`](crate::Builder) is in
//! `builder`, the settings for masters with replicas in `replicas`); the calls
//! that wait as the caller says, and the shutdown that ends waits, are in
//! `waiting`; those that run work under the lock in `work`.

use crate::command::Command;
use crate::error::{Error, NodeReport};
use crate::events::call::{Call, CallName};
use crate::handle::Shared;
use crate::lock::acquire::acquire;
use crate::lock::inspect::{inspect, Inspection};
use crate::lock::wait::{acquire_within, Wait};
use crate::lock::Lock;
use crate::quorum::{quorum, Decision, NodeSet, Rule};
use crate::round::{NodeHealth, Plan};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) mod builder;
mod many;
mod replicas;
mod waiting;
mod work;
pub(crate) mod work_error;
mod work_many;

/// A Redlock client over N independent Redis masters.
///
/// Cheap to clone (a shared handle) and safe to use from many threads at
/// once: each call runs on its own connections, taken from a pool.
///
/// ```no_run
/// use std::time::Duration;
/// let redlock = redlock_sync::Redlock::builder()
///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
///     .build()?;
/// let lock = redlock.lock("orders:42", Duration::from_secs(10))?;
/// // ... work while lock.validity() is comfortably above zero ...
/// lock.unlock()?;
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone)]
pub struct Redlock {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &s.voters.iter().map(|v| v.name()).collect::<Vec<_>>(),
            )
            .field("quorum", &quorum(s.voters.len()))
            .field("node_timeout", &s.node_timeout)
            .field("retry_delay", &s.retry_delay)
            .field("retry_jitter", &s.retry_jitter)
            .field("lock_wait", &self.lock_wait())
            .field("unreachable_limit", &s.unreachable_limit)
            .field("release_notices", &s.release_notices)
            .field("fair_waiting", &s.fair_waiting)
            .field("allow_scripts", &s.allow_scripts)
            .field("max_extensions", &s.max_extensions)
            .finish_non_exhaustive()
    }
}

impl Redlock {
    /// Number of masters.
    pub fn node_count(&self) -> usize {
        self.shared.voters.len()
    }

    /// Whether Lua scripts may run on the masters (see
    /// [`Builder::allow_scripts`](crate::Builder::allow_scripts)).
    pub fn allows_scripts(&self) -> bool {
        self.shared.allow_scripts
    }

    /// Votes needed for a lock: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        quorum(self.shared.voters.len())
    }

    /// Acquires `resource` for `ttl`, waiting until it gets it, as
    /// `std::sync::Mutex::lock` and flock(1) do: while another client
    /// holds it, and while masters are out of reach, woken by the release
    /// (see [`Redlock::try_lock_for`]) or by the holder's key expiring.
    ///
    /// The wait ends without the lock only with an error: an error that
    /// retrying cannot fix, at once (see [`Error::is_retryable`]: rejected
    /// credentials, a missing right); [`Error::ShutDown`] once the handle
    /// is shut down ([`Redlock::shutdown`]); [`Error::NoQuorum`] once no
    /// quorum of masters could be reached for
    /// [`Builder::unreachable_limit`](crate::Builder::unreachable_limit)
    /// in a row (10 s by default; its report says so; the last attempt's
    /// error may instead be [`Error::TooSlow`], or with
    /// [`Builder::group_commit`](crate::Builder::group_commit)
    /// [`Error::QueueTimeout`], which carry no report); and before any I/O
    /// [`Error::Config`] for an empty resource name, one longer than
    /// [`MAX_RESOURCE_LEN`](crate::MAX_RESOURCE_LEN), or a TTL below
    /// [`MIN_TTL`](crate::MIN_TTL) or above [`MAX_TTL`](crate::MAX_TTL). A
    /// handle built with [`Builder::lock_wait`](crate::Builder::lock_wait)
    /// waits at most that long, then fails with [`Error::Contended`] (or
    /// the last failure), whose report says how long it waited.
    ///
    /// The returned lock is valid for [`Lock::validity`](crate::Lock::validity): the TTL minus the
    /// time the acquisition took and an allowance for clock drift.
    #[must_use = "dropping the Lock releases it at once"]
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let (shared, resource) = (&self.shared, resource.as_ref());
        let call = Call::start(CallName::Lock, resource);
        call.end(
            acquire_within(shared, resource, ttl, self.lock_wait())
                .map(|acquired| Lock::new(shared, acquired)),
        )
    }

    /// The wait of [`Redlock::lock`] and [`Redlock::with_lock`].
    fn lock_wait(&self) -> Wait {
        match self.shared.lock_wait {
            Some(wait) => Wait::For(wait),
            None => Wait::NoLimit,
        }
    }

    /// Acquires `resource` for `ttl`, waiting at most `wait` while it is
    /// held by others: `Ok(None)` if it is still held when `wait` runs out.
    ///
    /// While it waits, the thread sleeps until a release of the lock is
    /// announced by any master (releases publish a notice; see
    /// [`Builder::release_notices`](crate::Builder::release_notices)) and then tries at once, so the next
    /// holder starts within a few round trips of the release. A fallback
    /// pause (`retry_delay` plus random `retry_jitter`) covers notices that
    /// do not come. A failure that may pass (no quorum, a round too slow) is
    /// retried within `wait`, on the next release heard or after the
    /// fallback pause; when `wait` runs out it is returned as the error.
    /// Errors that retrying cannot fix are returned at once. `wait` of zero
    /// is one attempt, as [`Redlock::try_lock`]; `Duration::MAX` waits
    /// without limit (see [`Wait::NoLimit`]).
    ///
    /// A waiter that found the lock held asks the masters how long the key
    /// has left to live, and tries again by then at the latest (plus the
    /// allowance for clock drift): a holder that crashed is replaced when
    /// its key expires.
    ///
    /// Waiters take turns: they announce themselves on one master chosen
    /// by the resource, and after a release the first in line tries (the
    /// others a moment later if it does not take the lock), so while every
    /// waiting client hears that master they are served in the order they
    /// came. The order is advisory, not guaranteed: a client that does not
    /// wait (a first attempt that finds the lock free) can take it first,
    /// and with that master down waiters race (README, "Fairness";
    /// [`Builder::fair_waiting`](crate::Builder::fair_waiting) turns it
    /// off).
    ///
    /// `wait` is a bare `Duration`, as in parking_lot's `try_lock_for`: it
    /// can be swapped with the TTL beside it unnoticed. Name the two
    /// (`let (ttl, wait) = ...`), or use [`Redlock::lock_waiting`], whose
    /// [`Wait`] cannot be.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.try_lock_for("orders:42", Duration::from_secs(10), Duration::from_secs(2))? {
    ///     Some(lock) => lock.unlock()?,
    ///     None => println!("still held after 2 s"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the Lock releases it at once"]
    pub fn try_lock_for(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Lock>, Error> {
        none_if_held(self.lock_waiting(resource, ttl, Wait::For(wait)))
    }

    /// Makes one attempt to acquire `resource` for `ttl`.
    ///
    /// `Ok(None)` means another client holds it. Errors are those of
    /// [`Redlock::lock`], except contention.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.try_lock(b"report:daily", Duration::from_secs(30))? {
    ///     Some(lock) => { /* we run the report */ lock.unlock()?; }
    ///     None => { /* someone else is running it */ }
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the Lock releases it at once"]
    pub fn try_lock(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<Option<Lock>, Error> {
        let call = Call::start(CallName::TryLock, resource.as_ref());
        none_if_held(
            call.end(
                acquire(&self.shared, resource.as_ref(), ttl)
                    .map(|acquired| Lock::new(&self.shared, acquired)),
            ),
        )
    }

    /// Looks at `resource`'s lock without taking it: one round of `PTTL`
    /// on every master (waiting for each up to the node timeout), which
    /// says whether each holds the key and for how long, each followed by
    /// a `GETRANGE` of the holder label, which says who holds it if its
    /// holder's handle stores one ([`Builder::holder_label`](crate::Builder::holder_label);
    /// [`Inspection::holder_label`]). The lock's secret is never read: the
    /// label is the part of the value after it. See [`Inspection`] for what
    /// the answers mean.
    ///
    /// Fails with [`Error::NoQuorum`] (with what each master did) when
    /// fewer than a quorum answered: then nothing can be said. Before any
    /// I/O, with [`Error::Config`] for an empty resource name or one longer
    /// than [`MAX_RESOURCE_LEN`](crate::MAX_RESOURCE_LEN).
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let seen = redlock.inspect("orders:42")?;
    /// match seen.held_for() {
    ///     Some(left) => println!("held on a quorum for at least {left:?} more"),
    ///     None if seen.is_free() => println!("free"),
    ///     None => println!("neither held nor free on a quorum: {seen}"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn inspect(&self, resource: impl AsRef<[u8]>) -> Result<Inspection, Error> {
        let call = Call::start(CallName::Inspect, resource.as_ref());
        call.end(inspect(&self.shared, resource.as_ref()))
    }

    /// Runs one round of `PING` on every master (connecting where needed)
    /// and reports what each did, waiting for every answer up to the node
    /// timeout. `Ok` if a quorum answered (locks can be taken), otherwise
    /// [`Error::NoQuorum`] with the same report. The round also refreshes
    /// [`Redlock::health`].
    ///
    /// It dials every master it has no connection to, also one in its
    /// reconnect backoff, and one whose last failure was permanent (a
    /// refused password, a missing right): so the ping after the operator
    /// fixed a master sees it fixed.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.ping() {
    ///     Ok(report) if report.iter().all(|s| s.outcome() == &redlock_sync::NodeOutcome::Agreed) => {}
    ///     Ok(report) => eprintln!("degraded, still a quorum: {report}"),
    ///     Err(e) => eprintln!("locking is unavailable: {e}"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn ping(&self) -> Result<NodeReport, Error> {
        let call = Call::start_on_masters(CallName::Ping);
        let shared = &self.shared;
        let mut session = shared.pool.take();
        let all = NodeSet::all(shared.voters.len());
        let plan = Plan::everyone(Command::Ping, all, Instant::now() + shared.node_timeout);
        let tally = session.run(shared.masters(), plan);
        let report = session.report(&shared.voters);
        shared.pool.give_back(session);
        call.end(match tally.decision(Rule::Everyone) {
            Decision::Reached => Ok(report),
            _ => Err(Error::NoQuorum(report)),
        })
    }

    /// Initialises the handle's fence domain ([`Builder::fencing`](crate::Builder::fencing)): every
    /// master must answer and have no anchor for it yet; each is then
    /// anchored with the counter `start` in a fresh epoch, recording its
    /// server run and data set (replication id), and the domain's members:
    /// a fresh domain id, how many masters, and each one's place in the
    /// order this handle names them (a client that names other masters is
    /// refused: docs/fencing.md, "Members"). Tokens start at `start + 1`. A deployment step,
    /// run once per domain (by the operator or the deploying program),
    /// never by the library on its own: it cannot tell a new deployment
    /// from one whose masters all lost their state, where restarting the
    /// tokens would let them go back.
    ///
    /// `start`: 0 for a new deployment; after losing a majority of the
    /// masters' state (then delete the domain's hash on the survivors
    /// first), at least the largest token any protected resource accepted.
    ///
    /// Fails with [`Error::FenceInitRefused`] (nothing written) if a master
    /// did not answer or is already anchored (its report shows those
    /// masters as failed and declined;
    /// [`Error::is_already_initialised`] tells an anchored domain, to be
    /// repaired, from masters that did not answer), [`Error::NoQuorum`] if some
    /// anchors failed (those written are sources for
    /// [`Redlock::fence_repair`], which anchors the rest), and
    /// [`Error::Config`] on a handle that does not fence or for a `start`
    /// above 2^53. Returns what each master did.
    pub fn fence_init(&self, start: u64) -> Result<NodeReport, Error> {
        let call = Call::start_on_masters(CallName::FenceInit);
        call.end(crate::lock::fence::operator::init(&self.shared, start))
    }

    /// Repairs the handle's fence domain after masters lost their state
    /// (a restart without persistence, `FLUSHALL`, an eviction), restarted
    /// (a restart can roll a counter back), or had their data set changed
    /// (made a replica and promoted again: a new replication id), or after
    /// a repair that missed masters (split epochs): reads the counters of
    /// the masters still validly anchored behind a barrier (a fresh epoch,
    /// which turns away acquisitions decided before it), and anchors the
    /// others with the largest. Safe at any time, also while locks are
    /// taken; concurrent repairs only cost availability. Until it runs,
    /// such masters are left out of fenced acquisitions (fail closed):
    /// locks keep working while a quorum counts, and fail with
    /// [`Error::FenceUnanchored`] (or [`Error::FenceEpochsSplit`])
    /// otherwise. Anchors written by an earlier version of this library
    /// (no replication id) count once it has upgraded them: run it once
    /// after upgrading.
    ///
    /// Fails with [`Error::NoQuorum`] if fewer than a quorum of masters
    /// are still anchored (nothing is anchored then: see
    /// [`Redlock::fence_init`] for losing a majority) or some could not be
    /// anchored, [`Error::Config`] on a handle that does not fence or
    /// whose masters are not the domain's members (nothing written). The
    /// report (returned, or in the error) says where each master ended:
    /// [`NodeOutcome::Agreed`](crate::NodeOutcome::Agreed) in the fresh
    /// epoch (kept its counter through the barrier, or was re-anchored),
    /// [`NodeOutcome::Failed`](crate::NodeOutcome::Failed) with the
    /// [`FenceFault`](crate::FenceFault) that still leaves it out (no
    /// anchor, restarted, another data set, ...), or with the error of the
    /// step it failed.
    pub fn fence_repair(&self) -> Result<NodeReport, Error> {
        let call = Call::start_on_masters(CallName::FenceRepair);
        call.end(crate::lock::fence::repair::repair(&self.shared))
    }

    /// What this handle (all its clones and threads) knows of each master,
    /// in the configured order: failures in a row, the last failure and
    /// when, when it last answered and how fast, whether it refused
    /// release notices to a waiting thread, and (fenced handles) why it is
    /// left out of fencing ([`NodeHealth::fence_fault`]). Reads counters
    /// the rounds keep anyway; makes no round.
    pub fn health(&self) -> Vec<NodeHealth> {
        let now = Instant::now();
        let refusals = self.shared.notices.refusals();
        self.shared
            .voters
            .iter()
            .zip(&self.shared.states)
            .zip(refusals)
            .map(|((voter, state), refused)| {
                state
                    .snapshot(voter.name(), now)
                    .with_notices_refused(refused)
            })
            .collect()
    }
}

/// An acquisition's result as the `try_` calls return it: `Ok(None)` for a
/// lock held by others.
fn none_if_held(result: Result<Lock, Error>) -> Result<Option<Lock>, Error> {
    match result {
        Ok(lock) => Ok(Some(lock)),
        Err(Error::Contended(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
