//! `redlock status -k KEY -k KEY ...`: several keys looked at as one set,
//! as `redlock run -k` holds them (`Redlock::inspect_many`: one round, a
//! `PTTL` and the holder label per key per master). A summary of the set,
//! then each key as `redlock status KEY` shows it. The status: 0 when
//! every key is held, 1 when every key is free (the set could be taken
//! now), 2 otherwise.

use crate::duration::show;
use crate::json;
use crate::output::show_key;
use crate::status::{self, FREE, HELD, NEITHER};
use redlock_sync::SetInspection;
use std::time::Duration;

/// How many keys a summary names before it says how many more there are.
const SHOWN_KEYS: usize = 8;

/// What the set is (`held`: every key; `free`: every key; else
/// `neither`), and the status that says so.
pub(crate) fn lock_state(set: &SetInspection) -> (&'static str, u8) {
    if set.iter().all(|(_, seen)| seen.is_held()) {
        ("held", HELD)
    } else if set.is_free() {
        ("free", FREE)
    } else {
        ("neither", NEITHER)
    }
}

/// The keys as a set: `{a, b}`, escaped, at most [`SHOWN_KEYS`] of them
/// then how many more.
pub(crate) fn show_keys<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>) -> String {
    let count = keys.len();
    let shown: Vec<String> = keys.take(SHOWN_KEYS).map(show_key).collect();
    let more = match count > SHOWN_KEYS {
        true => format!(", ... {} more", count - SHOWN_KEYS),
        false => String::new(),
    };
    format!("{{{}{more}}}", shown.join(", "))
}

/// How long a quorum holds every key at least, when every key is held
/// (`Duration::MAX`: every key held without expiry).
fn held_for(set: &SetInspection) -> Option<Duration> {
    set.iter()
        .map(|(_, seen)| seen.held_for())
        .collect::<Option<Vec<Duration>>>()?
        .into_iter()
        .min()
}

/// The set's summary line, then each key's report.
pub(crate) fn report(set: &SetInspection) -> String {
    let names = show_keys(set.iter().map(|(key, _)| key));
    let summary = match lock_state(set).0 {
        "held" => {
            let mut line = format!("{names}: held, every key on a quorum of masters");
            match held_for(set) {
                Some(Duration::MAX) | None => {}
                Some(left) => line.push_str(&format!(", for at least {}", show(left))),
            }
            if let Some(label) = set.held_by_one_holder() {
                line.push_str(&format!(", holder {label:?}"));
            }
            line
        }
        "free" => format!("{names}: free, every key absent from a quorum of masters"),
        _ => {
            let held = set.iter().filter(|(_, seen)| seen.is_held()).count();
            let free = set.iter().filter(|(_, seen)| seen.is_free()).count();
            format!(
                "{names}: neither: {held} of {} keys held, {free} free",
                set.iter().len()
            )
        }
    };
    let mut out = summary;
    out.push('\n');
    for (key, seen) in set.iter() {
        out.push_str(&status::report(key, seen));
    }
    out
}

/// The `--json` document of the set: its state, and each key's document
/// (`by_key`); its `fence` is the caller's to fill.
pub(crate) fn document(set: &SetInspection) -> json::Status {
    let by_key: Vec<json::Status> = set
        .iter()
        .map(|(key, seen)| status::document(key, seen))
        .collect();
    json::Status {
        key: None,
        keys: set.iter().map(|(key, _)| show_key(key)).collect(),
        lock: lock_state(set).0,
        quorum: by_key.first().map_or(0, |key| key.quorum),
        held_on: None,
        absent_on: None,
        unknown_on: None,
        held_for_ms: held_for(set)
            .filter(|left| *left != Duration::MAX)
            .map(json::ms),
        holder_label: set.held_by_one_holder().map(String::from),
        masters: None,
        by_key: Some(by_key),
        fence: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_named_in_braces_and_bounded() {
        let two: [&[u8]; 2] = [b"a", b"b\xff"];
        assert_eq!(show_keys(two.iter().copied()), "{a, b\\xff}");
        let many: Vec<Vec<u8>> = (0..20).map(|i| format!("k{i:02}").into_bytes()).collect();
        assert_eq!(
            show_keys(many.iter().map(Vec::as_slice)),
            "{k00, k01, k02, k03, k04, k05, k06, k07, ... 12 more}"
        );
    }
}
