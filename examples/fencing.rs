//! Fencing tokens: a holder that pauses past its validity (a GC pause, a
//! swapped-out process, SIGSTOP) comes back after the lock passed to
//! someone else, and its late write is refused by the resource.
//!
//! ```sh
//! cargo run --release --example fencing       # 3 local masters, a local resource
//! cargo run --release --example fencing -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! The recipe:
//!
//! 1. Build the handle with `fencing(true)`; initialise the fence domain
//!    once per deployment with `fence_init(0)` (refused, harmlessly, once
//!    it is done).
//! 2. Every lock has a token, `lock.fence_token()`. Send it with every
//!    write to the protected resource.
//! 3. The resource keeps the largest token it accepted and refuses a write
//!    with a lower one, in the same atomic step as the write: here a Redis
//!    key written by `REFEREE_LUA` (`write`); in SQL,
//!    `UPDATE t SET data = $1, fence = $2 WHERE id = $3 AND fence <= $2`.
//!
//! Here two workers are threads: `slow` takes the lock and then stalls
//! (a sleep standing for a pause) past its TTL; `fast` takes the lock once
//! it expired and writes; `slow` wakes up and writes too, and is refused.
//!
//! What to copy: `worker` and `write`. Demo scaffolding: `main` (the local
//! servers of `local`, `examples/support/local.rs`, one of them the
//! resource, and the check of what the resource kept).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, Redlock, REFEREE_LUA};
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

/// The protected resource's keys: the data, and the largest token that
/// wrote it.
const DATA: &str = "fencing-demo:data";
const LARGEST: &str = "fencing-demo:largest-token";
const TTL: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let (_servers, urls) = local::masters(3);
    // The resource: a Redis server of its own (any store with an atomic
    // compare-and-write works the same way).
    let resource = match local::Server::start(&[]) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot start the resource's server: {e}");
            return ExitCode::from(2);
        }
    };
    let redlock = match Redlock::builder().nodes(&urls).fencing(true).build() {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match redlock.fence_init(0) {
        Ok(_) => println!("fence domain initialised"),
        Err(Error::FenceInitRefused(_)) => println!("fence domain already initialised"),
        Err(e) => {
            eprintln!("fence_init: {e}");
            return ExitCode::FAILURE;
        }
    }

    let (slow, fast) = thread::scope(|scope| {
        let (slow_handle, resource) = (redlock.clone(), &resource);
        let slow = scope.spawn(move || worker("slow", &slow_handle, resource, TTL * 3));
        thread::sleep(TTL * 2); // slow's lock has expired by now
        let fast = worker("fast", &redlock, resource, Duration::ZERO);
        (slow.join().expect("slow worker"), fast)
    });
    // What the resource kept: the fast worker's write (`:1`).
    let is_fast = "return redis.call('get', KEYS[1]) == ARGV[1] and 1 or 0";
    let kept_fast = resource.command(&["EVAL", is_fast, "1", DATA, "fast"]);
    println!(
        "the resource kept the {} worker's write",
        if matches!(kept_fast.as_deref(), Ok(":1")) {
            "fast"
        } else {
            "slow (!)"
        }
    );
    match (slow, fast) {
        (Ok(false), Ok(true)) if matches!(kept_fast.as_deref(), Ok(":1")) => ExitCode::SUCCESS,
        other => {
            println!("expected the slow worker refused and the fast one accepted: {other:?}");
            ExitCode::FAILURE
        }
    }
}

/// Takes the lock, stalls for `pause` (a stand-in for a GC pause), then
/// writes its name to the resource with its token. `Ok(false)`: refused.
fn worker(
    name: &str,
    redlock: &Redlock,
    resource: &local::Server,
    pause: Duration,
) -> Result<bool, Error> {
    let lock = redlock.lock("fencing-demo", TTL)?;
    let token = lock.fence_token().expect("a fencing handle");
    println!("{name}: got the lock with token {token}");
    thread::sleep(pause);
    if !pause.is_zero() {
        // Too late: the lock has expired, and someone else may hold it.
        println!(
            "{name}: back after {pause:?}, validity left {:?}",
            lock.validity()
        );
    }
    let accepted = write(resource, token, name);
    println!(
        "{name}: write with token {token} {}",
        if accepted {
            "accepted"
        } else {
            "REFUSED: a newer holder wrote first"
        }
    );
    let _ = lock.unlock();
    Ok(accepted)
}

/// Writes `data` only if `token` is at least the largest token the
/// resource accepted (`REFEREE_LUA`, atomically on the resource's server).
fn write(resource: &local::Server, token: u64, data: &str) -> bool {
    let token = token.to_string();
    let reply = resource.command(&["EVAL", REFEREE_LUA, "2", LARGEST, DATA, &token, data]);
    matches!(reply.as_deref(), Ok(":1"))
}
