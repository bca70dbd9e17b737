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

/// A password with a comma, a blank, an `@` and a `%` (issue 31, item 5).
const ODD_PASSWORD: &str = "Xq7,Zv9 Wk4@Rt2%Yp";
/// Its pieces, none of which may show.
const ODD_PIECES: [&str; 4] = ["Xq7", "Zv9", "Wk4", "Rt2"];

/// The cluster's URLs with `ODD_PASSWORD` written in (its `%` encoded),
/// joined by `separator`.
fn urls_with_odd_password(cluster: &Cluster, separator: &str) -> String {
    cluster
        .servers
        .iter()
        .map(|s| format!("redis://:Xq7,Zv9 Wk4@Rt2%25Yp@127.0.0.1:{}", s.port()))
        .collect::<Vec<_>>()
        .join(separator)
}

fn assert_never_shown(text: &str) {
    for piece in ODD_PIECES {
        assert!(!text.contains(piece), "{piece:?} shown: {text}");
    }
}

/// The list is split between URLs, never inside a password: from
/// `REDLOCK_NODES`, `--nodes` and `--nodes-file`, with commas, blanks and
/// line breaks between the URLs, the masters take the password; nothing
/// of it is printed (the tool cut it at every comma and blank, and printed
/// a piece in the error).
#[test]
fn passwords_with_commas_blanks_ats_and_percents_work_from_every_source_and_never_show() {
    let cluster = Cluster::start_with(3, &["--requirepass", ODD_PASSWORD]);
    let scratch = Scratch::new();
    let file = scratch.file("nodes");
    fs::write(&file, urls_with_odd_password(&cluster, "\n")).unwrap();
    let mut from_env = redlock();
    from_env
        .args(["run", "-v", "job", "true"])
        .env("REDLOCK_NODES", urls_with_odd_password(&cluster, ", "))
        .env("REDLOCK_PASSWORD", "not-used");
    let mut from_option = redlock();
    from_option
        .args(["run", "--nodes", &urls_with_odd_password(&cluster, " ")])
        .args(["job", "true"]);
    let mut from_file = redlock();
    from_file.args(["run", "--nodes-file", &file, "job", "true"]);
    for (source, command) in [
        ("REDLOCK_NODES", from_env),
        ("--nodes", from_option),
        ("--nodes-file", from_file),
    ] {
        let done = finish(command);
        assert!(done.status.success(), "{source}: {done:?}");
        assert_never_shown(&done.stderr);
    }
}

/// A list whose URLs are wrong (a port out of range, a host missing, a
/// scheme forgotten before a URL with a password) is
/// refused as the configuration's error, 78, without a piece of the
/// password on stderr.
#[test]
fn an_invalid_url_holding_a_password_with_commas_and_blanks_is_refused_without_showing_it() {
    for list in [
        "redis://:Xq7,Zv9 Wk4@Rt2%25Yp@127.0.0.1:0",
        "redis://:Xq7,Zv9 Wk4@Rt2%25Yp",
        "redis://:Xq7,Zv9 Wk4%Rt2@127.0.0.1",
        "redis://127.0.0.1,:Xq7,Zv9 Wk4@127.0.0.1:2",
    ] {
        let done = finish(
            redlock()
                .args(["run", "job", "true"])
                .env("REDLOCK_NODES", list),
        );
        assert_eq!(done.status.code(), Some(78), "{list}: {done:?}");
        assert!(!done.stderr.is_empty());
        assert_never_shown(&done.stderr);
    }
}

/// clap's own errors quote arguments: an unknown option, an argument too
/// many, an invalid value. None shows a password written in a URL beside
/// it or in it (the argument is cut out), and each exits 64.
#[test]
fn clap_errors_never_show_a_password_from_the_command_line() {
    let url = format!("redis://:{ODD_PASSWORD}@127.0.0.1:1").replace('%', "%25");
    let cases: [Vec<String>; 6] = [
        vec![
            "run".into(),
            "--nodes".into(),
            url.clone(),
            "--bogus".into(),
            "job".into(),
        ],
        vec![
            "status".into(),
            "--nodes".into(),
            url.clone(),
            "job".into(),
            url.clone(),
        ],
        vec!["status".into(), "job".into(), url.clone()],
        vec![format!("--nodes={url}"), "status".into(), "job".into()],
        vec![
            "run".into(),
            format!("--wait=5{url}"),
            "job".into(),
            "true".into(),
        ],
        vec!["fence".into(), "init".into(), "--start".into(), url.clone()],
    ];
    for args in cases {
        let done = finish(redlock().args(&args));
        assert_eq!(done.status.code(), Some(64), "{args:?}: {done:?}");
        assert!(done.stderr.starts_with("error: "), "{args:?}: {done:?}");
        assert_never_shown(&done.stderr);
        assert_never_shown(&done.stdout);
    }
}
