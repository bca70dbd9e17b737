//! Time windows of back-to-back pairs, the figures taken from each, and the
//! tables that sum the rounds up.

use crate::clients::{Client, Kind, Pair};
use crate::servers::Sample;
use std::time::{Duration, Instant};

/// Samples kept per window without reallocating while measuring (more fit;
/// the vectors then grow as usual).
const SAMPLES_RESERVED: usize = 1 << 16;

/// What one client did in one time window.
#[derive(Debug, Default)]
pub struct Window {
    /// Every acquire attempt's latency, failed ones included.
    acquire: Vec<Duration>,
    /// Every release's latency.
    release: Vec<Duration>,
    ok: u64,
    failed: u64,
    elapsed: Duration,
}

impl Window {
    /// An empty window with room for `samples` pairs (more fit; the vectors
    /// then grow as usual).
    pub fn with_capacity(samples: usize) -> Window {
        Window {
            acquire: Vec::with_capacity(samples),
            release: Vec::with_capacity(samples),
            ..Window::default()
        }
    }

    /// Runs pairs on `client` back to back for `length` (at least one pair),
    /// with a new name from `names` each time, round robin.
    pub fn run(
        client: &mut dyn Client,
        names: &[String],
        ttl: Duration,
        length: Duration,
    ) -> Window {
        let mut window = Window::with_capacity(SAMPLES_RESERVED);
        let started = Instant::now();
        for name in names.iter().cycle() {
            window.record(client.pair(name, ttl));
            if started.elapsed() >= length || client.hangs() {
                break;
            }
        }
        window.elapsed = started.elapsed();
        window
    }

    /// As [`Window::run`], for one of `workers` workers that run side by
    /// side and share a client: `pair` makes one pair on it.
    pub fn run_shared(
        mut pair: impl FnMut(&str, Duration) -> Pair,
        names: &[String],
        ttl: Duration,
        length: Duration,
        workers: usize,
    ) -> Window {
        let mut window = Window::with_capacity(SAMPLES_RESERVED / workers.max(1));
        let started = Instant::now();
        for name in names.iter().cycle() {
            window.record(pair(name, ttl));
            if started.elapsed() >= length {
                break;
            }
        }
        window.finish(started);
        window
    }

    /// Adds one pair's figures.
    pub fn record(&mut self, pair: Pair) {
        self.acquire.push(pair.acquire);
        self.release.extend(pair.release);
        if pair.ok {
            self.ok += 1;
        } else {
            self.failed += 1;
        }
    }

    /// The window, which began at `started`, ends now.
    pub fn finish(&mut self, started: Instant) {
        self.elapsed = started.elapsed();
    }

    /// Windows that ran side by side (one per thread) as one: their samples
    /// together, over the longest of their durations.
    pub fn merge(windows: Vec<Window>) -> Window {
        let mut all = Window::default();
        for window in windows {
            all.acquire.extend(window.acquire);
            all.release.extend(window.release);
            all.ok += window.ok;
            all.failed += window.failed;
            all.elapsed = all.elapsed.max(window.elapsed);
        }
        all
    }

    /// The window's figures.
    pub fn stats(mut self) -> RoundStats {
        self.acquire.sort_unstable();
        self.release.sort_unstable();
        let attempts = self.ok + self.failed;
        RoundStats {
            acquire_p50: percentile_us(&self.acquire, 0.50),
            acquire_p99: percentile_us(&self.acquire, 0.99),
            release_p50: percentile_us(&self.release, 0.50),
            pairs_per_sec: Some(self.ok as f64 / self.elapsed.as_secs_f64()),
            success_pct: (attempts > 0).then(|| 100.0 * self.ok as f64 / attempts as f64),
            server_cpu_per_pair: None,
            client_cpu_per_pair: None,
            ok: self.ok,
            failed: self.failed,
        }
    }
}

/// One client's figures for one round. A latency is `None` without samples.
#[derive(Clone, Copy, Debug)]
pub struct RoundStats {
    acquire_p50: Option<f64>,
    acquire_p99: Option<f64>,
    release_p50: Option<f64>,
    /// Successful pairs (acquired and released) per second.
    pairs_per_sec: Option<f64>,
    success_pct: Option<f64>,
    /// The servers' CPU time (all of them, `INFO cpu`) per pair attempted,
    /// in µs; only in scenarios that measure it.
    server_cpu_per_pair: Option<f64>,
    /// This process's CPU time (every thread, `getrusage`) per pair
    /// attempted, in µs; only in scenarios that measure it.
    client_cpu_per_pair: Option<f64>,
    ok: u64,
    failed: u64,
}

impl RoundStats {
    /// Pairs attempted in the round.
    pub fn attempts(&self) -> u64 {
        self.ok + self.failed
    }

    /// Records that the servers used `cpu_us` of CPU time in the round.
    pub fn set_server_cpu(&mut self, cpu_us: f64) {
        self.server_cpu_per_pair = (self.attempts() > 0).then(|| cpu_us / self.attempts() as f64);
    }

    /// Records that this process used `cpu_us` of CPU time in the round.
    pub fn set_client_cpu(&mut self, cpu_us: f64) {
        self.client_cpu_per_pair = (self.attempts() > 0).then(|| cpu_us / self.attempts() as f64);
    }
}

/// A column of a table.
#[derive(Clone, Copy, Debug)]
pub enum Metric {
    AcquireP50,
    AcquireP99,
    ReleaseP50,
    PairsPerSec,
    SuccessPct,
    /// The servers' CPU time per pair (see `RoundStats`).
    ServerCpuPerPair,
    /// This process's CPU time per pair (see `RoundStats`).
    ClientCpuPerPair,
}

impl Metric {
    fn header(self) -> &'static str {
        match self {
            Metric::AcquireP50 => "acquire p50 µs",
            Metric::AcquireP99 => "acquire p99 µs",
            Metric::ReleaseP50 => "release p50 µs",
            Metric::PairsPerSec => "pairs/s",
            Metric::SuccessPct => "success %",
            Metric::ServerCpuPerPair => "server CPU µs/pair",
            Metric::ClientCpuPerPair => "client CPU µs/pair",
        }
    }

    fn of(self, stats: &RoundStats) -> Option<f64> {
        match self {
            Metric::AcquireP50 => stats.acquire_p50,
            Metric::AcquireP99 => stats.acquire_p99,
            Metric::ReleaseP50 => stats.release_p50,
            Metric::PairsPerSec => stats.pairs_per_sec,
            Metric::SuccessPct => stats.success_pct,
            Metric::ServerCpuPerPair => stats.server_cpu_per_pair,
            Metric::ClientCpuPerPair => stats.client_cpu_per_pair,
        }
    }
}

/// One client's rounds in one scenario.
#[derive(Debug)]
pub struct ClientRun {
    pub kind: Kind,
    /// Indexed by round; `None` for a round the client did not run.
    pub rounds: Vec<Option<RoundStats>>,
    /// Shown after the figures, or instead of them if no round ran.
    pub note: Option<String>,
    /// What the servers did during the client's windows, summed over the
    /// rounds (scenarios that measure it).
    pub servers: Option<Sample>,
}

/// Prints a scenario's table: per client and metric, the median over rounds
/// and, in parentheses, the median over rounds of its ratio to the
/// `baseline` client's figure of the same round; then, if `also` ran, each
/// other client's paired ratios to it on a line of their own.
pub fn print_table(
    title: &str,
    metrics: &[Metric],
    runs: &[ClientRun],
    baseline: Kind,
    also: Option<Kind>,
) {
    const NAME: usize = 10;
    const CELL: usize = 20;
    println!("{title}");
    let mut header = format!("  {:<NAME$}", "client");
    for metric in metrics {
        header += &format!("{:>CELL$}", metric.header());
    }
    println!("{header}{:>CELL$}", "failed/pairs");
    let reference = runs.iter().find(|run| run.kind == baseline);
    for run in runs {
        let mut line = format!("  {:<NAME$}", run.kind.name());
        let ran = run.rounds.iter().flatten().count() > 0;
        if ran {
            for &metric in metrics {
                line += &format!("{:>CELL$}", cell(metric, run, reference));
            }
            let (ok, failed) = run
                .rounds
                .iter()
                .flatten()
                .fold((0, 0), |(ok, failed), r| (ok + r.ok, failed + r.failed));
            line += &format!("{:>CELL$}", format!("{failed}/{}", ok + failed));
        }
        if let Some(note) = &run.note {
            line += &format!("  {note}");
        }
        println!("{line}");
    }
    if let Some(other) = also.and_then(|also| runs.iter().find(|run| run.kind == also)) {
        print_ratios_to(other, metrics, runs);
    }
    let with_servers: Vec<_> = runs
        .iter()
        .filter_map(|run| Some((run, run.servers.as_ref()?)))
        .collect();
    if !with_servers.is_empty() {
        println!("  server commands per pair attempted (INFO commandstats, all servers, scripts' calls included):");
        for (run, servers) in with_servers {
            let attempts = run.rounds.iter().flatten().map(RoundStats::attempts).sum();
            println!(
                "    {:<NAME$} {}",
                run.kind.name(),
                servers.calls_per_pair(attempts)
            );
            if !servers.errors.is_empty() {
                println!("    {:<NAME$} error replies: {:?}", "", servers.errors);
            }
        }
    }
    println!();
}

/// Per client, the median over rounds of its figures over `other`'s of
/// the same round, metric by metric.
fn print_ratios_to(other: &ClientRun, metrics: &[Metric], runs: &[ClientRun]) {
    const NAME: usize = 10;
    println!(
        "  paired ratios to {} (median over rounds of the per-round ratio):",
        other.kind.name()
    );
    for run in runs.iter().filter(|run| run.kind != other.kind) {
        let ratios: Vec<String> = metrics
            .iter()
            .filter_map(|&metric| {
                let ratio = median(paired_ratios(metric, run, other))?;
                Some(format!("{} {}×", metric.header(), format_value(ratio)))
            })
            .collect();
        if !ratios.is_empty() {
            println!("    {:<NAME$} {}", run.kind.name(), ratios.join(", "));
        }
    }
}

/// "median (ratio×)" for one client and metric; the ratio is left out for
/// the reference itself or when no round has both figures.
fn cell(metric: Metric, run: &ClientRun, reference: Option<&ClientRun>) -> String {
    let values = run.rounds.iter().flatten().filter_map(|r| metric.of(r));
    let Some(value) = median(values.collect()) else {
        return "-".into();
    };
    let ratio = reference
        .filter(|reference| reference.kind != run.kind)
        .and_then(|reference| median(paired_ratios(metric, run, reference)));
    match ratio {
        Some(ratio) => format!("{} ({}×)", format_value(value), format_value(ratio)),
        None => format_value(value),
    }
}

/// `run`'s figure over the reference's, for every round where both ran.
fn paired_ratios(metric: Metric, run: &ClientRun, reference: &ClientRun) -> Vec<f64> {
    run.rounds
        .iter()
        .zip(&reference.rounds)
        .filter_map(|(ours, theirs)| {
            let (ours, theirs) = (metric.of(ours.as_ref()?)?, metric.of(theirs.as_ref()?)?);
            (theirs > 0.0).then(|| ours / theirs)
        })
        .collect()
}

/// Three or four significant figures, without exponent.
fn format_value(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        _ => format!("{value:.2}"),
    }
}

/// The nearest-rank percentile of sorted samples, in microseconds.
fn percentile_us(sorted: &[Duration], fraction: f64) -> Option<f64> {
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    let sample = sorted.get(rank.saturating_sub(1))?;
    Some(sample.as_secs_f64() * 1e6)
}

/// The median (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_unstable_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[middle]),
        _ => Some((values[middle - 1] + values[middle]) / 2.0),
    }
}

/// This process's CPU time so far (user and system, every thread), in µs.
pub fn process_cpu_us() -> f64 {
    // SAFETY: `usage` is a live, writable rusage that getrusage(2) fills;
    // all-zero bytes are a valid value of this plain C struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&samples, 0.50), Some(50.0));
        assert_eq!(percentile_us(&samples, 0.99), Some(99.0));
        assert_eq!(percentile_us(&samples[..1], 0.99), Some(1.0));
        assert_eq!(percentile_us(&[], 0.50), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
    }
}
