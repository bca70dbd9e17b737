//! Signals: those sent to `redlock` reach the command's whole process
//! group; a `redlock` killed outright takes its command along (Linux); a
//! signal during the wait ends `redlock` before the command starts.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{
    is_alive, listening_for_release, number, redlock_run, signal, until, wait, Scratch, PATIENCE,
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
        if sig != libc::SIGINT {
            // A background job of a script ignores SIGINT (POSIX), so only
            // the other two show that the whole group got the signal.
            until("the grandchild to die of the signal", || {
                !is_alive(grandchild)
            });
        } else {
            signal(grandchild, libc::SIGKILL);
        }
        assert_eq!(cluster.total_keys(), 0, "released after SIG{name}");
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

#[test]
fn a_signal_while_waiting_ends_redlock_before_the_command_starts() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let _held = redlock_sync::Redlock::builder()
        .nodes(cluster.urls())
        .build()
        .expect("valid configuration")
        .lock("job", Duration::from_secs(30))
        .expect("the test takes the lock");
    let mut tool = redlock_run(
        &cluster,
        &["job", "-c", &format!("touch {}", scratch.file("ran"))],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawning redlock");
    // Waiting: it listens for the release (a fixed pause could end before
    // a busy machine has even started it).
    until("redlock to wait for the lock", || {
        listening_for_release(&cluster, "job")
    });
    signal(tool.id(), libc::SIGTERM);
    let status = wait(&mut tool, PATIENCE);
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert_eq!(scratch.read("ran"), None);
}
