//! How `redlock` ends: the command's own status, or one of the codes below
//! (from `<sysexits.h>` where one fits, as flock(1) does).

use redlock_sync::Error;

/// The default status when the lock is held elsewhere (flock's, settable
/// with `-E`).
pub(crate) const HELD_ELSEWHERE: u8 = 1;
/// `redlock fence init`: the fence domain is anchored already on some
/// master, so nothing was written (as for a lock held elsewhere: what is
/// asked for exists already).
pub(crate) const ANCHORED: u8 = 1;
/// EX_USAGE: the command line is wrong.
pub(crate) const USAGE: u8 = 64;
/// EX_UNAVAILABLE: no quorum of masters answered (down, unreachable, too
/// slow).
pub(crate) const UNAVAILABLE: u8 = 69;
/// EX_OSERR: the system refused something (a process, a thread, a pipe,
/// random bytes).
pub(crate) const OS_ERROR: u8 = 71;
/// EX_CANTCREAT: `redlock man --dir` could not write a page.
pub(crate) const CANT_CREATE: u8 = 73;
/// EX_TEMPFAIL: the lock was lost while the command ran; the command was
/// stopped.
pub(crate) const LOCK_LOST: u8 = 75;
/// EX_NOPERM: a master refused the credentials or a command (ACL).
pub(crate) const PERMISSION: u8 = 77;
/// EX_CONFIG: the configuration is wrong (no masters, a bad URL, a password
/// file that cannot be read).
pub(crate) const CONFIG: u8 = 78;
/// timeout(1)'s status: the command ran for `--max-hold` and was stopped.
pub(crate) const MAX_HOLD: u8 = 124;
/// The shell's status for a command that could not be executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The shell's status for a command that was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// How the process ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// With this status.
    Code(u8),
    /// Killed by this signal, as the command was.
    Signal(i32),
}

/// The status for an error from the library that kept the lock from being
/// taken or kept (contention is the caller's: it has its own code).
pub(crate) fn for_error(error: &Error) -> u8 {
    if error.is_auth_failure() || error.is_permission_denied() {
        PERMISSION
    } else if error.is_config()
        || matches!(
            error,
            Error::FenceUnanchored(_) | Error::FenceExhausted(_) | Error::FenceEpochsSplit(_)
        )
    {
        // A fence domain to initialise or repair: the operator's to fix.
        CONFIG
    } else if error.is_lock_lost() {
        LOCK_LOST
    } else if matches!(error, Error::Entropy(_) | Error::System(_)) {
        OS_ERROR
    } else {
        // No quorum, too slow, and whatever a later version adds.
        UNAVAILABLE
    }
}
