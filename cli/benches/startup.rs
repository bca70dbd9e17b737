//! What `redlock run` adds around a command, next to `flock(1)` on the same
//! machine: the time from starting the tool to the command's first
//! instruction, and from the command's exit to the tool's.
//!
//! ```sh
//! cargo bench -p redlock-cli --bench startup            # 300 runs of each
//! cargo bench -p redlock-cli --bench startup -- 1000    # or as many as asked
//! # Beside another build of the tool (an older commit's, say), in one run:
//! REDLOCK_STARTUP_BASELINE=/path/to/old/redlock cargo bench -p redlock-cli --bench startup
//! ```
//!
//! The command is this program again, in its stamp mode: it writes the
//! wall-clock time as its `main` starts and again just before it exits.
//! Each run spawns the tool (or the command directly, for the floor),
//! notes the time before the spawn and after the tool is reaped, and takes
//! the differences with the stamps. `redlock` locks on 3 local masters
//! (Redis started here, as the tests do), so its figures include one
//! acquisition and one release round on loopback; `flock` locks a file.
//!
//! A second table times whole processes that start, read their command
//! line and end without a lock: `redlock --version`, and `redlock status
//! KEY` without masters (a configuration error, 78, once the command line
//! and the environment are read), next to `true`: what the command line's
//! parser costs each start.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// Set in the command's environment: where it writes its stamps.
const STAMP_VARIABLE: &str = "REDLOCK_STARTUP_STAMP";

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

fn main() {
    if let Some(path) = std::env::var_os(STAMP_VARIABLE) {
        let first = now_ns();
        let text = format!("{first} {}\n", now_ns());
        fs::write(path, text).expect("writing the stamps");
        return;
    }
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let cluster = support::Cluster::start(3);
    let dir = std::env::temp_dir().join(format!("redlock-startup-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("creating a scratch directory");
    let stamp = dir.join("stamp");
    let lock_file = dir.join("flock");
    let me = std::env::current_exe().expect("this program's path");
    let redlock = env!("CARGO_BIN_EXE_redlock");
    let nodes = cluster.urls().join(",");

    let baseline = std::env::var("REDLOCK_STARTUP_BASELINE").ok();
    let mut redlocks = vec![("redlock", redlock.to_string())];
    if let Some(path) = &baseline {
        redlocks.push(("baseline", path.clone()));
    }
    let mut tools: Vec<(String, Vec<String>)> = vec![
        ("the command alone".into(), vec![]),
        (
            "flock FILE".into(),
            vec!["flock".into(), lock_file.display().to_string()],
        ),
    ];
    for (name, path) in &redlocks {
        tools.push((
            format!("{name} run (3 masters)"),
            vec![
                path.clone(),
                "run".into(),
                "--nodes".into(),
                nodes.clone(),
                "startup".into(),
                "--".into(),
            ],
        ));
    }
    let mut samples: Vec<(Vec<u128>, Vec<u128>)> = vec![(Vec::new(), Vec::new()); tools.len()];
    for _ in 0..runs {
        // Interleaved, so that a busy moment on the machine hits all alike.
        for ((_, prefix), (to_first, to_exit)) in tools.iter().zip(samples.iter_mut()) {
            let (program, args) = match prefix.split_first() {
                Some((program, args)) => (program.as_str(), args.to_vec()),
                None => (me.to_str().expect("UTF-8 path"), vec![]),
            };
            let mut command = Command::new(program);
            command.args(&args);
            if !prefix.is_empty() {
                command.arg(&me);
            }
            let _ = fs::remove_file(&stamp);
            command
                .env(STAMP_VARIABLE, &stamp)
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            let started = now_ns();
            let status = command.status().expect("running the tool");
            let ended = now_ns();
            assert!(status.success(), "{program}: {status}");
            let text = fs::read_to_string(&stamp).expect("the stamps");
            let (first, last) = text.trim().split_once(' ').expect("two stamps");
            let first: u128 = first.parse().expect("a time");
            let last: u128 = last.parse().expect("a time");
            to_first.push(first - started);
            to_exit.push(ended - last);
        }
    }
    let _ = fs::remove_dir_all(&dir);
    let whole = whole_processes(&redlocks, runs);
    println!(
        "{runs} runs each, microseconds (median / p90 / p99); {}",
        support::server_version().unwrap_or_default()
    );
    println!(
        "{:<26} {:>26} {:>26}",
        "", "start -> first instruction", "command exit -> tool exit"
    );
    for ((name, _), (to_first, to_exit)) in tools.iter().zip(samples.iter_mut()) {
        println!(
            "{name:<26} {:>26} {:>26}",
            summary(to_first),
            summary(to_exit)
        );
    }
    println!();
    println!("{:<32} {:>26}", "", "whole process");
    for (name, mut times) in whole {
        println!("{name:<32} {:>26}", summary(&mut times));
    }
}

/// Times whole processes that read their command line and end: `true`,
/// then each `redlock` with `--version`, and with `status KEY` and no
/// masters (it ends at the configuration, status 78). Interleaved as
/// above; returns each one's name and samples (nanoseconds, spawn to
/// reaped).
fn whole_processes(redlocks: &[(&str, String)], runs: usize) -> Vec<(String, Vec<u128>)> {
    let mut commands: Vec<(String, Vec<String>)> = vec![("true".into(), vec!["true".into()])];
    for (name, path) in redlocks {
        commands.push((
            format!("{name} --version"),
            vec![path.clone(), "--version".into()],
        ));
        commands.push((
            format!("{name} status (no masters)"),
            vec![path.clone(), "status".into(), "startup".into()],
        ));
    }
    let mut samples: Vec<Vec<u128>> = vec![Vec::new(); commands.len()];
    for _ in 0..runs {
        for ((_, words), times) in commands.iter().zip(samples.iter_mut()) {
            let mut command = Command::new(&words[0]);
            command
                .args(&words[1..])
                .env_remove("REDLOCK_NODES")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let started = now_ns();
            let status = command.status().expect("running the tool");
            times.push(now_ns() - started);
            assert!(matches!(status.code(), Some(0 | 78)), "{words:?}: {status}");
        }
    }
    commands
        .into_iter()
        .map(|(name, _)| name)
        .zip(samples)
        .collect()
}

/// `median / p90 / p99` in microseconds.
fn summary(samples: &mut [u128]) -> String {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize] / 1000;
    format!("{} / {} / {}", at(0.5), at(0.9), at(0.99))
}
