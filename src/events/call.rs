//! The span a public call runs in (feature `tracing`): opened as the call
//! starts, entered for its whole length (so that the rounds' events, and
//! the caller's own inside `with_lock`, fall in it), and closed with how
//! the call ended. Without the feature a [`Call`] is nothing: its
//! functions compile away.

use crate::error::Error;
use crate::events::Resources;

/// The public calls that run in a span, each named as its span is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallName {
    /// `lock`, `lock_waiting`, `try_lock_for`, `try_lock_until`.
    Lock,
    /// `try_lock`.
    TryLock,
    /// `try_lock_many` (its span names the set once its names are read:
    /// [`name_resources`]).
    TryLockMany,
    /// `lock_many`, `lock_many_waiting`, `try_lock_many_for`,
    /// `try_lock_many_until` (as `TryLockMany`).
    LockMany,
    /// `with_lock`, `with_lock_waiting`.
    WithLock,
    /// `try_with_lock`.
    TryWithLock,
    /// `Lock::unlock` (and so `Lease::unlock`, and a dropped `Lease`).
    Unlock,
    /// A dropped `Lock`'s release.
    Drop,
    /// `Lock::extend` (and `renew_if_below` when it extends).
    Extend,
    /// `Redlock::inspect`.
    Inspect,
    /// `Redlock::ping`.
    Ping,
    /// `Redlock::fence_init`.
    FenceInit,
    /// `Redlock::fence_repair`.
    FenceRepair,
}

/// A public call under way, in its span (feature `tracing`).
#[must_use = "a call's span records its outcome when the call ends (`Call::end`)"]
pub(crate) struct Call {
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl Call {
    /// The call `name` on `resource` starts.
    #[inline(always)]
    pub(crate) fn start(name: CallName, resource: &[u8]) -> Call {
        Call::open(name, Some(Resources::one(resource)))
    }

    /// The call `name` on a held lock's `resources` (a set's: all of
    /// them) starts.
    #[inline(always)]
    pub(crate) fn start_on(name: CallName, resources: Resources<'_>) -> Call {
        Call::open(name, Some(resources))
    }

    /// The call `name`, on the masters rather than a lock, starts.
    #[inline(always)]
    pub(crate) fn start_on_masters(name: CallName) -> Call {
        Call::open(name, None)
    }

    #[inline(always)]
    fn open(name: CallName, resource: Option<Resources<'_>>) -> Call {
        #[cfg(feature = "tracing")]
        return Call {
            span: span::open(name, resource).entered(),
        };
        #[cfg(not(feature = "tracing"))]
        {
            let _ = (name, resource);
            Call {}
        }
    }

    /// The call ends with `result`, which is handed back.
    #[inline(always)]
    pub(crate) fn end<T, E: CallError>(self, result: Result<T, E>) -> Result<T, E> {
        #[cfg(feature = "tracing")]
        span::close(&self.span, &result);
        result
    }
}

/// Names the resources of the call under way, as the `resource` field of
/// its span (feature `tracing`): a set's calls (`try_lock_many`,
/// `lock_many`, `inspect_many`) open their span before they read the
/// caller's names, and call this once they have. Only a span of ours,
/// of one of those calls, is written to: never a span of the caller's.
#[inline(always)]
pub(crate) fn name_resources(resources: Resources<'_>) {
    #[cfg(feature = "tracing")]
    span::name(resources);
    #[cfg(not(feature = "tracing"))]
    let _ = resources;
}

/// An error a public call ends with, as its span records it: an
/// [`Error`], or one that carries an `Error` (`with_lock`'s
/// `WithLockError`).
pub(crate) trait CallError {
    /// The error the span records (its outcome, its message).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn error(&self) -> &Error;
}

impl CallError for Error {
    fn error(&self) -> &Error {
        self
    }
}

/// The span itself (feature `tracing`).
#[cfg(feature = "tracing")]
mod span {
    use super::{CallError, CallName, Resources};
    use crate::events::labels::outcome_name;
    use crate::events::trace::{agreed, forget_agreed, TARGET};
    use crate::events::RoundOutcome;
    use tracing::field::{display, Empty};
    use tracing::Span;

    /// Opens the span of a call named `name` on `resource` (`None`: the call
    /// is on the masters, not a lock). Disabled (no cost beyond a look at the
    /// subscriber's interest) unless the subscriber wants debug spans of the
    /// target `redlock_sync`.
    pub(super) fn open(name: CallName, resource: Option<Resources<'_>>) -> Span {
        let resource = resource.map(display);
        macro_rules! span {
            ($name:literal, $operation:literal) => {
                tracing::debug_span!(
                    target: TARGET,
                    $name,
                    resource,
                    operation = $operation,
                    outcome = Empty,
                    masters_agreed = Empty,
                    error = Empty
                )
            };
        }
        let span = match name {
            CallName::Lock => span!("lock", "acquire"),
            CallName::TryLock => span!("try_lock", "acquire"),
            CallName::TryLockMany => span!("try_lock_many", "acquire"),
            CallName::LockMany => span!("lock_many", "acquire"),
            CallName::WithLock => span!("with_lock", "acquire"),
            CallName::TryWithLock => span!("try_with_lock", "acquire"),
            CallName::Unlock => span!("unlock", "release"),
            CallName::Drop => span!("drop", "release"),
            CallName::Extend => span!("extend", "extend"),
            CallName::Inspect => span!("inspect", "inspect"),
            CallName::Ping => span!("ping", "ping"),
            CallName::FenceInit => span!("fence_init", "fence_init"),
            CallName::FenceRepair => span!("fence_repair", "fence_repair"),
        };
        if !span.is_disabled() {
            forget_agreed();
        }
        span
    }

    /// Records `resources` as the `resource` of the current span, if it
    /// is a set call's span of ours (see [`name_resources`]).
    pub(super) fn name(resources: Resources<'_>) {
        let span = Span::current();
        let ours = span.metadata().is_some_and(|meta| {
            meta.target() == TARGET
                && matches!(meta.name(), "try_lock_many" | "lock_many" | "inspect")
        });
        if ours {
            span.record("resource", display(resources));
        }
    }

    /// Records in `span` how its call ended: `outcome` (the names of
    /// [`RoundOutcome`]), the `error` if it failed, and `masters_agreed` of
    /// the last round the call ran, if it ran one.
    pub(super) fn close<T, E: CallError>(span: &Span, result: &Result<T, E>) {
        if span.is_disabled() {
            return;
        }
        let error = result.as_ref().err().map(CallError::error);
        let outcome = error.map_or(RoundOutcome::Succeeded, RoundOutcome::of);
        span.record("outcome", outcome_name(outcome));
        if let Some(error) = error {
            span.record("error", display(error));
        }
        if let Some(agreed) = agreed() {
            span.record("masters_agreed", agreed);
        }
    }
}
