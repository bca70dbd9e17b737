//! What the command leaves running in its process group (`job &`) holds
//! the lock, as under flock(1), whose lock is held until every process
//! that inherited it is gone: `redlock` renews the lock until the group is
//! empty, then releases it (issue 31, item 3: it released the lock when
//! the group's first process exited, and a second holder ran beside the
//! job). A signal that asks `redlock` to end ends what is left instead.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, is_alive, number, redlock_run, released, signal, until, Scratch};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::Cluster;

/// Starts `redlock run` with `options` on `-c 'JOB &'`, where the shell
/// writes its pid (file `shell`), and the job writes its pid (file `job`),
/// sleeps `seconds`, and writes when it ended (Unix ms).
fn start_with_a_background_job(
    cluster: &Cluster,
    scratch: &Scratch,
    options: &[&str],
    seconds: &str,
) -> Child {
    let line = format!(
        "echo $$ > {shell}; sh -c 'echo $$ > {pid}; sleep {seconds}; date +%s%3N > {ended}' &",
        shell = scratch.file("shell"),
        pid = scratch.file("job"),
        ended = scratch.file("job_ended"),
    );
    let mut args = options.to_vec();
    args.extend(["job", "-c", &line]);
    redlock_run(cluster, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock")
}

/// The job outlives the command's first process, and the lock's TTL
/// twice over: a second run on the key starts only once the job has ended,
/// and the first exits with the command's status after the job, having
/// released the lock.
#[test]
fn a_background_job_holds_the_lock_until_it_ends() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let first = start_with_a_background_job(&cluster, &scratch, &["--ttl", "2s", "-v"], "4.5");
    scratch.wait_for("job");
    let second = redlock_run(
        &cluster,
        &[
            "job",
            "-c",
            &format!("date +%s%3N > {}", scratch.file("second")),
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawning the second redlock");
    let first = collect(first, started);
    let second = collect(second, started);
    let job_ended = number(&scratch.wait_for("job_ended"));
    let second_started = number(&scratch.wait_for("second"));
    assert!(
        second_started >= job_ended,
        "the second run started {} ms before the job ended",
        job_ended - second_started
    );
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert!(
        first.stderr.contains("leaving processes in its group"),
        "{}",
        first.stderr
    );
    released(&cluster, "after both runs");
}

/// A signal that asks `redlock` to end, once only the job is left (which
/// ignores SIGINT, as a shell's background jobs do): the job gets SIGTERM,
/// the lock is released, and `redlock` exits with the command's status.
#[test]
fn a_signal_ends_what_the_command_left_behind_and_releases() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let tool = start_with_a_background_job(&cluster, &scratch, &[], "60");
    let job = number(&scratch.wait_for("job")) as u32;
    // The command's first process has exited (seen gone: a fixed pause
    // could end before a busy machine got there); redlock holds on, also
    // a moment later, when one that took that for the end would have
    // released and exited.
    let shell = number(&scratch.wait_for("shell")) as u32;
    until("the command's first process to exit", || !is_alive(shell));
    std::thread::sleep(Duration::from_millis(300));
    assert!(is_alive(tool.id()), "redlock exited while the job ran");
    assert!(cluster.total_keys() > 0, "released while the job ran");
    signal(tool.id(), libc::SIGINT);
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    until("the job to end", || !is_alive(job));
    assert_eq!(scratch.read("job_ended"), None, "the job ran to its end");
    released(&cluster, "after the signal");
}

/// The lock lost while only the job runs: the job is stopped as the
/// command would be, and `redlock` exits 75.
#[test]
fn a_lock_lost_while_the_job_runs_stops_the_job() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let tool = start_with_a_background_job(&cluster, &scratch, &["--ttl", "2s"], "60");
    let job = number(&scratch.wait_for("job")) as u32;
    for server in &cluster.servers {
        server.cmd(&["DEL", "job"]);
    }
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(done.stderr.contains("lock lost"), "{}", done.stderr);
    assert!(!is_alive(job), "the job outlived redlock");
}
