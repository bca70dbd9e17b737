//! The child processes of the fault suite. The suite re-runs its own test
//! binary with a filter that selects only [`child_process`] and a
//! `FAULT_MODE` environment variable that says what the child does:
//!
//! - `contend`: several threads lock one resource over and over until the
//!   run ends, each holder checked by the referee; one line per event on
//!   stdout, then a summary.
//! - `hold`: take the lock once, report its validity, and wait to be killed.
//! - `chatter`: write `FAULT_BYTES` bytes of lines and exit (for the test
//!   of how the suite collects its children's output).
//!
//! The referee is a separate redis-server that does not trust the lock: a
//! holder must `SET referee <holder> NX PX <its validity>` on entry; finding
//! the key taken means another holder is inside its validity too (a
//! violation). On exit the holder deletes the key only if it is still its
//! own. Because the referee key expires with the holder's validity, a holder
//! that crashed, or that outlived its validity, blocks nobody.

use crate::client::Client;
use crate::support::OwnedReply;
use redlock_sync::Redlock;
use std::collections::BTreeMap;
use std::env;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: a clock the parent and all children
/// share, used only to place events in the parent's fault phases.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

const COMPARE_AND_DELETE: &[u8] =
    b"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";

fn var(name: &str) -> String {
    env::var(name).unwrap_or_else(|_| panic!("child process without {name}"))
}

fn var_ms(name: &str) -> Duration {
    Duration::from_millis(
        var(name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} not a number")),
    )
}

/// Not a test of its own: the body of the suite's child processes.
#[test]
#[ignore = "run by the fault suite as a child process"]
fn child_process() {
    // The harness has printed "test worker::child_process ... " without a
    // line break: start our output on a line of its own.
    println!();
    if var("FAULT_MODE") == "chatter" {
        return chatter();
    }
    let nodes: Vec<String> = var("FAULT_NODES").split(',').map(str::to_string).collect();
    let redlock = Redlock::builder()
        .nodes(&nodes)
        .node_timeout(var_ms("FAULT_NODE_TIMEOUT_MS"))
        .lock_wait(Duration::ZERO)
        .build()
        .expect("valid configuration");
    match var("FAULT_MODE").as_str() {
        "contend" => contend(redlock),
        "hold" => hold(&redlock),
        other => panic!("unknown FAULT_MODE {other}"),
    }
}

/// What one contending thread saw.
#[derive(Default)]
struct Tally {
    /// Each lock taken: when its attempt began, and when it returned the
    /// lock (wall clock, ms). The lock was granted in between.
    acquisitions: Vec<(u64, u64)>,
    violations: usize,
    bad_validity: usize,
    /// The longest call (a `try_lock` or an `unlock`), and what it was:
    /// `call:outcome@when it began (wall clock, ms)`.
    max_call: Duration,
    slowest: String,
    errors: BTreeMap<String, usize>,
}

impl Tally {
    /// Counts a call that took `took` and began at `began` (wall clock).
    fn timed(&mut self, took: Duration, began: u64, what: impl FnOnce() -> String) {
        if took > self.max_call {
            self.max_call = took;
            self.slowest = format!("{}@{began}", what());
        }
    }
}

fn contend(redlock: Redlock) {
    let threads: usize = var("FAULT_THREADS").parse().expect("FAULT_THREADS");
    let label = var("FAULT_ID");
    let end = Instant::now() + var_ms("FAULT_RUN_MS");
    let redlock = Arc::new(redlock);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (redlock, label) = (redlock.clone(), format!("{label}.{t}"));
            thread::spawn(move || contend_thread(&redlock, &label, end))
        })
        .collect();
    let mut all = Tally::default();
    for handle in handles {
        let t = handle.join().expect("contending thread panicked");
        all.acquisitions.extend(t.acquisitions);
        all.violations += t.violations;
        all.bad_validity += t.bad_validity;
        if t.max_call > all.max_call {
            (all.max_call, all.slowest) = (t.max_call, t.slowest);
        }
        for (kind, n) in t.errors {
            *all.errors.entry(kind).or_default() += n;
        }
    }
    for (began, taken) in &all.acquisitions {
        println!("ACQ {began} {taken}");
    }
    let errors: Vec<String> = all.errors.iter().map(|(k, n)| format!("{k}:{n}")).collect();
    println!(
        "SUMMARY violations={} bad_validity={} max_call_us={} slowest={} errors={}",
        all.violations,
        all.bad_validity,
        all.max_call.as_micros(),
        all.slowest,
        errors.join(",")
    );
    // Dropping the last handle lets the connections finish what they were
    // sent before the process exits.
    drop(redlock);
}

fn contend_thread(redlock: &Redlock, label: &str, end: Instant) -> Tally {
    let resource = var("FAULT_RESOURCE");
    let ttl = var_ms("FAULT_TTL_MS");
    let hold = var_ms("FAULT_HOLD_MS");
    let mut referee = Client::connect(&var("FAULT_REFEREE"));
    let mut tally = Tally::default();
    let mut n = 0u64;
    while Instant::now() < end {
        let began = wall_ms();
        let asked = Instant::now();
        let result = redlock.try_lock(&resource, ttl);
        tally.timed(asked.elapsed(), began, || match &result {
            Ok(Some(_)) => "try_lock:locked".to_string(),
            Ok(None) => "try_lock:contended".to_string(),
            Err(e) => format!("try_lock:{}", error_kind(e)),
        });
        let lock = match result {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                thread::sleep(Duration::from_micros(
                    200 + u64::from(getrandom::u32().unwrap_or(0) % 1800),
                ));
                continue;
            }
            Err(e) => {
                *tally.errors.entry(error_kind(&e)).or_default() += 1;
                thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        tally.acquisitions.push((began, wall_ms()));
        let validity = lock.validity();
        if validity.is_zero() || validity > ttl {
            tally.bad_validity += 1;
            println!("BAD_VALIDITY {validity:?} ttl {ttl:?}");
        }
        n += 1;
        let me = format!("{label}#{n}");
        let pttl = validity.as_millis().max(1).to_string();
        let entered = referee.call(&[
            b"SET",
            b"referee",
            me.as_bytes(),
            b"NX",
            b"PX",
            pttl.as_bytes(),
        ]);
        if entered == OwnedReply::Nil {
            let other = referee.call(&[b"GET", b"referee"]);
            println!("VIOLATION {me} got the lock while {other:?} held it");
            tally.violations += 1;
        }
        thread::sleep(hold);
        if lock.validity() > Duration::ZERO {
            referee.call(&[b"EVAL", COMPARE_AND_DELETE, b"1", b"referee", me.as_bytes()]);
        }
        let (asked, began) = (Instant::now(), wall_ms());
        let released = lock.unlock();
        tally.timed(asked.elapsed(), began, || match &released {
            Ok(()) => "unlock:ok".to_string(),
            Err(e) => format!("unlock:{}", error_kind(e)),
        });
        if let Err(e) = released {
            *tally
                .errors
                .entry(format!("unlock-{}", error_kind(&e)))
                .or_default() += 1;
        }
    }
    tally
}

/// A short name for the kind of error, for the summary.
fn error_kind(e: &redlock_sync::Error) -> String {
    let text = format!("{e:?}");
    text.split(['(', ' ', '{'])
        .next()
        .unwrap_or("?")
        .to_string()
}

/// Takes the lock once, says until when it is valid, then waits (the parent
/// kills this process with SIGKILL).
fn hold(redlock: &Redlock) {
    let resource = var("FAULT_RESOURCE");
    let ttl = var_ms("FAULT_TTL_MS");
    let lock = loop {
        if let Ok(Some(lock)) = redlock.try_lock(&resource, ttl) {
            break lock;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let valid_until = wall_ms() + lock.validity().as_millis() as u64;
    println!("HELD {valid_until}");
    thread::sleep(Duration::from_secs(600));
    drop(lock);
}

/// Writes `FAULT_BYTES` bytes (rounded up to whole 64-byte lines) to stdout.
fn chatter() {
    let bytes: usize = var("FAULT_BYTES").parse().expect("FAULT_BYTES");
    let line = "x".repeat(63);
    for _ in 0..bytes.div_ceil(64) {
        println!("{line}");
    }
}
