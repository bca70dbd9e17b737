//! The renewal thread of a `Redlock` handle: one at most, started by the
//! first [`Lease`](crate::Lease) and ended a second after the last, it
//! renews every lease when about a third of its TTL is left.
//!
//! Leases due within one node timeout (at most a quarter of the lease's TTL)
//! of each other are renewed together, in one round: each master gets the extensions of all of them in one
//! write (see `round::Session::run_batch`), so a thousand leases cost a
//! round, not a thousand. A round lasts at most one node timeout, and every
//! lease is renewed at least three node timeouts before its validity ends,
//! so no lease waits past its margin for another's round.
//!
//! The renewer holds each lease's lock for the length of the round, and no
//! longer: a release waits for the round in flight (at most one node
//! timeout), and no extension is ever sent after a release. The leases the
//! round gives up (lost or expired) are released after every lease's lock
//! is let go, so an `unlock` never waits for another lease's release. The
//! thread keeps only a weak reference to the handle between rounds, so it
//! never keeps a dropped handle alive.

use super::state::LeaseInner;
use crate::clock::BootInstant;
use crate::error::{Error, NodeReport};
use crate::events::tell::Hook;
use crate::events::{LeaseChange, LeaseEvent};
use crate::handle::Shared;
use crate::lock::extension::{Extension, ExtensionRound};
use crate::lock::Lock;
use crate::os::fork_generation;
use crate::quorum::Rule;
use crate::round::{set_runs_in_parts, BatchOp, Dial, Plan};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Most leases renewed in one round; more are renewed in several.
const MAX_BATCH: usize = 256;

/// How long the thread outlives the last lease (a program that takes
/// leases one after another keeps one thread).
const IDLE: Duration = Duration::from_secs(1);

/// A handle's renewer.
pub(crate) struct Renewer {
    core: Arc<Core>,
}

struct Core {
    state: Mutex<State>,
    /// Signalled when a lease is added.
    added: Condvar,
}

#[derive(Default)]
struct State {
    leases: Vec<Arc<LeaseInner>>,
    /// The process generation whose thread is running, if one is (a forked
    /// child has none, whatever its copy of this says).
    running: Option<u64>,
}

impl fmt::Debug for Renewer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.core.state();
        f.debug_struct("Renewer")
            .field("leases", &state.leases.len())
            .finish_non_exhaustive()
    }
}

impl Core {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Renewer {
    /// The renewer of `shared`'s leases, made the first time.
    pub(super) fn of(shared: &Shared) -> &Renewer {
        shared
            .renewer
            .get_or_init(|| Box::new(Renewer::new()))
            .downcast_ref()
            .expect("the handle keeps only its renewer there")
    }

    fn new() -> Renewer {
        Renewer {
            core: Arc::new(Core {
                state: Mutex::new(State::default()),
                added: Condvar::new(),
            }),
        }
    }

    /// Starts renewing `lease`, starting the thread if none runs.
    pub(super) fn add(&self, shared: &Arc<Shared>, lease: Arc<LeaseInner>) -> Result<(), Error> {
        let repair = lease.lock().as_ref().is_some_and(Lock::has_left_out);
        lease.renew_at.store(
            renew_at(&lease, shared.node_timeout, repair).as_nanos(),
            std::sync::atomic::Ordering::Relaxed,
        );
        let mut state = self.core.state();
        if state
            .running
            .is_some_and(|generation| generation != fork_generation())
        {
            // A forked child's copy of the parent's list: those leases are
            // the parent's to renew, not this process's.
            state.leases.clear();
        }
        if state.running != Some(fork_generation()) {
            let (core, handle) = (Arc::clone(&self.core), Arc::downgrade(shared));
            std::thread::Builder::new()
                .name("redlock-renew".into())
                .spawn(move || run(&handle, &core))
                .map_err(Error::System)?;
            state.running = Some(fork_generation());
        }
        state.leases.push(lease);
        self.core.added.notify_one();
        Ok(())
    }
}

/// When `lease` is due: when about a third of its TTL is left, and at least
/// three node timeouts before its validity ends (but no earlier than half
/// of it). With `repair` (some master may lack the key), early enough for
/// the repair to go out (see `repair_margin`).
fn renew_at(lease: &LeaseInner, node_timeout: Duration, repair: bool) -> BootInstant {
    let margin = if repair {
        repair_margin(lease.ttl, node_timeout)
    } else {
        margin(lease.ttl, node_timeout)
    };
    let valid_until = BootInstant::now().saturating_add(lease.validity_left());
    BootInstant::from_nanos(
        valid_until
            .as_nanos()
            .saturating_sub(u64::try_from(margin.as_nanos()).unwrap_or(u64::MAX)),
    )
}

/// How long before the end of its validity a lease with `ttl` is renewed.
fn margin(ttl: Duration, node_timeout: Duration) -> Duration {
    (ttl / 3).max(node_timeout * 3).min(ttl / 2)
}

/// How long before the end of its validity a lease with `ttl` is renewed
/// while some master may lack its key. An extension sends that master the
/// repair (`SET NX`) only if its round, a node timeout long, ends before the
/// validity does (see `Lock::extension_targets`): the usual margin, at most
/// half the TTL, leaves no room for it when the TTL is two node timeouts or
/// less, and such a lease never repaired a master its acquisition left out.
/// So a quarter of a node timeout more than a round, unless that would
/// renew more often than every quarter of the TTL.
fn repair_margin(ttl: Duration, node_timeout: Duration) -> Duration {
    let usual = margin(ttl, node_timeout);
    let room = node_timeout + node_timeout / 4;
    if usual < room && room <= ttl * 3 / 4 {
        room
    } else {
        usual
    }
}

/// How much earlier than due a lease with `ttl` may be renewed, with others
/// due then: renewing a little early costs nothing and saves a round. At
/// most a node timeout, and at most a quarter of the TTL, so that a renewal
/// leaves the next one due later than the window (a renewal due at half a
/// TTL of 2 s, renewed up to a 1 s node timeout early, was due again at
/// once: the renewer renewed that lease back to back, thousands of rounds a
/// second, and a master it had left out never had time for its repair).
fn early(ttl: Duration, node_timeout: Duration) -> Duration {
    node_timeout.min(ttl / 4)
}

/// When `lease`, whose renewal round just failed (no quorum, or too slow),
/// is tried again: after a pause, so that masters that fail at once (a
/// refused connection, a master in its reconnect backoff) do not make the
/// renewer loop. A quarter of the renewal margin, so that a few rounds are
/// tried while validity remains; at least two node timeouts (a round may be
/// started up to one node timeout early, with others due then); and no
/// sooner than a master in its reconnect backoff may be dialled again (a
/// round before that fails the same way). But no later than the end of the
/// validity (or two node timeouts from now, if that is later), when the
/// renewer gives the lease up and releases it.
fn retry_at(lease: &LeaseInner, shared: &Shared) -> BootInstant {
    let node_timeout = shared.node_timeout;
    let now = Instant::now();
    let backoff = shared
        .states
        .iter()
        .map(|state| state.reconnect_in(now))
        .filter(|wait| !wait.is_zero())
        .min()
        .unwrap_or_default();
    let soonest = node_timeout.saturating_mul(2);
    let pause = (margin(lease.ttl, node_timeout) / 4)
        .max(backoff)
        .max(soonest);
    let left = lease.validity_left();
    let boot_now = BootInstant::now();
    boot_now.saturating_add(pause.min(left).max(soonest))
}

/// The thread: sleeps until a lease is due, renews the due ones in rounds,
/// and ends when no lease is left for [`IDLE`] or the handle is gone.
fn run(handle: &Weak<Shared>, core: &Core) {
    let mut idle_since: Option<Instant> = None;
    loop {
        let due = {
            let mut state = core.state();
            let node_timeout = match handle.upgrade() {
                Some(shared) => shared.node_timeout,
                None => {
                    state.running = None;
                    return;
                }
            };
            let now = BootInstant::now();
            // Leases released (or being released), lost, or past their
            // hold limit are done.
            state.leases.retain(|lease| {
                if now >= lease.hold_until && lease.hold_limit_reached() {
                    if let Some(shared) = handle.upgrade() {
                        tell(&shared.events, lease, LeaseChange::HoldLimit);
                    }
                }
                lease.wants_renewal()
            });
            if state.leases.is_empty() {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= IDLE {
                    state.running = None;
                    return;
                }
                let _unused = core
                    .added
                    .wait_timeout(state, IDLE)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            idle_since = None;
            let mut next = u64::MAX;
            let mut due = Vec::new();
            for lease in &state.leases {
                let at = lease.renew_at.load(std::sync::atomic::Ordering::Relaxed);
                if at
                    <= now
                        .saturating_add(early(lease.ttl, node_timeout))
                        .as_nanos()
                {
                    due.push(Arc::clone(lease));
                } else {
                    next = next.min(at);
                }
            }
            if due.is_empty() {
                let wait = BootInstant::from_nanos(next)
                    .saturating_since(now)
                    .min(IDLE);
                let _unused = core
                    .added
                    .wait_timeout(state, wait)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            due
        };
        let Some(shared) = handle.upgrade() else {
            core.state().running = None;
            return;
        };
        for batch in due.chunks(MAX_BATCH) {
            renew(&shared, batch);
        }
    }
}

/// Renews `leases` in one round, then releases those it gave up; then
/// each lease on a set whose keys span slots on a cluster voter, in a
/// round of its own (see `renew_in_parts`).
fn renew(shared: &Shared, leases: &[Arc<LeaseInner>]) {
    // Each lease's lock, held until the round's results are in.
    let mut guards: Vec<_> = leases.iter().map(|lease| lease.lock()).collect();
    // The locks of the leases given up, released once every guard is gone.
    let mut given_up = Vec::new();
    // The leases whose extension runs in parts, after this round.
    let mut in_parts = Vec::new();
    let mut extensions: Vec<Option<Extension>> = Vec::with_capacity(leases.len());
    for (lease, guard) in leases.iter().zip(guards.iter_mut()) {
        extensions.push(match guard.as_mut() {
            // A lease whose holder saw its validity run out is over.
            Some(_) if lease.wants_renewal() && lease.has_ended() => {
                give_up(&shared.events, lease, guard, &mut given_up);
                None
            }
            Some(lock)
                if lease.wants_renewal()
                    && set_runs_in_parts(&shared.voters, lock.set_names().keys()) =>
            {
                in_parts.push(Arc::clone(lease));
                None
            }
            Some(lock) if lease.wants_renewal() => match lock.begin_extension(lease.ttl, false) {
                Ok(extension) => Some(extension),
                Err(e) => {
                    lease.renewal_failed(e, || None);
                    give_up(&shared.events, lease, guard, &mut given_up);
                    None
                }
            },
            _ => None,
        });
    }
    let mut session = shared.pool.take();
    let ops: Vec<BatchOp<'_>> = guards
        .iter()
        .zip(&extensions)
        .filter_map(|(guard, extension)| {
            let (lock, extension) = (guard.as_ref()?, extension.as_ref()?);
            Some(batch_op(lock, extension, &session, shared.node_timeout))
        })
        .collect();
    let deadline = Instant::now() + shared.node_timeout;
    let results = session.run_batch(shared.masters(), &ops, Rule::Extend, deadline);
    drop(ops);
    let mut next_op = 0;
    for ((lease, guard), extension) in leases.iter().zip(guards.iter_mut()).zip(extensions) {
        let Some(extension) = extension else {
            continue;
        };
        let op = next_op;
        next_op += 1;
        let round = ExtensionRound {
            tally: results.tally(op),
            sent: results.sent(op),
            agreed: results.agreed(op),
            declined: results.declined(op),
            set_tag: results.set_tag(op),
            progress: Arc::clone(session.progress()),
        };
        let report = || results.report(op, &shared.voters);
        settle(
            shared,
            lease,
            guard,
            extension,
            round,
            report,
            &mut given_up,
        );
    }
    shared.pool.give_back(session);
    // Every lease's lock is let go before the releases, so that an `unlock`
    // waits for one round at most, not for these too (each may take a node
    // timeout when masters do not answer).
    drop(guards);
    for lock in given_up {
        // Best effort: compare-and-delete touches only our own key.
        let _ = lock.unlock();
    }
    for lease in in_parts {
        renew_alone(shared, &lease);
    }
}

/// Takes in what an extension round did for `lease`: the new validity, or
/// the failure, told to the hook and published to the holder; its next
/// renewal time; or, if the lease ended, its lock moved to `given_up`.
fn settle(
    shared: &Shared,
    lease: &LeaseInner,
    guard: &mut Option<Lock>,
    extension: Extension,
    round: ExtensionRound,
    report: impl Fn() -> NodeReport,
    given_up: &mut Vec<Lock>,
) {
    let Some(lock) = guard.as_mut() else {
        return;
    };
    let outcome = lock.end_extension(extension, round, &report);
    let renewed = match outcome {
        Ok(()) => true,
        Err(e) => {
            // A loss is told once the lease has ended (`give_up`).
            if !matches!(e, Error::LockLost(_) | Error::Forked) {
                tell(&shared.events, lease, LeaseChange::RenewalFailed(&e));
            }
            lease.renewal_failed(e, || Some(report()));
            false
        }
    };
    // The holder sees the new validity, or the shorter one a failure
    // leaves; unless the lease ended meanwhile (lost, or its validity
    // ran out, also if the round's result came too late to count).
    if !(lease.is_renewing() && lease.publish(lock.valid_until_boot())) {
        give_up(&shared.events, lease, guard, given_up);
        return;
    }
    let next = if renewed {
        lease.renewed();
        let validity = lease.validity_left();
        tell(&shared.events, lease, LeaseChange::Renewed { validity });
        renew_at(lease, shared.node_timeout, lock.has_left_out())
    } else {
        // No quorum, or too slow: again after a pause, while validity
        // remains (then the lease ends).
        retry_at(lease, shared)
    };
    lease
        .renew_at
        .store(next.as_nanos(), std::sync::atomic::Ordering::Relaxed);
}

/// Renews one lease on a set whose keys span slots on a cluster voter in a
/// round of its own, after the batch: its extension begins just before
/// that round, so that the validity left (which decides whether the
/// repair may go out, and against which lateness is judged) is measured
/// then, not before the batch round; and the other leases' results were
/// taken in before it (a lease judged after another's round of up to a
/// node timeout could be found late when its own answers were in time).
fn renew_alone(shared: &Shared, lease: &LeaseInner) {
    let mut given_up = Vec::new();
    {
        let mut guard = lease.lock();
        let extension = match guard.as_mut() {
            Some(_) if lease.wants_renewal() && lease.has_ended() => {
                give_up(&shared.events, lease, &mut guard, &mut given_up);
                None
            }
            Some(lock) if lease.wants_renewal() => match lock.begin_extension(lease.ttl, false) {
                Ok(extension) => Some(extension),
                Err(e) => {
                    lease.renewal_failed(e, || None);
                    give_up(&shared.events, lease, &mut guard, &mut given_up);
                    None
                }
            },
            _ => None,
        };
        if let (Some(extension), Some(lock)) = (extension, guard.as_ref()) {
            let mut session = shared.pool.take();
            let (round, report) = renew_in_parts(shared, lock, &extension, &mut session);
            shared.pool.give_back(session);
            settle(
                shared,
                lease,
                &mut guard,
                extension,
                round,
                || report.clone(),
                &mut given_up,
            );
        }
    }
    for lock in given_up {
        let _ = lock.unlock();
    }
}

/// One lease's extension in a round of its own on `session` (a set whose
/// keys span slots on a cluster voter: see `round::parts`), lasting at
/// most a node timeout: what it did, and its report.
fn renew_in_parts(
    shared: &Shared,
    lock: &Lock,
    extension: &Extension,
    session: &mut crate::round::Session,
) -> (ExtensionRound, NodeReport) {
    let unordered = lock.unordered_on(session);
    let (to, others) = lock.extension_targets(extension, unordered, shared.node_timeout);
    let plan = Plan {
        command: extension.command(lock),
        to,
        others: others.map(|masters| (extension.set_command(lock), masters)),
        rule: Rule::Extend,
        deadline: Instant::now() + shared.node_timeout,
        dial: Dial::OutsideBackoff,
        skip: unordered,
        unawaited: false,
    };
    let tally = session.run(shared.masters(), plan);
    let round = ExtensionRound {
        tally,
        sent: session.sent(),
        agreed: session.agreed(),
        declined: session.declined(),
        set_tag: session.last_tags().1,
        progress: Arc::clone(session.progress()),
    };
    (round, session.report(&shared.voters))
}

/// One lease's extension in a batch round that lasts at most `round`.
fn batch_op<'a>(
    lock: &'a Lock,
    extension: &Extension,
    session: &crate::round::Session,
    round: Duration,
) -> BatchOp<'a> {
    let unordered = lock.unordered_on(session);
    let (to, others) = lock.extension_targets(extension, unordered, round);
    BatchOp {
        command: extension.command(lock),
        to,
        others: others.map(|masters| (extension.set_command(lock), masters)),
        skip: unordered,
    }
}

/// The lease cannot be renewed (lost, expired, or the lock is a forked
/// child's copy): it ends now, for good, and its lock joins `given_up`, to
/// be released (what is left of the key deleted) after the round.
/// The hook is told why, as the holder will be (`Lease::check`).
fn give_up(hook: &Hook, lease: &LeaseInner, guard: &mut Option<Lock>, given_up: &mut Vec<Lock>) {
    lease.end();
    given_up.extend(guard.take());
    if let Err(why) = lease.check() {
        tell(hook, lease, LeaseChange::Lost(&why));
    }
}

/// Tells `hook` of `change` to `lease`.
fn tell(hook: &Hook, lease: &LeaseInner, change: LeaseChange<'_>) {
    hook.lease(LeaseEvent {
        resources: lease.resources(),
        change,
    });
}
