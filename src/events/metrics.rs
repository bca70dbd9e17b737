//! The feature `metrics`: what the handle tells, recorded through the
//! `metrics` facade into the recorder the program installed (a Prometheus
//! exporter, StatsD, ...; without one, nothing is recorded). The names,
//! kinds and labels are listed in `METRICS` (and docs/observability.md,
//! which a test holds to it).
//!
//! No allocation per event: every key of the hot path (a round's outcome
//! and latency, a master's failure, a wait's end) is made once, its labels
//! fixed words (`labels`), and a master's own label is made only for its
//! changes of state, which are rare.

use super::labels::{
    failure_index, lease_end_index, master_change, operation_index, outcome_index, woken_index,
    FAILURES, LEASE_ENDS, OPERATIONS, OUTCOMES, WOKEN_BY,
};
use super::{LeaseChange, LeaseEvent, MasterAnswer, MasterEvent, RoundEvent, WaitChange, WaitEvent};
use metrics::{Key, KeyName, Label, Level, Metadata, SharedString, Unit};
use std::sync::OnceLock;
use std::time::Duration;

/// What kind of metric a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric: its name, kind, labels and what it counts.
pub(crate) struct Metric {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    // Read by the test that holds docs/observability.md to this list.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) labels: &'static [&'static str],
    pub(crate) help: &'static str,
}

const ACQUISITIONS: &str = "redlock_acquisitions_total";
const RELEASES: &str = "redlock_releases_total";
const EXTENSIONS: &str = "redlock_extensions_total";
const ROUND_DURATION: &str = "redlock_round_duration_seconds";
const MASTER_FAILURES: &str = "redlock_master_failures_total";
const FENCE_TOKENS: &str = "redlock_fence_tokens_total";
const WAIT_DURATION: &str = "redlock_wait_duration_seconds";
const WAKEUPS: &str = "redlock_wait_wakeups_total";
const RENEWALS: &str = "redlock_lease_renewals_total";
const LEASES_ENDED: &str = "redlock_leases_ended_total";
const MASTER_UP: &str = "redlock_master_up";
const MASTER_CHANGES: &str = "redlock_master_changes_total";

/// Every metric the feature records.
pub(crate) const METRICS: [Metric; 12] = [
    Metric {
        name: ACQUISITIONS,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Acquisition attempts (one round each; a fenced one with its write-back round), by outcome.",
    },
    Metric {
        name: RELEASES,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Release rounds (unlock, a dropped Lock or Lease), by outcome.",
    },
    Metric {
        name: EXTENSIONS,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Extension rounds (Lock::extend, Lock::renew_if_below), by outcome.",
    },
    Metric {
        name: ROUND_DURATION,
        kind: Kind::Histogram,
        labels: &["operation"],
        help: "How long a round took, from its start to its decision.",
    },
    Metric {
        name: MASTER_FAILURES,
        kind: Kind::Counter,
        labels: &["cause"],
        help: "Masters that failed in a round (acquire, release, extend), by how they failed.",
    },
    Metric {
        name: FENCE_TOKENS,
        kind: Kind::Counter,
        labels: &[],
        help: "Fence tokens issued (fenced acquisitions that succeeded).",
    },
    Metric {
        name: WAIT_DURATION,
        kind: Kind::Histogram,
        labels: &["outcome"],
        help: "How long a waiting call (lock, try_lock_for, ...) ran, its first try included: acquired or gave_up.",
    },
    Metric {
        name: WAKEUPS,
        kind: Kind::Counter,
        labels: &["by"],
        help: "Waiting calls woken to try again: by a release notice, the fallback timer, or a late-confirmed subscription.",
    },
    Metric {
        name: RENEWALS,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Lease renewals by the renewal thread: renewed or failed (tried again while validity remains).",
    },
    Metric {
        name: LEASES_ENDED,
        kind: Kind::Counter,
        labels: &["reason"],
        help: "Leases that ended on the renewal thread (lost, expired, forked) or reached their max_hold.",
    },
    Metric {
        name: MASTER_UP,
        kind: Kind::Gauge,
        labels: &["master"],
        help: "1 while a master answers (or was not tried yet), 0 once it is down or lacks a right.",
    },
    Metric {
        name: MASTER_CHANGES,
        kind: Kind::Counter,
        labels: &["master", "change"],
        help: "A master's changes of state: down, back, missing_right, notices_refused, fence_left_out, fence_back.",
    },
];

/// Where the recorder is told the metrics come from.
static METADATA: Metadata<'static> =
    Metadata::new("redlock_sync", Level::INFO, Some(module_path!()));

/// The keys of the hot path, made once.
struct Keys {
    acquisitions: [Key; OUTCOMES.len()],
    releases: [Key; OUTCOMES.len()],
    extensions: [Key; OUTCOMES.len()],
    round_duration: [Key; OPERATIONS.len()],
    master_failures: [Key; FAILURES.len()],
    fence_tokens: Key,
    wait_acquired: Key,
    wait_gave_up: Key,
    wakeups: [Key; WOKEN_BY.len()],
    renewed: Key,
    renewal_failed: Key,
    leases_ended: [Key; LEASE_ENDS.len()],
}

/// Keys named `name`, one per value of the label `label`.
fn keyed<const N: usize>(
    name: &'static str,
    label: &'static str,
    values: [&'static str; N],
) -> [Key; N] {
    values.map(|value| labelled(name, label, value))
}

/// The key named `name` whose label `label` is `value`.
fn labelled(name: &'static str, label: &'static str, value: &'static str) -> Key {
    Key::from_parts(name, vec![Label::new(label, value)])
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        acquisitions: keyed(ACQUISITIONS, "outcome", OUTCOMES),
        releases: keyed(RELEASES, "outcome", OUTCOMES),
        extensions: keyed(EXTENSIONS, "outcome", OUTCOMES),
        round_duration: keyed(ROUND_DURATION, "operation", OPERATIONS),
        master_failures: keyed(MASTER_FAILURES, "cause", FAILURES),
        fence_tokens: Key::from_static_name(FENCE_TOKENS),
        wait_acquired: labelled(WAIT_DURATION, "outcome", "acquired"),
        wait_gave_up: labelled(WAIT_DURATION, "outcome", "gave_up"),
        wakeups: keyed(WAKEUPS, "by", WOKEN_BY),
        renewed: labelled(RENEWALS, "outcome", "renewed"),
        renewal_failed: labelled(RENEWALS, "outcome", "failed"),
        leases_ended: keyed(LEASES_ENDED, "reason", LEASE_ENDS),
    })
}

fn count(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

fn observe(key: &Key, duration: Duration) {
    metrics::with_recorder(|recorder| {
        recorder
            .register_histogram(key, &METADATA)
            .record(duration.as_secs_f64())
    });
}

/// A handle was built on these masters: describes the metrics to the
/// recorder (their help and units), and counts each master up until a
/// round finds it down, as the handle does.
pub(super) fn built<'a>(masters: impl Iterator<Item = &'a str>) {
    metrics::with_recorder(|recorder| {
        for metric in &METRICS {
            let name = KeyName::from_const_str(metric.name);
            let help = SharedString::const_str(metric.help);
            let unit = metric.name.ends_with("_seconds").then_some(Unit::Seconds);
            match metric.kind {
                Kind::Counter => recorder.describe_counter(name, unit, help),
                Kind::Gauge => recorder.describe_gauge(name, unit, help),
                Kind::Histogram => recorder.describe_histogram(name, unit, help),
            }
        }
        for master in masters {
            recorder
                .register_gauge(&master_key(MASTER_UP, master, None), &METADATA)
                .set(1.0);
        }
    });
}

/// A key naming a master (and a change of its state).
fn master_key(name: &'static str, master: &str, change: Option<&'static str>) -> Key {
    let mut labels = vec![Label::new("master", master.to_owned())];
    labels.extend(change.map(|change| Label::new("change", change)));
    Key::from_parts(name, labels)
}

pub(super) fn round(event: &RoundEvent<'_>) {
    let keys = keys();
    let by_outcome = match event.operation {
        super::Operation::Acquire => &keys.acquisitions,
        super::Operation::Release => &keys.releases,
        super::Operation::Extend => &keys.extensions,
    };
    count(&by_outcome[outcome_index(event.outcome)]);
    observe(
        &keys.round_duration[operation_index(event.operation)],
        event.elapsed,
    );
    if event.fence_token.is_some() {
        count(&keys.fence_tokens);
    }
    for (_, answer) in event.masters() {
        if let MasterAnswer::Failed(error) = answer {
            count(&keys.master_failures[failure_index(error)]);
        }
    }
}

pub(super) fn wait(event: &WaitEvent<'_>) {
    let keys = keys();
    match event.change {
        WaitChange::Acquired => observe(&keys.wait_acquired, event.waited),
        WaitChange::GaveUp => observe(&keys.wait_gave_up, event.waited),
        WaitChange::Woken(by) => count(&keys.wakeups[woken_index(by)]),
        // Counted by the round (`redlock_acquisitions_total`).
        WaitChange::Contended => {}
    }
}

pub(super) fn lease(event: &LeaseEvent<'_>) {
    let keys = keys();
    match (&event.change, lease_end_index(&event.change)) {
        (LeaseChange::Renewed { .. }, _) => count(&keys.renewed),
        (LeaseChange::RenewalFailed(_), _) => count(&keys.renewal_failed),
        (_, Some(end)) => count(&keys.leases_ended[end]),
        (_, None) => {}
    }
}

pub(super) fn master(event: &MasterEvent<'_>) {
    let (change, up) = master_change(&event.change);
    metrics::with_recorder(|recorder| {
        recorder
            .register_counter(
                &master_key(MASTER_CHANGES, event.node, Some(change)),
                &METADATA,
            )
            .increment(1);
        if let Some(up) = up {
            recorder
                .register_gauge(&master_key(MASTER_UP, event.node, None), &METADATA)
                .set(if up { 1.0 } else { 0.0 });
        }
    });
}
