//! The masters' password never shows: not in `redlock`'s command line, not
//! in what it prints (verbose, warnings, errors), not in the command's
//! environment.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, finish, redlock, until, Scratch};
use std::fs;
use std::process::Stdio;
use std::time::Instant;
use support::Cluster;

const PASSWORD: &str = "s3cret-Pa55word";

fn protected() -> Cluster {
    Cluster::start_with(3, &["--requirepass", PASSWORD])
}

fn urls_with_password(cluster: &Cluster) -> String {
    cluster
        .servers
        .iter()
        .map(|s| format!("redis://:{PASSWORD}@127.0.0.1:{}", s.port()))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_password_from_the_environment_reaches_neither_argv_nor_output_nor_the_command() {
    let cluster = protected();
    let scratch = Scratch::new();
    // The command shows its environment, then waits until the test has
    // read redlock's command line.
    let script = format!(
        "env; touch {running}; while [ ! -e {seen} ]; do sleep 0.01; done",
        running = scratch.file("running"),
        seen = scratch.file("seen"),
    );
    let started = Instant::now();
    let tool = redlock()
        .args([
            "run",
            "-v",
            "--nodes",
            &harness::nodes(&cluster),
            "job",
            "-c",
            &script,
        ])
        .env("REDLOCK_PASSWORD", PASSWORD)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock");
    until("the command to run", || scratch.read("running").is_some());
    let argv = fs::read(format!("/proc/{}/cmdline", tool.id())).unwrap_or_default();
    fs::write(scratch.file("seen"), "").unwrap();
    let done = collect(tool, started);
    assert!(done.status.success(), "{done:?}");
    assert!(
        done.stdout.contains("REDLOCK_KEY=job"),
        "the command's env: {}",
        done.stdout
    );
    assert!(
        !done.stdout.contains(PASSWORD),
        "the command's env: {}",
        done.stdout
    );
    assert!(!done.stdout.contains("REDLOCK_PASSWORD"), "{}", done.stdout);
    assert!(!done.stderr.contains(PASSWORD), "{}", done.stderr);
    assert!(!String::from_utf8_lossy(&argv).contains(PASSWORD));
}

#[test]
fn nodes_with_passwords_in_the_environment_are_kept_from_the_command() {
    let cluster = protected();
    let done = finish(
        redlock()
            .args(["run", "job", "--", "env"])
            .env("REDLOCK_NODES", urls_with_password(&cluster)),
    );
    assert!(done.status.success(), "{done:?}");
    assert!(!done.stdout.contains(PASSWORD), "{}", done.stdout);
    assert!(!done.stdout.contains("REDLOCK_NODES"), "{}", done.stdout);
    assert!(
        done.stderr.is_empty(),
        "no warning for the environment: {}",
        done.stderr
    );
}

#[test]
fn a_password_file_works() {
    let cluster = protected();
    let scratch = Scratch::new();
    let file = scratch.file("password");
    fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let done = finish(
        redlock()
            .args([
                "run",
                "--nodes",
                &harness::nodes(&cluster),
                "--password-file",
                &file,
            ])
            .args(["job", "--", "env"]),
    );
    assert!(done.status.success(), "{done:?}");
    assert!(!done.stdout.contains(PASSWORD), "{}", done.stdout);
}

#[test]
fn a_password_on_the_command_line_works_with_a_warning_that_does_not_repeat_it() {
    let cluster = protected();
    let done = finish(redlock().args([
        "run",
        "--nodes",
        &urls_with_password(&cluster),
        "job",
        "true",
    ]));
    assert!(done.status.success(), "{done:?}");
    assert!(
        done.stderr.contains("warning: a password given in --nodes"),
        "{}",
        done.stderr
    );
    assert!(!done.stderr.contains(PASSWORD), "{}", done.stderr);
}

#[test]
fn a_refused_password_is_not_repeated_in_the_error() {
    let cluster = protected();
    let wrong = format!("{PASSWORD}-wrong");
    let done = finish(
        redlock()
            .args(["run", "--nodes", &harness::nodes(&cluster), "job", "true"])
            .env("REDLOCK_PASSWORD", &wrong),
    );
    assert_eq!(done.status.code(), Some(77), "{done:?}");
    assert!(!done.stderr.contains(PASSWORD), "{}", done.stderr);
}
