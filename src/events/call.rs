//! The span a public call runs in (feature `tracing`): opened as the call
//! starts, entered for its whole length (so that the rounds' events, and
//! the caller's own inside `with_lock`, fall in it), and closed with how
//! the call ended. Without the feature a [`Call`] is nothing: its
//! functions compile away.

use crate::error::Error;

/// The public calls that run in a span, each named as its span is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallName {
    /// `lock`, `lock_waiting`, `try_lock_for`, `try_lock_until`.
    Lock,
    /// `try_lock`.
    TryLock,
    /// `with_lock`, `with_lock_waiting`.
    WithLock,
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
        Call::open(name, Some(resource))
    }

    /// The call `name`, on the masters rather than a lock, starts.
    #[inline(always)]
    pub(crate) fn start_on_masters(name: CallName) -> Call {
        Call::open(name, None)
    }

    #[inline(always)]
    fn open(name: CallName, resource: Option<&[u8]>) -> Call {
        #[cfg(feature = "tracing")]
        return Call {
            span: super::trace::open(name, resource).entered(),
        };
        #[cfg(not(feature = "tracing"))]
        {
            let _ = (name, resource);
            Call {}
        }
    }

    /// The call ends with `result`, which is handed back.
    #[inline(always)]
    pub(crate) fn end<T>(self, result: Result<T, Error>) -> Result<T, Error> {
        #[cfg(feature = "tracing")]
        super::trace::close(&self.span, &result);
        result
    }
}
