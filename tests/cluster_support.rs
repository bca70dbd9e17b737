//! Checks the cluster test support on real servers (whichever
//! `REDLOCK_TEST_SERVER` names): clusters start ready and agree, keys land
//! where the tests' own slot function says, slots move with their keys,
//! a migration stops halfway (ASK) and is finished or rolled back, a killed
//! master is replaced by its replica, shared clusters are started once and
//! cleaned up at exit; and, for the replica guard and Sentinel voters,
//! masters with replicas and sentinels do what those tests need.
//!
//! The measured times (start-up, failover) are printed: run with
//! `--nocapture` to see them.

mod support;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{
    key_in_slot, key_slot, shared_clusters, unique_prefix, OwnedReply, RedisCluster, Replicated,
    Role, Sentinels, SlotMap, NODE_TIMEOUT, SHARED_CLUSTERS, SHARED_SHARDS, SLOTS,
};

fn ok() -> OwnedReply {
    OwnedReply::Simple(b"OK".to_vec())
}

fn bulk(value: &str) -> OwnedReply {
    OwnedReply::Bulk(value.as_bytes().to_vec())
}

/// The text of an error reply; panics on any other reply.
fn error(reply: OwnedReply) -> String {
    match reply {
        OwnedReply::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

/// `CLUSTER KEYSLOT key` as the server computes it.
fn server_slot(cluster: &RedisCluster, key: &[u8]) -> u16 {
    match cluster.node(0).command(&[b"CLUSTER", b"KEYSLOT", key]) {
        Ok(OwnedReply::Integer(slot)) => u16::try_from(slot).expect("a slot"),
        other => panic!("CLUSTER KEYSLOT: {other:?}"),
    }
}

#[test]
fn a_cluster_starts_ready_and_every_node_agrees() {
    let started = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    println!(
        "3 shards, 1 replica each: ready after {:?}",
        started.elapsed()
    );

    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.shards(), 3);
    let ports: HashSet<u16> = cluster.nodes().iter().map(|n| n.port()).collect();
    assert_eq!(ports.len(), 6);
    let seeds = cluster.seeds();
    for (seed, node) in seeds.iter().zip(cluster.nodes()) {
        assert_eq!(seed, &format!("redis://127.0.0.1:{}", node.port()));
    }

    // Every node: state ok, and the same map with every slot served.
    let map = cluster.slot_map();
    assert!(map.covers_all(), "{map:?}");
    for (index, node) in cluster.nodes().iter().enumerate() {
        let OwnedReply::Bulk(info) = node.cmd(&["CLUSTER", "INFO"]) else {
            panic!("CLUSTER INFO")
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        assert!(info.contains("cluster_state:ok"), "node {index}: {info}");
        assert!(
            info.contains("cluster_known_nodes:6"),
            "node {index}: {info}"
        );
        assert_eq!(cluster.slot_map_seen_by(index).as_ref(), Some(&map));
        let parsed = SlotMap::parse(&node.cmd(&["CLUSTER", "SLOTS"])).expect("CLUSTER SLOTS");
        assert_eq!(parsed, map, "node {index}");
    }

    // Three masters, each with one replica that replicates it.
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    let mut replicas = HashSet::new();
    for &master in &masters {
        let of = cluster.replicas_of(master);
        assert_eq!(of.len(), 1, "replicas of node {master}");
        let OwnedReply::Array(role) = cluster.node(of[0]).cmd(&["ROLE"]) else {
            panic!("ROLE")
        };
        assert_eq!(role[0], bulk("slave"));
        assert_eq!(
            role[2],
            OwnedReply::Integer(i64::from(cluster.node(master).port()))
        );
        assert_eq!(role[3], bulk("connected"));
        replicas.extend(of);
        assert!(!cluster.slots_of(master).is_empty());
    }
    assert_eq!(replicas.len(), 3);

    // Each node has a bus port of its own, not port + 10000.
    let OwnedReply::Bulk(nodes) = cluster.node(0).cmd(&["CLUSTER", "NODES"]) else {
        panic!("CLUSTER NODES")
    };
    let nodes = String::from_utf8_lossy(&nodes).into_owned();
    for node in cluster.nodes() {
        let port = node.port();
        let line = nodes
            .lines()
            .find(|l| l.contains(&format!("127.0.0.1:{port}@")))
            .unwrap_or_else(|| panic!(":{port} not in\n{nodes}"));
        let after_at = line.split('@').nth(1).expect("@bus port");
        let digits: String = after_at.chars().take_while(char::is_ascii_digit).collect();
        let bus: u16 = digits.parse().expect("a bus port");
        assert_ne!(bus, port);
        assert!(!ports.contains(&bus), "bus port {bus} is a node's port");
    }

    // A key is served by the master the tests' slot function names; any
    // other master redirects to it.
    for key in ["a", "lock:orders", "{user1000}.following", "x{}y"] {
        let owner = cluster.master_of_key(key.as_bytes());
        assert_eq!(
            cluster.cmd_for_key(key.as_bytes(), &["SET", key, "v"]),
            ok()
        );
        let other = masters.iter().copied().find(|&m| m != owner).unwrap();
        let moved = error(cluster.node(other).cmd(&["GET", key]));
        let port = cluster.node(owner).port();
        assert_eq!(
            moved,
            format!("MOVED {} 127.0.0.1:{port}", key_slot(key.as_bytes()))
        );
        assert_eq!(
            cluster.node(owner).cmd(&["DEL", key]),
            OwnedReply::Integer(1)
        );
    }

    // A key placed on each master lands there.
    for &master in &masters {
        let key = cluster.key_on(master, "placed:");
        assert_eq!(cluster.master_of_key(key.as_bytes()), master);
        assert_eq!(cluster.node(master).cmd(&["SET", &key, "1"]), ok());
        assert_eq!(
            cluster.node(master).cmd(&["DEL", &key]),
            OwnedReply::Integer(1)
        );
    }
}

#[test]
fn key_slots_match_the_server() {
    let cluster = RedisCluster::start(3, 0);
    let mut keys: Vec<Vec<u8>> = [
        "",
        "a",
        "foo",
        "123456789",
        "{",
        "}",
        "{}",
        "{a",
        "a}",
        "{a}",
        "x{a}y",
        "{a}{b}",
        "{}{a}",
        "a{}b{c}",
        "{{a}}",
        "user:{1000}:x",
        "é{ü}",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    keys.push(vec![0, 255, b'{', 7, b'}', 128]);
    keys.extend((0..300).map(|n| format!("key:{n}:{}", n * 7919).into_bytes()));
    for key in &keys {
        assert_eq!(
            key_slot(key),
            server_slot(&cluster, key),
            "{:?}",
            key.escape_ascii().to_string()
        );
    }
    for slot in [0, 1, 5460, 5461, 12182, SLOTS - 1] {
        let key = key_in_slot("p:", slot);
        assert_eq!(server_slot(&cluster, key.as_bytes()), slot, "{key}");
    }
}

#[test]
fn a_slot_moves_with_its_keys_and_a_stale_map_meets_moved() {
    let cluster = RedisCluster::start(3, 0);
    let before = cluster.slot_map();
    let slot = 12182;
    let source = cluster.master_of_slot(slot);
    let target = cluster
        .masters()
        .into_iter()
        .find(|&m| m != source)
        .unwrap();
    let keys: Vec<String> = (0..3)
        .map(|n| key_in_slot(&format!("k{n}:"), slot))
        .collect();
    for key in &keys {
        assert_eq!(
            cluster.node(source).cmd(&["SET", key, key, "PX", "60000"]),
            ok()
        );
    }
    let persistent = key_in_slot("forever:", slot);
    assert_eq!(cluster.node(source).cmd(&["SET", &persistent, "1"]), ok());

    cluster.move_slot(slot, target);

    // Every node agrees; the map learnt before is stale for that slot only.
    let after = cluster.slot_map();
    let target_port = cluster.node(target).port();
    assert_eq!(after.owner(slot), Some(target_port));
    assert_eq!(before.owner(slot), Some(cluster.node(source).port()));
    for (index, _) in cluster.nodes().iter().enumerate() {
        assert_eq!(cluster.slot_map_seen_by(index).as_ref(), Some(&after));
    }
    for other in [0, slot - 1, slot + 1, SLOTS - 1] {
        assert_eq!(after.owner(other), before.owner(other), "slot {other}");
    }
    // The keys moved with their values and TTLs.
    for key in &keys {
        assert_eq!(
            cluster.node(target).get(key.as_bytes()),
            Some(key.as_bytes().to_vec())
        );
        let ttl = cluster.node(target).pttl(key.as_bytes());
        assert!(0 < ttl && ttl <= 60_000, "{key}: pttl {ttl}");
        // A client with the old map asks the source and is sent on.
        assert_eq!(
            error(cluster.node(source).cmd(&["GET", key])),
            format!("MOVED {slot} 127.0.0.1:{target_port}")
        );
    }
    assert_eq!(cluster.node(target).pttl(persistent.as_bytes()), -1);
    assert!(cluster.keys_in_slot(source, slot).is_empty());
    assert_eq!(cluster.keys_in_slot(target, slot).len(), 4);
}

#[test]
fn a_half_moved_slot_answers_ask_and_is_finished_or_rolled_back() {
    let cluster = RedisCluster::start(3, 0);
    let slot = 777;
    let source = cluster.master_of_slot(slot);
    let target = cluster
        .masters()
        .into_iter()
        .find(|&m| m != source)
        .unwrap();
    let (src, dst) = (cluster.node(source), cluster.node(target));
    let keys: Vec<String> = (0..4)
        .map(|n| key_in_slot(&format!("m{n}:"), slot))
        .collect();
    for key in &keys {
        assert_eq!(src.cmd(&["SET", key, "v", "PX", "60000"]), ok());
    }

    let migration = cluster.begin_migration(slot, target);
    assert_eq!(
        (migration.slot, migration.source, migration.target),
        (slot, source, target)
    );
    cluster.migrate_keys(&migration, &[keys[0].as_bytes()]);
    assert_eq!(cluster.migrate_some(&migration, 1), 1);
    let left = cluster.keys_in_slot(source, slot);
    let moved: Vec<&String> = keys
        .iter()
        .filter(|k| !left.contains(&k.as_bytes().to_vec()))
        .collect();
    assert_eq!(moved.len(), 2, "two of {keys:?} migrated");
    assert!(moved.contains(&&keys[0]));
    let ask = format!("ASK {slot} 127.0.0.1:{}", dst.port());
    let back = format!("MOVED {slot} 127.0.0.1:{}", src.port());
    for key in &keys {
        if moved.contains(&key) {
            // Gone from the source: ASK; the target serves it after ASKING only.
            assert_eq!(error(src.cmd(&["GET", key])), ask);
            assert_eq!(error(dst.cmd(&["GET", key])), back);
            let replies = dst
                .pipeline(&[&[b"ASKING"], &[b"GET", key.as_bytes()]])
                .expect("ASKING + GET");
            assert_eq!(replies, vec![ok(), bulk("v")]);
        } else {
            assert_eq!(src.cmd(&["GET", key]), bulk("v"));
        }
    }
    // A new key of the slot is created on the target, through ASK.
    let fresh = key_in_slot("fresh:", slot);
    assert_eq!(error(src.cmd(&["SET", &fresh, "f", "NX"])), ask);
    let replies = dst
        .pipeline(&[&[b"ASKING"], &[b"SET", fresh.as_bytes(), b"f", b"NX"]])
        .expect("ASKING + SET");
    assert_eq!(replies, vec![ok(), ok()]);

    cluster.finish_migration(migration);
    assert_eq!(cluster.master_of_slot(slot), target);
    assert!(cluster.keys_in_slot(source, slot).is_empty());
    assert_eq!(cluster.keys_in_slot(target, slot).len(), 5);
    for key in keys.iter().chain([&fresh]) {
        assert!(dst.get(key.as_bytes()).is_some(), "{key}");
    }

    // Back towards the source, stopped halfway, then rolled back: the
    // keys return to the target, which keeps the slot; no ASK any more.
    let migration = cluster.begin_migration(slot, source);
    assert_eq!(cluster.migrate_some(&migration, 2), 2);
    assert_eq!(cluster.keys_in_slot(source, slot).len(), 2);
    cluster.roll_back_migration(migration);
    assert_eq!(cluster.master_of_slot(slot), target);
    assert!(cluster.keys_in_slot(source, slot).is_empty());
    assert_eq!(cluster.keys_in_slot(target, slot).len(), 5);
    for key in keys.iter().chain([&fresh]) {
        assert!(dst.get(key.as_bytes()).is_some(), "{key}");
        let ttl = dst.pttl(key.as_bytes());
        assert!(ttl == -1 || ttl > 0, "{key}: pttl {ttl}");
    }
    let missing = key_in_slot("missing:", slot);
    assert_eq!(dst.cmd(&["GET", &missing]), OwnedReply::Nil);
    assert_eq!(
        error(src.cmd(&["GET", &missing])),
        format!("MOVED {slot} 127.0.0.1:{}", dst.port())
    );
}

#[test]
fn a_killed_master_is_replaced_by_its_replica_and_comes_back_as_one() {
    let mut cluster = RedisCluster::start(3, 1);
    let master = cluster.masters()[0];
    let replica = cluster.replicas_of(master)[0];
    let key = cluster.key_on(master, "held:");
    // WAIT: the replica has the key before the master dies.
    let replies = cluster
        .node(master)
        .pipeline(&[&[b"SET", key.as_bytes(), b"v"], &[b"WAIT", b"1", b"5000"]])
        .expect("SET + WAIT");
    assert_eq!(replies, vec![ok(), OwnedReply::Integer(1)]);
    let ranges = cluster.slots_of(master);

    let failover = cluster.fail_over(master);
    println!("SIGKILL of a master with node timeout {NODE_TIMEOUT:?}: {failover:?}");
    assert_eq!(
        (failover.old_master, failover.new_master),
        (master, replica)
    );
    assert!(failover.promoted_after <= failover.ready_after);
    assert!(!cluster.node(master).is_running());
    assert_eq!(cluster.slots_of(replica), ranges);
    assert!(!cluster.masters().contains(&master));
    assert_eq!(cluster.node(replica).cmd(&["GET", &key]), bulk("v"));
    for (index, node) in cluster.nodes().iter().enumerate() {
        if index != master {
            let OwnedReply::Bulk(info) = node.cmd(&["CLUSTER", "INFO"]) else {
                panic!("CLUSTER INFO")
            };
            assert!(String::from_utf8_lossy(&info).contains("cluster_state:ok"));
        }
    }

    // Restarted, the old master rejoins as a replica of its successor.
    let restarted = Instant::now();
    cluster.restart_node(master);
    println!(
        "the old master rejoined as a replica after {:?}",
        restarted.elapsed()
    );
    assert_eq!(cluster.replicas_of(replica), vec![master]);
    assert_eq!(
        cluster.node(master).cmd(&["GET", &key]),
        error_moved(&cluster, &key)
    );

    // A manual failover hands the slots back without losing anything.
    let failback = cluster.fail_over_to(master);
    println!("CLUSTER FAILOVER: {failback:?}");
    assert_eq!(
        (failback.old_master, failback.new_master),
        (replica, master)
    );
    assert_eq!(cluster.slots_of(master), ranges);
    assert_eq!(cluster.node(master).cmd(&["GET", &key]), bulk("v"));
}

/// The `MOVED` a replica answers for `key` (it redirects to its master).
fn error_moved(cluster: &RedisCluster, key: &str) -> OwnedReply {
    let owner = cluster.node(cluster.master_of_key(key.as_bytes())).port();
    OwnedReply::Error(format!("MOVED {} 127.0.0.1:{owner}", key_slot(key.as_bytes())).into_bytes())
}

#[test]
fn a_paused_node_answers_nothing_until_resumed() {
    let cluster = RedisCluster::start(3, 0);
    let node = cluster.masters()[1];
    let mut raw = TcpStream::connect(cluster.node(node).addr()).expect("connecting");
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    {
        // Shorter than the node timeout: the others do not fail it.
        let _paused = cluster.pause_node(node);
        raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut byte = [0u8; 1];
        assert!(raw.read(&mut byte).is_err(), "a paused node answered");
    }
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut pong = [0u8; 7];
    raw.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    cluster.wait_ready();
}

#[test]
fn dropping_a_cluster_kills_its_nodes_and_removes_their_directories() {
    let cluster = RedisCluster::start(3, 0);
    let nodes: Vec<(u32, PathBuf)> = cluster
        .nodes()
        .iter()
        .map(|n| (n.pid(), n.dir().to_owned()))
        .collect();
    for (_, dir) in &nodes {
        assert!(dir.join("nodes.conf").exists(), "{}", dir.display());
    }
    drop(cluster);
    for (pid, dir) in nodes {
        assert!(!dir.exists(), "{} still exists", dir.display());
        assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "pid {pid}");
    }
}

#[test]
fn shared_clusters_start_once_and_refuse_changes() {
    let first = shared_clusters(SHARED_CLUSTERS);
    let again = shared_clusters(2);
    assert_eq!(again.len(), 2);
    assert!(std::ptr::eq(&first[0], &again[0]));
    let mut ports = HashSet::new();
    for cluster in first {
        assert_eq!(cluster.masters().len(), SHARED_SHARDS);
        assert!(cluster.slot_map().covers_all());
        ports.extend(cluster.nodes().iter().map(|n| n.port()));
    }
    assert_eq!(ports.len(), SHARED_CLUSTERS * SHARED_SHARDS);

    let (a, b) = (unique_prefix("t"), unique_prefix("t"));
    assert_ne!(a, b);
    assert!(a.starts_with("t-") && a.ends_with(':'));

    let refused = std::panic::catch_unwind(|| first[0].move_slot(0, first[0].masters()[1]));
    assert!(refused.is_err(), "a shared cluster moved a slot");
    assert_eq!(first[0].master_of_slot(0), first[0].masters()[0]);
}

/// The variable that makes [`shared_clusters_child`] run: set only by
/// [`shared_clusters_are_cleaned_up_when_the_binary_exits`].
const CHILD_VARIABLE: &str = "CLUSTER_SUPPORT_SHARED_CHILD";

/// Run as a child process: starts the shared clusters, prints each node's
/// pid and directory, then passes or fails as told.
#[test]
#[ignore = "a child of shared_clusters_are_cleaned_up_when_the_binary_exits"]
fn shared_clusters_child() {
    let Ok(outcome) = std::env::var(CHILD_VARIABLE) else {
        return;
    };
    for cluster in shared_clusters(SHARED_CLUSTERS) {
        for node in cluster.nodes() {
            println!("NODE {} {}", node.pid(), node.dir().display());
        }
    }
    assert_eq!(outcome, "pass", "failing as told");
}

#[test]
fn shared_clusters_are_cleaned_up_when_the_binary_exits() {
    let exe = std::env::current_exe().expect("the test binary");
    // Both at once: one passes, one fails (the harness then exits through
    // `std::process::exit`).
    let children = ["pass", "fail"].map(|outcome| {
        let child = Command::new(&exe)
            .args([
                "shared_clusters_child",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_VARIABLE, outcome)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running the test binary");
        (outcome, child)
    });
    for (outcome, child) in children {
        let output = child.wait_with_output().expect("waiting for the child");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(output.status.success(), outcome == "pass", "{stdout}");
        let nodes: Vec<(&str, &str)> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("NODE ")?.split_once(' '))
            .collect();
        assert_eq!(nodes.len(), SHARED_CLUSTERS * SHARED_SHARDS, "{stdout}");
        for (pid, dir) in nodes {
            // Reaped by the child's exit handler: no process, not even a
            // zombie re-parented to init.
            let alive = PathBuf::from(format!("/proc/{pid}")).exists();
            if alive {
                // Do not leave it running if the handler failed.
                let pid: i32 = pid.parse().unwrap();
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            assert!(!alive, "{outcome}: pid {pid} survived its test binary");
            assert!(!PathBuf::from(dir).exists(), "{outcome}: {dir} left behind");
        }
    }
}

#[test]
fn a_replicated_master_replicas_cut_promoted_and_failed_back() {
    let mut set = Replicated::start(2);
    assert_eq!(set.master(), 0);
    assert_eq!(set.replicas(), vec![1, 2]);
    for replica in [1, 2] {
        assert!(matches!(
            set.role(replica),
            Some(Role::Replica { master, link_up: true, .. }) if master == set.node(0).port()
        ));
    }
    assert_eq!(set.node(0).cmd(&["SET", "k1", "1"]), ok());
    set.wait_synced();
    assert_eq!(set.node(1).get(b"k1"), Some(b"1".to_vec()));
    assert_eq!(set.node(2).get(b"k1"), Some(b"1".to_vec()));

    // Node 1's link is cut: it misses k2, and WAIT counts node 2 only.
    set.cut_link(1);
    assert!(matches!(
        set.role(1),
        Some(Role::Replica { link_up: false, .. })
    ));
    let replies = set
        .node(0)
        .pipeline(&[&[b"SET", b"k2", b"2"], &[b"WAIT", b"2", b"300"]])
        .expect("SET + WAIT");
    assert_eq!(replies, vec![ok(), OwnedReply::Integer(1)]);
    set.wait_synced();
    assert_eq!(set.node(2).get(b"k2"), Some(b"2".to_vec()));
    assert_eq!(set.node(1).get(b"k2"), None);

    // The master dies; node 1 is promoted: the acknowledged k2 is lost.
    let (old_replid, old_run_id) = (set.replication_id(1), set.run_id(0));
    set.node_mut(0).kill();
    set.promote(1);
    assert_eq!(set.master(), 1);
    assert_ne!(set.replication_id(1), old_replid);
    assert_eq!(set.node(1).get(b"k1"), Some(b"1".to_vec()));
    assert_eq!(set.node(1).get(b"k2"), None);
    // Node 2 follows the new master (and drops k2 with its full sync).
    set.replicate(2, 1);
    assert_eq!(set.node(2).get(b"k2"), None);

    // Failback: the old master, restarted empty, replicates the new one.
    set.node_mut(0).restart();
    assert_ne!(set.run_id(0), old_run_id);
    assert_eq!(set.masters(), vec![0, 1]);
    set.replicate(0, 1);
    assert_eq!(set.master(), 1);
    assert_eq!(set.node(0).get(b"k1"), Some(b"1".to_vec()));
    assert_eq!(set.replicas(), vec![0, 2]);
}

/// What makes a replica miss a write, on this server: the link cut by the
/// support (`cut_link`) and `CLIENT PAUSE WRITE` on the replica lose the
/// write when the master dies, every time. SIGSTOP of the replica is no
/// reliable cut: the stream waits in the replica's socket and is usually
/// applied when it resumes, but about one run in fifteen lost it (likely
/// when the dying master's socket held unread data, such as the replica's
/// last ACK, and so reset the connection, discarding what the replica had
/// not read). `WAIT` reports no replica in all three cases.
#[test]
fn how_a_replica_misses_a_write() {
    let lost = |cut: &dyn Fn(&Replicated)| -> (OwnedReply, bool) {
        let mut set = Replicated::start(1);
        cut(&set);
        let replies = set
            .node(0)
            .pipeline(&[&[b"SET", b"k", b"v"], &[b"WAIT", b"1", b"200"]])
            .expect("SET + WAIT");
        set.node_mut(0).kill();
        // SIGCONT (if stopped), then promote while a CLIENT PAUSE holds.
        set.node(1).resume();
        set.promote(1);
        let _ = set.node(1).cmd(&["CLIENT", "UNPAUSE"]);
        (replies[1].clone(), set.node(1).get(b"k").is_none())
    };
    let pid_stop = |set: &Replicated| {
        // SIGSTOP, and seen stopped before the write (a fixed pause after
        // the signal may end before a busy machine stopped it); left
        // stopped past the guard: `lost` resumes it after the master died.
        std::mem::forget(set.node(1).pause());
    };
    let no_replica = OwnedReply::Integer(0);
    assert_eq!(lost(&|set| set.cut_link(1)), (no_replica.clone(), true));
    let pause = |set: &Replicated| {
        assert_eq!(
            set.node(1).cmd(&["CLIENT", "PAUSE", "10000", "WRITE"]),
            ok()
        );
    };
    assert_eq!(lost(&pause), (no_replica.clone(), true));
    assert_eq!(lost(&pid_stop).0, no_replica);
}

#[test]
fn sentinels_watch_masters_and_follow_failovers() {
    let a = Replicated::start(1);
    let mut b = Replicated::start(1);
    let started = Instant::now();
    let sentinels = Sentinels::start(3, &[("alpha", &a), ("beta", &b)]);
    println!(
        "3 sentinels, 2 masters: ready after {:?}",
        started.elapsed()
    );
    assert_eq!(sentinels.urls().len(), 3);
    for index in 0..3 {
        assert_eq!(
            sentinels.master_port(index, "alpha"),
            Some(a.node(0).port())
        );
        assert_eq!(sentinels.master_port(index, "beta"), Some(b.node(0).port()));
        let OwnedReply::Array(replicas) =
            sentinels.nodes()[index].cmd(&["SENTINEL", "REPLICAS", "alpha"])
        else {
            panic!("SENTINEL REPLICAS")
        };
        assert_eq!(replicas.len(), 1);
    }

    // Asked for: the replica becomes the master.
    let (port, took) = sentinels.failover("alpha");
    println!("SENTINEL FAILOVER: every sentinel names the new master after {took:?}");
    assert_eq!(port, a.node(1).port());
    assert!(matches!(a.role(1), Some(Role::Master { .. })));

    // A killed master is detected and replaced.
    let old = b.node(0).port();
    b.node_mut(0).kill();
    let killed = Instant::now();
    let (port, took) = sentinels.wait_new_master("beta", old, killed);
    println!("master SIGKILLed: every sentinel names the new master after {took:?}");
    assert_eq!(port, b.node(1).port());
    assert_eq!(b.master(), 1);
    for index in 0..3 {
        assert_eq!(sentinels.master_port(index, "beta"), Some(port));
    }
}

#[test]
fn a_cluster_with_a_password() {
    let args = ["--requirepass", "s3cret", "--masterauth", "s3cret"];
    let cluster = RedisCluster::start_with_auth(3, 1, &args, &["s3cret"]);
    let master = cluster.masters()[0];
    let refused = cluster.node(master).cmd(&["AUTH", "nope"]);
    assert!(error(refused).starts_with("WRONGPASS"));
    let key = cluster.key_on(master, "secret:");
    assert_eq!(cluster.node(master).cmd(&["SET", &key, "v"]), ok());
    // MIGRATE authenticates to the target.
    let slot = key_slot(key.as_bytes());
    let target = cluster.other_master(master);
    cluster.move_slot(slot, target);
    assert_eq!(cluster.node(target).cmd(&["GET", &key]), bulk("v"));
}

#[test]
fn sentinels_with_passwords_of_their_own() {
    let args = ["--requirepass", "mpw", "--masterauth", "mpw"];
    let set = Replicated::start_with_auth(1, &args, &["mpw"]);
    let config = [
        "sentinel auth-pass guarded mpw",
        "requirepass spw",
        "sentinel sentinel-pass spw",
    ];
    let sentinels = Sentinels::start_with(3, &[("guarded", &set)], 2, &config, &["spw"]);
    let (port, _) = sentinels.failover("guarded");
    assert_eq!(port, set.node(1).port());
    assert!(matches!(set.role(1), Some(Role::Master { .. })));
    // The old master is demoted by the sentinels only seconds later: a
    // test that wants it a replica at once says so.
    set.replicate(0, 1);
    assert_eq!(set.master(), 1);
}
