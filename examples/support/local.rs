//! The examples' shared set-up: which masters to use. Not an example itself
//! (cargo builds only `examples/*.rs` as examples); each example includes it
//! by path, after the project's test spawner it relies on:
//!
//! ```ignore
//! #[allow(dead_code)]
//! #[path = "../tests/support/redis.rs"]
//! mod redis;
//! #[allow(dead_code)]
//! #[path = "../tests/support/resp.rs"]
//! mod resp;
//! #[path = "support/local.rs"]
//! mod local;
//! ```
//!
//! In your own program the URLs come from your configuration instead.

use crate::redis::{self, Cluster};
use std::process::exit;

/// The masters to lock on: the ones `--nodes URL,URL,...` names (no local
/// servers then), or `n` local `redis-server` processes started now on free
/// loopback ports, without persistence, which stop when the returned
/// [`Cluster`] is dropped. Exits with status 2 and a message on a bad
/// argument, or when no server binary can be run.
pub fn masters(n: usize) -> (Option<Cluster>, Vec<String>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, urls] if flag == "--nodes" => {
            return (None, urls.split(',').map(str::to_string).collect())
        }
        _ => {
            eprintln!("usage: {} [--nodes URL,URL,...]", env!("CARGO_CRATE_NAME"));
            exit(2);
        }
    }
    if !redis::redis_server_available() {
        eprintln!("{}, or pass --nodes URL,...", redis::how_to_get_a_server());
        exit(2);
    }
    let cluster = Cluster::start(n);
    let urls = cluster.urls();
    let version = redis::server_version().unwrap_or_default();
    let version: Vec<&str> = version.split_whitespace().take(3).collect(); // "Redis server v=7.0.15"
    println!(
        "{n} local masters ({}): {}",
        version.join(" "),
        urls.join(" ")
    );
    (Some(cluster), urls)
}
