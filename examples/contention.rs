//! The main demo: several threads contend for one lock for a few seconds,
//! while an independent referee checks that no two of them are ever inside
//! the critical section at once.
//!
//! ```sh
//! cargo run --release --example contention                 # 5 local masters, 8 threads, 5 s
//! cargo run --release --example contention -- --masters 3 --threads 4 --seconds 10
//! cargo run --release --example contention -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! cargo run --release --example contention -- --clusters   # 3 local clusters of 3 masters
//! cargo run --release --example contention -- --cluster redis://10.0.1.1:7000 --cluster redis://10.0.2.1:7000 --nodes redis://10.0.3.1:6379
//! ```
//!
//! Without `--nodes` or `--cluster`, it starts its own `redis-server`
//! processes on free loopback ports (no persistence) and stops them however
//! it ends: standalone masters, or with `--clusters` Redis Clusters (each
//! one voter, whatever its number of masters: `Builder::cluster`), joined
//! with `redis-cli --cluster create`.
//!
//! The referee does not trust the lock: it is a slot in this process that a
//! holder fills on entry (with its id and the end of its validity) and
//! empties on exit. Entering while the slot names another holder whose
//! validity has not run out is a violation: two holders inside their
//! validity at once. The program exits with status 1 if there was any.
//!
//! What to copy: `contend`, one thread's loop of `lock`, work, `unlock`
//! (without the referee, which only checks the lock). Demo scaffolding:
//! the options, the local servers (`local`, `examples/support/local.rs`),
//! the referee and the figures.

// Demo scaffolding: local servers (`--nodes URL,...` and `--cluster
// URL,...` use yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::Redlock;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: contention [--masters N] [--threads N] [--seconds N] [--ttl-ms N] \
                     [--hold-us N] [--nodes URL,URL,...]
       contention --clusters [--masters N] [--shards N] [OPTIONS]   (N local clusters: 3)
       contention --cluster URL,URL,... [--cluster URL,...] [--nodes URL,...] [OPTIONS]";

struct Options {
    /// The number of local voters: masters, or clusters with `--clusters`
    /// (`None`: 5 masters, 3 clusters).
    masters: Option<usize>,
    /// Local clusters instead of masters.
    clusters: bool,
    /// Masters per local cluster.
    shards: usize,
    threads: usize,
    duration: Duration,
    ttl: Duration,
    hold: Duration,
    nodes: Option<Vec<String>>,
    /// Existing clusters, each by the URLs of some of its nodes.
    cluster_seeds: Vec<Vec<String>>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        masters: None,
        clusters: false,
        shards: 3,
        threads: 8,
        duration: Duration::from_secs(5),
        ttl: Duration::from_secs(2),
        hold: Duration::from_micros(50),
        nodes: None,
        cluster_seeds: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        if flag == "--clusters" {
            options.clusters = true;
            continue;
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--masters" => options.masters = Some(number()?.clamp(1, 15) as usize),
            "--shards" => options.shards = number()?.clamp(3, 15) as usize,
            "--threads" => options.threads = number()?.clamp(1, 256) as usize,
            "--seconds" => options.duration = Duration::from_secs(number()?.clamp(1, 3600)),
            "--ttl-ms" => options.ttl = Duration::from_millis(number()?.max(1)),
            "--hold-us" => options.hold = Duration::from_micros(number()?),
            "--nodes" => options.nodes = Some(value.split(',').map(str::to_string).collect()),
            "--cluster" => options
                .cluster_seeds
                .push(value.split(',').map(str::to_string).collect()),
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if options.clusters && (options.nodes.is_some() || !options.cluster_seeds.is_empty()) {
        return Err(format!(
            "--clusters starts local clusters: it goes without --nodes and --cluster\n{USAGE}"
        ));
    }
    Ok(options)
}

/// What every thread reports.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: usize,
    last_error: Option<String>,
}

/// The referee: who is inside the critical section, and until when their
/// lock is valid.
struct Referee {
    holder: Mutex<Option<(u64, Instant)>>,
    violations: AtomicUsize,
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };

    // Local servers, unless existing ones were named. They stop when
    // `_servers` and `_clusters` are dropped at the end of main (or with
    // this process).
    let mut urls = options.nodes.clone().unwrap_or_default();
    let mut cluster_seeds = options.cluster_seeds.clone();
    let (mut _servers, mut _clusters) = (Vec::new(), None);
    let named = options.nodes.is_some() || !cluster_seeds.is_empty();
    if !named && options.clusters {
        let (count, shards) = (options.masters.unwrap_or(3), options.shards);
        match local::start_clusters(count, shards) {
            Ok(clusters) => {
                println!(
                    "{count} local clusters of {shards} masters each ({})",
                    local::server_version()
                );
                cluster_seeds = clusters.seeds();
                _clusters = Some(clusters);
            }
            Err(e) => {
                eprintln!("{e}; or pass --cluster URL,...");
                return ExitCode::from(2);
            }
        }
    } else if !named {
        match local::start_servers(options.masters.unwrap_or(5)) {
            Ok(servers) => {
                println!(
                    "{} local masters ({})",
                    servers.len(),
                    local::server_version()
                );
                urls = servers.iter().map(local::Server::url).collect();
                _servers = servers;
            }
            Err(e) => {
                eprintln!("{e}; or pass --nodes URL,...");
                return ExitCode::from(2);
            }
        }
    }

    let builder = cluster_seeds
        .iter()
        .fold(Redlock::builder(), |builder, seeds| builder.cluster(seeds));
    let redlock = match builder
        .nodes(&urls)
        // A thread that finds the lock held waits in `lock()`, woken by the
        // release (not polling), for as long as the run lasts.
        .lock_wait(options.duration + Duration::from_secs(10))
        .build()
    {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let voters = match (cluster_seeds.len(), urls.len()) {
        (0, masters) => format!("{masters} masters"),
        (clusters, 0) => format!("{clusters} clusters"),
        (clusters, masters) => format!("{clusters} clusters and {masters} masters"),
    };
    println!(
        "{} threads contending for one lock on {voters} (quorum {}) for {:?}, TTL {:?}",
        options.threads,
        redlock.quorum(),
        options.duration,
        options.ttl
    );
    for seeds in &cluster_seeds {
        println!("  cluster {}", seeds.join(" "));
    }
    for url in &urls {
        println!("  master {url}");
    }

    let referee = Arc::new(Referee {
        holder: Mutex::new(None),
        violations: AtomicUsize::new(0),
    });
    let end = Instant::now() + options.duration;
    let started = Instant::now();
    let workers: Vec<_> = (1..=options.threads as u64)
        .map(|id| {
            let (redlock, referee) = (redlock.clone(), referee.clone());
            let (ttl, hold) = (options.ttl, options.hold);
            thread::spawn(move || contend(id, &redlock, &referee, ttl, hold, end))
        })
        .collect();
    let mut all = Tally::default();
    for worker in workers {
        let tally = worker.join().expect("worker thread panicked");
        all.latencies.extend(tally.latencies);
        all.errors += tally.errors;
        all.last_error = tally.last_error.or(all.last_error);
    }
    let elapsed = started.elapsed();

    all.latencies.sort_unstable();
    let percentile = |p: f64| {
        let rank =
            ((p * all.latencies.len() as f64).ceil() as usize).clamp(1, all.latencies.len().max(1));
        all.latencies.get(rank - 1).copied().unwrap_or_default()
    };
    let violations = referee.violations.load(Ordering::SeqCst);
    println!("acquisitions: {}", all.latencies.len());
    println!(
        "acquisitions per second: {:.0}",
        all.latencies.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "acquire latency: p50 {:?}, p99 {:?}",
        percentile(0.50),
        percentile(0.99)
    );
    println!("failed lock calls: {}", all.errors);
    if let Some(e) = &all.last_error {
        println!("  last error: {e}");
    }
    println!("violations: {violations}");
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One thread: lock, hold for `hold` under the referee's eye, unlock, repeat.
fn contend(
    id: u64,
    redlock: &Redlock,
    referee: &Referee,
    ttl: Duration,
    hold: Duration,
    end: Instant,
) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < end {
        let asked = Instant::now();
        let lock = match redlock.lock("contention-demo", ttl) {
            Ok(lock) => lock,
            Err(e) => {
                tally.errors += 1;
                tally.last_error = Some(e.to_string());
                continue;
            }
        };
        tally.latencies.push(asked.elapsed());

        {
            let mut holder = referee.holder.lock().expect("referee");
            if let Some((other, valid_until)) = *holder {
                if Instant::now() < valid_until {
                    eprintln!("violation: thread {id} got the lock while thread {other} held it");
                    referee.violations.fetch_add(1, Ordering::SeqCst);
                }
            }
            *holder = Some((id, lock.valid_until()));
        }
        let until = Instant::now() + hold;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        {
            let mut holder = referee.holder.lock().expect("referee");
            if matches!(*holder, Some((who, _)) if who == id) {
                *holder = None;
            }
        }
        if let Err(e) = lock.unlock() {
            tally.errors += 1;
            tally.last_error = Some(e.to_string());
        }
    }
    tally
}
