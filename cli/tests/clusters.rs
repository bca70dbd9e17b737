//! `redlock` with cluster voters, on real Redis or Valkey Clusters (the
//! library's test support starts them): `--cluster URL,...` and
//! `cluster(URL,...)` in `REDLOCK_NODES`, mixed with a standalone master,
//! one vote each; `redlock status` on them; and malformed cluster entries
//! refused as configuration errors without showing a password.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, finish, redlock, Scratch, PATIENCE};
use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Instant;
use support::{shared_clusters, unique_prefix, Cluster, OwnedReply, RedisCluster};

/// `cluster(SEED,SEED,...)`: a cluster as one entry of a list.
fn group(cluster: &RedisCluster) -> String {
    format!("cluster({})", cluster.seeds().join(","))
}

/// `REDLOCK_NODES` for two clusters and a master, in the list's form,
/// with blanks and commas around the groups.
fn nodes_list(clusters: &[RedisCluster], master: &Cluster) -> String {
    format!(
        "{} ,\n{}  {}",
        group(&clusters[0]),
        group(&clusters[1]),
        master.urls()[0]
    )
}

/// `redlock ARGS...` with the two clusters as `--cluster` options and the
/// master as `--nodes`.
fn with_options(clusters: &[RedisCluster], master: &Cluster, args: &[&str]) -> Command {
    let mut command = redlock();
    command.arg(args[0]);
    for cluster in clusters {
        command.arg("--cluster").arg(cluster.seeds().join(","));
    }
    command.arg("--nodes").arg(master.urls()[0].clone());
    command.args(&args[1..]);
    command
}

/// Whether `key` is on the master of `cluster` that owns its slot.
fn exists_on(cluster: &RedisCluster, key: &str) -> bool {
    match cluster.cmd_for_key(key.as_bytes(), &["EXISTS", key]) {
        OwnedReply::Integer(n) => n == 1,
        other => panic!("EXISTS {key}: {other:?}"),
    }
}

/// Waits (at most [`harness::PATIENCE`]) until `key` is on none of the
/// voters: a run returns once a quorum released it, the last voter may
/// still be at it.
fn wait_until_released(clusters: &[RedisCluster], master: &Cluster, key: &str) {
    harness::until(&format!("{key} released on every voter"), || {
        clusters.iter().all(|c| !exists_on(c, key)) && master.total_keys() == 0
    });
}

/// Two clusters and a standalone master are three voters (quorum 2):
/// concurrent runs of one key, half given the voters as `--cluster` and
/// `--nodes` options and half as `REDLOCK_NODES` with `cluster(...)`
/// entries, all run their command, one at a time. The referee is the file
/// system (mkdir fails if the directory exists), as in `exclusion.rs`.
#[test]
fn runs_on_two_clusters_and_a_master_never_overlap() {
    let clusters = shared_clusters(2);
    let master = Cluster::start(1);
    let key = format!("{}job", unique_prefix("run"));
    let scratch = Scratch::new();
    let script = format!(
        "mkdir {inside} 2>/dev/null || echo overlap >> {violations}; \
         echo run >> {runs}; sleep 0.05; rmdir {inside}",
        inside = scratch.file("inside"),
        violations = scratch.file("violations"),
        runs = scratch.file("runs"),
    );
    let runs = 6;
    let started = Instant::now();
    let tools: Vec<_> = (0..runs)
        .map(|n| {
            let mut command = if n % 2 == 0 {
                with_options(clusters, &master, &["run", &key, "-c", &script])
            } else {
                let mut command = redlock();
                command
                    .env("REDLOCK_NODES", nodes_list(clusters, &master))
                    .args(["run", &key, "-c", &script]);
                command
            };
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawning redlock")
        })
        .collect();
    for tool in tools {
        let done = collect(tool, started);
        assert!(done.status.success(), "{done:?}");
        assert!(done.stderr.is_empty(), "{done:?}");
    }
    assert_eq!(scratch.read("violations"), None, "two commands overlapped");
    assert_eq!(
        scratch.read("runs").map(|r| r.lines().count()),
        Some(runs),
        "every run ran its command"
    );
    wait_until_released(clusters, &master, &key);
}

/// While a run's command runs, `redlock status` (run by the command, with
/// the `REDLOCK_NODES` it inherits) sees the lock held on a quorum of the
/// three voters, a line each, the clusters named `cluster(HOST:PORT,...)`;
/// after the run, `redlock status` with `--cluster` options sees it free.
#[test]
fn status_on_cluster_voters_sees_the_lock_held_then_free() {
    let clusters = shared_clusters(2);
    let master = Cluster::start(1);
    let key = format!("{}status", unique_prefix("status"));
    let done = finish(
        redlock()
            .env("REDLOCK_NODES", nodes_list(clusters, &master))
            .env("REDLOCK", env!("CARGO_BIN_EXE_redlock"))
            .args(["run", &key, "-c", "\"$REDLOCK\" status \"$REDLOCK_KEY\""]),
    );
    assert_eq!(done.status.code(), Some(0), "held: {done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a summary and a line per voter: {done:?}");
    assert!(
        lines[0].starts_with(&format!("{key}: held on "))
            && lines[0].contains(" of 3 masters (quorum 2)"),
        "{done:?}"
    );
    for (line, cluster) in lines[1..3].iter().zip(clusters) {
        let name = format!("cluster(127.0.0.1:{},", cluster.node(0).port());
        assert!(line.trim_start().starts_with(&name), "{line}");
    }
    assert!(
        lines[3]
            .trim_start()
            .starts_with(&format!("127.0.0.1:{}", master.servers[0].port())),
        "{done:?}"
    );
    let held = lines[1..]
        .iter()
        .filter(|l| l.contains("  held, expires in "))
        .count();
    assert!(held >= 2, "held on a quorum: {done:?}");
    wait_until_released(clusters, &master, &key);

    let done = finish(with_options(clusters, &master, &["status", &key]));
    assert_eq!(done.status.code(), Some(1), "free: {done:?}");
    assert!(
        done.stdout
            .starts_with(&format!("{key}: free on 3 of 3 masters (quorum 2)")),
        "{done:?}"
    );
    assert_eq!(done.stdout.matches("  free\n").count(), 3, "{done:?}");
}

const PASSWORD: &str = "s3cret-Pa55word";

/// A cluster entry that cannot be read, from every source, is a
/// configuration error (78) that names the source and shows no password;
/// `--cluster` without its value is a usage error (64). Nothing is
/// started, so no server is needed.
#[test]
fn a_malformed_cluster_entry_is_a_configuration_error_without_the_password() {
    let seed = format!("redis://:{PASSWORD}@127.0.0.1:1");
    let malformed = [
        format!("cluster({seed}"),
        format!("cluster({seed}))"),
        format!("cluster(cluster({seed}))"),
        format!("cluster ({seed})"),
        format!("sentinel({seed})"),
        "cluster()".to_string(),
        // Read, but a seed the library refuses: shown without its password.
        format!("cluster(redis://:{PASSWORD}@127.0.0.1:notaport)"),
    ];
    let scratch = Scratch::new();
    let file = scratch.file("nodes");
    for list in &malformed {
        fs::write(&file, format!("# voters\n{list}\n")).expect("writing the nodes file");
        let with_nodes = ["status", "--nodes", list, "k"];
        let with_file = ["status", "--nodes-file", &file, "k"];
        let mut from_env = redlock();
        from_env
            .env("REDLOCK_NODES", list)
            .args(["run", "k", "true"]);
        let inner = list
            .strip_prefix("cluster(")
            .and_then(|l| l.strip_suffix(')'))
            .unwrap_or(list);
        let with_cluster = ["fence", "repair", "--cluster", inner];
        let mut commands = vec![from_env];
        for args in [&with_nodes[..], &with_file, &with_cluster] {
            let mut command = redlock();
            command.args(args);
            commands.push(command);
        }
        for mut command in commands {
            let done = finish(&mut command);
            // `--cluster` takes URLs: a list the grammar reads is refused as
            // a configuration error; one it cannot read as well.
            assert_eq!(done.status.code(), Some(78), "{list}: {done:?}");
            assert!(!done.stderr.is_empty(), "{list}: says why: {done:?}");
            assert!(
                !done.stderr.contains(PASSWORD) && !done.stdout.contains(PASSWORD),
                "{list}: {done:?}"
            );
        }
    }
    let done = finish(redlock().args(["status", "--cluster"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");
}

/// A password-protected cluster, the only voter, its password from
/// `REDLOCK_PASSWORD` (given to every seed, and by the library to every
/// node it finds): the run succeeds, and neither its output nor its
/// command's environment holds the password; `REDLOCK_NODES` with the
/// password in a `cluster(...)` seed is not handed on to the command.
#[test]
fn a_protected_cluster_takes_the_password_from_the_environment_and_never_shows_it() {
    let cluster = RedisCluster::start_with_auth(
        3,
        0,
        &["--requirepass", PASSWORD, "--masterauth", PASSWORD],
        &[PASSWORD],
    );
    let done = finish(
        redlock()
            .env("REDLOCK_PASSWORD", PASSWORD)
            .args(["run", "-v", "--cluster", &cluster.seeds().join(",")])
            .args(["protected", "-c", "env"]),
    );
    assert!(done.status.success(), "{done:?}");
    assert!(done.stderr.contains("locked protected"), "{done:?}");
    assert!(!done.stdout.contains(PASSWORD), "{done:?}");
    assert!(!done.stderr.contains(PASSWORD), "{done:?}");

    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("redis://:{PASSWORD}@127.0.0.1:{}", n.port()))
        .collect();
    let done = finish(
        redlock()
            .env("REDLOCK_NODES", format!("cluster({})", seeds.join(", ")))
            .args(["run", "-v", "protected", "-c", "env"]),
    );
    assert!(done.status.success(), "{done:?}");
    assert!(!done.stdout.contains(PASSWORD), "{done:?}");
    assert!(!done.stdout.contains("REDLOCK_NODES="), "{done:?}");
    assert!(!done.stderr.contains(PASSWORD), "{done:?}");
    let deadline = Instant::now() + PATIENCE;
    while cluster.nodes().iter().any(|n| n.dbsize() > 0) {
        assert!(
            Instant::now() < deadline,
            "the lock was left on the cluster"
        );
        thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Several keys (`-k a -k b`) with cluster voters among the masters (once
/// refused with exit 78): the command runs (exit 0), and after it neither
/// key is on its slot's owner in either cluster, nor on the master.
#[test]
fn a_set_of_keys_with_cluster_voters_runs_the_command_and_leaves_no_key() {
    let clusters = shared_clusters(2);
    let master = Cluster::start(1);
    let prefix = unique_prefix("set");
    let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
    let scratch = Scratch::new();
    let ran = format!("touch {}", scratch.file("ran"));
    let done = finish(with_options(
        clusters,
        &master,
        &["run", "-n", "-k", &a, "-k", &b, "-c", &ran],
    ));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert_eq!(scratch.read("ran"), Some(String::new()), "the command ran");
    assert!(clusters
        .iter()
        .all(|c| !exists_on(c, &a) && !exists_on(c, &b)));
    assert_eq!(master.total_keys(), 0);
}
