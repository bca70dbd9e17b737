//! `redlock status -k KEY -k KEY ...`: several keys looked at as one set
//! (the library's `inspect_many`), against real servers: the set's
//! summary and each key's lines, the exit status (0 every key held, 1
//! every key free, 2 otherwise), and `--json` (`keys`, `by_key`).

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, released, until};
use redlock_sync::Redlock;
use std::process::Command;
use std::time::Duration;
use support::Cluster;

/// `redlock status --nodes URL,... ARGS...`, with a node timeout a loaded
/// machine meets (the lines below want every master's answer).
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

fn json(cluster: &Cluster, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let done = finish(status(cluster, &all));
    let doc = serde_json::from_str(&done.stdout).unwrap_or_else(|e| panic!("{e}: {done:?}"));
    (done.status.code(), doc)
}

const LABEL: &str = "transfer 17-42";

#[test]
fn status_of_a_set_shows_the_set_then_each_key_and_exits_by_the_whole_set() {
    let cluster = Cluster::start(3);
    let client = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .holder_label(LABEL)
        .build()
        .unwrap();
    let set = client
        .lock_many(["acct:42", "acct:17"], Duration::from_secs(30))
        .unwrap();
    until("both keys on every master", || cluster.total_keys() == 6);

    // Held: the set's line, then each key's summary and masters.
    let done = finish(status(&cluster, &["-k", "acct:42", "--key", "acct:17"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 1 + 2 * 4, "{done:?}");
    assert!(
        lines[0].starts_with(
            "{acct:17, acct:42}: held, every key on a quorum of masters, for at least "
        ) && lines[0].ends_with(&format!(", holder \"{LABEL}\"")),
        "{done:?}"
    );
    for (at, key) in [(1, "acct:17"), (5, "acct:42")] {
        assert!(
            lines[at].starts_with(&format!("{key}: held on 3 of 3 masters (quorum 2)")),
            "{done:?}"
        );
        for line in &lines[at + 1..at + 4] {
            assert!(line.contains("held, expires in "), "{line}");
        }
    }
    assert!(done.stderr.is_empty(), "{done:?}");

    let (code, doc) = json(&cluster, &["-k", "acct:42", "-k", "acct:17"]);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["key"], serde_json::Value::Null, "{doc}");
    assert_eq!(
        doc["keys"],
        serde_json::json!(["acct:17", "acct:42"]),
        "{doc}"
    );
    assert_eq!(doc["lock"], "held", "{doc}");
    assert_eq!(doc["quorum"], 2, "{doc}");
    assert_eq!(doc["holder_label"], LABEL, "{doc}");
    assert!(doc["held_for_ms"].as_u64().is_some(), "{doc}");
    assert_eq!(doc["masters"], serde_json::Value::Null, "{doc}");
    let by_key = doc["by_key"].as_array().expect("by_key");
    assert_eq!(by_key.len(), 2, "{doc}");
    for (each, key) in by_key.iter().zip(["acct:17", "acct:42"]) {
        assert_eq!(each["key"], key, "{each}");
        assert_eq!(each["lock"], "held", "{each}");
        assert_eq!(each["held_on"], 3, "{each}");
        assert_eq!(each["masters"].as_array().map(Vec::len), Some(3), "{each}");
    }

    // Free: every key.
    set.unlock().unwrap();
    released(&cluster, "after the set's unlock");
    let done = finish(status(&cluster, &["-k", "acct:17", "-k", "acct:42"]));
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    assert!(
        done.stdout
            .starts_with("{acct:17, acct:42}: free, every key absent from a quorum of masters\n"),
        "{done:?}"
    );
    let (code, doc) = json(&cluster, &["-k", "acct:17", "-k", "acct:42"]);
    assert_eq!((code, &doc["lock"]), (Some(1), &"free".into()), "{doc}");

    // Neither: one key held, the other free (the set cannot be taken).
    let one = client.lock("acct:42", Duration::from_secs(30)).unwrap();
    until("acct:42 on every master", || cluster.total_keys() == 3);
    let done = finish(status(&cluster, &["-k", "acct:17", "-k", "acct:42"]));
    assert_eq!(done.status.code(), Some(2), "{done:?}");
    assert!(
        done.stdout
            .starts_with("{acct:17, acct:42}: neither: 1 of 2 keys held, 1 free\n"),
        "{done:?}"
    );
    let (code, doc) = json(&cluster, &["-k", "acct:17", "-k", "acct:42"]);
    assert_eq!((code, &doc["lock"]), (Some(2), &"neither".into()), "{doc}");
    assert_eq!(doc["by_key"][1]["lock"], "held", "{doc}");
    assert_eq!(doc["by_key"][0]["lock"], "free", "{doc}");

    // One key given twice is that key, as `status KEY` shows it.
    let done = finish(status(&cluster, &["-k", "acct:42", "-k", "acct:42"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(done.stdout.lines().count(), 4, "{done:?}");
    assert!(
        done.stdout
            .starts_with("acct:42: held on 3 of 3 masters (quorum 2)"),
        "{done:?}"
    );
    let (_, doc) = json(&cluster, &["-k", "acct:42"]);
    assert_eq!(doc["key"], "acct:42", "{doc}");
    assert_eq!(doc["keys"], serde_json::json!(["acct:42"]), "{doc}");
    assert_eq!(doc["by_key"], serde_json::Value::Null, "{doc}");
    assert_eq!(doc["held_on"], 3, "{doc}");
    one.unlock().unwrap();

    // KEY and -k together are a usage error.
    let done = finish(status(&cluster, &["-k", "acct:17", "acct:42"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");
}
