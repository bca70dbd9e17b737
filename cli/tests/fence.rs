//! `redlock fence init` and `redlock fence repair` end to end, against real
//! servers: an initialised domain gives `redlock run --fence` tokens above
//! the start; a second init is refused (exit 1) and writes nothing; a
//! master restarted empty is brought back by the repair; masters out of
//! reach exit 69; a wrong command line 64; no password is ever printed.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, Finished};
use redlock_sync::{Error, Redlock};
use std::process::Command;
use std::time::Duration;
use support::{Cluster, OwnedReply};

/// The tool's node timeout in these tests: they want every master's
/// answer, which the default (200 ms) does not promise on a loaded machine.
const NODE_TIMEOUT: [&str; 2] = ["--node-timeout", "1s"];

/// `redlock fence ACTION --nodes URL,... --node-timeout 1s ARGS...`.
fn fence(cluster: &Cluster, action: &str, args: &[&str]) -> Command {
    let mut command = redlock();
    command
        .arg("fence")
        .arg(action)
        .arg("--nodes")
        .arg(harness::nodes(cluster))
        .args(NODE_TIMEOUT)
        .args(args);
    command
}

/// The lines after the summary, one per master, in the cluster's order.
fn master_lines(done: &Finished, cluster: &Cluster) -> Vec<String> {
    let lines: Vec<&str> = done.stdout.lines().skip(1).collect();
    assert_eq!(lines.len(), cluster.servers.len(), "{done:?}");
    for (line, server) in lines.iter().zip(&cluster.servers) {
        assert!(
            line.contains(&format!("127.0.0.1:{}", server.port())),
            "{line}"
        );
    }
    lines.iter().map(|line| line.to_string()).collect()
}

/// The default domain's counter on one master (`None`: no anchor).
fn counter(cluster: &Cluster, master: usize) -> Option<u64> {
    match cluster.servers[master].cmd(&["HGET", "redlock-sync:fence:default", "c"]) {
        OwnedReply::Bulk(n) => Some(String::from_utf8(n).unwrap().parse().unwrap()),
        _ => None,
    }
}

#[test]
fn init_anchors_every_master_then_a_fenced_run_gets_a_token_above_the_start() {
    let cluster = Cluster::start_with(3, &["--requirepass", "hunter2"]);
    let cluster = Cluster {
        servers: cluster
            .servers
            .into_iter()
            .map(|s| s.with_admin_auth(&["hunter2"]))
            .collect(),
    };
    let with_password = |mut command: Command| {
        command.env("REDLOCK_PASSWORD", "hunter2");
        finish(command)
    };
    let done = with_password(fence(&cluster, "init", &["--start", "1000"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(
        done.stdout
            .starts_with("fence domain default: initialised on 3 masters at 1000"),
        "{done:?}"
    );
    for line in master_lines(&done, &cluster) {
        assert!(line.ends_with("  anchored"), "{line}");
    }
    assert!(done.stderr.is_empty(), "{done:?}");
    assert_eq!(counter(&cluster, 1), Some(1000));

    let mut run = redlock();
    run.args(["run", "--fence", "--nodes", &harness::nodes(&cluster)])
        .args(NODE_TIMEOUT)
        .args(["job", "-c", "echo $REDLOCK_FENCE_TOKEN"]);
    let done = with_password(run);
    assert!(done.status.success(), "{done:?}");
    let token: u64 = done.stdout.trim().parse().expect("a token");
    assert!(token > 1000, "token {token} after --start 1000");

    // Again: refused, nothing written, each master named as anchored.
    let done = with_password(fence(&cluster, "init", &["--start", "0"]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.stdout.contains("already anchored on 3 of 3"),
        "{done:?}"
    );
    for line in master_lines(&done, &cluster) {
        assert!(line.ends_with("  already anchored"), "{line}");
    }
    assert!(done.stderr.contains("fence repair"), "{done:?}");
    assert!(counter(&cluster, 1) >= Some(token), "not reset");
    let done = with_password(fence(&cluster, "init", &["-q"]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(done.stdout.is_empty(), "-q prints nothing: {done:?}");

    // Even with the password in --nodes, it is never printed.
    let urls: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| format!("redis://:hunter2@127.0.0.1:{}", s.port()))
        .collect();
    for action in ["init", "repair"] {
        let done = finish(
            redlock()
                .args(["fence", action, "--nodes", &urls.join(",")])
                .args(NODE_TIMEOUT),
        );
        assert!(matches!(done.status.code(), Some(0 | 1)), "{done:?}");
        assert!(
            !done.stdout.contains("hunter2") && !done.stderr.contains("hunter2"),
            "{done:?}"
        );
    }
}

#[test]
fn repair_brings_back_a_master_restarted_empty() {
    let mut cluster = Cluster::start(3);
    let done = finish(fence(&cluster, "init", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let fenced = Redlock::builder()
        .nodes(cluster.urls())
        .fencing(true)
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let take = |redlock: &Redlock| -> Result<u64, Error> {
        let lock = redlock.try_lock("orders", Duration::from_secs(10))?;
        let lock = lock.expect("free");
        let token = lock.fence_token().unwrap();
        lock.unlock().unwrap();
        Ok(token)
    };
    let before = take(&fenced).unwrap();
    cluster.servers[0].restart(); // no persistence: its counter is gone
    let _ = fenced.ping(); // a new connection, which probes again
    {
        // Left out: with master 2 stopped too, no fenced lock.
        let _paused = cluster.servers[2].pause();
        assert!(
            take(&fenced).is_err(),
            "master 0 counted without its counter"
        );
    }

    let done = finish(fence(&cluster, "repair", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(
        done.stdout
            .starts_with("fence domain default: repaired: all 3 masters count"),
        "{done:?}"
    );
    for line in master_lines(&done, &cluster) {
        assert!(
            line.ends_with("anchored in the new epoch: counts"),
            "{line}"
        );
    }
    assert!(
        counter(&cluster, 0) >= Some(before),
        "re-anchored from the others"
    );
    // Master 0 counts again: with master 2 stopped, it makes the quorum.
    let _paused = cluster.servers[2].pause();
    let after = take(&fenced).expect("master 0 counts after the repair");
    assert!(after > before, "{after} after {before}");
}

#[test]
fn masters_out_of_reach_exit_69_and_nothing_is_written() {
    let mut cluster = Cluster::start(3);
    cluster.servers[2].kill();
    let done = finish(fence(&cluster, "init", &[]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    let lines = master_lines(&done, &cluster);
    assert!(lines[0].ends_with("not anchored yet"), "{done:?}");
    assert!(lines[2].contains("failed: connection refused"), "{done:?}");
    assert!(done.stderr.contains("every master must answer"), "{done:?}");
    assert_eq!(counter(&cluster, 0), None, "nothing written");

    // A majority without its counter: the repair cannot run.
    cluster.servers[2].restart();
    let done = finish(fence(&cluster, "init", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    cluster.servers[0].restart();
    cluster.servers[1].kill();
    let done = finish(fence(&cluster, "repair", &[]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(done.stderr.contains("not repaired"), "{done:?}");
    assert_eq!(counter(&cluster, 0), None, "not anchored without a quorum");
}

#[test]
fn a_wrong_command_line_exits_64_and_a_wrong_configuration_78() {
    for args in [
        &["fence"][..],
        &["fence", "seed"],
        &["fence", "init", "extra"],
        &["fence", "init", "--start"],
        &["fence", "init", "--start", "-1"],
        &["fence", "init", "--start", "many"],
        &["fence", "repair", "--start", "5"],
        &["fence", "repair", "--bogus"],
        &["fence", "init", "--fence-domain="],
        &["run", "--fence-domain", "d", "k", "true"],
    ] {
        let done = finish(redlock().args(args));
        assert_eq!(done.status.code(), Some(64), "{args:?}: {done:?}");
        // clap's error, or (for `fence` alone) the command's help.
        assert!(done.stderr.contains("--help"), "{args:?}: {done:?}");
        assert!(done.stdout.is_empty(), "{args:?}: {done:?}");
    }
    let done = finish(redlock().args(["fence", "repair"]));
    assert_eq!(done.status.code(), Some(78), "no masters: {done:?}");
    let done = finish(redlock().arg("--help"));
    assert!(
        done.stdout.contains("redlock fence init [--start N]"),
        "{done:?}"
    );
    let done = finish(redlock().args(["fence", "repair", "--help"]));
    assert!(
        done.stdout
            .contains("Run fence repair when a master is left out"),
        "{done:?}"
    );
}

/// Issue 31, item 7: a master that lost its fence anchor is told by
/// `redlock status --fence` and `redlock run --fence -v`, each with what to
/// run; and a repair that cannot run says what is wrong with each master
/// and what to do, not that no quorum answered.
#[test]
fn a_master_left_out_is_told_by_status_run_v_and_a_failed_repair() {
    let mut cluster = Cluster::start(3);
    let done = finish(fence(&cluster, "init", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    cluster.servers[0].restart(); // no persistence: its anchor is gone
    let left_out = format!("127.0.0.1:{}", cluster.servers[0].port());

    let mut status = redlock();
    status
        .args(["status", "--fence", "--nodes", &harness::nodes(&cluster)])
        .args(NODE_TIMEOUT)
        .arg("job");
    let done = finish(status);
    assert_eq!(done.status.code(), Some(1), "free: {done:?}");
    let fence_lines: Vec<&str> = done.stdout.lines().skip(4).collect();
    assert!(
        fence_lines[0].starts_with("fence domain default: 2 of 3 masters count (quorum 2)")
            && fence_lines[0].contains("run redlock fence repair"),
        "{done:?}"
    );
    assert!(
        fence_lines[1].contains(&left_out)
            && fence_lines[1].contains("left out: no fence anchor")
            && fence_lines[1].contains("redlock fence repair"),
        "{done:?}"
    );
    assert!(fence_lines[2].ends_with("  counts"), "{done:?}");

    let mut run = redlock();
    run.args(["run", "--fence", "-v", "--nodes", &harness::nodes(&cluster)])
        .args(NODE_TIMEOUT)
        .args(["job", "-c", "true"]);
    let done = finish(run);
    assert!(done.status.success(), "{done:?}");
    assert!(
        done.stderr.contains(&format!(
            "master {left_out} is left out of fenced locks: no fence anchor"
        )) && done.stderr.contains("redlock fence repair"),
        "{done:?}"
    );

    // A majority without its anchor: the repair says why, master by master.
    cluster.servers[1].restart();
    let done = finish(fence(&cluster, "repair", &[]));
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(
        done.stdout.starts_with(
            "fence domain default: not repaired: 1 of 3 masters kept their counter, 2 needed"
        ),
        "{done:?}"
    );
    let lines = master_lines(&done, &cluster);
    for line in &lines[..2] {
        assert!(
            line.ends_with("left out: no anchor (it lost its data)"),
            "{line}"
        );
    }
    assert!(
        done.stderr.contains("initialise the domain again")
            && done.stderr.contains("redlock fence init --start N")
            && !done.stderr.contains("no quorum"),
        "{done:?}"
    );
}

/// Issue 31, item 9: masters left in epochs none of which has a quorum
/// stop `redlock run --fence` with the operator's status (78) and the
/// cause, not 69 "no quorum of masters answered".
#[test]
fn masters_in_split_epochs_exit_78_naming_the_cause() {
    let mut cluster = Cluster::start(3);
    let done = finish(fence(&cluster, "init", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    cluster.servers[2].restart(); // no anchor
    {
        // The barrier reaches master 0 only.
        let _stopped = cluster.servers[1].pause();
        let done = finish(fence(&cluster, "repair", &[]));
        assert_eq!(done.status.code(), Some(69), "{done:?}");
    }
    let mut run = redlock();
    run.args(["run", "--fence", "--nodes", &harness::nodes(&cluster)])
        .args(NODE_TIMEOUT)
        .args(["job", "-c", "true"]);
    let done = finish(run);
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    assert!(
        done.stderr.contains("different fence epochs")
            && done.stderr.contains("redlock fence repair")
            && !done.stderr.contains("no quorum of masters"),
        "{done:?}"
    );
    let done = finish(fence(&cluster, "repair", &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
}
