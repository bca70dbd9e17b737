//! `redlock status KEY`: whether the lock KEY is held, and for how long,
//! master by master (`Redlock::inspect`: one round of `PTTL`, never the
//! lock's value). The exit status answers for scripts: 0 held, 1 free, 2
//! neither held nor free on a quorum.

use crate::args::StatusArgs;
use crate::duration::show;
use crate::exit::{self, Exit};
use crate::masters;
use crate::output::{say, show_key};
use redlock_sync::{Inspection, KeyOnMaster};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

/// The status when the lock is held on a quorum of masters.
pub(crate) const HELD: u8 = 0;
/// The status when the key is absent from a quorum of masters.
pub(crate) const FREE: u8 = 1;
/// The status when it is neither (masters down, a lock being taken or
/// expiring, keys left on a minority).
pub(crate) const NEITHER: u8 = 2;

/// Looks at the lock and prints what each master holds.
pub(crate) fn status(args: &StatusArgs) -> Exit {
    let key = args.key.as_bytes();
    let redlock = match masters::client(&args.masters, args.node_timeout, |builder| builder) {
        Ok(redlock) => redlock,
        Err(exit) => return exit,
    };
    let seen = match redlock.inspect(key) {
        Ok(seen) => seen,
        Err(error) => {
            say(&format!("cannot look at {}: {error}", show_key(key)));
            return Exit::Code(exit::for_error(&error));
        }
    };
    if !args.quiet {
        // A closed stdout (`| head -1`) is no failure of the lock's status.
        let _ = std::io::stdout().write_all(report(key, &seen).as_bytes());
    }
    Exit::Code(if seen.is_held() {
        HELD
    } else if seen.is_free() {
        FREE
    } else {
        NEITHER
    })
}

/// The summary line, then a line per master.
fn report(key: &[u8], seen: &Inspection) -> String {
    let mut out = format!("{}: {seen}\n", show_key(key));
    let width = seen.masters().map(|(m, _)| m.len()).max().unwrap_or(0);
    for (master, key) in seen.masters() {
        let state = match key {
            KeyOnMaster::Held { expires_in } => format!("held, expires in {}", show(*expires_in)),
            KeyOnMaster::HeldWithoutExpiry => "held, without expiry (not set by a lock)".into(),
            KeyOnMaster::Absent => "free".into(),
            KeyOnMaster::Unknown(error) => format!("no answer: {error}"),
            other => format!("{other:?}"),
        };
        out.push_str(&format!("  {master:width$}  {state}\n"));
    }
    out
}
