//! `redlock run` end to end, against real servers: the forms the issue
//! writes out, waiting, and every exit status.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{
    finish, listening_for_release, redlock, redlock_run, released, until, wall_ms, Scratch,
};
use redlock_sync::Redlock;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, RedisServer};

/// A handle of the test's own, whose rounds give each master 1 s (the
/// default, 50 ms, can be missed on a loaded machine).
fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration")
}

/// Holds `key` from the test itself, for 30 s unless released.
fn hold(cluster: &Cluster, key: &str) -> redlock_sync::Lock {
    client(cluster)
        .lock(key, Duration::from_secs(30))
        .expect("the test takes the lock")
}

#[test]
fn runs_the_command_as_written_and_passes_its_exit_status() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let seen = scratch.file("seen");
    // The form: --nodes, KEY, --, a command and its arguments.
    let script = format!("echo \"$0 $1 $REDLOCK_KEY\" > {seen}; exit 7");
    let done = finish(redlock_run(
        &cluster,
        &["job:1", "--", "sh", "-c", &script, "arg0", "arg1"],
    ));
    assert_eq!(done.status.code(), Some(7), "{done:?}");
    assert_eq!(scratch.read("seen").as_deref(), Some("arg0 arg1 job:1\n"));
    released(&cluster, "when the command exited");

    let done = finish(redlock_run(&cluster, &["job:1", "true"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(
        done.stderr.is_empty(),
        "nothing said on success: {}",
        done.stderr
    );
}

#[test]
fn takes_the_masters_from_redlock_nodes() {
    let cluster = Cluster::start(3);
    let done = finish(
        redlock()
            .env("REDLOCK_NODES", harness::nodes(&cluster))
            .args(["run", "job:env", "--", "sh", "-c", "exit 3"]),
    );
    assert_eq!(done.status.code(), Some(3), "{done:?}");
}

#[test]
fn the_command_gets_the_key_and_the_validity_deadline() {
    let cluster = Cluster::start(3);
    let before = wall_ms();
    let done = finish(redlock_run(
        &cluster,
        &[
            "--ttl",
            "10s",
            "job:env",
            "-c",
            "echo $REDLOCK_KEY $REDLOCK_VALID_UNTIL_MS",
        ],
    ));
    let after = wall_ms();
    assert!(done.status.success(), "{done:?}");
    let (key, until) = done.stdout.trim().split_once(' ').expect("two words");
    assert_eq!(key, "job:env");
    let until: u128 = until.parse().expect("milliseconds");
    // The validity: the TTL less the acquisition and the drift allowance.
    assert!(
        until > before + 9_000 && until <= after + 10_000,
        "{before} < {until} - 10 s < {after}"
    );
}

#[test]
fn with_fence_the_command_gets_the_locks_fencing_token() {
    let cluster = Cluster::start(3);
    let show = "echo token=${REDLOCK_FENCE_TOKEN-none}";
    // Not initialised: no lock without a counter; the operator's to fix.
    let done = finish(redlock_run(&cluster, &["--fence", "job:fence", "-c", show]));
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    assert!(done.stderr.contains("fence"), "{}", done.stderr);
    assert_eq!(done.stdout, "", "the command did not run");

    let fenced = Redlock::builder()
        .nodes(cluster.urls())
        .fencing(true)
        .build()
        .unwrap();
    fenced.fence_init(0).expect("fence_init");
    for expected in ["token=1\n", "token=2\n"] {
        let done = finish(redlock_run(&cluster, &["--fence", "job:fence", "-c", show]));
        assert!(done.status.success(), "{done:?}");
        assert_eq!(done.stdout, expected);
    }
    // Without --fence: no token, even one inherited from redlock's caller.
    let done =
        finish(redlock_run(&cluster, &["job:fence", "-c", show]).env("REDLOCK_FENCE_TOKEN", "99"));
    assert!(done.status.success(), "{done:?}");
    assert_eq!(done.stdout, "token=none\n");
}

#[test]
fn a_command_killed_by_a_signal_ends_redlock_by_the_same_signal() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(&cluster, &["job:sig", "-c", "kill -USR1 $$"]));
    assert_eq!(done.status.signal(), Some(libc::SIGUSR1), "{done:?}");
    assert!(!done.status.core_dumped());
    released(&cluster, "after the command's signal");
}

#[test]
fn a_lock_held_elsewhere_exits_1_or_the_chosen_status_and_quiet_exits_0_silently() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let ran = format!("touch {}", scratch.file("ran"));
    let _held = hold(&cluster, "job:held");

    for once in [&["-n"][..], &["--wait", "0"], &["--nonblock"]] {
        let mut args = once.to_vec();
        args.extend(["job:held", "-c", &ran]);
        let done = finish(redlock_run(&cluster, &args));
        assert_eq!(done.status.code(), Some(1), "{once:?}: {done:?}");
        assert!(
            done.stderr.contains("job:held is held elsewhere"),
            "{}",
            done.stderr
        );
        assert!(
            done.took < Duration::from_secs(5),
            "one attempt: {:?}",
            done.took
        );
    }
    let done = finish(redlock_run(
        &cluster,
        &["-n", "-E", "9", "job:held", "-c", &ran],
    ));
    assert_eq!(done.status.code(), Some(9), "{done:?}");
    let done = finish(redlock_run(&cluster, &["-q", "-n", "job:held", "-c", &ran]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(done.stderr, "", "quiet");
    assert_eq!(scratch.read("ran"), None, "the command never ran");
}

#[test]
fn a_wait_with_a_limit_gives_up_after_it() {
    let cluster = Cluster::start(3);
    let _held = hold(&cluster, "job:held");
    let done = finish(redlock_run(
        &cluster,
        &["--wait", "500ms", "job:held", "true"],
    ));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.took >= Duration::from_millis(500) && done.took < Duration::from_secs(10),
        "{:?}",
        done.took
    );
}

#[test]
fn waits_without_a_limit_until_the_release_and_then_runs() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let held = hold(&cluster, "job:turn");
    let mut tool = redlock_run(
        &cluster,
        &["job:turn", "-c", &format!("touch {}", scratch.file("ran"))],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawning redlock");
    // Past the library's default wait, counted from when it is seen
    // waiting (listening for the release), not from its start, which a
    // busy machine may delay.
    until("redlock to wait for the lock", || {
        listening_for_release(&cluster, "job:turn")
    });
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(tool.try_wait().expect("try_wait"), None, "still waiting");
    assert_eq!(scratch.read("ran"), None, "not run while held elsewhere");
    let released = Instant::now();
    held.unlock().expect("released");
    let status = harness::wait(&mut tool, harness::PATIENCE);
    assert!(status.success(), "{status:?}");
    assert!(scratch.read("ran").is_some());
    // Woken by the release, not by a timer of its own: well under the
    // fallback pause's many repetitions, on a busy machine too.
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "{:?}",
        released.elapsed()
    );
}

#[test]
fn masters_that_cannot_be_reached_exit_69_after_the_wait() {
    // Ports where nothing listens (servers started and stopped).
    let mut cluster = Cluster::start(3);
    for server in &mut cluster.servers {
        server.kill();
    }
    let done = finish(redlock_run(&cluster, &["-n", "job:down", "true"]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(done.stderr.contains("no quorum"), "{}", done.stderr);
    assert!(
        done.took < Duration::from_secs(5),
        "one attempt: {:?}",
        done.took
    );
    // Within a wait, retried until it ends.
    let done = finish(redlock_run(&cluster, &["--wait", "1s", "job:down", "true"]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(done.took >= Duration::from_secs(1), "{:?}", done.took);
}

#[test]
fn masters_that_come_back_within_the_wait_give_the_lock() {
    let mut cluster = Cluster::start(3);
    for server in &mut cluster.servers {
        server.kill();
    }
    let mut tool = redlock_run(&cluster, &["job:back", "true"])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning redlock");
    thread::sleep(Duration::from_millis(500));
    for server in &mut cluster.servers {
        server.restart();
    }
    let status = harness::wait(&mut tool, harness::PATIENCE);
    assert!(status.success(), "{status:?}");
}

#[test]
fn configuration_errors_exit_78_and_usage_errors_64() {
    let done = finish(redlock().args(["run", "job", "true"]));
    assert_eq!(done.status.code(), Some(78), "no masters: {done:?}");
    assert!(done.stderr.contains("REDLOCK_NODES"), "{}", done.stderr);
    let done = finish(redlock().args(["run", "--nodes", "http://h", "job", "true"]));
    assert_eq!(done.status.code(), Some(78), "bad URL: {done:?}");
    let done = finish(redlock().args([
        "run",
        "--nodes",
        "redis://h:1",
        "--password-file",
        "/nonexistent",
        "job",
        "true",
    ]));
    assert_eq!(
        done.status.code(),
        Some(78),
        "unreadable password file: {done:?}"
    );

    for args in [
        &["run"][..],
        &["run", "job"],
        &["lock", "job", "true"],
        &["run", "--wait", "soon", "job", "true"],
    ] {
        let done = finish(redlock().args(args));
        assert_eq!(done.status.code(), Some(64), "{args:?}: {done:?}");
        assert!(done.stderr.starts_with("error: "), "{}", done.stderr);
        assert!(done.stderr.contains("try '--help'"), "{}", done.stderr);
    }
}

#[test]
fn a_refused_password_exits_77() {
    let cluster = Cluster::start_with(3, &["--requirepass", "right"]);
    let done = finish(redlock_run(&cluster, &["job", "true"]).env("REDLOCK_PASSWORD", "wrong"));
    assert_eq!(done.status.code(), Some(77), "{done:?}");
}

#[test]
fn a_command_not_found_exits_127_one_not_executable_126_and_the_lock_is_released() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &["job", "--", "redlock-test-no-such-command"],
    ));
    assert_eq!(done.status.code(), Some(127), "{done:?}");
    assert!(
        done.stderr.contains("redlock-test-no-such-command"),
        "{}",
        done.stderr
    );
    released(&cluster, "after a command not found");
    let scratch = Scratch::new();
    let not_executable = scratch.file("data");
    std::fs::write(&not_executable, "not a program").unwrap();
    let done = finish(redlock_run(&cluster, &["job", "--", &not_executable]));
    assert_eq!(done.status.code(), Some(126), "{done:?}");
    released(&cluster, "after a command not executable");
}

#[test]
fn max_hold_stops_the_command_and_exits_124() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(
        &cluster,
        &["--max-hold", "1s", "job", "--", "sleep", "30"],
    ));
    assert_eq!(done.status.code(), Some(124), "{done:?}");
    assert!(
        done.took >= Duration::from_secs(1) && done.took < Duration::from_secs(10),
        "{:?}",
        done.took
    );
    assert!(done.stderr.contains("--max-hold 1s"), "{}", done.stderr);
    released(&cluster, "after the stop");
}

#[test]
fn verbose_says_when_the_lock_is_taken_and_released() {
    let cluster = Cluster::start(3);
    let done = finish(redlock_run(&cluster, &["-v", "job:v", "true"]));
    assert!(done.status.success(), "{done:?}");
    assert!(done.stderr.contains("locked job:v in "), "{}", done.stderr);
    assert!(
        done.stderr.contains("released job:v in "),
        "{}",
        done.stderr
    );
}

#[test]
fn a_single_master_is_enough_when_it_is_the_only_one() {
    let server = RedisServer::start();
    let done = finish(redlock().args(["run", "--nodes", &server.url(), "job", "true"]));
    assert!(done.status.success(), "{done:?}");
}
