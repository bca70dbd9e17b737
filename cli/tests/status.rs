//! `redlock status KEY` end to end, against real servers: a line per
//! master, and the exit status for held (0), free (1), neither (2),
//! masters out of reach (69) and a wrong command line (64).

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, released, until};
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
