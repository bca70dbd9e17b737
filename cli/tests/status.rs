//! `redlock status KEY` end to end, against real servers: a line per
//! master, and the exit status for held (0), free (1), neither (2),
//! masters out of reach (69) and a wrong command line (64); who holds the
//! lock (its holder label, from the library or `redlock run
//! --holder-label`), never its secret.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, redlock_run, released, until};
use redlock_sync::Redlock;
use std::process::Command;
use std::time::Duration;
use support::Cluster;

/// `redlock status --nodes URL,... ARGS...`, with a node timeout a loaded
/// machine meets: the lines below want every master's answer (the
/// default, 200 ms, can be missed there).
fn status(cluster: &Cluster, args: &[&str]) -> Command {
    let mut command = redlock();
    command
        .arg("status")
        .arg("--nodes")
        .arg(harness::nodes(cluster))
        .args(["--node-timeout", "1s"])
        .args(args);
    command
}

#[test]
fn a_held_lock_shows_per_master_and_exits_0() {
    let cluster = Cluster::start(3);
    let client = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let lock = client.lock("deploy:web", Duration::from_secs(30)).unwrap();
    // The call returned at a quorum: the last master may set the key a
    // moment later.
    until("the key set on every master", || cluster.total_keys() == 3);
    let done = finish(status(&cluster, &["deploy:web"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a summary and a line per master: {done:?}");
    assert!(
        lines[0].starts_with("deploy:web: held on 3 of 3 masters (quorum 2) for at least "),
        "{done:?}"
    );
    for (line, server) in lines[1..].iter().zip(&cluster.servers) {
        assert!(
            line.contains(&format!("127.0.0.1:{}", server.port())),
            "{line}"
        );
        assert!(line.contains("held, expires in "), "{line}");
    }
    assert!(done.stderr.is_empty(), "{done:?}");
    lock.unlock().unwrap();
    released(&cluster, "after the unlock");

    let done = finish(status(&cluster, &["-q", "deploy:web"]));
    assert_eq!(done.status.code(), Some(1), "free now: {done:?}");
    assert!(done.stdout.is_empty(), "-q prints nothing: {done:?}");
    let done = finish(status(&cluster, &["deploy:web"]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.stdout.starts_with("deploy:web: free on 3 of 3"),
        "{done:?}"
    );
    assert_eq!(done.stdout.matches(" free\n").count(), 3, "{done:?}");
    assert_eq!(cluster.total_keys(), 0, "status sets nothing");
}

#[test]
fn neither_held_nor_free_exits_2_and_no_quorum_exits_69() {
    let mut cluster = Cluster::start(3);
    cluster.servers[0].cmd(&["SET", "job", "x", "PX", "60000"]);
    cluster.servers[2].kill();
    let done = finish(status(&cluster, &["job"]));
    assert_eq!(done.status.code(), Some(2), "{done:?}");
    assert!(done.stdout.contains("neither held nor free"), "{done:?}");
    assert!(
        done.stdout.contains("no answer: connection refused"),
        "{done:?}"
    );
    cluster.servers[1].kill();
    let done = finish(status(&cluster, &["job"]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(done.stderr.contains("cannot look at job"), "{done:?}");
}

#[test]
fn a_wrong_command_line_exits_64() {
    for args in [&[][..], &["--bogus", "k"], &["k", "extra"], &[""]] {
        let done = finish(redlock().arg("status").args(args));
        assert_eq!(done.status.code(), Some(64), "{args:?}: {done:?}");
    }
    let done = finish(redlock().arg("--help"));
    assert!(
        done.stdout.contains("redlock status [OPTIONS] KEY"),
        "{done:?}"
    );
}

const LABEL: &str = "web-3 pid 4242";

/// A lock taken by a handle with a holder label: `status` says who holds
/// it in its summary and on each master's line, and `--json` in
/// `holder_label` (the lock's and each master's), and neither shows the
/// lock's secret (the value's first 40 bytes) or any long piece of it.
#[test]
fn status_says_who_holds_the_lock_and_never_its_secret() {
    let cluster = Cluster::start(3);
    let client = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .holder_label(LABEL)
        .build()
        .unwrap();
    let lock = client.lock("deploy:web", Duration::from_secs(30)).unwrap();
    until("the key set on every master", || cluster.total_keys() == 3);
    let value = cluster.servers[0].get(b"deploy:web").expect("set");
    let secret = String::from_utf8(value[..40].to_vec()).unwrap();
    assert_eq!(&value[40..], format!("|{LABEL}").as_bytes());

    let done = finish(status(&cluster, &["deploy:web"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{done:?}");
    let holder = format!(", holder \"{LABEL}\"");
    assert!(
        lines[0].starts_with("deploy:web: held on 3 of 3 masters (quorum 2) for at least ")
            && lines[0].ends_with(&holder),
        "{done:?}"
    );
    for line in &lines[1..] {
        assert!(
            line.contains("held, expires in ") && line.ends_with(&holder),
            "{line}"
        );
    }
    let json = finish(status(&cluster, &["--json", "deploy:web"]));
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    assert_eq!(doc["holder_label"], LABEL, "{doc}");
    for master in doc["masters"].as_array().expect("masters") {
        assert_eq!(master["holder_label"], LABEL, "{master}");
    }
    for shown in [&done.stdout, &done.stderr, &json.stdout, &json.stderr] {
        for piece in [&secret[..], &secret[..20], &secret[20..]] {
            assert!(!shown.contains(piece), "the secret shows: {shown}");
        }
    }
    lock.unlock().unwrap();
    released(&cluster, "after the unlock");
}

/// `redlock run --holder-label` stores its label with the lock: a
/// `redlock status` run under the lock (the command itself) says who
/// holds it. Without the option, no holder is shown. A bad label is the
/// library's typed configuration error: exit 78 before any lock.
#[test]
fn run_with_a_holder_label_is_shown_by_status() {
    let cluster = Cluster::start(3);
    let nodes = harness::nodes(&cluster);
    let look = [
        env!("CARGO_BIN_EXE_redlock"),
        "status",
        "--nodes",
        &nodes,
        "--node-timeout",
        "1s",
        "nightly",
    ];
    let mut args = vec!["--holder-label", "backup@db-2", "nightly", "--"];
    args.extend(look);
    let done = finish(redlock_run(&cluster, &args));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let summary = done.stdout.lines().next().unwrap_or_default();
    assert!(
        summary.starts_with("nightly: held on ") && summary.ends_with(", holder \"backup@db-2\""),
        "{done:?}"
    );
    released(&cluster, "after the run");

    let mut args = vec!["nightly", "--"];
    args.extend(look);
    let done = finish(redlock_run(&cluster, &args));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(done.stdout.starts_with("nightly: held on "), "{done:?}");
    assert!(
        !done.stdout.contains("holder"),
        "no label, no holder: {done:?}"
    );
    released(&cluster, "after the second run");

    let done = finish(redlock_run(
        &cluster,
        &["--holder-label", "a|b", "nightly", "--", "true"],
    ));
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    assert!(
        done.stderr.contains("holder label may not hold '|'"),
        "{done:?}"
    );
    assert_eq!(cluster.total_keys(), 0, "nothing locked");
}
