//! The `--json` documents: what `redlock status`, `redlock fence` and
//! `redlock run` report, for scripts. Each is one JSON object on a line
//! of its own; cli/README.md ("JSON output") is the schema, and these
//! types are it: a field is added, never renamed or removed, and every
//! field is always there (`null` when it does not apply).
//!
//! Names are snake_case words; durations are whole milliseconds (`_ms`)
//! or microseconds (`_us`); addresses are `host:port` as the library
//! names masters (never credentials); `error` and `detail` fields are the
//! messages the tool prints, which never hold a password.

use redlock_sync::FenceFault;
use serde::Serialize;
use std::io::Write;
use std::time::Duration;

/// `redlock status --json`: one key, or (`-k a -k b`) a set of keys.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    /// The KEY (non-UTF-8 bytes escaped as `\xNN`); `null` for a set of
    /// several keys (`keys` names them).
    pub(crate) key: Option<String>,
    /// Every key looked at, sorted and each once (one for a single key).
    pub(crate) keys: Vec<String>,
    /// `held` (on a quorum), `free` (absent from a quorum) or `neither`;
    /// for a set: `held` when every key is, `free` when every key is,
    /// else `neither`.
    pub(crate) lock: &'static str,
    pub(crate) quorum: usize,
    /// How many masters hold the key, do not, did not answer; `null` for
    /// a set (each key's are in `by_key`).
    pub(crate) held_on: Option<usize>,
    pub(crate) absent_on: Option<usize>,
    pub(crate) unknown_on: Option<usize>,
    /// When held: how long a quorum holds it at least (a set: every key);
    /// `null` when not held, or held without expiry.
    pub(crate) held_for_ms: Option<u64>,
    /// Who holds the lock: the holder label on a quorum of masters
    /// (`redlock run --holder-label`, `Builder::holder_label`; a set: one
    /// label for every key); `null` when none is.
    pub(crate) holder_label: Option<String>,
    /// Each master's key; `null` for a set (see `by_key`).
    pub(crate) masters: Option<Vec<StatusMaster>>,
    /// For a set, each key's document (as `redlock status --json KEY`
    /// gives it, its `fence` `null`), in the order of `keys`; `null` for a
    /// single key.
    pub(crate) by_key: Option<Vec<Status>>,
    /// With `--fence`; `null` without.
    pub(crate) fence: Option<FenceState>,
}

/// One master in `redlock status --json`.
#[derive(Debug, Serialize)]
pub(crate) struct StatusMaster {
    pub(crate) address: String,
    /// `held`, `absent` or `unknown` (no answer).
    pub(crate) key: &'static str,
    /// The key's time to live as the master said it; `null` when absent,
    /// unknown, or held without expiry (not a lock's key).
    pub(crate) ttl_ms: Option<u64>,
    /// The holder label this master's key carries; `null` when absent,
    /// unknown, or a key without one.
    pub(crate) holder_label: Option<String>,
    /// Why the master did not answer (`key` is `unknown`).
    pub(crate) error: Option<String>,
}

/// `redlock status --fence --json`: the fence domain.
#[derive(Debug, Serialize)]
pub(crate) struct FenceState {
    pub(crate) domain: String,
    /// How many masters count for fenced acquisitions.
    pub(crate) counting: usize,
    pub(crate) quorum: usize,
    pub(crate) masters: Vec<FenceMaster>,
}

/// One master of a fence domain, in `redlock status --fence --json` and
/// `redlock fence ... --json`.
#[derive(Debug, Serialize)]
pub(crate) struct FenceMaster {
    pub(crate) address: String,
    /// status: `counts`, `left_out` or `no_answer`; fence init: `anchored`,
    /// `not_anchored` (a refused init: it has no anchor yet),
    /// `already_anchored` or `failed`; fence repair: `counts`, `left_out`
    /// or `no_answer`. `other` for an outcome a later version adds.
    pub(crate) state: &'static str,
    /// Why it is left out (see [`fault_name`]); `null` otherwise.
    pub(crate) fault: Option<&'static str>,
    /// What is wrong, in words (the fault's or the failure's message).
    pub(crate) detail: Option<String>,
}

/// `redlock fence init|repair --json`.
#[derive(Debug, Serialize)]
pub(crate) struct Fence {
    pub(crate) domain: String,
    /// `init` or `repair`.
    pub(crate) action: &'static str,
    /// `init`'s `--start`; `null` for a repair.
    pub(crate) start: Option<u64>,
    /// Whether every master took part (the exit status is 0).
    pub(crate) done: bool,
    /// The summary line the text output starts with.
    pub(crate) summary: String,
    /// Why it failed (the line said on stderr); `null` when done.
    pub(crate) error: Option<String>,
    pub(crate) exit_code: u8,
    pub(crate) masters: Vec<FenceMaster>,
}

/// `redlock run --json`: the report written on stderr at the end.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Run {
    /// The key; `null` for a set of several keys (`keys` names them).
    pub(crate) key: Option<String>,
    /// Every key locked, sorted and each once (one for a single key).
    pub(crate) keys: Vec<String>,
    /// `completed` (COMMAND ran and ended holding the lock),
    /// `held_elsewhere`, `interrupted` (a signal ended the wait),
    /// `failed` (the lock could not be taken or kept: see `error`),
    /// `not_started` (COMMAND could not be run), `lost` (the lock was
    /// lost while COMMAND ran) or `max_hold` (COMMAND was stopped at
    /// `--max-hold`).
    pub(crate) outcome: &'static str,
    pub(crate) acquired: bool,
    /// From the first attempt to the lock (or to giving up): the wait
    /// included.
    pub(crate) acquire_us: Option<u64>,
    /// How many masters there are, and how many confirmed the lock.
    pub(crate) masters: Option<usize>,
    pub(crate) confirmed_by: Option<usize>,
    /// The lock's validity when it was taken.
    pub(crate) validity_ms: Option<u64>,
    /// With `--fence`: the token COMMAND got.
    pub(crate) fence_token: Option<u64>,
    /// What became of the lock after COMMAND: `released`, `kept`
    /// (`--keep`), `lost` or `release_failed` (it expires with its TTL).
    pub(crate) end: Option<&'static str>,
    /// `--keep`: how long the key stays on the masters.
    pub(crate) kept_ms: Option<u64>,
    pub(crate) release_us: Option<u64>,
    /// How redlock exits: a status, or the signal it ends by.
    pub(crate) exit_code: Option<u8>,
    pub(crate) signal: Option<i32>,
    pub(crate) error: Option<String>,
}

/// A fence fault's name in the JSON documents: `unanchored`,
/// `restarted`, `replication_changed`, `old_anchor`, `other_epoch`,
/// `info_refused`, `evicting_policy`, `probe_failed`, or `other` for one
/// a later version of the library adds.
pub(crate) fn fault_name(fault: FenceFault) -> &'static str {
    match fault {
        FenceFault::Unanchored => "unanchored",
        FenceFault::Restarted => "restarted",
        FenceFault::ReplicationChanged => "replication_changed",
        FenceFault::OldAnchor => "old_anchor",
        FenceFault::OtherEpoch => "other_epoch",
        FenceFault::InfoRefused => "info_refused",
        FenceFault::EvictingPolicy(_) => "evicting_policy",
        FenceFault::ProbeFailed => "probe_failed",
        _ => "other",
    }
}

/// Whole milliseconds.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole microseconds.
pub(crate) fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// `document` as one line on stdout. A closed stdout (`| head`) is no
/// failure of what was done.
pub(crate) fn print(document: &impl Serialize) {
    let _ = std::io::stdout().write_all(line(document).as_bytes());
}

/// `document` as one line on stderr.
pub(crate) fn print_err(document: &impl Serialize) {
    let _ = std::io::stderr().write_all(line(document).as_bytes());
}

fn line(document: &impl Serialize) -> String {
    // Serializing these types cannot fail: strings, numbers, options.
    let mut text = serde_json::to_string(document).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_written_null_or_not() {
        let text = line(&Run {
            key: Some("k".into()),
            keys: vec!["k".into()],
            outcome: "completed",
            ..Run::default()
        });
        assert!(text.ends_with("}\n") && !text[..text.len() - 1].contains('\n'));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let object = value.as_object().unwrap();
        for field in [
            "key",
            "keys",
            "outcome",
            "acquired",
            "acquire_us",
            "masters",
            "confirmed_by",
            "validity_ms",
            "fence_token",
            "end",
            "kept_ms",
            "release_us",
            "exit_code",
            "signal",
            "error",
        ] {
            assert!(object.contains_key(field), "{field}");
        }
        assert_eq!(object.len(), 15);
        assert_eq!(value["fence_token"], serde_json::Value::Null);
    }

    #[test]
    fn every_status_field_is_written_null_or_not() {
        let text = line(&Status {
            key: None,
            keys: vec!["a".into(), "b".into()],
            lock: "free",
            quorum: 2,
            held_on: None,
            absent_on: None,
            unknown_on: None,
            held_for_ms: None,
            holder_label: None,
            masters: None,
            by_key: Some(Vec::new()),
            fence: None,
        });
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let object = value.as_object().unwrap();
        for field in [
            "key",
            "keys",
            "lock",
            "quorum",
            "held_on",
            "absent_on",
            "unknown_on",
            "held_for_ms",
            "holder_label",
            "masters",
            "by_key",
            "fence",
        ] {
            assert!(object.contains_key(field), "{field}");
        }
        assert_eq!(object.len(), 12);
        assert_eq!(value["key"], serde_json::Value::Null);
    }

    #[test]
    fn fault_names_are_snake_case_words() {
        for fault in [
            FenceFault::Unanchored,
            FenceFault::Restarted,
            FenceFault::ReplicationChanged,
            FenceFault::OldAnchor,
            FenceFault::OtherEpoch,
            FenceFault::InfoRefused,
            FenceFault::ProbeFailed,
        ] {
            let name = fault_name(fault);
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert_ne!(name, "other");
        }
    }
}
