//! `redlock` and masters with replicas, on real servers: the replica
//! guard (`--replica-ack N[,TIMEOUT]`).

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock};
use support::{OwnedReply, Replicated};

/// Three masters, each with one replica that its `WAIT` already counts.
fn masters_with_replicas() -> Vec<Replicated> {
    let sets: Vec<Replicated> = (0..3).map(|_| Replicated::start(1)).collect();
    for set in &sets {
        let counted = set.node(0).cmd(&["WAIT", "1", "10000"]);
        assert_eq!(counted, OwnedReply::Integer(1), "{}", set.logs());
    }
    sets
}

fn run_on(sets: &[Replicated], guard: Option<&str>, key: &str) -> harness::Finished {
    let nodes: Vec<String> = sets.iter().map(|s| s.url(s.master())).collect();
    let mut command = redlock();
    command
        .args([
            "run",
            "--nodes",
            &nodes.join(","),
            "--node-timeout",
            "5s",
            "-n",
        ])
        .env_remove("REDLOCK_NODES");
    if let Some(guard) = guard {
        command.args(["--replica-ack", guard]);
    }
    command.args([key, "true"]);
    finish(command)
}

#[test]
fn replica_ack_counts_a_master_only_once_its_replica_confirms() {
    let sets = masters_with_replicas();
    let done = run_on(&sets, Some("1,1s"), "job:guarded");
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    // Two masters' replicas miss what follows: their grants do not count.
    for set in &sets[..2] {
        set.wait_synced();
        set.cut_link(1);
    }
    let done = run_on(&sets, Some("1,1s"), "job:guarded");
    assert_eq!(done.status.code(), Some(69), "{done:?}");
    assert!(done.stderr.contains("replicas"), "{}", done.stderr);
    // Nothing is left behind on the masters that granted.
    harness::until("the refused grants released", || {
        sets.iter().all(|s| s.node(0).dbsize() == 0)
    });
    // Without the guard, the same masters grant.
    let done = run_on(&sets, None, "job:guarded");
    assert_eq!(done.status.code(), Some(0), "{done:?}");
}

/// `sentinel(SENTINEL,...;NAME)`: the three masters of the shared
/// Sentinel set as voters, from `REDLOCK_NODES`; `status` names them as
/// written.
#[test]
fn sentinel_entries_lock_through_the_masters_the_sentinels_name() {
    let set = support::shared_sentinels();
    let sentinels = set.sentinel_urls().join(",");
    let list: Vec<String> = support::SentinelSet::NAMES
        .iter()
        .map(|name| format!("sentinel({sentinels};{name})"))
        .collect();
    let list = list.join(" ");
    let marker = "sentinel-cli:held";
    let done = finish(
        redlock()
            .env("REDLOCK_NODES", &list)
            .args(["run", "--node-timeout", "2s", "-n", "job:sentinel", "--"])
            .args(["sh", "-c", &format!("echo {marker}")]),
    );
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(done.stdout.contains(marker), "{done:?}");
    let done = finish(redlock().env("REDLOCK_NODES", &list).args([
        "status",
        "--node-timeout",
        "2s",
        "job:sentinel",
    ]));
    assert!(
        done.stdout.contains("sentinel(") && done.stdout.contains(";alpha)"),
        "{done:?}"
    );
    // A sentinel group without its master's name is a configuration error.
    let done = finish(
        redlock()
            .env("REDLOCK_NODES", format!("sentinel({sentinels})"))
            .args(["run", "-n", "job:sentinel", "true"]),
    );
    assert_eq!(done.status.code(), Some(78), "{done:?}");
    assert!(done.stderr.contains("names no master"), "{done:?}");
}
