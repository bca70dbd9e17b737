//! Job control without a terminal: SIGTSTP sent to `redlock` stops its
//! command's group and then `redlock`; when `redlock` is continued, it
//! reads the lock before anything else, and continues the command only if
//! the lock's validity is not over (issue 31, item 2). (With a terminal,
//! Ctrl-Z: `terminal.rs`.)

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{
    appended, appender, collect, is_alive, is_stopped, number, redlock_run, released, signal,
    until, Scratch,
};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};
use support::Cluster;

/// The warning for a command that outlives its SIGKILL.
const NO_DEATH: &str = "does not die of SIGKILL";

/// Starts `redlock run` with `options` on [`appender`].
fn start_appending(cluster: &Cluster, scratch: &Scratch, options: &[&str]) -> Child {
    let appender = appender(scratch);
    let mut args = options.to_vec();
    args.extend(["job", &appender]);
    redlock_run(cluster, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock")
}

/// Sends SIGTSTP to `redlock` and waits until it and its command are
/// stopped; returns the command's pid.
fn stop_both(tool: &Child, scratch: &Scratch) -> u32 {
    let pid = number(&scratch.wait_for("pid")) as u32;
    until("the command to write", || appended(scratch) > 0);
    signal(tool.id(), libc::SIGTSTP);
    until("the command and redlock to stop", || {
        is_stopped(pid) && is_stopped(tool.id())
    });
    pid
}

#[test]
fn continued_after_the_validity_the_stopped_command_is_killed_without_running_again() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let tool = start_appending(&cluster, &scratch, &["--ttl", "2s"]);
    let pid = stop_both(&tool, &scratch);
    // The validity ends before the masters expire the keys.
    until("the keys to expire on every master", || {
        cluster.total_keys() == 0
    });
    let before = appended(&scratch);
    signal(tool.id(), libc::SIGCONT);
    let done = collect(tool, started);
    assert_eq!(
        appended(&scratch),
        before,
        "the command ran after redlock was continued"
    );
    assert!(!is_alive(pid));
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(
        done.stderr.contains("killed the stopped command (SIGKILL)"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains(NO_DEATH), "{}", done.stderr);
}

#[test]
fn continued_within_the_validity_the_command_runs_on() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    // The default TTL, 30 s: at least 10 s of validity while renewals go
    // on, far above the stop lead (6 s) after a short stop.
    let tool = start_appending(&cluster, &scratch, &[]);
    stop_both(&tool, &scratch);
    thread::sleep(Duration::from_millis(300));
    let before = appended(&scratch);
    signal(tool.id(), libc::SIGCONT);
    until("the command to write again", || appended(&scratch) > before);
    std::fs::write(scratch.file("end"), "").unwrap();
    let done = collect(tool, started);
    assert_eq!(
        done.status.code(),
        Some(4),
        "the command's status: {done:?}"
    );
    assert_eq!(done.stderr, "", "nothing to say");
    released(&cluster, "after the command ended");
}
