//! `--json` end to end, against real servers: `redlock status --json`
//! (with and without `--fence`), `redlock fence init|repair --json` and
//! `redlock run --json`'s report, each parsed and checked field by field
//! against what the servers hold (the schema is cli/README.md's "JSON
//! output").

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, Finished};
use redlock_sync::Redlock;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use support::Cluster;

/// `redlock COMMAND... --nodes URL,... ARGS...`.
fn tool(cluster: &Cluster, command: &[&str], args: &[&str]) -> Command {
    let mut tool = redlock();
    tool.args(command)
        .arg("--nodes")
        .arg(harness::nodes(cluster))
        .args(args);
    tool
}

/// stdout as one JSON document on one line.
fn stdout_json(done: &Finished) -> Value {
    assert_eq!(done.stdout.lines().count(), 1, "one line: {done:?}");
    serde_json::from_str(&done.stdout).unwrap_or_else(|e| panic!("{e}: {done:?}"))
}

/// The last line of stderr as a JSON document (run's report).
fn report(done: &Finished) -> Value {
    let line = done.stderr.lines().last().expect("a report on stderr");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {done:?}"))
}

fn address(cluster: &Cluster, i: usize) -> String {
    format!("127.0.0.1:{}", cluster.servers[i].port())
}

/// The fields of an object, sorted: the schema's field list.
fn fields(value: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names
}

#[test]
fn status_json_gives_the_lock_and_each_master() {
    let mut cluster = Cluster::start(3);
    let client = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let lock = client.lock("deploy:web", Duration::from_secs(30)).unwrap();

    let done = finish(tool(&cluster, &["status", "--json"], &["deploy:web"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(
        fields(&doc),
        [
            "absent_on",
            "by_key",
            "fence",
            "held_for_ms",
            "held_on",
            "holder_label",
            "key",
            "keys",
            "lock",
            "masters",
            "quorum",
            "unknown_on"
        ]
    );
    assert_eq!(doc["key"], "deploy:web");
    // (`keys` and `by_key` are for `-k a -k b`: tests/status_sets.rs.)
    assert_eq!(doc["keys"], serde_json::json!(["deploy:web"]));
    assert_eq!(doc["by_key"], Value::Null);
    assert_eq!(doc["lock"], "held");
    assert_eq!(
        (
            &doc["quorum"],
            &doc["held_on"],
            &doc["absent_on"],
            &doc["unknown_on"]
        ),
        (
            &Value::from(2),
            &Value::from(3),
            &Value::from(0),
            &Value::from(0)
        )
    );
    let held_for = doc["held_for_ms"].as_u64().expect("a number");
    assert!(held_for > 0 && held_for <= 30_000, "{doc}");
    assert_eq!(doc["fence"], Value::Null);
    assert_eq!(doc["holder_label"], Value::Null, "a lock without a label");
    let masters = doc["masters"].as_array().unwrap();
    assert_eq!(masters.len(), 3);
    for (i, master) in masters.iter().enumerate() {
        assert_eq!(
            fields(master),
            ["address", "error", "holder_label", "key", "ttl_ms"]
        );
        assert_eq!(master["holder_label"], Value::Null);
        assert_eq!(master["address"], address(&cluster, i));
        assert_eq!(master["key"], "held");
        let ttl = master["ttl_ms"].as_u64().expect("a number");
        assert!(ttl >= held_for && ttl <= 30_000, "{master}");
        assert_eq!(master["error"], Value::Null);
    }
    lock.unlock().unwrap();

    // Free on two, down on one: free (exit 1), the third unknown.
    cluster.servers[2].kill();
    let done = finish(tool(&cluster, &["status", "--json"], &["deploy:web"]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(doc["lock"], "free");
    assert_eq!(doc["held_for_ms"], Value::Null);
    assert_eq!(
        (&doc["held_on"], &doc["absent_on"], &doc["unknown_on"]),
        (&Value::from(0), &Value::from(2), &Value::from(1))
    );
    for master in &doc["masters"].as_array().unwrap()[..2] {
        assert_eq!(master["key"], "absent");
        assert_eq!(master["ttl_ms"], Value::Null);
    }
    let down = &doc["masters"][2];
    assert_eq!(down["key"], "unknown");
    assert_eq!(down["ttl_ms"], Value::Null);
    assert!(
        down["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{down}"
    );

    // Held on one, absent on one, down on one: neither (exit 2).
    cluster.servers[0].cmd(&["SET", "deploy:web", "x", "PX", "60000"]);
    let done = finish(tool(&cluster, &["status", "--json"], &["deploy:web"]));
    assert_eq!(done.status.code(), Some(2), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(doc["lock"], "neither");
    assert_eq!(doc["masters"][0]["key"], "held");
    assert_eq!(doc["masters"][1]["key"], "absent");

    // -q and --json do not go together.
    let done = finish(tool(&cluster, &["status", "-q", "--json"], &["deploy:web"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");
}

#[test]
fn fence_json_tells_each_masters_part_and_status_fence_json_who_counts() {
    let mut cluster = Cluster::start(3);
    let done = finish(tool(
        &cluster,
        &["fence", "init", "--json"],
        &["--start", "7"],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(
        fields(&doc),
        [
            "action",
            "domain",
            "done",
            "error",
            "exit_code",
            "masters",
            "start",
            "summary"
        ]
    );
    assert_eq!(
        (&doc["domain"], &doc["action"], &doc["start"], &doc["done"]),
        (
            &Value::from("default"),
            &Value::from("init"),
            &Value::from(7),
            &Value::from(true)
        )
    );
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["error"], Value::Null);
    assert!(doc["summary"]
        .as_str()
        .unwrap()
        .contains("tokens start at 8"));
    for (i, master) in doc["masters"].as_array().unwrap().iter().enumerate() {
        assert_eq!(fields(master), ["address", "detail", "fault", "state"]);
        assert_eq!(master["address"], address(&cluster, i));
        assert_eq!(master["state"], "anchored");
    }

    // A second init is refused: exit 1, every master already anchored.
    let done = finish(tool(&cluster, &["fence", "init", "--json"], &[]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(
        (&doc["done"], &doc["exit_code"]),
        (&Value::from(false), &Value::from(1))
    );
    assert!(doc["error"]
        .as_str()
        .unwrap()
        .contains("already initialised"));
    for master in doc["masters"].as_array().unwrap() {
        assert_eq!(master["state"], "already_anchored");
    }

    // A master restarted empty is left out: status --fence --json says
    // which and why.
    cluster.servers[0].restart();
    let done = finish(tool(&cluster, &["status", "--fence", "--json"], &["job"]));
    assert_eq!(done.status.code(), Some(1), "free: {done:?}");
    let fence = &stdout_json(&done)["fence"];
    assert_eq!(fields(fence), ["counting", "domain", "masters", "quorum"]);
    assert_eq!(
        (&fence["domain"], &fence["counting"], &fence["quorum"]),
        (&Value::from("default"), &Value::from(2), &Value::from(2))
    );
    let left_out = &fence["masters"][0];
    assert_eq!(left_out["address"], address(&cluster, 0));
    assert_eq!(left_out["state"], "left_out");
    assert_eq!(left_out["fault"], "unanchored");
    assert!(left_out["detail"]
        .as_str()
        .unwrap()
        .contains("redlock fence repair"));
    for master in &fence["masters"].as_array().unwrap()[1..] {
        assert_eq!(master["state"], "counts");
        assert_eq!(master["fault"], Value::Null);
    }

    // The repair brings it back: every master counts.
    let done = finish(tool(&cluster, &["fence", "repair", "--json"], &[]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let doc = stdout_json(&done);
    assert_eq!(
        (&doc["action"], &doc["start"], &doc["done"]),
        (&Value::from("repair"), &Value::Null, &Value::from(true))
    );
    for master in doc["masters"].as_array().unwrap() {
        assert_eq!(master["state"], "counts", "{doc}");
    }

    // A fenced run reports its token, above the start.
    let done = finish(tool(
        &cluster,
        &["run", "--fence", "--json"],
        &["job", "true"],
    ));
    assert!(done.status.success(), "{done:?}");
    let token = report(&done)["fence_token"].as_u64().expect("a token");
    assert!(token > 7, "{token}");
}

#[test]
fn run_json_reports_how_the_run_went() {
    let cluster = Cluster::start(3);
    let done = finish(tool(
        &cluster,
        &["run", "--json"],
        &["job", "--", "sh", "-c", "exit 3"],
    ));
    assert_eq!(done.status.code(), Some(3), "{done:?}");
    let doc = report(&done);
    assert_eq!(
        fields(&doc),
        [
            "acquire_us",
            "acquired",
            "confirmed_by",
            "end",
            "error",
            "exit_code",
            "fence_token",
            "kept_ms",
            "key",
            "keys",
            "masters",
            "outcome",
            "release_us",
            "signal",
            "validity_ms"
        ]
    );
    assert_eq!(doc["key"], "job");
    assert_eq!(doc["keys"], serde_json::json!(["job"]));
    assert_eq!(doc["outcome"], "completed");
    assert_eq!(doc["acquired"], true);
    assert!(doc["acquire_us"].as_u64().is_some(), "{doc}");
    assert_eq!(doc["masters"], 3);
    let confirmed = doc["confirmed_by"].as_u64().unwrap();
    assert!((2..=3).contains(&confirmed), "{doc}");
    let validity = doc["validity_ms"].as_u64().unwrap();
    assert!(validity > 0 && validity <= 30_000, "{doc}");
    assert_eq!(doc["fence_token"], Value::Null);
    assert_eq!(doc["end"], "released");
    assert!(doc["release_us"].as_u64().is_some(), "{doc}");
    assert_eq!(doc["kept_ms"], Value::Null);
    assert_eq!(
        (&doc["exit_code"], &doc["signal"]),
        (&Value::from(3), &Value::Null)
    );
    assert_eq!(doc["error"], Value::Null);
    assert!(done.stdout.is_empty(), "stdout is the command's: {done:?}");
    assert_eq!(cluster.total_keys(), 0);

    // --keep: the key stays, for about the TTL.
    let done = finish(tool(
        &cluster,
        &["run", "--json", "--keep", "--ttl", "20s"],
        &["kept", "true"],
    ));
    assert!(done.status.success(), "{done:?}");
    let doc = report(&done);
    assert_eq!(doc["end"], "kept");
    let kept = doc["kept_ms"].as_u64().unwrap();
    assert!(kept > 0 && kept <= 20_000, "{doc}");
    assert_eq!(doc["release_us"], Value::Null);

    // Held elsewhere: not acquired, the conflict's status.
    let done = finish(tool(
        &cluster,
        &["run", "--json", "-n", "-E", "9"],
        &["kept", "true"],
    ));
    assert_eq!(done.status.code(), Some(9), "{done:?}");
    let doc = report(&done);
    assert_eq!(doc["outcome"], "held_elsewhere");
    assert_eq!(doc["acquired"], false);
    assert_eq!(doc["exit_code"], 9);
    assert_eq!(
        (&doc["end"], &doc["validity_ms"], &doc["confirmed_by"]),
        (&Value::Null, &Value::Null, &Value::Null)
    );

    // A command that cannot be found: not started, the lock released.
    let done = finish(tool(
        &cluster,
        &["run", "--json"],
        &["job", "redlock-test-no-such-command"],
    ));
    assert_eq!(done.status.code(), Some(127), "{done:?}");
    let doc = report(&done);
    assert_eq!(doc["outcome"], "not_started");
    assert_eq!(doc["acquired"], true);
    assert!(doc["error"]
        .as_str()
        .unwrap()
        .contains("redlock-test-no-such-command"));
}

#[test]
fn run_json_reports_a_configuration_error_without_a_password() {
    let done = finish(
        redlock()
            .args(["run", "--json", "job", "true"])
            .env("REDLOCK_NODES", "redis://:s3cret@127.0.0.1:0"),
    );
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    let doc = report(&done);
    assert_eq!(doc["outcome"], "failed");
    assert_eq!(doc["acquired"], false);
    assert_eq!(doc["exit_code"], 78);
    assert_eq!(doc["masters"], Value::Null);
    assert!(
        doc["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{doc}"
    );
    assert!(!done.stderr.contains("s3cret"), "{done:?}");
}
