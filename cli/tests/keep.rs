//! `redlock run --keep`: when the command ends, the key stays on the masters
//! until one TTL after the acquisition (or, once renewed, for the rest of
//! its renewed TTL), so that a second run within the period finds it held;
//! a command that outlived the TTL, one that never started, and a lock that
//! could not be kept leave no key. The exit status stays the command's.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, finish, number, redlock_run, until, Scratch};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::Cluster;

const KEY: &str = "report:hourly";

/// `PTTL KEY` on every master that runs: milliseconds left, -2 if missing.
fn pttls(cluster: &Cluster) -> Vec<i64> {
    cluster
        .servers
        .iter()
        .filter(|server| server.is_running())
        .map(|server| server.pttl(KEY.as_bytes()))
        .collect()
}

/// The milliseconds left on the masters that hold the key, checking that
/// they are a quorum of the cluster's.
fn kept_on_a_quorum(cluster: &Cluster) -> Vec<i64> {
    let all = pttls(cluster);
    let held: Vec<i64> = all.iter().copied().filter(|&ms| ms > 0).collect();
    assert!(
        held.len() > cluster.servers.len() / 2,
        "the key should stay on a quorum of masters; PTTL: {all:?}"
    );
    held
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("a test's duration")
}

#[test]
fn the_key_stays_one_ttl_from_the_acquisition_and_a_second_run_meanwhile_skips() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let ran = |name: &str| format!("echo ran > {}", scratch.file(name));
    let ttl = Duration::from_secs(4);
    let before = Instant::now();
    let done = finish(redlock_run(
        &cluster,
        &[
            "--keep",
            "--ttl",
            "4s",
            "-n",
            "-v",
            KEY,
            "-c",
            &ran("first"),
        ],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(scratch.read("first").is_some(), "the command ran");
    assert!(
        done.stderr.contains("kept report:hourly"),
        "{}",
        done.stderr
    );
    // The key was set after `before`, and the command ended long before the
    // first renewal (two thirds of the TTL): it expires one TTL after its
    // acquisition, so what is left is at most a TTL, and at least the TTL
    // less the time from `before` to the PTTL reads (1 ms for PTTL's
    // rounding): that time is taken once the reads are done, so that a
    // busy machine that delays them only widens the bound.
    let kept = kept_on_a_quorum(&cluster);
    let elapsed = millis(before.elapsed());
    for left in kept {
        assert!(
            left <= millis(ttl) && left >= millis(ttl) - elapsed - 1,
            "{left} ms left, {elapsed} ms after the start, TTL 4 s"
        );
    }

    // A second run in the period, as another host's cron would start it.
    let second = ["--keep", "--wait", "0", KEY, "-c", &ran("second")];
    let done = finish(redlock_run(&cluster, &second));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains("report:hourly is held elsewhere"),
        "{}",
        done.stderr
    );
    let quiet = [&["-q"][..], &second].concat();
    let done = finish(redlock_run(&cluster, &quiet));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(done.stderr, "", "quiet");
    assert_eq!(scratch.read("second"), None, "not run within the period");

    // Gone once the TTL has passed (the masters' expiry, polled).
    until("the kept key to expire", || {
        pttls(&cluster).iter().all(|&ms| ms == -2)
    });
    let gone = before.elapsed();
    // Set after `before`: never gone before a TTL from it (10 ms for the
    // masters' wall clock against this monotonic one).
    assert!(
        gone + Duration::from_millis(10) >= ttl && gone < ttl + Duration::from_secs(5),
        "gone {gone:?} after the start, TTL {ttl:?}"
    );
    let done = finish(redlock_run(
        &cluster,
        &["--keep", "-n", KEY, "-c", &ran("third")],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(scratch.read("third").is_some(), "the next period runs");
}

#[test]
fn the_exit_status_stays_the_commands_and_the_key_is_kept_whatever_it_is() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &["--keep", "-n", KEY, "-c", "exit 7"],
    ));
    assert_eq!(done.status.code(), Some(7), "{done:?}");
    kept_on_a_quorum(&cluster);

    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &["--keep", "-n", KEY, "-c", "kill -USR1 $$"],
    ));
    assert_eq!(done.status.signal(), Some(libc::SIGUSR1), "{done:?}");
    kept_on_a_quorum(&cluster);
}

#[test]
fn a_command_that_outlived_the_ttl_releases_the_key_at_its_end() {
    let cluster = Cluster::start(3);
    // Renewed at about 1.3 s and 2.7 s: kept, the key would have more than
    // a second left when the command ends at 3 s.
    let done = finish(redlock_run(
        &cluster,
        &["--keep", "--ttl", "2s", "-v", KEY, "--", "sleep", "3"],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(
        done.stderr.contains("released report:hourly") && done.stderr.contains("outlived"),
        "{}",
        done.stderr
    );
    assert_eq!(pttls(&cluster), [-2, -2, -2], "released");
}

#[test]
fn a_command_that_ended_after_a_renewal_leaves_the_key_for_the_rest_of_the_renewed_ttl() {
    let cluster = Cluster::start(3);
    // TTL 6 s: renewed when 2 s are left (about 4 s in); the command ends
    // at 5 s, within the period. Without the renewal at most 1 s would be
    // left; with it, at least a third of the TTL and at most a TTL.
    let done = finish(redlock_run(
        &cluster,
        &["--keep", "--ttl", "6s", KEY, "--", "sleep", "5"],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    for left in kept_on_a_quorum(&cluster) {
        assert!(
            (2_000..=6_000).contains(&left),
            "{left} ms left after a renewal (TTL 6 s)"
        );
    }
}

#[test]
fn a_command_stopped_at_max_hold_keeps_the_key_too() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &[
            "--keep",
            "--ttl",
            "10s",
            "--max-hold",
            "1s",
            KEY,
            "--",
            "sleep",
            "30",
        ],
    ));
    assert_eq!(done.status.code(), Some(124), "{done:?}");
    kept_on_a_quorum(&cluster);
}

#[test]
fn a_command_that_cannot_start_leaves_no_key() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &["--keep", KEY, "--", "redlock-test-no-such-command"],
    ));
    assert_eq!(done.status.code(), Some(127), "{done:?}");
    assert_eq!(pttls(&cluster), [-2, -2, -2], "released: nothing ran");
}

#[test]
fn a_lock_that_could_not_be_kept_leaves_no_key_where_it_can_be_deleted() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let script = format!("echo $$ > {}; exec sleep 60", scratch.file("pid"));
    let started = Instant::now();
    let tool = redlock_run(&cluster, &["--keep", "--ttl", "3s", KEY, "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock");
    number(&scratch.wait_for("pid"));
    // Two of the three masters hang: renewals fail from here on, and the
    // command is stopped with some validity left, the key still on the
    // master that answers. (Paused, not killed: while the others refuse
    // connections, the library's release does not reach the lone master
    // today, which keeps the key its renewals set for a TTL.)
    let _hung = [cluster.servers[1].pause(), cluster.servers[2].pause()];
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    // Kept, it would have most of a second left.
    assert_eq!(
        cluster.servers[0].pttl(KEY.as_bytes()),
        -2,
        "released where it was left"
    );
}
