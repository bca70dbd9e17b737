//! `redlock status KEY`: whether the lock KEY is held, for how long and by
//! whom (its holder label, if it has one), master by master
//! (`Redlock::inspect`: one round of `PTTL` and the label, never the
//! lock's secret). The exit status answers for scripts: 0 held, 1 free, 2
//! neither held nor free on a quorum. With `--fence`, also whether each
//! master counts for the fence domain (as the probe of each connection
//! finds it: `Redlock::health`), and what to run if one does not.
//!
//! `redlock status -k a -k b` looks at several keys as one set
//! (`Redlock::inspect_many`, one round): `status_set` reports it.

use crate::args::StatusArgs;
use crate::duration::show;
use crate::exit::{self, Exit};
use crate::json;
use crate::masters;
use crate::output::{say, show_key};
use crate::status_set;
use redlock_sync::{Builder, Inspection, KeyOnMaster, NodeHealth, SetInspection};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// The status when the lock is held on a quorum of masters.
pub(crate) const HELD: u8 = 0;
/// The status when the key is absent from a quorum of masters.
pub(crate) const FREE: u8 = 1;
/// The status when it is neither (masters down, a lock being taken or
/// expiring, keys left on a minority).
pub(crate) const NEITHER: u8 = 2;

/// What was looked at: one key's lock, or a set's keys.
enum Seen<'a> {
    One(&'a [u8], Inspection),
    Set(SetInspection),
}

/// Looks at the lock (or the set) and prints what each master holds.
pub(crate) fn status(args: &StatusArgs) -> Exit {
    let fencing = |builder: Builder| match &args.fence {
        Some(Some(domain)) => builder.fencing(true).fence_domain(domain),
        Some(None) => builder.fencing(true),
        None => builder,
    };
    let redlock = match masters::client(&args.masters, args.node_timeout, fencing) {
        Ok(redlock) => redlock,
        Err(failed) => return failed.exit,
    };
    let looked = match &args.keys[..] {
        [key] => redlock
            .inspect(key.as_bytes())
            .map(|seen| Seen::One(key.as_bytes(), seen)),
        keys => redlock
            .inspect_many(keys.iter().map(|key| key.as_bytes()))
            .map(Seen::Set),
    };
    let seen = match looked {
        Ok(seen) => seen,
        Err(error) => {
            let names = match &args.keys[..] {
                [key] => show_key(key.as_bytes()),
                keys => status_set::show_keys(keys.iter().map(|key| key.as_bytes())),
            };
            say(&format!("cannot look at {names}: {error}"));
            return Exit::Code(exit::for_error(&error));
        }
    };
    if !args.quiet {
        let fence = args.fence.as_ref().map(|domain| {
            // The round may have ended at a quorum: a ping waits for every
            // master, reading what each one's probe found.
            let _ = redlock.ping();
            (
                domain.as_deref().unwrap_or(DEFAULT_DOMAIN),
                redlock.health(),
            )
        });
        if args.json {
            let mut document = match &seen {
                Seen::One(key, seen) => document(key, seen),
                Seen::Set(set) => status_set::document(set),
            };
            document.fence = fence
                .as_ref()
                .map(|(domain, health)| fence_document(domain, health));
            json::print(&document);
        } else {
            let mut out = match &seen {
                Seen::One(key, seen) => report(key, seen),
                Seen::Set(set) => status_set::report(set),
            };
            if let Some((domain, health)) = &fence {
                out.push_str(&fence_report(domain, health));
            }
            // A closed stdout (`| head -1`) is no failure of the lock's
            // status.
            let _ = std::io::stdout().write_all(out.as_bytes());
        }
    }
    Exit::Code(match &seen {
        Seen::One(_, seen) => lock_state(seen).1,
        Seen::Set(set) => status_set::lock_state(set).1,
    })
}

/// What the lock is (`held`, `free`, `neither`), and the status that says
/// so.
pub(crate) fn lock_state(seen: &Inspection) -> (&'static str, u8) {
    if seen.is_held() {
        ("held", HELD)
    } else if seen.is_free() {
        ("free", FREE)
    } else {
        ("neither", NEITHER)
    }
}

/// The summary line, then a line per master.
pub(crate) fn report(key: &[u8], seen: &Inspection) -> String {
    let mut out = format!("{}: {seen}\n", show_key(key));
    let width = seen.masters().map(|(m, _)| m.len()).max().unwrap_or(0);
    for ((master, key), (_, holder)) in seen.masters().zip(seen.holder_labels()) {
        let state = match key {
            KeyOnMaster::Held { expires_in } => format!("held, expires in {}", show(*expires_in)),
            KeyOnMaster::HeldWithoutExpiry => "held, without expiry (not set by a lock)".into(),
            KeyOnMaster::Absent => "free".into(),
            KeyOnMaster::Unknown(error) => format!("no answer: {error}"),
            other => format!("{other:?}"),
        };
        // Quoted and escaped, as the summary shows it: the holder's text.
        let holder = holder.map_or(String::new(), |label| format!(", holder {label:?}"));
        out.push_str(&format!("  {master:width$}  {state}{holder}\n"));
    }
    out
}

/// The `--json` document of one key: the lock and each master (its
/// `fence` is the caller's to fill).
pub(crate) fn document(key: &[u8], seen: &Inspection) -> json::Status {
    let masters = seen
        .masters()
        .zip(seen.holder_labels())
        .map(|((address, key), (_, holder))| {
            let (state, ttl_ms, error) = match key {
                KeyOnMaster::Held { expires_in } => ("held", Some(json::ms(*expires_in)), None),
                KeyOnMaster::HeldWithoutExpiry => ("held", None, None),
                KeyOnMaster::Absent => ("absent", None, None),
                KeyOnMaster::Unknown(error) => ("unknown", None, Some(error.to_string())),
                other => ("unknown", None, Some(format!("{other:?}"))),
            };
            json::StatusMaster {
                address: address.to_string(),
                key: state,
                ttl_ms,
                holder_label: holder.map(String::from),
                error,
            }
        })
        .collect();
    let (held_on, absent_on) = (seen.held_on(), seen.absent_on());
    json::Status {
        key: Some(show_key(key)),
        keys: vec![show_key(key)],
        lock: lock_state(seen).0,
        quorum: seen.quorum(),
        held_on: Some(held_on),
        absent_on: Some(absent_on),
        unknown_on: Some(seen.masters().count() - held_on - absent_on),
        held_for_ms: seen
            .held_for()
            .filter(|left| *left != Duration::MAX)
            .map(json::ms),
        holder_label: seen.holder_label().map(String::from),
        masters: Some(masters),
        by_key: None,
        fence: None,
    }
}

/// Each master's part in the fence domain, for `--json`.
fn fence_document(domain: &str, health: &[NodeHealth]) -> json::FenceState {
    let masters: Vec<json::FenceMaster> = health
        .iter()
        .map(|master| {
            let (state, fault, detail) = match (master.is_failing(), master.fence_fault()) {
                (true, _) => (
                    "no_answer",
                    None,
                    master.last_failure().map(|(error, _)| error.to_string()),
                ),
                (false, Some(fault)) => (
                    "left_out",
                    Some(json::fault_name(fault)),
                    Some(fault.to_string()),
                ),
                (false, None) => ("counts", None, None),
            };
            json::FenceMaster {
                address: master.node().to_string(),
                state,
                fault,
                detail,
            }
        })
        .collect();
    json::FenceState {
        domain: show_key(domain.as_bytes()),
        counting: masters.iter().filter(|m| m.state == "counts").count(),
        quorum: health.len() / 2 + 1,
        masters,
    }
}

/// The library's fence domain when none is given (`Builder::fence_domain`).
const DEFAULT_DOMAIN: &str = "default";

/// With `--fence`: a summary of the fence domain, then whether each master
/// counts for it, with what to run when one does not.
fn fence_report(domain: &str, health: &[NodeHealth]) -> String {
    let n = health.len();
    let counting = health
        .iter()
        .filter(|h| !h.is_failing() && h.fence_fault().is_none())
        .count();
    let mut out = format!(
        "fence domain {}: {counting} of {n} masters count (quorum {})",
        show_key(domain.as_bytes()),
        n / 2 + 1
    );
    if counting < n {
        out.push_str("; for those left out, run redlock fence repair once they answer");
    }
    out.push('\n');
    let width = health.iter().map(|h| h.node().len()).max().unwrap_or(0);
    for master in health {
        let state = match (master.is_failing(), master.fence_fault()) {
            (true, _) => "no answer".to_string(),
            (false, Some(fault)) => format!("left out: {fault}"),
            (false, None) => "counts".to_string(),
        };
        out.push_str(&format!("  {:width$}  {state}\n", master.node()));
    }
    out
}
