//! Concurrent `redlock run`s of one key never run their commands at the
//! same time. The referee is the file system: each command makes a
//! directory on entry (mkdir(2) fails if it exists: only one can) and
//! removes it on exit, and writes down any entry that found it there.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, redlock_run, released, Scratch};
use std::process::Stdio;
use std::time::Instant;
use support::Cluster;

/// Starts `n` runs of one key at once, each holding it ~50 ms, and checks
/// that all ran, one at a time.
fn runs_never_overlap(n: usize) {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let script = format!(
        "mkdir {inside} 2>/dev/null || echo overlap >> {violations}; \
         echo run >> {runs}; sleep 0.05; rmdir {inside}",
        inside = scratch.file("inside"),
        violations = scratch.file("violations"),
        runs = scratch.file("runs"),
    );
    let started = Instant::now();
    let tools: Vec<_> = (0..n)
        .map(|_| {
            redlock_run(&cluster, &["shared", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawning redlock")
        })
        .collect();
    for tool in tools {
        let done = collect(tool, started);
        assert!(done.status.success(), "{done:?}");
    }
    assert_eq!(scratch.read("violations"), None, "two commands overlapped");
    assert_eq!(scratch.read("runs").map(|r| r.lines().count()), Some(n));
    released(&cluster, "every lock released");
}

#[test]
fn two_concurrent_runs_never_overlap() {
    runs_never_overlap(2);
}

#[test]
fn ten_concurrent_runs_never_overlap() {
    runs_never_overlap(10);
}
