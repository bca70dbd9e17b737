//! One call queued in a group (see `group`): what it asks, how far it got
//! (its [`Stage`]), and how its owner is told.

use super::batch::{Done, Release};
use crate::clock::BootInstant;
use crate::error::Error;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::Instant;

/// One queued acquisition or release.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub(super) inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    pub(super) stage: Stage,
    /// The owner, to unpark.
    pub(super) thread: Option<Thread>,
    pub(super) resource: Vec<u8>,
    pub(super) ttl_ms: u64,
    /// A release's; `None` for an acquisition (or once a batch took it).
    pub(super) release: Option<Release>,
    /// Whether the request is a release (kept when a batch takes
    /// `release`: a taken release refused is still `Done::Unbatched`).
    pub(super) releasing: bool,
    pub(super) deadline: Option<Instant>,
    /// When it was queued: its validity counts from here.
    pub(super) started: Option<BootInstant>,
    pub(super) result: Option<Result<Done, Error>>,
}

impl Inner {
    /// Tells the request it was not sent, with `error` for an acquisition
    /// (it fails) and [`Done::Unbatched`] for a release (its owner sends it
    /// itself: a release is never dropped).
    pub(super) fn refuse(&mut self, error: Error) {
        self.result = Some(match self.releasing {
            true => Ok(Done::Unbatched),
            false => Err(error),
        });
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    #[default]
    Queued,
    /// In a batch round.
    Taken,
    /// Its owner is to lead.
    Lead,
    /// Its result is posted.
    Done,
}

/// Posts a request's result (already stored): its owner wakes.
pub(super) fn post(mut inner: MutexGuard<'_, Inner>) {
    inner.stage = Stage::Done;
    wake(inner);
}

/// Posts a request's result (already stored) while the group's mutex is
/// held: its owner is put in `later`, to unpark once that mutex is let go
/// too ([`wake_later`]), for the owner's first step after waking (giving
/// its request back) takes it. Allocates only when requests expire or a
/// shutdown fails them, never in steady state.
pub(super) fn post_later(mut inner: MutexGuard<'_, Inner>, later: &mut Vec<Thread>) {
    inner.stage = Stage::Done;
    later.extend(inner.thread.clone());
}

/// Unparks the owners [`post_later`] put aside.
pub(super) fn wake_later(later: Vec<Thread>) {
    for owner in later {
        owner.unpark();
    }
}

/// Unparks a request's owner after letting go of the request: woken while
/// the mutex is still held, the owner's first step (taking that mutex)
/// would block, costing a second wait and wake-up per call. An owner that
/// saw its new stage before the unpark lands (its wait timed out just
/// then) gets a spare unpark, possibly after its call has returned: every
/// park loop of the library tolerates one (each checks its condition
/// again against a fixed deadline), as `std::thread::park`'s contract
/// asks of any caller; a caller's own code that parks may see one spurious
/// wake-up.
fn wake(inner: MutexGuard<'_, Inner>) {
    let owner = inner.thread.clone();
    drop(inner);
    if let Some(owner) = owner {
        owner.unpark();
    }
}

/// The error of a request whose deadline passed before a batch sent it.
pub(super) fn expired(inner: &Inner) -> Error {
    let waited = inner
        .started
        .map(|s| BootInstant::now().saturating_since(s))
        .unwrap_or_default();
    Error::QueueTimeout {
        waited,
        ttl: std::time::Duration::from_millis(inner.ttl_ms),
    }
}

pub(super) fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}
