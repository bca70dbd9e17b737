//! Side-by-side benchmark of Redlock clients, in one process and one run:
//! redlock-sync ("ours"), the `rslock` and `redlock` crates, and a minimal
//! hand-written fan-out ("reference", the floor). See README.md.
//!
//! ```sh
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --rounds 10
//! ```

// The spawner the integration tests use, so that the servers are started
// (and stopped, paused, resumed) the same way everywhere.
#[allow(dead_code)]
#[path = "../../../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../../../tests/support/resp.rs"]
mod resp;
// Real Redis Clusters on loopback, started and changed (slot moves) as
// the integration tests do. (`map_or(true, ..)` there: the library's Rust
// 1.81 has no `Option::is_none_or`.)
#[allow(dead_code, clippy::unnecessary_map_or)]
#[path = "../../../tests/support/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "../../../tests/support/cluster_ops.rs"]
mod cluster_ops;
#[allow(dead_code)]
#[path = "../../../tests/support/slots.rs"]
mod slots;

mod batched;
mod clients;
mod cluster_reference;
mod measure;
mod moved;
mod reference;
mod scenario;
mod servers;
mod sets;
mod tls;
mod workers;

use clients::Kind;
use scenario::{Scenario, Settings, SCENARIOS};
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, ExitCode};
use std::time::Duration;

const USAGE: &str = "usage: peers [--rounds N] [--scenarios s1,s2,s3,s4,c1,moved,k1,k8,k32,k64,m1] \
                     [--clients reference,ref-notify,ref-batch,ours,ours-scripts,ours-tls,rslock,redlock] \
                     [--nodes HOST:PORT,...] [--moved-trials N] [--node-timeout-ms N]";

/// The id of the MOVED measurement (not a table of rounds: see `moved`).
const MOVED: &str = "moved";
/// Trials per variant of the MOVED measurement, unless `--moved-trials`.
const MOVED_TRIALS: usize = 15;

/// TTL of every lock (long: no key may expire during a pair).
const TTL: Duration = Duration::from_secs(10);
/// Per-master timeout, for the clients that take one (ours, reference).
const NODE_TIMEOUT: Duration = Duration::from_millis(50);

fn main() -> ExitCode {
    let (settings, scenarios, moved_trials) = match parse_options() {
        Ok(parsed) => parsed,
        Err(message) if message == USAGE => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    print_header(&settings, &scenarios);
    let mut tables = Vec::new();
    for scenario in scenarios {
        eprintln!("{}: starting", scenario.id);
        // A panic in one scenario (its servers and any paused master are
        // cleaned up by their guards) must not cost the others.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| scenario.run(&settings)))
            .unwrap_or_else(|_| Err("panicked (see above)".into()));
        tables.push((scenario, outcome));
    }
    println!();
    for (scenario, outcome) in &tables {
        let title = scenario.title(&settings);
        match outcome {
            Ok(runs) => measure::print_table(
                &title,
                scenario.metrics,
                runs,
                scenario.baseline,
                scenario.also,
            ),
            Err(why) => println!("{title}\n  {why}\n"),
        }
    }
    if !tables.is_empty() {
        print_legend();
    }
    if let Some(trials) = moved_trials {
        eprintln!("{MOVED}: starting");
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| moved::run(&settings, trials)))
            .unwrap_or_else(|_| Err("panicked (see above)".into()));
        println!();
        if let Err(why) = outcome {
            println!("MOVED\n  {why}\n");
        }
    }
    ExitCode::SUCCESS
}

/// The settings, the table scenarios to run, and the MOVED measurement's
/// trials if it runs.
type Options = (Settings, Vec<&'static Scenario>, Option<usize>);

fn parse_options() -> Result<Options, String> {
    let mut settings = Settings {
        rounds: 10,
        clients: None,
        nodes: None,
        ttl: TTL,
        node_timeout: NODE_TIMEOUT,
    };
    let mut scenarios: Vec<&Scenario> = SCENARIOS.iter().filter(|s| s.by_default).collect();
    let mut moved = false;
    let mut moved_trials = MOVED_TRIALS;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let list = || {
            value
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
        };
        match flag.as_str() {
            "--rounds" => {
                settings.rounds = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--rounds: not a positive number: {value}"))?;
            }
            "--scenarios" => {
                moved = list().any(|id| id.eq_ignore_ascii_case(MOVED));
                scenarios = list()
                    .filter(|id| !id.eq_ignore_ascii_case(MOVED))
                    .map(|id| {
                        let id = id.to_lowercase();
                        SCENARIOS
                            .iter()
                            .find(|s| s.id == id)
                            .ok_or_else(|| format!("--scenarios: unknown scenario {id}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--node-timeout-ms" => {
                // Longer than the default under valgrind, say.
                settings.node_timeout = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| format!("--node-timeout-ms: not a positive number: {value}"))?;
            }
            "--moved-trials" => {
                moved_trials = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--moved-trials: not a positive number: {value}"))?;
            }
            "--clients" => {
                settings.clients = Some(
                    list()
                        .map(|name| {
                            Kind::parse(name)
                                .ok_or_else(|| format!("--clients: unknown client {name}"))
                        })
                        .collect::<Result<_, _>>()?,
                );
            }
            "--nodes" => {
                // `redis://` is accepted too, as the other tools take URLs.
                let nodes: Vec<String> = list()
                    .map(|node| {
                        node.trim_start_matches("redis://")
                            .trim_end_matches('/')
                            .to_string()
                    })
                    .collect();
                settings.nodes = Some(nodes);
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if settings.clients.as_ref().is_some_and(Vec::is_empty)
        || (scenarios.is_empty() && !moved)
        || settings.nodes.as_ref().is_some_and(Vec::is_empty)
    {
        return Err(format!("nothing to run\n{USAGE}"));
    }
    Ok((settings, scenarios, moved.then_some(moved_trials)))
}

/// What the figures depend on: the servers and the machine.
fn print_header(settings: &Settings, scenarios: &[&Scenario]) {
    println!(
        "Redlock clients side by side (figures vary with the machine: compare within one run)"
    );
    match &settings.nodes {
        Some(nodes) => println!("servers: given with --nodes: {}", nodes.join(",")),
        None => println!(
            "servers: {} (started per scenario, on loopback, no persistence)",
            redis::server_version().unwrap_or_else(|| "none found".into())
        ),
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("machine: {cpus} CPUs, kernel {}", kernel_release());
    println!(
        "locks: TTL {:?}, one attempt per pair; node timeout {:?} for reference and ours \
         (the others have no such setting)",
        settings.ttl, settings.node_timeout
    );
    println!("clients:");
    let mut shown = Vec::new();
    for kind in scenarios.iter().flat_map(|s| s.clients(settings)) {
        if !shown.contains(&kind) {
            println!("  {:<10} {}", kind.name(), kind.description());
            shown.push(kind);
        }
    }
}

/// `uname -r`, or "?".
fn kernel_release() -> String {
    Command::new("uname")
        .arg("-r")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map_or_else(
            || "?".into(),
            |output| String::from_utf8_lossy(&output.stdout).trim().to_string(),
        )
}

fn print_legend() {
    println!(
        "Each figure is the median over rounds of a per-round value (latency percentiles are per \
         round).\n(x.xx×) is the median over rounds of the client's value divided by the \
         reference's in the same round\n(in K1-K64: ref-notify's; the lines under those tables: \
         ref-batch's):\nfor latencies above 1 is slower than the reference, for \
         pairs/s below 1 is fewer.\nAcquire latencies include failed attempts; pairs/s counts \
         successful pairs (acquired and released).\nrslock and redlock report no release \
         failures: their release returns nothing."
    );
}
