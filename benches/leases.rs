//! What leases cost: `LEASES` leases (default 1000) kept alive on one
//! handle, against 3 local `redis-server`s started here, for `SECONDS`
//! (default 10) after a warm-up. Prints the renewals, the commands the
//! masters ran (INFO commandstats, script-internal commands included) and
//! the client's CPU time (user + system, all threads: getrusage), per
//! second, for two TTLs.
//!
//! ```sh
//! cargo bench --bench leases
//! LEASES=5000 SECONDS=20 cargo bench --bench leases
//! ```
//!
//! Not a criterion benchmark: it measures a steady background cost, not
//! the time of a call.

#[allow(dead_code)]
#[path = "../tests/support/redis.rs"]
mod redis;
#[allow(dead_code)]
#[path = "../tests/support/resp.rs"]
mod resp;

use redis::{Cluster, RedisServer};
use redlock_sync::Redlock;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Calls of each command on `servers`, summed: (all but `INFO`, pexpire).
fn calls(servers: &[RedisServer]) -> (u64, u64) {
    let all = servers
        .iter()
        .flat_map(RedisServer::command_calls)
        .filter(|(name, _)| name != "info")
        .map(|(_, calls)| calls)
        .sum();
    let pexpire = servers.iter().map(|s| s.calls_of("pexpire")).sum();
    (all, pexpire)
}

/// CPU time of the whole process so far.
fn cpu() -> Duration {
    let usage = rusage();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[allow(unsafe_code)]
fn rusage() -> libc::rusage {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid
    // `rusage` to start from.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    if !redis::redis_server_available() {
        eprintln!("{}", redis::how_to_get_a_server());
        std::process::exit(2);
    }
    let leases = env_or("LEASES", 1000) as usize;
    let seconds = env_or("SECONDS", 10);
    let cluster = Cluster::start(3);
    println!(
        "{leases} leases on one handle, 3 local masters ({}), node timeout 50 ms",
        redis::server_version().unwrap_or_default()
    );
    for ttl in [Duration::from_secs(10), Duration::from_secs(1)] {
        let redlock = Redlock::builder()
            .nodes(cluster.urls())
            .build()
            .expect("valid configuration");
        let held: Vec<_> = (0..leases)
            .map(|i| {
                redlock
                    .lock(format!("bench:lease:{i}"), ttl)
                    .expect("free")
                    .keep_alive(Duration::from_secs(3600))
                    .expect("kept alive")
            })
            .collect();
        // Warm up: a full renewal cycle.
        std::thread::sleep(ttl);
        let (calls_before, pexpire_before) = calls(&cluster.servers);
        let (cpu_before, start) = (cpu(), Instant::now());
        std::thread::sleep(Duration::from_secs(seconds));
        let (calls_after, pexpire_after) = calls(&cluster.servers);
        let (cpu_used, elapsed) = (cpu() - cpu_before, start.elapsed().as_secs_f64());
        assert!(
            held.iter().all(|lease| lease.check().is_ok()),
            "a lease was lost"
        );
        let renewals = (pexpire_after - pexpire_before) / 3;
        let commands = calls_after - calls_before;
        println!(
            "TTL {ttl:?}: {:.0} renewals/s, {:.0} commands/s on all masters ({:.1} per renewal), \
             client CPU {:.2} ms/s ({:.1} µs per renewal)",
            renewals as f64 / elapsed,
            commands as f64 / elapsed,
            commands as f64 / renewals.max(1) as f64,
            cpu_used.as_secs_f64() * 1000.0 / elapsed,
            cpu_used.as_secs_f64() * 1e6 / renewals.max(1) as f64,
        );
        drop(held);
    }
}
