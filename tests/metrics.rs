//! The feature `metrics`: what real lock calls against real servers record
//! through the `metrics` facade, name by name and label by label
//! (docs/observability.md lists them). A recorder of the test's own keeps
//! every value as it was last set (counters and gauges are never reset by a
//! read, as metrics-util's `DebuggingRecorder` resets them), and the
//! Prometheus exporter renders them as a program would serve them.
//! (`cargo test --features metrics --test metrics`.)

mod support;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use redlock_sync::Redlock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, Proxy, RedisServer};

/// A histogram's values, in the order recorded.
#[derive(Default)]
struct Values(Mutex<Vec<f64>>);

impl HistogramFn for Values {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Every metric registered, by its key written out (`name{label="value",...}`).
#[derive(Default)]
struct Recorded {
    counters: Mutex<HashMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<String, Arc<Values>>>,
    described: Mutex<HashMap<String, (Option<Unit>, String)>>,
}

/// `name{a="x",b="y"}`, the labels in the order given.
fn written(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}=\"{}\"", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

fn entry<T: Default>(map: &Mutex<HashMap<String, Arc<T>>>, key: &Key) -> Arc<T> {
    Arc::clone(map.lock().unwrap().entry(written(key)).or_default())
}

impl Recorder for Recorded {
    fn describe_counter(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }
    fn describe_gauge(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }
    fn describe_histogram(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(name, unit, help);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(entry(&self.counters, key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(entry(&self.gauges, key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(entry(&self.histograms, key))
    }
}

impl Recorded {
    fn describe(&self, name: KeyName, unit: Option<Unit>, help: SharedString) {
        let entry = (unit, help.to_string());
        self.described
            .lock()
            .unwrap()
            .insert(name.as_str().to_string(), entry);
    }

    fn counter(&self, key: &str) -> u64 {
        let counters = self.counters.lock().unwrap();
        counters.get(key).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Every counter whose key starts with `prefix`, summed.
    fn counters_starting(&self, prefix: &str) -> u64 {
        let counters = self.counters.lock().unwrap();
        counters
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum()
    }

    fn gauge(&self, key: &str) -> Option<f64> {
        let gauges = self.gauges.lock().unwrap();
        gauges
            .get(key)
            .map(|g| f64::from_bits(g.load(Ordering::Relaxed)))
    }

    fn values(&self, key: &str) -> Vec<f64> {
        let histograms = self.histograms.lock().unwrap();
        histograms
            .get(key)
            .map_or_else(Vec::new, |h| h.0.lock().unwrap().clone())
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.counters.lock().unwrap().keys().cloned().collect();
        keys.extend(self.gauges.lock().unwrap().keys().cloned());
        keys.extend(self.histograms.lock().unwrap().keys().cloned());
        keys.sort();
        keys
    }
}

/// The recorder, installed once for the process; and the tests that read
/// it, one at a time (they compare counts before and after).
fn recorded() -> (&'static Recorded, MutexGuard<'static, ()>) {
    static RECORDED: OnceLock<&'static Recorded> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let recorded = *RECORDED.get_or_init(|| {
        let recorded: &'static Recorded = Box::leak(Box::default());
        metrics::set_global_recorder(recorded).expect("the only recorder");
        recorded
    });
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    (recorded, turn)
}

/// Waits up to `within` for `done`; says whether it came.
fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + within;
    while !done() {
        if Instant::now() > until {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

const TTL: Duration = Duration::from_secs(10);

#[test]
fn lock_calls_record_each_round_with_its_operation_and_outcome() {
    let (rec, _turn) = recorded();
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");

    // Built: every master counts as up, and the metrics are described.
    for server in &cluster.servers {
        let up = format!(
            "redlock_master_up{{master=\"127.0.0.1:{}\"}}",
            server.port()
        );
        assert_eq!(rec.gauge(&up), Some(1.0), "{up}: {:?}", rec.keys());
    }
    {
        let described = rec.described.lock().unwrap();
        for name in [
            "redlock_acquisitions_total",
            "redlock_releases_total",
            "redlock_extensions_total",
            "redlock_master_failures_total",
            "redlock_fence_tokens_total",
            "redlock_wait_wakeups_total",
            "redlock_lease_renewals_total",
            "redlock_leases_ended_total",
            "redlock_master_up",
            "redlock_master_changes_total",
        ] {
            let (unit, help) = described.get(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(*unit, None, "{name}");
            assert!(!help.is_empty(), "{name}");
        }
        for name in [
            "redlock_round_duration_seconds",
            "redlock_wait_duration_seconds",
        ] {
            let (unit, _) = described.get(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(*unit, Some(Unit::Seconds), "{name}");
        }
    }

    let acquired = r#"redlock_acquisitions_total{outcome="succeeded"}"#;
    let contended = r#"redlock_acquisitions_total{outcome="contended"}"#;
    let released = r#"redlock_releases_total{outcome="succeeded"}"#;
    let extended = r#"redlock_extensions_total{outcome="succeeded"}"#;
    let acquire_rounds = r#"redlock_round_duration_seconds{operation="acquire"}"#;
    let release_rounds = r#"redlock_round_duration_seconds{operation="release"}"#;
    let extend_rounds = r#"redlock_round_duration_seconds{operation="extend"}"#;
    let before = |key: &str| rec.counter(key);
    let (acquired_0, contended_0, released_0, extended_0) = (
        before(acquired),
        before(contended),
        before(released),
        before(extended),
    );
    let rounds_0 = (
        rec.values(acquire_rounds).len(),
        rec.values(release_rounds).len(),
        rec.values(extend_rounds).len(),
    );

    let started = Instant::now();
    let mut lock = redlock
        .try_lock("metrics:one", TTL)
        .expect("no error")
        .expect("free");
    assert!(redlock
        .try_lock("metrics:one", TTL)
        .expect("no error")
        .is_none());
    lock.extend(TTL).expect("extended");
    lock.unlock().expect("released");
    let took = started.elapsed();

    assert_eq!(rec.counter(acquired) - acquired_0, 1);
    assert_eq!(rec.counter(contended) - contended_0, 1);
    assert_eq!(rec.counter(extended) - extended_0, 1);
    assert_eq!(rec.counter(released) - released_0, 1);
    let acquire_values = rec.values(acquire_rounds);
    assert_eq!(
        acquire_values.len() - rounds_0.0,
        2,
        "two acquisition rounds"
    );
    assert_eq!(rec.values(release_rounds).len() - rounds_0.1, 1);
    assert_eq!(rec.values(extend_rounds).len() - rounds_0.2, 1);
    for seconds in &acquire_values[rounds_0.0..] {
        assert!(
            *seconds > 0.0 && *seconds <= took.as_secs_f64(),
            "a round of {seconds} s within {took:?}"
        );
    }
    let keys = rec.keys();
    assert!(
        keys.iter().all(|k| !k.contains("metrics:one")),
        "no resource name in a label: {keys:?}"
    );
}

#[test]
fn a_wait_records_its_wakeups_and_its_length() {
    let (rec, _turn) = recorded();
    let cluster = Cluster::start(3);
    // Without release notices a waiter tries again only when its fallback
    // timer wakes it: every retry after the first try is a wakeup, however
    // the threads are scheduled.
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .release_notices(false)
        .retry_delay(Duration::from_millis(50))
        .build()
        .expect("valid configuration");
    let waits = r#"redlock_wait_duration_seconds{outcome="acquired"}"#;
    let gave_up = r#"redlock_wait_duration_seconds{outcome="gave_up"}"#;
    let by_timer = r#"redlock_wait_wakeups_total{by="timer"}"#;
    let waits_0 = rec.values(waits).len();
    let by_timer_0 = rec.counter(by_timer);
    let contended = r#"redlock_acquisitions_total{outcome="contended"}"#;
    let contended_0 = rec.counter(contended);

    let held = redlock
        .try_lock("metrics:wait", TTL)
        .expect("no error")
        .expect("free");
    let waiter = {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let lock = redlock
                .try_lock_for("metrics:wait", TTL, Duration::from_secs(30))
                .expect("no error")
                .expect("acquired after the release");
            let took = started.elapsed();
            lock.unlock().expect("released");
            took
        })
    };
    // The waiter found the lock held before it is released.
    assert!(
        eventually(Duration::from_secs(10), || rec.counter(contended)
            > contended_0),
        "the waiter never found the lock held"
    );
    held.unlock().expect("released");
    let took = waiter.join().expect("waiter");

    let values = rec.values(waits);
    assert_eq!(values.len() - waits_0, 1, "one wait that acquired");
    let waited = values[values.len() - 1];
    assert!(
        waited > 0.0 && waited <= took.as_secs_f64(),
        "waited {waited} s in a call of {took:?}"
    );
    assert!(
        rec.counter(by_timer) > by_timer_0,
        "the timer's wakeups are counted: {:?}",
        rec.keys()
    );
    for key in rec.keys() {
        if let Some(by) = key.strip_prefix("redlock_wait_wakeups_total{by=") {
            assert!(
                ["\"notice\"}", "\"timer\"}", "\"subscribed\"}"].contains(&by),
                "{key}"
            );
        }
    }

    // A wait that runs out.
    let gave_up_0 = rec.values(gave_up).len();
    let held = redlock
        .try_lock("metrics:wait", TTL)
        .expect("no error")
        .expect("free");
    let none = redlock
        .try_lock_for("metrics:wait", TTL, Duration::from_millis(300))
        .expect("no error");
    assert!(none.is_none());
    held.unlock().expect("released");
    let values = rec.values(gave_up);
    assert_eq!(values.len() - gave_up_0, 1, "one wait that gave up");
    assert!(values[values.len() - 1] >= 0.3, "{values:?}");
}

#[test]
fn leases_fence_tokens_and_masters_are_recorded() {
    let (rec, _turn) = recorded();
    let mut cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .fencing(true)
        .build()
        .expect("valid configuration");
    redlock.fence_init(0).expect("initialised");

    // A fenced acquisition issues a token.
    let tokens = "redlock_fence_tokens_total{}";
    let tokens_0 = rec.counter(tokens);
    let lock = redlock
        .try_lock("metrics:fenced", TTL)
        .expect("no error")
        .expect("free");
    assert!(lock.fence_token().is_some());
    lock.unlock().expect("released");
    assert_eq!(rec.counter(tokens) - tokens_0, 1);

    // A lease renewed, then lost: its key deleted behind it.
    let renewed = r#"redlock_lease_renewals_total{outcome="renewed"}"#;
    let lost = r#"redlock_leases_ended_total{reason="lost"}"#;
    let (renewed_0, lost_0) = (rec.counter(renewed), rec.counter(lost));
    let lease = redlock
        .try_lock("metrics:lease", Duration::from_secs(1))
        .expect("no error")
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    assert!(
        eventually(Duration::from_secs(10), || rec.counter(renewed) > renewed_0),
        "no renewal recorded"
    );
    for server in &cluster.servers {
        server.cmd(&["DEL", "metrics:lease"]);
    }
    assert!(lease.wait_ended(Duration::from_secs(10)).is_some());
    assert!(
        eventually(Duration::from_secs(5), || rec.counter(lost) > lost_0),
        "the lost lease was not recorded: {:?}",
        rec.keys()
    );
    assert_eq!(rec.counter(lost) - lost_0, 1);
    drop(lease);

    // A master down: its failures by cause, its change, its gauge.
    let port = cluster.servers[2].port();
    let up = format!("redlock_master_up{{master=\"127.0.0.1:{port}\"}}");
    let down =
        format!("redlock_master_changes_total{{master=\"127.0.0.1:{port}\",change=\"down\"}}");
    let back =
        format!("redlock_master_changes_total{{master=\"127.0.0.1:{port}\",change=\"back\"}}");
    let failures_0 = rec.counters_starting("redlock_master_failures_total{cause=");
    let (down_0, back_0) = (rec.counter(&down), rec.counter(&back));
    cluster.servers[2].kill();
    let lock = redlock
        .try_lock("metrics:down", TTL)
        .expect("no error")
        .expect("two of three masters");
    lock.unlock().expect("released on two");
    assert!(rec.counters_starting("redlock_master_failures_total{cause=") > failures_0);
    assert_eq!(rec.counter(&down) - down_0, 1, "{:?}", rec.keys());
    assert_eq!(rec.gauge(&up), Some(0.0));

    // Back: the gauge says so once a round reaches it again (within its
    // reconnect backoff).
    cluster.servers[2].restart();
    assert!(
        eventually(Duration::from_secs(20), || {
            let _ = redlock.ping();
            rec.gauge(&up) == Some(1.0)
        }),
        "the master's gauge did not come back: {:?}",
        rec.keys()
    );
    assert_eq!(rec.counter(&back) - back_0, 1);
}

/// One server given as two voters (the second through a proxy): the later
/// is refused, a change of its own (`not_a_voter`), and its gauge says it
/// is not up.
#[test]
fn a_voter_refused_as_not_independent_is_counted_down() {
    let (rec, _turn) = recorded();
    let shared = RedisServer::start();
    let proxy = Proxy::start(shared.addr(), |_| false);
    let other = RedisServer::start();
    let refused = proxy.url().trim_start_matches("redis://").to_string();
    let up = format!("redlock_master_up{{master=\"{refused}\"}}");
    let change =
        format!("redlock_master_changes_total{{master=\"{refused}\",change=\"not_a_voter\"}}");
    let change_0 = rec.counter(&change);
    let redlock = Redlock::builder()
        .nodes([shared.url(), proxy.url(), other.url()])
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid configuration");
    assert_eq!(
        rec.gauge(&up),
        Some(1.0),
        "up until a round finds otherwise"
    );
    let lock = redlock
        .try_lock("metrics:voters", TTL)
        .expect("no error")
        .expect("two independent voters");
    // Every voter's connection set up (the lock round returned at quorum).
    let _ = redlock.ping();
    lock.unlock().expect("released");
    assert!(
        eventually(Duration::from_secs(5), || rec.counter(&change) > change_0),
        "the refusal was not recorded: {:?}",
        rec.keys()
    );
    assert_eq!(rec.counter(&change) - change_0, 1, "told once");
    assert_eq!(rec.gauge(&up), Some(0.0));
}

/// The Prometheus exporter (a recorder on this thread only) renders the
/// crate's metrics with their help, kinds and labels.
#[test]
fn the_prometheus_exporter_renders_them() {
    let cluster = Cluster::start(3);
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        let redlock = Redlock::builder()
            .nodes(cluster.urls())
            .node_timeout(Duration::from_millis(500))
            .build()
            .expect("valid configuration");
        let lock = redlock.lock("metrics:text", TTL).expect("free");
        lock.unlock().expect("released");
    });
    let text = handle.render();
    for line in [
        "# TYPE redlock_acquisitions_total counter",
        "redlock_acquisitions_total{outcome=\"succeeded\"} 1",
        "redlock_releases_total{outcome=\"succeeded\"} 1",
        "# TYPE redlock_master_up gauge",
        "# TYPE redlock_round_duration_seconds summary",
        "redlock_round_duration_seconds_count{operation=\"acquire\"} 1",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let port = cluster.servers[0].port();
    let up = format!("redlock_master_up{{master=\"127.0.0.1:{port}\"}} 1");
    assert!(text.contains(&up), "{up:?} not in:\n{text}");
    assert!(text.contains("# HELP redlock_acquisitions_total Acquisition attempts"));
}
