//! The feature `metrics`: what the handle tells, recorded through the
//! `metrics` facade into the recorder the program installed (a Prometheus
//! exporter, StatsD, ...; without one, nothing is recorded). The names,
//! kinds and labels are listed in `METRICS` (and docs/observability.md,
//! which a test holds to it).
//!
//! No allocation per event: every metric of the hot path (a round's
//! outcome and latency, a master's failure, a wait's end) is registered
//! once, when the handle is built (`Recorders`), its labels fixed words
//! (`labels`); a master's own key is made only for its changes of state,
//! which are rare. So the recorder must be installed before the handle is
//! built (a handle built before records nothing but its masters' changes).

use super::labels::{
    failure_index, lease_end_index, master_change, operation_index, outcome_index, woken_index,
    FAILURES, LEASE_ENDS, OPERATIONS, OUTCOMES, WOKEN_BY,
};
use super::{
    LeaseChange, LeaseEvent, MasterAnswer, MasterEvent, Operation, RoundEvent, WaitChange,
    WaitEvent,
};
use metrics::{Counter, Histogram, Key, KeyName, Label, Level, Metadata, SharedString, Unit};

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
        help: "How long a waiting call (lock, try_lock_for, ...) that waited ran, its first try included: acquired or gave_up.",
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
        help: "1 while a master answers (or was not tried yet), 0 once it is down, lacks a right or is refused as a voter.",
    },
    Metric {
        name: MASTER_CHANGES,
        kind: Kind::Counter,
        labels: &["master", "change"],
        help: "A master's changes of state: down, back, missing_right, not_a_voter, notices_refused, fence_left_out, fence_back, readdressed, unresolved.",
    },
];

/// Where the recorder is told the metrics come from.
static METADATA: Metadata<'static> =
    Metadata::new("redlock_sync", Level::INFO, Some(module_path!()));

/// A handle's metrics, registered with the recorder when the handle was
/// built: recording one is a call on its handle (an atomic add, for most
/// recorders), without looking its key up again.
pub(crate) struct Recorders {
    acquisitions: [Counter; OUTCOMES.len()],
    releases: [Counter; OUTCOMES.len()],
    extensions: [Counter; OUTCOMES.len()],
    round_duration: [Histogram; OPERATIONS.len()],
    master_failures: [Counter; FAILURES.len()],
    fence_tokens: Counter,
    wait_acquired: Histogram,
    wait_gave_up: Histogram,
    wakeups: [Counter; WOKEN_BY.len()],
    renewed: Counter,
    renewal_failed: Counter,
    leases_ended: [Counter; LEASE_ENDS.len()],
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

/// A key naming a master (and a change of its state).
fn master_key(name: &'static str, master: &str, change: Option<&'static str>) -> Key {
    let mut labels = vec![Label::new("master", master.to_owned())];
    labels.extend(change.map(|change| Label::new("change", change)));
    Key::from_parts(name, labels)
}

/// A handle was built on these masters: describes the metrics to the
/// recorder installed now (their help and units), registers them, and
/// counts each master up until a round finds it down, as the handle does.
pub(super) fn built<'a>(masters: impl Iterator<Item = &'a str>) -> Recorders {
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
        let counter = |key: &Key| recorder.register_counter(key, &METADATA);
        let histogram = |key: &Key| recorder.register_histogram(key, &METADATA);
        Recorders {
            acquisitions: keyed(ACQUISITIONS, "outcome", OUTCOMES)
                .each_ref()
                .map(counter),
            releases: keyed(RELEASES, "outcome", OUTCOMES).each_ref().map(counter),
            extensions: keyed(EXTENSIONS, "outcome", OUTCOMES)
                .each_ref()
                .map(counter),
            round_duration: keyed(ROUND_DURATION, "operation", OPERATIONS)
                .each_ref()
                .map(histogram),
            master_failures: keyed(MASTER_FAILURES, "cause", FAILURES)
                .each_ref()
                .map(counter),
            fence_tokens: counter(&Key::from_static_name(FENCE_TOKENS)),
            wait_acquired: histogram(&labelled(WAIT_DURATION, "outcome", "acquired")),
            wait_gave_up: histogram(&labelled(WAIT_DURATION, "outcome", "gave_up")),
            wakeups: keyed(WAKEUPS, "by", WOKEN_BY).each_ref().map(counter),
            renewed: counter(&labelled(RENEWALS, "outcome", "renewed")),
            renewal_failed: counter(&labelled(RENEWALS, "outcome", "failed")),
            leases_ended: keyed(LEASES_ENDED, "reason", LEASE_ENDS)
                .each_ref()
                .map(counter),
        }
    })
}

impl Recorders {
    pub(super) fn round(&self, event: &RoundEvent<'_>) {
        let by_outcome = match event.operation {
            Operation::Acquire => &self.acquisitions,
            Operation::Release => &self.releases,
            Operation::Extend => &self.extensions,
        };
        by_outcome[outcome_index(event.outcome)].increment(1);
        self.round_duration[operation_index(event.operation)].record(event.elapsed.as_secs_f64());
        if event.fence_token.is_some() {
            self.fence_tokens.increment(1);
        }
        for (_, answer) in event.masters() {
            if let MasterAnswer::Failed(error) = answer {
                self.master_failures[failure_index(error)].increment(1);
            }
        }
    }

    pub(super) fn wait(&self, event: &WaitEvent<'_>) {
        match event.change {
            WaitChange::Acquired => self.wait_acquired.record(event.waited.as_secs_f64()),
            WaitChange::GaveUp => self.wait_gave_up.record(event.waited.as_secs_f64()),
            WaitChange::Woken(by) => self.wakeups[woken_index(by)].increment(1),
            // Counted by the round (`redlock_acquisitions_total`).
            WaitChange::Contended => {}
        }
    }

    pub(super) fn lease(&self, event: &LeaseEvent<'_>) {
        match (&event.change, lease_end_index(&event.change)) {
            (LeaseChange::Renewed { .. }, _) => self.renewed.increment(1),
            (LeaseChange::RenewalFailed(_), _) => self.renewal_failed.increment(1),
            (_, Some(end)) => self.leases_ended[end].increment(1),
            (_, None) => {}
        }
    }
}

/// A master's change of state: rare, so its keys (which name the master)
/// are made and looked up each time, in the recorder installed now.
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

#[cfg(test)]
mod tests {
    use super::{Kind, METRICS};

    /// The rows of docs/observability.md's table of metrics: name, kind,
    /// labels (the cells as written, backquotes removed).
    fn documented() -> Vec<(String, String, String)> {
        let guide = include_str!("../../docs/observability.md");
        guide
            .lines()
            .filter(|line| line.starts_with("| `redlock_"))
            .map(|line| {
                let cells: Vec<String> = line
                    .split('|')
                    .map(|cell| cell.trim().replace('`', ""))
                    .collect();
                (cells[1].clone(), cells[2].clone(), cells[3].clone())
            })
            .collect()
    }

    #[test]
    fn the_guide_lists_every_metric_with_its_kind_and_labels() {
        let rows = documented();
        for metric in &METRICS {
            let kind = match metric.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let row = (
                metric.name.to_string(),
                kind.to_string(),
                metric.labels.join(", "),
            );
            assert!(rows.contains(&row), "{row:?} not in the guide: {rows:#?}");
            assert_eq!(
                metric.name.ends_with("_total"),
                metric.kind == Kind::Counter,
                "{}: counters, and only they, end in _total",
                metric.name
            );
        }
        assert_eq!(
            rows.len(),
            METRICS.len(),
            "a documented metric that is not recorded"
        );
    }
}
