//! Clusters shared by the tests of one test binary: started once, on first
//! use, and reused by every test that asks (each under its own key prefix),
//! so that a binary of cluster tests pays one start-up (about 2 s) instead
//! of one per test. Tests that change a cluster (move slots, kill nodes)
//! start their own; the shared ones refuse such changes.
//!
//! A static is never dropped, so the shared nodes are killed and their
//! directories removed by an `atexit` handler when the test binary exits
//! (normally or through `std::process::exit`, as the test harness does
//! when a test failed). A binary killed by a signal leaves them behind,
//! as it would any child.

use super::cluster::RedisCluster;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// How many clusters [`shared_clusters`] starts.
pub const SHARED_CLUSTERS: usize = 3;
/// Masters per shared cluster (no replicas).
pub const SHARED_SHARDS: usize = 3;

/// The first `n` (at most [`SHARED_CLUSTERS`]) of this binary's shared
/// clusters: 3 masters each, no replicas, started together on the first
/// call (which blocks any concurrent caller until they are ready).
///
/// Use keys under a [`unique_prefix`], and do not change these clusters:
/// their methods that would (slot moves, failovers, kills) panic.
pub fn shared_clusters(n: usize) -> &'static [RedisCluster] {
    assert!(
        n <= SHARED_CLUSTERS,
        "{n} shared clusters asked for; there are {SHARED_CLUSTERS}"
    );
    static SHARED: OnceLock<Vec<RedisCluster>> = OnceLock::new();
    let clusters = SHARED.get_or_init(|| {
        let mut clusters = RedisCluster::start_many(SHARED_CLUSTERS, SHARED_SHARDS, 0);
        for cluster in &mut clusters {
            cluster.shared = true;
            for node in cluster.nodes() {
                clean_up_at_exit(node.pid(), node.dir().to_owned());
            }
        }
        clusters
    });
    &clusters[..n]
}

/// A key prefix of its own for a test using shared clusters: `name`, then
/// a number unique in this process, then `:` (no braces: a test adds its
/// own hash tags).
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    assert!(!name.contains(['{', '}']), "name {name:?} has braces");
    format!("{name}-{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Processes to kill and directories to remove when the process exits.
static AT_EXIT: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

pub(super) fn clean_up_at_exit(pid: u32, dir: PathBuf) {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: `clean_up` is an `extern "C" fn()` that does not unwind
        // (it catches nothing that could panic: see its body).
        let rc = unsafe { libc::atexit(clean_up) };
        assert_eq!(rc, 0, "atexit failed");
    });
    AT_EXIT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((pid, dir));
}

/// Kills the registered processes (SIGCONT first, in case one is paused),
/// reaps them and removes their directories. Nothing here panics.
extern "C" fn clean_up() {
    let mut registered = AT_EXIT.lock().unwrap_or_else(PoisonError::into_inner);
    for (pid, dir) in registered.drain(..) {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            continue;
        };
        // SAFETY: kill(2) and waitpid(2) have no memory-safety
        // preconditions; the pid is a child of ours that nothing has
        // reaped (shared nodes are never killed or restarted), so it
        // cannot name another process. A null status pointer is allowed.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
