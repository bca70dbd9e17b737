//! A forked child and the connections and locks it inherits. In a binary of
//! its own: `fork` in a process running other tests' threads is asking for
//! trouble.

mod support;

use redlock_sync::{Error, Redlock};
use std::time::Duration;
use support::{Cluster, OwnedReply, RedisServer};

const TTL: Duration = Duration::from_secs(30);

fn connections_received(server: &RedisServer) -> u64 {
    let OwnedReply::Bulk(info) = server.cmd(&["INFO", "stats"]) else {
        panic!("INFO stats")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received")
}

/// What the child checks, as an exit code (0: all as expected).
fn child(redlock: &Redlock, inherited: redlock_sync::Lock) -> i32 {
    if inherited.validity() != Duration::ZERO {
        return 10; // the parent's lock is not the child's to act on
    }
    if !matches!(inherited.unlock(), Err(Error::Forked)) {
        return 11;
    }
    match redlock.try_lock("child", TTL) {
        Ok(Some(lock)) => match lock.unlock() {
            Ok(()) => 0,
            Err(_) => 13,
        },
        _ => 12,
    }
}

#[test]
fn a_forked_child_opens_its_own_connections_and_never_releases_its_parents_lock() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder().nodes(cluster.urls()).build().unwrap();
    let mut lock = redlock.lock("parent", TTL).expect("acquired");
    let value = cluster.servers[0].get(b"parent").expect("set");
    let dialled: Vec<u64> = cluster.servers.iter().map(connections_received).collect();

    // SAFETY: the child only runs this test's code (no other thread of this
    // binary holds a lock it needs: the servers' start-up threads have been
    // joined) and ends with _exit, so it never returns into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The child's copy of the parent's memory holds the parent's lock
        // and the parent's pooled connections.
        let code =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || child(&redlock, lock)))
                .unwrap_or(99);
        // SAFETY: ends the child at once, without running the parent's
        // destructors or flushing its buffers a second time.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "child check failed");

    for (server, before) in cluster.servers.iter().zip(dialled) {
        // The admin client opens a connection per command: one for this
        // INFO, and at least one more from the child.
        assert!(
            connections_received(server) >= before + 2,
            "the child did not open a connection of its own"
        );
        assert_eq!(server.get(b"parent"), Some(value.clone()), "lock touched");
    }
    // The parent's connections are in step: its lock still works.
    lock.extend(TTL).expect("extended");
    lock.unlock().expect("released");
}
