//! Watching the masters: `Redlock::ping`, `Redlock::health` and
//! `Lock::masters`, wired to a logger and to gauges in the Prometheus text
//! format, with an alert raised as soon as the healthy masters are down to
//! the quorum: one more failure and locking stops, so it warns before any
//! lock fails.
//!
//! ```sh
//! cargo run --release --example monitoring       # 3 local masters, one frozen for 3 s
//! cargo run --release --example monitoring -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! It polls once a second: 2 s with every master up, 3 s with the third
//! master frozen (SIGSTOP: it accepts connections but answers nothing, the
//! worst kind of failure), 3 s after it resumes. With `--nodes`, it polls
//! for 8 s and leaves the failures to you (`redis-cli -h HOST -p PORT DEBUG
//! SLEEP 3` freezes a master for 3 s).
//!
//! What each source tells:
//! - `ping()`: one round of PING on every master, now. `Ok(report)` if a
//!   quorum answered (locks can be taken), `Err(NoQuorum)` otherwise.
//! - `health()`: what the handle's own rounds (locks and pings, from every
//!   thread) have seen of each master: failures in a row, the last answer
//!   and its round trip, the last failure. Free: it reads counters, makes
//!   no round. A master that accepts connections and then answers nothing
//!   counts as failing from the first round that finds it late ("timed out
//!   during reply"): the ping, which waits for every master, or any call
//!   after its answer was due. It stays failing until it answers again.
//!   The ping also keeps the view fresh when the program makes few calls.
//! - `lock.masters()`: where one lock's key is (`Held`, `Unconfirmed`,
//!   `Absent`): a lock on fewer masters tolerates fewer failures.
//!
//! What to copy: `Monitor` (the poll and the alert) and `Metrics`. Demo
//! scaffolding: `main`, which freezes a local server (`local`,
//! `examples/support/local.rs`) to raise the alert.

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{KeyState, NodeOutcome, Redlock};
use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

const POLL_EVERY: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    let (servers, urls) = local::masters(3);
    let redlock = match Redlock::builder().nodes(&urls).build() {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let mut monitor = Monitor::new(redlock);

    log("INFO", "phase 1: every master up");
    monitor.poll_for(Duration::from_secs(2));

    match &servers {
        Some(servers) => {
            let frozen_master = servers[2].addr();
            // SIGSTOP until `_frozen` is dropped at the end of this block.
            let _frozen = servers[2].pause();
            log("INFO", format!("phase 2: master {frozen_master} frozen"));
            monitor.poll_for(Duration::from_secs(3));
            println!("{}", monitor.metrics.render()); // what /metrics would serve now
            log("INFO", format!("phase 3: master {frozen_master} resumed"));
        }
        None => {
            log(
                "INFO",
                "phase 2: polling for 6 s; stop or freeze a master now to see the alert",
            );
            monitor.poll_for(Duration::from_secs(3));
        }
    }
    monitor.poll_for(Duration::from_secs(3));
    println!("{}", monitor.metrics.render());

    // With local masters, the demo checks itself: the alert must have
    // fired while a master was frozen, and cleared once it was back.
    if servers.is_some() && !(monitor.alerts_raised > 0 && monitor.alert == Alert::Clear) {
        log("ERROR", "the alert did not fire and clear as expected");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The alert state: how close locking is to failing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Alert {
    /// More healthy masters than a quorum: one can fail without harm.
    Clear,
    /// Exactly a quorum healthy: locks still work, one more failure stops them.
    AtQuorum,
    /// Fewer than a quorum healthy: locks fail.
    BelowQuorum,
}

struct Monitor {
    redlock: Redlock,
    metrics: Metrics,
    alert: Alert,
    alerts_raised: usize,
}

impl Monitor {
    fn new(redlock: Redlock) -> Monitor {
        Monitor {
            redlock,
            metrics: Metrics::default(),
            alert: Alert::Clear,
            alerts_raised: 0,
        }
    }

    /// Polls every `POLL_EVERY` for `how_long`.
    fn poll_for(&mut self, how_long: Duration) {
        let end = Instant::now() + how_long;
        let mut next = Instant::now();
        while next < end {
            self.poll();
            next += POLL_EVERY;
            thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }

    /// One poll: ping, read the health, update the gauges, raise or clear
    /// the alert, and look at where a probe lock lands.
    fn poll(&mut self) {
        let redlock = &self.redlock;
        let (masters, quorum) = (redlock.node_count(), redlock.quorum());

        // 1. One round of PING on every master (each has the node timeout,
        // 50 ms by default, to answer). Keep what each one did.
        let report = match redlock.ping() {
            Ok(report) => {
                if report.iter().any(|s| *s.outcome() != NodeOutcome::Agreed) {
                    log("WARN", format!("ping: degraded, still a quorum: {report}"));
                }
                self.metrics.set("redlock_ping_ok", None, 1.0);
                Some(report)
            }
            Err(e) => {
                log("ERROR", format!("ping: locking is unavailable: {e}"));
                self.metrics.set("redlock_ping_ok", None, 0.0);
                e.nodes().cloned()
            }
        };
        // What a master did in this ping: `None` if it answered.
        let ping_problem = |node: &str| -> Option<String> {
            let Some(report) = &report else {
                return Some("no ping report".into());
            };
            match report.iter().find(|s| s.node() == node)?.outcome() {
                NodeOutcome::Agreed => None,
                NodeOutcome::Failed(e) => Some(e.to_string()),
                other => Some(format!("{other:?}")),
            }
        };

        // 2. What the handle knows of each master (the ping included).
        //
        // A master counts as healthy unless it is failing: a connection to
        // it failed (refused, closed, a refused AUTH, ...), or it missed its
        // deadline and has not answered since (frozen, swapping: the ping
        // just waited for it, so it shows at once, "timed out during
        // reply"). A late master is not in the reconnect backoff and keeps
        // its connection (`reconnect_in()` is zero): its answer may still
        // come, and ends the failure.
        let health = redlock.health();
        let mut healthy = 0;
        for node in &health {
            let name = Some(node.node());
            let problem = ping_problem(node.node());
            let up = !node.is_failing();
            healthy += usize::from(up);
            self.metrics
                .set("redlock_node_up", name, f64::from(u8::from(up)));
            let failures = f64::from(node.consecutive_failures());
            self.metrics
                .set("redlock_node_consecutive_failures", name, failures);
            if let Some(rtt) = node.round_trip() {
                let micros = rtt.as_micros() as f64;
                self.metrics.set("redlock_node_round_trip_us", name, micros);
            }
            if let Some(ago) = node.last_answer() {
                let seconds = ago.as_secs_f64();
                self.metrics
                    .set("redlock_node_last_answer_seconds", name, seconds);
            }
            // One line per master, e.g. "10.0.0.2:6379 ok, answered 3ms ago
            // in 210µs" or "10.0.0.2:6379 failing (4 in a row): connection
            // refused, 1.2s ago"; and what went wrong with the ping.
            match problem {
                None if up => log("DEBUG", node),
                None => log("WARN", node),
                Some(problem) => log("WARN", format!("{node}; ping: {problem}")),
            }
        }
        self.metrics
            .set("redlock_healthy_masters", None, healthy as f64);
        self.metrics.set("redlock_quorum", None, quorum as f64);

        // 3. The alert, on changes only.
        let alert = match healthy {
            n if n > quorum => Alert::Clear,
            n if n == quorum => Alert::AtQuorum,
            _ => Alert::BelowQuorum,
        };
        if alert != self.alert {
            match alert {
                Alert::Clear => log(
                    "INFO",
                    format!("alert cleared: {healthy} of {masters} masters healthy"),
                ),
                Alert::AtQuorum => log(
                    "WARN",
                    format!(
                        "ALERT: only {healthy} of {masters} masters healthy, the quorum: \
                         one more failure and locking stops"
                    ),
                ),
                Alert::BelowQuorum => log(
                    "ERROR",
                    format!(
                        "ALERT: {healthy} of {masters} masters healthy, below the quorum of \
                         {quorum}: locking fails"
                    ),
                ),
            }
            if alert != Alert::Clear {
                self.alerts_raised += 1;
            }
            self.alert = alert;
        }

        // 4. A probe lock: can one be taken now, and where does its key
        // land? (Any lock of the application can be inspected the same way.)
        match redlock.try_lock("monitoring:probe", Duration::from_secs(1)) {
            Ok(Some(lock)) => {
                let on = |wanted: KeyState| -> Vec<&str> {
                    lock.masters()
                        .filter(|(_, state)| *state == wanted)
                        .map(|(master, _)| master)
                        .collect()
                };
                // Unconfirmed is common and harmless: the round was decided
                // before that master answered. Absent means the lock left a
                // master out (it was failing or lagging): the lock survives
                // one failure fewer until an extension brings the key there.
                let (held, unconfirmed) = (on(KeyState::Held), on(KeyState::Unconfirmed));
                let absent = on(KeyState::Absent);
                let on_masters = (masters - absent.len()) as f64;
                self.metrics
                    .set("redlock_probe_key_masters", None, on_masters);
                let level = if absent.is_empty() { "DEBUG" } else { "INFO" };
                log(
                    level,
                    format!(
                        "probe lock: held on {held:?}, unconfirmed on {unconfirmed:?}, \
                         absent on {absent:?}"
                    ),
                );
                if let Err(e) = lock.unlock() {
                    log("WARN", format!("probe lock: release failed: {e}"));
                }
            }
            Ok(None) => log("WARN", "probe lock: held by someone else"),
            Err(e) => {
                self.metrics.set("redlock_probe_key_masters", None, 0.0);
                log("ERROR", format!("probe lock failed: {e}"));
            }
        }
    }
}

/// A tiny metrics registry: gauges by name and `node` label, rendered in
/// the Prometheus text format (what a `/metrics` endpoint would serve).
#[derive(Default)]
struct Metrics {
    gauges: BTreeMap<(&'static str, String), f64>,
}

impl Metrics {
    fn set(&mut self, name: &'static str, node: Option<&str>, value: f64) {
        let labels = node.map_or_else(String::new, |node| format!("{{node=\"{node}\"}}"));
        self.gauges.insert((name, labels), value);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let mut last = "";
        for ((name, labels), value) in &self.gauges {
            if *name != last {
                let _ = writeln!(out, "# TYPE {name} gauge");
                last = name;
            }
            let _ = writeln!(out, "{name}{labels} {value}");
        }
        out
    }
}

/// A minimal logger: seconds since start, level, message, on stderr.
fn log(level: &str, message: impl Display) {
    static START: OnceLock<Instant> = OnceLock::new();
    let at = START.get_or_init(Instant::now).elapsed();
    eprintln!("{:>7.3}s {level:<5} {message}", at.as_secs_f64());
}
