//! Ending a handle's waits from another thread (`Redlock::shutdown`): a
//! flag every acquisition looks at, and a sleep that ends when it is set.
//!
//! A waiting thread sleeps in one of two places: here (its fallback and
//! short pauses), or on its channel's condition variable or `poll(2)` in
//! `notify` (release notices), which `Notices::interrupt` wakes. Setting
//! the flag first and waking second, each sleeper looking at the flag under
//! the lock it sleeps on, no wake-up is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

/// Whether the handle was shut down, and a bell for the threads that sleep.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    stopped: AtomicBool,
    lock: Mutex<()>,
    bell: Condvar,
}

impl Stop {
    /// Whether the handle was shut down (one atomic load).
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Shuts the handle down for good, and wakes every thread asleep in
    /// [`Stop::sleep_until`].
    pub(crate) fn set(&self) {
        self.stopped.store(true, Ordering::Release);
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.bell.notify_all();
    }

    /// Sleeps until `until`, or less if the handle is (or gets) shut down.
    pub(crate) fn sleep_until(&self, until: Instant) {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = Instant::now();
            if self.is_set() || now >= until {
                return;
            }
            guard = self
                .bell
                .wait_timeout(guard, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
