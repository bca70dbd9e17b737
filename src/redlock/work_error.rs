//! The error of a call that runs work under a lock
//! ([`Redlock::with_lock`](crate::Redlock::with_lock) and its kin): the
//! lock was not taken, or it did not hold until the work returned, which
//! then carries the work's result.

use crate::error::Error;
use std::fmt;
use std::ops::Deref;

/// Why [`Redlock::with_lock`](crate::Redlock::with_lock) (and
/// [`Redlock::with_lock_waiting`](crate::Redlock::with_lock_waiting),
/// [`Redlock::try_with_lock`](crate::Redlock::try_with_lock)) did not
/// return a result made entirely under the lock.
///
/// - [`WithLockError::NotTaken`]: the lock was not taken, and the work did
///   not run.
/// - [`WithLockError::Lost`]: the work ran and returned, but the lock did
///   not hold until then: the renewer found it lost, its validity ran out
///   (a long pause, renewals that failed), or the release found its key
///   gone from the masters (deleted or taken by another client). Another
///   client may have held the lock while the work ran. The work's result
///   is kept here, since its effects happened: decide what to do with it
///   ([`WithLockError::into_result`]).
///
/// It dereferences to the [`Error`] that says why, so the predicates work
/// on it as on any error (`e.is_contention()`, `e.is_lock_lost()`), and it
/// converts into [`Error`], so `?` works in a function that returns
/// `Result<_, redlock_sync::Error>` (the result of lost work is dropped
/// then), and into `Box<dyn std::error::Error + Send + Sync>` when the
/// result is `Send + Sync + 'static`.
///
/// ```no_run
/// # use std::time::Duration;
/// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
/// use redlock_sync::WithLockError;
/// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(300));
/// match redlock.with_lock("report:daily", ttl, max_hold, |_lease| 42) {
///     Ok(rows) => println!("{rows} rows, all under the lock"),
///     Err(WithLockError::Lost { result, error }) => {
///         eprintln!("{result} rows, but the lock was lost before the end: {error}")
///     }
///     Err(e) => return Err(e.into()), // not taken: the work did not run
/// }
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[non_exhaustive]
pub enum WithLockError<R> {
    /// The lock was not taken (held until the wait ran out, no quorum, a
    /// configuration error, the handle shut down...): the work did not
    /// run.
    NotTaken(Error),
    /// The work ran and returned `result`, but the lock did not hold until
    /// it returned: `error` says why ([`Error::LockLost`] or
    /// [`Error::Expired`]).
    Lost {
        /// What the work returned.
        result: R,
        /// Why the lock did not hold to the end.
        error: Error,
    },
}

impl<R> WithLockError<R> {
    /// Why: the error that kept the lock from being taken, or that ended
    /// it before the work returned.
    pub fn error(&self) -> &Error {
        match self {
            WithLockError::NotTaken(error) | WithLockError::Lost { error, .. } => error,
        }
    }

    /// The error, without the work's result.
    pub fn into_error(self) -> Error {
        match self {
            WithLockError::NotTaken(error) | WithLockError::Lost { error, .. } => error,
        }
    }

    /// Whether the work ran but the lock did not hold to its end
    /// ([`WithLockError::Lost`]).
    pub fn is_lost(&self) -> bool {
        matches!(self, WithLockError::Lost { .. })
    }

    /// The work's result, if it ran ([`WithLockError::Lost`]).
    pub fn result(&self) -> Option<&R> {
        match self {
            WithLockError::Lost { result, .. } => Some(result),
            WithLockError::NotTaken(_) => None,
        }
    }

    /// The work's result, if it ran ([`WithLockError::Lost`]).
    pub fn into_result(self) -> Option<R> {
        match self {
            WithLockError::Lost { result, .. } => Some(result),
            WithLockError::NotTaken(_) => None,
        }
    }
}

impl<R> Deref for WithLockError<R> {
    type Target = Error;

    fn deref(&self) -> &Error {
        self.error()
    }
}

impl<R> From<WithLockError<R>> for Error {
    fn from(e: WithLockError<R>) -> Error {
        e.into_error()
    }
}

// By hand: the work's result is named by its type, so that any result
// (also one that is not `Debug`) makes an error that `unwrap` can show.
impl<R> fmt::Debug for WithLockError<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WithLockError::NotTaken(error) => f.debug_tuple("NotTaken").field(error).finish(),
            WithLockError::Lost { error, .. } => f
                .debug_struct("Lost")
                .field("result", &format_args!("<{}>", std::any::type_name::<R>()))
                .field("error", error)
                .finish(),
        }
    }
}

impl<R> fmt::Display for WithLockError<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WithLockError::NotTaken(error) => write!(f, "{error}"),
            WithLockError::Lost { error, .. } => write!(
                f,
                "the work ran, but the lock did not hold until it returned (its result is in \
                 the error): {error}"
            ),
        }
    }
}

impl<R> std::error::Error for WithLockError<R> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The message shows the error's: its source is the error's.
        std::error::Error::source(self.error())
    }
}
