//! On a terminal (a pseudo-terminal made by util-linux's `script`): the
//! command gets the terminal, so it can read from it and Ctrl-C reaches it.
#![cfg(target_os = "linux")]

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{
    appended, appender, is_stopped, nodes, number, signal, until, wait, Scratch, PATIENCE,
};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use support::Cluster;

/// Runs `line` (a shell command line) on a new pseudo-terminal, typing
/// `typed` into it once `ready` exists; returns what the terminal showed.
fn on_a_terminal(line: &str, scratch: &Scratch, ready: &str, typed: &[u8]) -> String {
    let mut script = Command::new("script")
        .args(["--quiet", "--return", "--command", line, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux's script(1) (package bsdutils on Debian)");
    until("the command to start", || scratch.read(ready).is_some());
    let mut keyboard = script.stdin.take().expect("piped stdin");
    keyboard.write_all(typed).expect("typing");
    let mut screen = script.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = screen.read_to_string(&mut text);
        text
    });
    wait(&mut script, PATIENCE);
    drop(keyboard);
    reader.join().expect("reader")
}

#[test]
fn the_command_reads_from_the_terminal() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let line = format!(
        "{} run --nodes {} job -c 'touch {}; read answer; echo got $answer'",
        env!("CARGO_BIN_EXE_redlock"),
        nodes(&cluster),
        scratch.file("started"),
    );
    let screen = on_a_terminal(&line, &scratch, "started", b"yes\n");
    assert!(screen.contains("got yes"), "{screen:?}");
}

#[test]
fn ctrl_c_on_the_terminal_reaches_the_command_and_ends_redlock_by_sigint() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let line = format!(
        "{} run --nodes {} job -c 'touch {}; exec sleep 60'; echo status=$?",
        env!("CARGO_BIN_EXE_redlock"),
        nodes(&cluster),
        scratch.file("started"),
    );
    let screen = on_a_terminal(&line, &scratch, "started", b"\x03");
    assert!(screen.contains("status=130"), "{screen:?}");
    assert_eq!(cluster.total_keys(), 0, "released");
}

/// What [`ctrl_z_then_continue`] saw.
struct Continued {
    screen: String,
    /// Lines the command appended before `redlock` was continued, and by
    /// the end.
    before: usize,
    after: usize,
}

/// Runs [`appender`] under `redlock run --ttl TTL` on a terminal, types
/// Ctrl-Z once it writes, waits until it and `redlock` are stopped and
/// `continue_when` returns, then continues `redlock` (as `fg` would: SIGCONT
/// to its process alone), and waits for the end.
fn ctrl_z_then_continue(ttl: &str, continue_when: impl FnOnce(&Cluster)) -> Continued {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let line = format!(
        "{} run --nodes {} --ttl {ttl} job {}; echo status=$?",
        env!("CARGO_BIN_EXE_redlock"),
        nodes(&cluster),
        appender(&scratch),
    );
    let mut script = Command::new("script")
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux's script(1) (package bsdutils on Debian)");
    let mut screen = script.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = screen.read_to_string(&mut text);
        text
    });
    let tool = number(&scratch.wait_for("tool")) as u32;
    let pid = number(&scratch.wait_for("pid")) as u32;
    until("the command to write", || appended(&scratch) > 0);
    let mut keyboard = script.stdin.take().expect("piped stdin");
    keyboard.write_all(b"\x1a").expect("typing Ctrl-Z");
    until("the command and redlock to stop", || {
        is_stopped(pid) && is_stopped(tool)
    });
    continue_when(&cluster);
    let before = appended(&scratch);
    signal(tool, libc::SIGCONT);
    wait(&mut script, PATIENCE);
    drop(keyboard);
    Continued {
        screen: reader.join().expect("reader"),
        before,
        after: appended(&scratch),
    }
}

/// The scenario (issue 31, item 2): the command on the terminal,
/// Ctrl-Z stops it and `redlock`; `redlock` is continued after the lock's
/// validity ended. It reads the lock before it gives the terminal back and
/// continues the command: the still stopped command is killed without
/// running again, `redlock` exits 75, and does not say that the command
/// would not die of SIGKILL (it said so at once, of a command that died).
#[test]
fn continued_after_ctrl_z_past_the_validity_the_command_never_runs_again() {
    let seen = ctrl_z_then_continue("2s", |cluster| {
        until("the keys to expire on every master", || {
            cluster.total_keys() == 0
        });
    });
    let screen = &seen.screen;
    assert_eq!(seen.after, seen.before, "the command ran on: {screen:?}");
    assert!(screen.contains("status=75"), "{screen:?}");
    assert!(
        screen.contains("killed the stopped command (SIGKILL)"),
        "{screen:?}"
    );
    assert!(!screen.contains("does not die of SIGKILL"), "{screen:?}");
}

/// Continued with less validity left than the stop lead (for a 6 s TTL:
/// 1 s of grace plus 0.6 s to kill), the still stopped command is killed
/// too: continued, it would run (it ignores SIGTERM) until the SIGKILL a
/// tenth of the TTL before the validity ends, while the lock ends.
///
/// The masters refuse writes for 3 s from just before `redlock` is
/// continued: its renewal, overdue by then, wakes with the main thread, and
/// a renewal that landed first would make the lock valid again (then the
/// command rightly goes on). Paused, the renewal cannot land, so what is
/// checked is the main thread's reading of the validity alone.
#[test]
fn continued_after_ctrl_z_within_the_stop_lead_the_command_never_runs_again() {
    let seen = ctrl_z_then_continue("6s", |cluster| {
        // About 1 s of validity left: the masters' keys outlive it by the
        // drift allowance (62 ms) and the acquisition's time.
        until("the keys to have about a second left", || {
            cluster
                .servers
                .iter()
                .map(|server| server.pttl(b"job"))
                .max()
                .is_some_and(|pttl| pttl <= 1_100)
        });
        for server in &cluster.servers {
            server
                .command(&[b"CLIENT", b"PAUSE", b"3000", b"WRITE"])
                .expect("CLIENT PAUSE WRITE");
        }
    });
    let screen = &seen.screen;
    assert_eq!(seen.after, seen.before, "the command ran on: {screen:?}");
    assert!(screen.contains("status=75"), "{screen:?}");
    assert!(
        screen.contains("killed the stopped command (SIGKILL)"),
        "{screen:?}"
    );
    assert!(!screen.contains("does not die of SIGKILL"), "{screen:?}");
}
