//! Signals: those sent to `redlock` reach the command's whole process
//! group; a `redlock` killed outright takes its command along (Linux); a
//! signal during the wait ends `redlock` before the command starts.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{
    has_thread, is_alive, listening_for_release, number, redlock_run, released, signal, until,
    wait, Scratch, PATIENCE,
};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;
use support::Cluster;

/// A command that starts a grandchild in its group, says both pids, and
/// exits 3 with the name of the signal it gets.
///
/// The grandchild says its pid itself, from a new program: until the shell's
/// fork has `exec`ed, it runs with the script's traps, and a signal that
/// reaches it then is taken by a trap and lost (`sleep` lives on). `$!`,
/// written by the script right after the fork, comes too early for that.
fn trapping_script(scratch: &Scratch) -> String {
    format!(
        "for s in INT TERM HUP; do trap \"echo $s > {got}; exit 3\" $s; done; \
         sh -c 'echo $$ > {grandchild}; exec sleep 60' & echo $$ > {child}; wait",
        got = scratch.file("got"),
        grandchild = scratch.file("grandchild"),
        child = scratch.file("child"),
    )
}

#[test]
fn sigint_sigterm_and_sighup_reach_the_commands_group() {
    let cluster = Cluster::start(3);
    for (sig, name) in [
        (libc::SIGINT, "INT"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGHUP, "HUP"),
    ] {
        let scratch = Scratch::new();
        let mut tool = redlock_run(&cluster, &["job", "-c", &trapping_script(&scratch)])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawning redlock");
        let grandchild = number(&scratch.wait_for("grandchild")) as u32;
        scratch.wait_for("child");
        signal(tool.id(), sig);
        let status = wait(&mut tool, PATIENCE);
        assert_eq!(scratch.wait_for("got"), name, "the command got SIG{name}");
        assert_eq!(status.code(), Some(3), "the command's status: {status:?}");
        // A background job of a script ignores SIGINT (POSIX): after
        // SIGINT, it is redlock's SIGTERM to what the command left behind
        // that ends it; the other two reach it directly.
        assert!(
            !is_alive(grandchild),
            "SIG{name}: the grandchild outlived redlock"
        );
        released(&cluster, &format!("after SIG{name}"));
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn sigkill_of_redlock_kills_the_command() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let script = format!("echo $$ > {}; exec sleep 60", scratch.file("child"));
    let mut tool = redlock_run(&cluster, &["job", "-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning redlock");
    let child = number(&scratch.wait_for("child")) as u32;
    assert!(is_alive(child));
    tool.kill().expect("SIGKILL to redlock");
    let status = wait(&mut tool, PATIENCE);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    until("the command to die with redlock", || !is_alive(child));
}

/// A signal while `redlock` waits for a lock held elsewhere ends the
/// wait: the command never runs, nothing of the tool's is left on the
/// masters, and `redlock` ends by that signal (as by its default action;
/// the shell shows 128 + its number).
#[test]
fn a_signal_while_waiting_ends_the_wait_before_the_command_starts() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let holder = redlock_sync::Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // The last round's redlock is gone from the masters, so that the
        // listener seen below is this round's.
        until("the previous redlock to stop listening", || {
            !listening_for_release(&cluster, "job")
        });
        let held = holder
            .lock("job", Duration::from_secs(30))
            .expect("the test takes the lock");
        let mut tool = redlock_run(
            &cluster,
            &["job", "-c", &format!("touch {}", scratch.file("ran"))],
        )
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning redlock");
        // Into the wait: it listens for the release (a fixed pause after
        // the acquisition began could end before a busy machine got there).
        until("redlock to wait for the lock", || {
            has_thread(tool.id(), "redlock-acquire") && listening_for_release(&cluster, "job")
        });
        signal(tool.id(), sig);
        let status = wait(&mut tool, PATIENCE);
        assert_eq!(status.signal(), Some(sig), "{status:?}");
        assert_eq!(scratch.read("ran"), None);
        held.unlock().expect("the test's lock was still held");
        released(&cluster, &format!("after signal {sig}"));
    }
}

/// A signal while the acquisition's round is in flight, a key already set
/// on one master (the two others are paused, so the round waits for them
/// until the node timeout): the round ends, what it set is released, and
/// `redlock` ends by the signal. It used to die at once by the signal's
/// default action, leaving the key until its TTL (issue 31, item 4).
#[test]
fn a_signal_during_the_acquisition_leaves_no_key() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let paused = [cluster.servers[1].pause(), cluster.servers[2].pause()];
    let mut tool = redlock_run(
        &cluster,
        &[
            "--node-timeout",
            "2s",
            "job",
            "-c",
            &format!("touch {}", scratch.file("ran")),
        ],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawning redlock");
    until(
        "the acquisition to set the key on the master that answers",
        || cluster.servers[0].dbsize() > 0,
    );
    signal(tool.id(), libc::SIGINT);
    let status = wait(&mut tool, PATIENCE);
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    // Everything the exited tool sent the master that answers was run once
    // it lists no client but the one asking.
    until(
        "the master that answers to run what redlock sent it",
        || clients(&cluster.servers[0]) == 1,
    );
    assert_eq!(
        cluster.servers[0].dbsize(),
        0,
        "the key the round set is left on the master that answered"
    );
    drop(paused);
    // The resumed masters run what was sent to them while paused, then
    // find the exited tool's connections closed: once they list no client
    // but the one asking, they ran it all (a fixed pause could end before
    // a busy machine got there, and a key found missing would prove
    // nothing).
    until("the resumed masters to run what redlock sent them", || {
        cluster.servers[1..]
            .iter()
            .all(|server| clients(server) == 1)
    });
    assert_eq!(cluster.total_keys(), 0, "a key left on a resumed master");
    assert_eq!(scratch.read("ran"), None);
}

/// How many clients `server` lists (`CLIENT LIST`), the one asking
/// included.
fn clients(server: &support::RedisServer) -> usize {
    match server.cmd(&["CLIENT", "LIST"]) {
        support::OwnedReply::Bulk(list) => list
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .count(),
        other => panic!("CLIENT LIST: {other:?}"),
    }
}
