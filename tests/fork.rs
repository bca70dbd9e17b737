//! A forked child and the connections and locks it inherits. In a binary of
//! its own: `fork` in a process running other tests' threads is asking for
//! trouble.

mod support;

use redlock_sync::{Error, Lease, Redlock};
use std::time::Duration;
use support::{Cluster, OwnedReply, RedisServer};

const TTL: Duration = Duration::from_secs(30);

/// A handle whose rounds give each master 1 s: the child's calls must be
/// answered, which the default node timeout (50 ms) does not promise on a
/// loaded machine.
fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// `key`'s value, once every master of `cluster` has it (the call that set
/// it returned at a quorum: the last master may set it a moment later).
fn value_everywhere(cluster: &Cluster, key: &[u8]) -> Vec<u8> {
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while !cluster.servers.iter().all(|s| s.get(key).is_some()) {
        assert!(
            std::time::Instant::now() < limit,
            "a master never set the key"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.servers[0].get(key).expect("set")
}

/// One fork at a time: a test's threads must not be half-way through
/// something (starting servers, say) when another test forks.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// In a forked child, takes ownership of the child's copy of `value`.
///
/// SAFETY (of the callers): only in the child, whose original of `value`
/// is then never used nor dropped (the child ends with `_exit`); the
/// parent's own `value` lives in another address space, untouched.
unsafe fn childs_copy<T>(value: &T) -> T {
    // SAFETY: see above: the copy is the only owner used from now on.
    unsafe { std::ptr::read(value) }
}

/// Forks; the child runs `child` and ends with its result as exit code
/// (99 if it panicked). Returns the child's exit code.
fn in_a_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only runs the given test code (no other thread of
    // this binary holds a lock it needs: tests fork one at a time, the
    // servers' start-up threads have been joined, and a renewal thread is
    // between rounds) and ends with _exit, so it never returns into the
    // harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
        // SAFETY: ends the child at once, without running the parent's
        // destructors or flushing its buffers a second time.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: {status}");
    libc::WEXITSTATUS(status)
}

/// Waits (10 s at most) until this process's renewal thread
/// (`redlock-renew`) is asleep (state `S`: waiting for its next round).
fn renewal_thread_asleep() {
    let asleep = || {
        std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| {
            tasks.filter_map(Result::ok).any(|task| {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
                // "tid (comm) STATE ...": the state follows the last ')'.
                comm.trim() == "redlock-renew"
                    && stat
                        .rsplit_once(") ")
                        .is_some_and(|(_, rest)| rest.starts_with('S'))
            })
        })
    };
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while !asleep() {
        assert!(
            std::time::Instant::now() < limit,
            "the renewal thread never slept"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

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
    let _serial = serial();
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let mut lock = redlock.lock("parent", TTL).expect("acquired");
    let value = value_everywhere(&cluster, b"parent");
    let dialled: Vec<u64> = cluster.servers.iter().map(connections_received).collect();

    // The child's copy of the parent's memory holds the parent's lock and
    // the parent's pooled connections.
    // SAFETY: in the child, which never touches its original `lock` again.
    let code = in_a_forked_child(|| child(&redlock, unsafe { childs_copy(&lock) }));
    assert_eq!(code, 0, "child check failed");

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

/// What the child checks of its copy of the parent's lease, as an exit code
/// (0: all as expected).
fn lease_child(redlock: &Redlock, inherited: Lease) -> i32 {
    if inherited.validity() != Duration::ZERO {
        return 20; // the parent's lease is not the child's to act on
    }
    if !matches!(inherited.check(), Err(Error::Forked)) {
        return 21;
    }
    if !matches!(inherited.unlock(), Err(Error::Forked)) {
        return 22;
    }
    // The child's own lease: renewed by a renewal thread of its own.
    let own = match redlock.lock("child-lease", TTL).map(|l| l.keep_alive(TTL)) {
        Ok(Ok(lease)) => lease,
        _ => return 23,
    };
    if own.check().is_err() {
        return 24;
    }
    match own.unlock() {
        Ok(()) => 0,
        Err(_) => 25,
    }
}

/// A lease copied into a forked child: zero validity, `check` and `unlock`
/// say `Forked`, and the parent's lease and key are untouched (it once
/// reported the parent's figures there: 29.7 s and `Ok`).
#[test]
fn a_forked_child_cannot_use_or_release_its_parents_lease() {
    let _serial = serial();
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let lease = redlock
        .lock("parent-lease", TTL)
        .expect("acquired")
        .keep_alive(TTL * 4)
        .expect("kept alive");
    let value = value_everywhere(&cluster, b"parent-lease");
    // Let the renewal thread settle between rounds (it holds no lock then):
    // seen asleep (a fixed 100 ms could end before a busy machine ran it
    // that far, and a child forked while it holds a lock may hang on it).
    renewal_thread_asleep();
    // SAFETY: in the child, which never touches its original `lease` again.
    let code = in_a_forked_child(|| lease_child(&redlock, unsafe { childs_copy(&lease) }));
    assert_eq!(code, 0, "child check failed");
    for server in &cluster.servers {
        assert_eq!(
            server.get(b"parent-lease"),
            Some(value.clone()),
            "lease touched"
        );
    }
    assert!(lease.check().expect("the parent's lease holds") > TTL / 2);
    lease.unlock().expect("released");
}
