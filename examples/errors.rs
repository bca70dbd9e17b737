//! Every kind of failure, provoked against local servers, and what a
//! program should do about each: see `decide`, the one `match` to copy.
//!
//! ```sh
//! cargo run --release --example errors       # 3 local masters (and one more, with a password)
//! cargo run --release --example errors -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! With `--nodes`, the cases that need servers of its own (one that wants
//! a password, keys deleted, servers killed) are skipped: this program only
//! does that to servers it started itself.
//!
//! Each case prints the error (its `Display` is one line naming every
//! master that failed, and how; never a password), the per-master report
//! the error carries, the predicates that classify it, and `decide`'s verdict.
//!
//! What to copy: `decide`, and `show` for what an error tells. Demo
//! scaffolding: `main`, which provokes each failure on local servers
//! (`local`, `examples/support/local.rs`: deleting keys, killing servers).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, KeyState, NodeOutcome, Redlock};
use std::thread;
use std::time::{Duration, Instant};

/// What to do about a failed `lock`, `try_lock`, `extend` or `unlock`: the
/// one `match` a program needs. The order matters: contention is also
/// retryable, and a lost lock must be given up whatever else went wrong.
fn decide(e: &Error) -> &'static str {
    match e {
        // Another client holds the lock: do something else, or come back.
        _ if e.is_contention() => "skip: someone else has it",
        // An extend or unlock found the lock gone (or its validity had run
        // out): someone else may hold it now. Stop using what it protects.
        _ if e.is_lock_lost() => "stop: the lock is gone",
        // A bad argument or configuration, or a master that rejects our
        // credentials or commands: it will fail the same way until someone
        // fixes it (even while the other masters still make a quorum).
        _ if e.is_config() || e.is_auth_failure() || e.is_permission_denied() => {
            "fix the configuration"
        }
        // Masters down, slow or unreachable for now; or a round too slow to
        // leave any validity. `lock()` has already retried these.
        _ if e.is_retryable() => "retry later",
        // Too many masters fail for good in other ways (a bad database
        // number, a key of the wrong type).
        Error::NoQuorum(_) => "fix the configuration",
        // The lock may not be extended again (`max_extensions`), or it
        // belongs to the parent of this forked process: finish within what
        // `validity()` leaves, or stop.
        Error::ExtensionLimit(_) | Error::Forked => "stop: the lock is gone",
        // The OS random generator failed (`Error::Entropy`); and `Error` is
        // non-exhaustive, so a catch-all is needed anyway.
        _ => "retry later",
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut servers, urls) = local::masters(3);
    let ttl = Duration::from_secs(10);
    // Short retries, so that the failing cases fail fast.
    let client = || {
        Redlock::builder()
            .nodes(&urls)
            .lock_wait(Duration::from_millis(60))
            .retry_delay(Duration::from_millis(20))
            .retry_jitter(Duration::from_millis(10))
            .build()
    };
    let redlock = client()?;

    section("contention: another client holds the lock");
    let other = client()?; // another process, say
    let held = other.lock("errors:contended", ttl)?;
    // try_lock makes one attempt, and reports contention as Ok(None).
    let attempt = redlock.try_lock("errors:contended", ttl)?;
    println!("try_lock: {attempt:?}");
    assert!(attempt.is_none());
    // lock waits (60 ms here, without a limit by default), then returns
    // the contention, saying how long it waited.
    let Err(e) = redlock.lock("errors:contended", ttl) else {
        panic!("lock succeeded while another client held it");
    };
    show(&e);
    assert!(e.is_contention() && e.is_retryable());
    held.unlock()?;

    if servers.is_some() {
        section("a wrong password");
        // One more server, which wants the password "right".
        let guarded = local::Server::start(&["--requirepass", "right"])?;
        let url = format!("redis://:wrong@127.0.0.1:{}", guarded.port());
        let locked_out = Redlock::builder().nodes([&url]).build()?;
        let asked = Instant::now();
        let Err(e) = locked_out.lock("errors:auth", ttl) else {
            panic!("a wrong password was accepted");
        };
        show(&e);
        // Not retryable, so lock() gave up at once instead of retrying.
        println!("lock() gave up after {:.1?}", asked.elapsed());
        assert!(e.is_auth_failure() && !e.is_retryable());
        // The message names the node by address; it never shows the password.
        assert!(
            !e.to_string().contains("wrong"),
            "the message shows the password"
        );
    }

    if let Some(servers) = &servers {
        section("a lock that was lost: its key vanished from 2 of the 3 masters");
        // A fresh handle: its first lock goes to every master. (A handle
        // that has been busy may leave out a master still answering an
        // earlier command; `masters()` says where the key is.)
        let fresh = client()?;
        let mut lock = fresh.lock("errors:lost", ttl)?;
        let holding: Vec<String> = lock
            .masters()
            .filter(|(_, state)| *state == KeyState::Held)
            .map(|(master, _)| master.to_string())
            .collect();
        println!("confirmed on: {}", holding.join(", "));
        // Delete it on two of the masters that confirmed it (as if they
        // had restarted without persistence and lost their data).
        for server in servers {
            if holding[..2].contains(&server.addr().to_string()) {
                server.command(&["DEL", "errors:lost"])?;
            }
        }
        let Err(e) = lock.extend(ttl) else {
            panic!("extend succeeded on a lost lock");
        };
        show(&e);
        println!("validity after the failed extend: {:?}", lock.validity());
        assert!(e.is_lock_lost() && lock.validity().is_zero());
        // `unlock()` still deletes our key where it remains, and reports
        // the loss again (dropping the lock would do the same silently).
        let Err(e) = lock.unlock() else {
            panic!("unlock succeeded on a lost lock");
        };
        println!("unlock after the loss: {e}");
        assert!(matches!(e, Error::LockLost(_)));
    }

    section("a configuration error: a TTL below MIN_TTL");
    let Err(e) = redlock.try_lock("errors:config", Duration::from_millis(1)) else {
        panic!("a 1 ms TTL was accepted");
    };
    show(&e);
    assert!(e.is_config() && !e.is_retryable());
    println!(
        "(the shortest TTL is redlock_sync::MIN_TTL = {:?})",
        redlock_sync::MIN_TTL
    );

    if let Some(servers) = &mut servers {
        section("no quorum: 2 of the 3 masters are down");
        servers[0].kill();
        servers[1].kill();
        let asked = Instant::now();
        let Err(e) = redlock.lock("errors:down", ttl) else {
            panic!("locked with 2 of 3 masters down");
        };
        show(&e);
        println!(
            "lock() gave up after {:.1?} (its lock_wait)",
            asked.elapsed()
        );
        assert!(e.is_no_quorum() && e.is_connection_refused() && e.is_retryable());

        // "retry later" does work, once the masters are back.
        servers[0].restart()?;
        servers[1].restart()?;
        println!("\nrestarted them; retrying every 300 ms:");
        for attempt in 1.. {
            match redlock.lock("errors:down", ttl) {
                Ok(lock) => {
                    println!("attempt {attempt}: locked");
                    lock.unlock()?;
                    break;
                }
                Err(e) if attempt < 10 && decide(&e) == "retry later" => {
                    println!("attempt {attempt}: {e}");
                    thread::sleep(Duration::from_millis(300));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

fn section(title: &str) {
    println!("\n== {title}");
}

/// Everything a program can learn from an error.
fn show(e: &Error) {
    println!("error: {e}");
    if let Some(report) = e.nodes() {
        for status in report {
            match status.outcome() {
                NodeOutcome::Failed(why) => println!("  {}: failed: {why}", status.node()),
                other => println!("  {}: {other:?}", status.node()),
            }
        }
    }
    let predicates = [
        ("is_contention", e.is_contention()),
        ("is_no_quorum", e.is_no_quorum()),
        ("is_too_slow", e.is_too_slow()),
        ("is_lock_lost", e.is_lock_lost()),
        ("is_config", e.is_config()),
        ("is_retryable", e.is_retryable()),
        ("is_auth_failure", e.is_auth_failure()),
        ("is_permission_denied", e.is_permission_denied()),
        ("is_timeout", e.is_timeout()),
        ("is_connection_refused", e.is_connection_refused()),
    ];
    let true_ones: Vec<&str> = predicates
        .iter()
        .filter(|(_, yes)| *yes)
        .map(|(name, _)| *name)
        .collect();
    println!("true: {}", true_ones.join(", "));
    if let Some(waited) = e.waited() {
        println!("waited: {waited:.1?}");
    }
    println!("decide: {}", decide(e));
}
