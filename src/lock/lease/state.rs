//! What a lease shares with the renewal thread: its lock, and the end of
//! its validity, which the holder reads with one atomic load.
//!
//! The holder reads the lease's state with one atomic load: the end of its
//! validity on the boot clock, which the renewer moves forward after each
//! successful round (counted from that round's start). Nothing the renewer
//! does can make that view optimistic: a holder paused past its validity
//! reads that it ran out when it resumes, before it can act, whether or not
//! the renewer ran.
//!
//! A lease that ended is over for good: once its validity ran out, or its
//! lock was found lost, nothing makes it valid again (another client may
//! have held the lock in between). The end of the validity and the mark
//! that the lease ended share one atomic word. Whoever first finds the
//! validity run out (the holder's `check` or `validity`, or the renewer)
//! sets the mark with a compare-and-swap against the end it read; the
//! renewer publishes a new end with a compare-and-swap against the old one,
//! which fails once the mark is set. So a renewal published first is seen
//! by every later reader, and once a reader was told the lease expired, no
//! renewal is ever published.

use crate::clock::BootInstant;
use crate::error::{Error, NodeReport};
use crate::events::Resources;
use crate::lock::Lock;
use crate::names::Names;
use crate::os::fork_generation;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The lease is renewed.
const RENEWING: u8 = 0;
/// The renewer found the lock lost on the masters, or the lease is a forked
/// child's copy (`gone` says which).
const LOST: u8 = 1;
/// `max_hold` has passed: renewal stopped.
const HOLD_LIMIT: u8 = 2;
/// Unlocked, dropped or left to expire.
const RELEASED: u8 = 3;

/// The mark, in `LeaseInner::valid_until`, that the lease has ended (the
/// other bits keep the end of its validity, in nanoseconds: a boot clock
/// needs 292 years to reach this bit).
const ENDED: u64 = 1 << 63;

/// What a lease shares with the renewal thread.
pub(crate) struct LeaseInner {
    /// The lock; `None` once released, or given up by the renewer. The
    /// renewer holds this mutex for the length of a renewal round (never
    /// longer), so a release waits for the round in flight and no extension
    /// is ever sent after the release.
    lock: Mutex<Option<Lock>>,
    /// The end of the validity on the boot clock, in nanoseconds, with
    /// [`ENDED`] once the lease is over (see the module docs).
    valid_until: AtomicU64,
    state: AtomicU8,
    /// Set by the release (or `let_expire`) before it waits for the lock:
    /// the renewer starts no round on the lease after it, so the release
    /// waits for the round in flight at most (a failed lease is due again
    /// at once, and the renewer would otherwise often take the mutex again
    /// before the waiting release).
    releasing: AtomicBool,
    /// Why the renewer gave the lock up, once the state is `LOST`.
    gone: Mutex<Option<Gone>>,
    /// What the masters answered to the last renewal that failed since the
    /// last that succeeded: why the lease expired, if it does.
    last_failure: Mutex<Option<NodeReport>>,
    /// Taken by each change of the lease's state before `changed` is
    /// signalled, and by a holder waiting for its end before it looks
    /// (see `wait_ended`), so that no change is missed.
    watch: Mutex<()>,
    changed: Condvar,
    /// When the renewer next renews it, on the boot clock (nanoseconds):
    /// kept by the renewer.
    pub(crate) renew_at: AtomicU64,
    /// Renewal stops here.
    pub(crate) hold_until: BootInstant,
    pub(crate) max_hold: Duration,
    /// The TTL each renewal sets.
    pub(crate) ttl: Duration,
    pub(super) resource: Vec<u8>,
    /// A set's names (two or more), for the events; empty for a lock on
    /// one resource.
    set: Names,
    /// The lock's fence token (see `Lock::fence_token`).
    pub(super) fence_token: Option<u64>,
    /// The process generation the lease was made in (see
    /// `os::fork_generation`): a forked child's copy is its parent's.
    fork_generation: u64,
}

impl fmt::Debug for LeaseInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseInner")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl LeaseInner {
    /// The state of a new lease of `lock`, whose validity ends at
    /// `valid_until`, renewed for at most `max_hold` after its acquisition.
    pub(super) fn new(lock: Lock, valid_until: BootInstant, max_hold: Duration) -> LeaseInner {
        LeaseInner {
            valid_until: AtomicU64::new(valid_until.as_nanos() & !ENDED),
            state: AtomicU8::new(RENEWING),
            releasing: AtomicBool::new(false),
            gone: Mutex::new(None),
            last_failure: Mutex::new(None),
            watch: Mutex::new(()),
            changed: Condvar::new(),
            renew_at: AtomicU64::new(0),
            hold_until: lock.acquired_at().saturating_add(max_hold),
            max_hold,
            ttl: lock.ttl(),
            resource: lock.resource().to_vec(),
            set: {
                let mut set = Names::default();
                if lock.is_set() {
                    set.copy_from(lock.set_names());
                }
                set
            },
            fence_token: lock.fence_token(),
            fork_generation: fork_generation(),
            lock: Mutex::new(Some(lock)),
        }
    }

    /// What the events tell of the lease: its one name, or a set's names.
    pub(super) fn resources(&self) -> Resources<'_> {
        match self.set.len() {
            0 => Resources::one(&self.resource),
            _ => Resources::set(self.set.keys()),
        }
    }

    /// See [`Lease::check`](super::Lease::check).
    pub(super) fn check(&self) -> Result<Duration, Error> {
        let inner = self;
        if inner.is_inherited() {
            return Err(Error::Forked);
        }
        if inner.state.load(Ordering::Acquire) == LOST {
            return Err(inner.gone_error());
        }
        // The validity decides before the hold limit: `HoldLimit` says the
        // lock still runs out a validity, which must be true.
        let now = BootInstant::now();
        let left = inner.left(now).map_err(|end| inner.ended_error(end))?;
        if inner.state.load(Ordering::Acquire) == HOLD_LIMIT || now >= inner.hold_until {
            return Err(Error::HoldLimit {
                max_hold: inner.max_hold,
            });
        }
        Ok(left)
    }

    /// See [`Lease::wait_ended`](super::Lease::wait_ended).
    pub(super) fn wait_ended(&self, timeout: Duration) -> Option<Error> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = match self.check() {
                Err(why) => return Some(why),
                Ok(left) => left,
            };
            // The end comes by the clock (validity, hold limit) or by the
            // renewer (lost), which signals `changed`.
            let mut wait = left.min(self.hold_until.saturating_since(BootInstant::now()));
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                wait = wait.min(deadline - now);
            }
            let watching = lock_ignoring_poison(&self.watch);
            // A change made before we took the mutex is seen here; one
            // made after it signals us.
            if self.check().is_err() {
                continue;
            }
            let _unused = self
                .changed
                .wait_timeout(watching, wait.max(Duration::from_micros(50)))
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Wakes the holders waiting for the lease's end, after a change.
    fn signal(&self) {
        drop(lock_ignoring_poison(&self.watch));
        self.changed.notify_all();
    }

    /// See [`Lease::let_expire`](super::Lease::let_expire).
    pub(super) fn let_expire(&self) -> Duration {
        let inner = self;
        if inner.is_inherited() {
            return Duration::ZERO;
        }
        let (was, lock) = inner.stop();
        let left = match was {
            LOST | RELEASED => Duration::ZERO,
            _ => inner.validity_left(),
        };
        inner.end();
        if let Some(lock) = lock {
            lock.let_expire();
        }
        left
    }

    /// The validity left at `now`, or, once it has run out, when it ended.
    /// The first to find it run out marks the lease ended, for good.
    fn left(&self, now: BootInstant) -> Result<Duration, BootInstant> {
        let end = |word: u64| BootInstant::from_nanos(word & !ENDED);
        let ran_out = |word: u64| word & ENDED == 0 && now >= end(word);
        // One load while the validity lasts: the closure asks for no store.
        let mark = |word: u64| ran_out(word).then_some(word | ENDED);
        let (Ok(word) | Err(word)) =
            self.valid_until
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, mark);
        if word & ENDED != 0 || now >= end(word) {
            Err(end(word))
        } else {
            Ok(end(word).saturating_since(now))
        }
    }

    /// The validity left now (zero once the lease ended).
    pub(crate) fn validity_left(&self) -> Duration {
        self.left(BootInstant::now()).unwrap_or(Duration::ZERO)
    }

    /// Whether the lease has ended (its validity ran out, or the renewer
    /// gave it up).
    pub(crate) fn has_ended(&self) -> bool {
        self.left(BootInstant::now()).is_err()
    }

    /// Why the lease ended, its validity having ended at `end`.
    fn ended_error(&self, end: BootInstant) -> Error {
        if self.state.load(Ordering::Acquire) == LOST {
            return self.gone_error();
        }
        Error::Expired {
            overrun: BootInstant::now().saturating_since(end),
            last_extension: lock_ignoring_poison(&self.last_failure).clone(),
        }
    }

    /// Why the renewer gave the lock up (the state is `LOST`).
    fn gone_error(&self) -> Error {
        match lock_ignoring_poison(&self.gone).clone() {
            Some(Gone::Lost(report)) => Error::LockLost(report),
            Some(Gone::Forked) | None => Error::Forked,
        }
    }

    /// The lock, for a renewal round or the release (waits for a round in
    /// flight).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Lock>> {
        lock_ignoring_poison(&self.lock)
    }

    /// Whether the lease is still renewed (if it has not ended): neither
    /// lost, nor held for `max_hold`, nor released.
    pub(crate) fn is_renewing(&self) -> bool {
        self.state.load(Ordering::Acquire) == RENEWING
    }

    /// Whether the renewer should start a round on it: it is renewed, and
    /// not being released.
    pub(crate) fn wants_renewal(&self) -> bool {
        self.is_renewing() && !self.releasing.load(Ordering::Acquire)
    }

    /// Stops renewal: waits for a round in flight (no other starts), then
    /// takes the lock out of the lease, unless that was done before (or
    /// the renewer gave it up). Returns the state before, and the lock.
    fn stop(&self) -> (u8, Option<Lock>) {
        self.releasing.store(true, Ordering::Release);
        let lock = self.lock().take();
        (self.state.swap(RELEASED, Ordering::AcqRel), lock)
    }

    /// Whether this is a copy inherited through `fork` by a child process.
    pub(crate) fn is_inherited(&self) -> bool {
        self.fork_generation != fork_generation()
    }

    /// Moves the end of the validity to `valid_until` (a renewal's, counted
    /// from its round's start, or the earlier end a failed renewal leaves),
    /// unless the lease has ended or its validity has run out meanwhile:
    /// then it stays ended (see the module docs). Returns whether the lease
    /// goes on.
    pub(crate) fn publish(&self, valid_until: BootInstant) -> bool {
        let now = BootInstant::now();
        let new = valid_until.as_nanos() & !ENDED;
        let replace = |word: u64| match word {
            _ if word & ENDED != 0 => None,
            _ if now >= BootInstant::from_nanos(word) => Some(word | ENDED),
            _ => Some(new),
        };
        let published = self
            .valid_until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, replace);
        self.signal();
        matches!(published, Ok(word) if now < BootInstant::from_nanos(word))
    }

    /// A renewal failed with `error`: remembers what the holder is to be
    /// told if the lease ends: the key found gone or a forked child's copy
    /// (the lease is lost then), or what the masters answered (no quorum,
    /// too slow, confirmed too late: the error's report, or, for an error
    /// without one, the round's, if there was a round).
    pub(crate) fn renewal_failed(&self, error: Error, round: impl FnOnce() -> Option<NodeReport>) {
        let gone = match error {
            Error::LockLost(report) => Gone::Lost(report),
            Error::Forked => Gone::Forked,
            other => {
                if let Some(report) = other.nodes().cloned().or_else(round) {
                    *lock_ignoring_poison(&self.last_failure) = Some(report);
                }
                return;
            }
        };
        *lock_ignoring_poison(&self.gone) = Some(gone);
        self.state.store(LOST, Ordering::Release);
        self.signal();
    }

    /// A renewal succeeded: earlier failures explain nothing any more.
    pub(crate) fn renewed(&self) {
        let mut last_failure = lock_ignoring_poison(&self.last_failure);
        if last_failure.is_some() {
            *last_failure = None;
        }
    }

    /// The renewer gives the lease up: over for good, validity zero. No
    /// round is started on it again, so the renewer drops it from its list
    /// (it wanted renewal still: its lock gone and its renewal time past,
    /// it was due at every turn, and the renewer spun on it).
    pub(crate) fn end(&self) {
        self.releasing.store(true, Ordering::Release);
        self.valid_until.fetch_or(ENDED, Ordering::AcqRel);
        self.signal();
    }

    /// `max_hold` passed: no more renewals. Returns whether this call
    /// stopped them (they were not stopped before).
    pub(crate) fn hold_limit_reached(&self) -> bool {
        let stopped = self
            .state
            .compare_exchange(RENEWING, HOLD_LIMIT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        self.signal();
        stopped
    }

    /// Stops renewal and releases the lock (once): the lease's own error if
    /// it had ended, else what the release found.
    pub(super) fn release(&self) -> Result<(), Error> {
        if self.is_inherited() {
            // The parent's lock: never released here, and its mutex, copied
            // at the fork, may be held by a renewer that does not exist here.
            return Err(Error::Forked);
        }
        let (was, lock) = self.stop();
        let ended = match was {
            RELEASED => return Ok(()), // released before (`unlock`, then drop)
            LOST => Some(self.gone_error()),
            _ => self
                .left(BootInstant::now())
                .err()
                .map(|end| self.ended_error(end)),
        };
        self.end();
        let released = match lock {
            Some(lock) => lock.unlock(),
            // The renewer gave it up, and deleted what was left of the key.
            None => Ok(()),
        };
        match ended {
            Some(error) => Err(error),
            None => released,
        }
    }
}

/// Why the renewer gave a lock up for lost.
#[derive(Clone, Debug)]
enum Gone {
    /// An extension found it gone on the masters.
    Lost(NodeReport),
    /// A forked child's copy.
    Forked,
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each field is consistent after every update.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
