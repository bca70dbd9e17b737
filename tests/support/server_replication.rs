//! Replication between test servers, for what fencing must notice about a
//! master's data set: a server made a replica of another (`REPLICAOF`),
//! waited for until its copy is loaded, and promoted again (`REPLICAOF NO
//! ONE`), as Sentinel does to a returning old master; and the fields of
//! `INFO replication` that tell it (`master_replid`, `role`).

use super::redis::RedisServer;
use super::resp::OwnedReply;
use std::thread;
use std::time::{Duration, Instant};

/// How long a replica may take to load its master's copy.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);

/// The arguments that make a server a quick master for a test replica: the
/// copy goes out at once (Redis 7.0 waits 5 s for more replicas by default).
pub const QUICK_SYNC: [&str; 2] = ["--repl-diskless-sync-delay", "0"];

/// Replication as the tests drive it.
pub trait Replication {
    /// A field of `INFO <section>`, as text.
    fn info_field(&self, section: &str, field: &str) -> Option<String>;
    /// The server's replication id (`master_replid`).
    fn replication_id(&self) -> String;
    /// Makes the server a replica of `master` and waits until its copy is
    /// loaded (`master_link_status:up`).
    fn replicate(&self, master: &RedisServer);
    /// Makes the server a master again (`REPLICAOF NO ONE`).
    fn promote(&self);
}

impl Replication for RedisServer {
    fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let OwnedReply::Bulk(info) = self.cmd(&["INFO", section]) else {
            panic!("INFO {section}: not a bulk string")
        };
        let info = String::from_utf8(info).expect("INFO is text");
        let prefix = format!("{field}:");
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|value| value.trim().to_string())
    }

    fn replication_id(&self) -> String {
        self.info_field("replication", "master_replid")
            .expect("INFO replication has master_replid")
    }

    fn replicate(&self, master: &RedisServer) {
        let port = master.port().to_string();
        assert_eq!(
            self.cmd(&["REPLICAOF", "127.0.0.1", &port]),
            OwnedReply::Simple(b"OK".to_vec())
        );
        let started = Instant::now();
        while self
            .info_field("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(
                started.elapsed() < SYNC_TIMEOUT,
                "replica :{} of :{port} not in sync after {SYNC_TIMEOUT:?}; logs:\n{}\n{}",
                self.port(),
                self.log(),
                master.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn promote(&self) {
        assert_eq!(
            self.cmd(&["REPLICAOF", "NO", "ONE"]),
            OwnedReply::Simple(b"OK".to_vec())
        );
    }
}
