//! `redlock run -k KEY -k KEY ... -- COMMAND`: several keys held as one
//! lock (the library's set calls), against real servers.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, listening_for_release, redlock_run, released, until, Scratch};
use std::fs;
use std::process::Stdio;
use support::Cluster;

/// A command that writes `REDLOCK_KEY` to `started`, then waits until
/// `end` exists.
fn holder(scratch: &Scratch) -> String {
    format!(
        "printf '%s' \"$REDLOCK_KEY\" > {keys}; echo up > {started}; \
         while [ ! -e {end} ]; do sleep 0.02; done",
        keys = scratch.file("keys"),
        started = scratch.file("started"),
        end = scratch.file("end"),
    )
}

/// The value of `key` on each master of `cluster` (`None` where absent).
fn values(cluster: &Cluster, key: &str) -> Vec<Option<Vec<u8>>> {
    cluster
        .servers
        .iter()
        .map(|server| server.get(key.as_bytes()))
        .collect()
}

/// Two keys: both are on every master, with one value (the tool's lock
/// value, the same for the whole set and on every master), while the
/// command runs; the command gets both keys; nothing is left after.
#[test]
fn two_keys_are_held_while_the_command_runs_and_released_after() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let tool = redlock_run(
        &cluster,
        &[
            "--json",
            "-k",
            "set:b",
            "--key",
            "set:a",
            "-c",
            &holder(&scratch),
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawning redlock");
    let started = std::time::Instant::now();
    scratch.wait_for("started");

    let a = values(&cluster, "set:a");
    let b = values(&cluster, "set:b");
    let value = a[0].clone().expect("set:a on the first master");
    assert!(!value.is_empty());
    for (on_a, on_b) in a.iter().zip(&b) {
        assert_eq!(on_a.as_ref(), Some(&value), "set:a, every master: {a:?}");
        assert_eq!(on_b.as_ref(), Some(&value), "set:b, every master: {b:?}");
    }
    assert_eq!(cluster.total_keys(), 6, "two keys on each of 3 masters");
    assert_eq!(
        scratch.read("keys").as_deref(),
        Some("set:a\nset:b"),
        "REDLOCK_KEY: the keys, sorted, one per line"
    );

    fs::write(scratch.file("end"), "").expect("ending the command");
    let done = harness::collect(tool, started);
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    released(&cluster, "both keys, after the command");
    let report: serde_json::Value =
        serde_json::from_str(done.stderr.lines().last().expect("the report")).expect("JSON");
    assert_eq!(report["keys"], serde_json::json!(["set:a", "set:b"]));
    assert_eq!(report["key"], serde_json::Value::Null);
    assert_eq!(report["acquired"], true);
    // A quorum at least: the round decides as soon as 2 of 3 granted.
    let confirmed = report["confirmed_by"].as_u64().expect("confirmed_by");
    assert!((2..=3).contains(&confirmed), "{report}");
    assert_eq!(report["end"], "released");
}

/// While a run holds {a, b}: a run of b alone, or of {b, c}, with one
/// attempt exits 1 as for one key held elsewhere, leaving c free; one
/// without a limit waits (listening for b's release) and runs once the
/// first run ends.
#[test]
fn a_second_run_on_one_of_the_keys_fails_once_or_waits_as_for_one_key() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let mut first = redlock_run(
        &cluster,
        &["-k", "job:a", "-k", "job:b", "-c", &holder(&scratch)],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawning redlock");
    scratch.wait_for("started");
    let ran = format!("touch {}", scratch.file("ran"));

    let done = finish(redlock_run(&cluster, &["-n", "job:b", "-c", &ran]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(done.stderr.contains("job:b is held elsewhere"), "{done:?}");
    let done = finish(redlock_run(
        &cluster,
        &["-n", "-k", "job:c", "-k", "job:b", "-c", &ran],
    ));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("one or more of job:b, job:c is held elsewhere"),
        "{done:?}"
    );
    assert_eq!(scratch.read("ran"), None, "never ran while held elsewhere");
    assert!(
        cluster.servers.iter().all(|s| s.get(b"job:c").is_none()),
        "a refused set holds nothing"
    );

    let mut waiting = redlock_run(&cluster, &["-k", "job:c", "-k", "job:b", "-c", &ran])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning redlock");
    until("the set's run to wait for job:b", || {
        listening_for_release(&cluster, "job:b")
    });
    assert_eq!(waiting.try_wait().expect("try_wait"), None, "still waiting");
    assert_eq!(scratch.read("ran"), None, "not run while job:b is held");
    assert!(
        cluster.servers.iter().all(|s| s.get(b"job:c").is_none()),
        "nothing held while waiting"
    );

    fs::write(scratch.file("end"), "").expect("ending the first command");
    assert!(harness::wait(&mut first, harness::PATIENCE).success());
    let status = harness::wait(&mut waiting, harness::PATIENCE);
    assert!(status.success(), "{status:?}");
    assert!(scratch.read("ran").is_some(), "the waiting run ran");
    released(&cluster, "every key");
}

/// `-k a -k a` is the lock `a` alone: one key on each master, named as
/// the KEY argument would be.
#[test]
fn a_key_given_twice_is_one_key() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let count = format!(
        "printf '%s' \"$REDLOCK_KEY\" > {keys}",
        keys = scratch.file("keys")
    );
    let done = finish(redlock_run(
        &cluster,
        &["--json", "-k", "one", "-k", "one", "-c", &count],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(scratch.read("keys").as_deref(), Some("one"));
    let report: serde_json::Value =
        serde_json::from_str(done.stderr.lines().last().expect("the report")).expect("JSON");
    assert_eq!(report["key"], "one");
    assert_eq!(report["keys"], serde_json::json!(["one"]));
    released(&cluster, "the key");
}

/// A fenced set: COMMAND gets the set's one token, above the token an
/// earlier lock of one of its keys got; nothing is left after.
#[test]
fn a_set_with_fence_gives_command_one_token_above_its_keys_earlier_ones() {
    let cluster = Cluster::start(3);
    let init = finish(harness::redlock().args([
        "fence",
        "init",
        "--nodes",
        &harness::nodes(&cluster),
        "--node-timeout",
        "1s",
    ]));
    assert_eq!(init.status.code(), Some(0), "{init:?}");
    let show = "echo $REDLOCK_FENCE_TOKEN";
    let token = |done: &harness::Finished| -> u64 {
        assert_eq!(done.status.code(), Some(0), "{done:?}");
        done.stdout.trim().parse().expect("a token")
    };
    let one = token(&finish(redlock_run(
        &cluster,
        &["--fence", "f:a", "-c", show],
    )));
    let set = token(&finish(redlock_run(
        &cluster,
        &["--fence", "-k", "f:a", "-k", "f:b", "-c", show],
    )));
    assert!(set > one, "the set's {set} after f:a's {one}");
    // The fence domain's hash stays on each master; the keys go.
    until("the set's keys released", || cluster.total_keys() == 3);
}

/// With -k, COMMAND must follow `--` (or be -c's): a line without it is a
/// usage error, not a run with redlock's options taken from COMMAND's.
#[test]
fn keys_without_double_dash_are_a_usage_error() {
    let cluster = Cluster::start(1);
    let done = finish(redlock_run(&cluster, &["-k", "u:a", "-k", "u:b", "true"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");
    assert!(done.stderr.contains("goes after --"), "{done:?}");
    assert_eq!(cluster.total_keys(), 0);
}
