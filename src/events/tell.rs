//! How the handle tells its events: to the hook installed on it, a panic
//! caught; and, with the feature `log`, as log lines (a debug line per
//! round, a warning for a lost lease, a failed renewal, a master down or
//! missing a right, release notices refused, a host name that no longer
//! resolves; an information line for a node's new address); with the
//! feature `metrics`, to the metrics recorder (`metrics`); with the feature
//! `tracing`, as events (`trace`). None ever shows a lock value or a
//! password: the events carry neither.

use super::{HandleEvent, LeaseEvent, MasterEvent, RoundEvent, WaitEvent};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The hook of a handle, if one was installed (and with the feature
/// `metrics`, the handle's metrics, registered when it was built). Cloned
/// into each master's state and kept by the handle; telling an event when
/// no hook is installed (and no log line wanted) costs one branch, and the
/// event is not even made.
#[derive(Clone, Default)]
pub(crate) struct Hook {
    hook: Option<Arc<dyn HandleEvent>>,
    #[cfg(feature = "metrics")]
    metrics: Option<Arc<super::metrics::Recorders>>,
}

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.hook.is_some() {
            "Hook(set)"
        } else {
            "Hook(none)"
        })
    }
}

impl Hook {
    pub(crate) fn new(hook: Arc<dyn HandleEvent>) -> Hook {
        Hook {
            hook: Some(hook),
            // Registered when the handle is built (`Hook::built`).
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Whether an event would be told to anyone (the hook, or the log at
    /// `level`): when not, the caller does not make it.
    fn wanted(&self, _level: Level) -> bool {
        if self.hook.is_some() {
            return true;
        }
        // With the feature `metrics`, every event of a built handle is
        // recorded.
        #[cfg(feature = "metrics")]
        if self.metrics.is_some() {
            return true;
        }
        #[cfg(feature = "log")]
        if log::log_enabled!(target: TARGET, log::Level::from(_level)) {
            return true;
        }
        #[cfg(feature = "tracing")]
        if super::trace::enabled(matches!(_level, Level::Warn)) {
            return true;
        }
        false
    }

    /// The hook of a handle built on these masters (with the feature
    /// `metrics`: its metrics registered with the recorder installed now,
    /// and its masters counted up).
    pub(crate) fn built<'a>(self, _masters: impl Iterator<Item = &'a str>) -> Hook {
        Hook {
            #[cfg(feature = "metrics")]
            metrics: Some(Arc::new(super::metrics::built(_masters))),
            ..self
        }
    }

    /// Whether a round's end would be told (see [`Hook::round`]).
    pub(crate) fn wants_rounds(&self) -> bool {
        self.wanted(Level::Debug)
    }

    /// Tells the end of a round (make it only if [`Hook::wants_rounds`]).
    pub(crate) fn round(&self, event: RoundEvent<'_>) {
        #[cfg(feature = "log")]
        lines::round(&event);
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.round(&event);
        }
        #[cfg(feature = "tracing")]
        super::trace::round(&event);
        self.call(|hook| hook.handle_round(event));
    }

    /// Tells a waiting call's progress (made by `event` only if wanted:
    /// it reads the clock).
    pub(crate) fn wait<'a>(&self, event: impl FnOnce() -> WaitEvent<'a>) {
        if self.wanted(Level::Debug) {
            let event = event();
            #[cfg(feature = "log")]
            lines::wait(&event);
            #[cfg(feature = "metrics")]
            if let Some(metrics) = &self.metrics {
                metrics.wait(&event);
            }
            #[cfg(feature = "tracing")]
            super::trace::wait(&event);
            self.call(|hook| hook.handle_wait(event));
        }
    }

    /// Tells a lease's change.
    pub(crate) fn lease(&self, event: LeaseEvent<'_>) {
        // Warn: the lease's lines go up to warnings (each line is then
        // filtered by its own level).
        if self.wanted(Level::Warn) {
            #[cfg(feature = "log")]
            lines::lease(&event);
            #[cfg(feature = "metrics")]
            if let Some(metrics) = &self.metrics {
                metrics.lease(&event);
            }
            #[cfg(feature = "tracing")]
            super::trace::lease(&event);
            self.call(|hook| hook.handle_lease(event));
        }
    }

    /// Tells a master's change.
    pub(crate) fn master(&self, event: MasterEvent<'_>) {
        if self.wanted(Level::Warn) {
            #[cfg(feature = "log")]
            lines::master(&event);
            #[cfg(feature = "metrics")]
            if self.metrics.is_some() {
                super::metrics::master(&event);
            }
            #[cfg(feature = "tracing")]
            super::trace::master(&event);
            self.call(|hook| hook.handle_master(event));
        }
    }

    /// Calls the hook, if there is one; its panic stops here.
    fn call(&self, f: impl FnOnce(&dyn HandleEvent)) {
        if let Some(hook) = &self.hook {
            // The handle's state is not the hook's to see or change: a
            // panic in it leaves nothing of ours half-done.
            let _ = catch_unwind(AssertUnwindSafe(|| f(&**hook)));
        }
    }
}

/// The log levels the events use (without the feature `log` too, so that
/// `wanted` keeps one signature).
#[derive(Clone, Copy)]
enum Level {
    Debug,
    Warn,
}

#[cfg(feature = "log")]
impl From<Level> for log::Level {
    fn from(level: Level) -> log::Level {
        match level {
            Level::Debug => log::Level::Debug,
            Level::Warn => log::Level::Warn,
        }
    }
}

/// The target of the crate's log lines.
#[cfg(feature = "log")]
const TARGET: &str = "redlock_sync";

/// The log lines (feature `log`). A resource name is shown escaped, a
/// set's as `{a, b}`, bounded however large the set (see `Resources`); no
/// lock value or password is in any event, so none is in any line.
#[cfg(feature = "log")]
mod lines {
    use super::TARGET;
    use crate::error::Rounded;
    use crate::events::{
        LeaseChange, LeaseEvent, MasterChange, MasterEvent, RoundEvent, RoundOutcome, WaitEvent,
    };

    pub(super) fn round(event: &RoundEvent<'_>) {
        let (name, took) = (event.resources, Rounded(event.elapsed));
        match (event.outcome, event.validity) {
            (RoundOutcome::Succeeded, Some(validity)) => log::debug!(
                target: TARGET,
                "{:?} {name}: {:?} in {took}, valid for {}",
                event.operation,
                event.outcome,
                Rounded(validity)
            ),
            _ => log::debug!(
                target: TARGET,
                "{:?} {name}: {:?} in {took}",
                event.operation,
                event.outcome
            ),
        }
    }

    pub(super) fn wait(event: &WaitEvent<'_>) {
        log::debug!(
            target: TARGET,
            "waiting for {}: {:?} after {}",
            event.resources,
            event.change,
            Rounded(event.waited)
        );
    }

    pub(super) fn lease(event: &LeaseEvent<'_>) {
        let name = event.resources;
        match event.change {
            LeaseChange::Renewed { validity } => log::debug!(
                target: TARGET,
                "lease {name} renewed, valid for {}",
                Rounded(validity)
            ),
            LeaseChange::RenewalFailed(error) => {
                log::warn!(target: TARGET, "lease {name}: renewal failed: {error}")
            }
            LeaseChange::Lost(error) => log::warn!(target: TARGET, "lease {name} lost: {error}"),
            LeaseChange::HoldLimit => log::info!(
                target: TARGET,
                "lease {name} held for its max_hold: renewal stopped"
            ),
        }
    }

    pub(super) fn master(event: &MasterEvent<'_>) {
        let node = event.node;
        match event.change {
            MasterChange::Down(error) => {
                log::warn!(target: TARGET, "master {node} is down: {error}")
            }
            MasterChange::Back => log::info!(target: TARGET, "master {node} is back"),
            MasterChange::MissingRight(missing) => {
                log::warn!(target: TARGET, "master {node} lacks a right: {missing}")
            }
            MasterChange::NotAVoter(why) => {
                log::error!(target: TARGET, "master {node} is refused as a voter: {why}")
            }
            MasterChange::FenceLeftOut(fault) => log::warn!(
                target: TARGET,
                "master {node} is left out of fenced locks: {fault}"
            ),
            MasterChange::FenceBack => {
                log::info!(target: TARGET, "master {node} counts for fenced locks again")
            }
            MasterChange::Readdressed { node: at, from, to } => log::info!(
                target: TARGET,
                "master {node}: {at} now resolves to {to} (was {from}); new connections dial {to}"
            ),
            MasterChange::Unresolved {
                node: at,
                reason,
                kept: Some(kept),
            } => log::warn!(
                target: TARGET,
                "master {node}: {at} did not resolve again ({reason}); new connections still dial {kept}"
            ),
            MasterChange::Unresolved {
                node: at,
                reason,
                kept: None,
            } => log::warn!(
                target: TARGET,
                "master {node}: {at} did not resolve ({reason}); it is not dialled until it does"
            ),
            MasterChange::NoticesRefused(error) => log::warn!(
                target: TARGET,
                "master {node} lacks a right: it refused release notices ({error}), so waiters \
                 poll; grant the ACL user the channels: ACL SETUSER <user> &redlock-sync:released:*"
            ),
        }
    }
}
