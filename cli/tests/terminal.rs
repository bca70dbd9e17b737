//! On a terminal (a pseudo-terminal made by util-linux's `script`): the
//! command gets the terminal, so it can read from it and Ctrl-C reaches it.
#![cfg(target_os = "linux")]

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{nodes, until, wait, Scratch, PATIENCE};
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
