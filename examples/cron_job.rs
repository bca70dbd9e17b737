//! A job that must run at most once per period, whichever host gets to it
//! first: a daily report, say, that cron starts on every host so that it
//! still runs when one of them is down.
//!
//! ```sh
//! cargo run --release --example cron_job       # 3 local masters
//! cargo run --release --example cron_job -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! The recipe:
//!
//! 1. Name the lock after the period (`report:2026-11-23`): each period
//!    has a lock of its own, so nothing needs cleaning up between periods.
//! 2. `try_lock` it, with a TTL that lasts until the period ends: one
//!    attempt, no waiting. A host that does not get it (`Ok(None)`) has
//!    nothing to do.
//! 3. The host that gets it runs the job, then calls `let_expire()`
//!    instead of `unlock()`: the key stays on the masters until its TTL
//!    ends, so a host whose cron fires late (a slow boot, a skewed clock)
//!    still finds it taken and does not run the job a second time.
//! 4. If the job fails, `unlock()` instead, so that another host (or the
//!    next cron tick) may try again.
//! 5. A job that may run longer than the TTL (here it does: 1.6 s of work
//!    under a 1 s TTL) holds a lease while it runs (`keep_alive`, checking
//!    `lease.check()` between steps), then `let_expire()`s the lease: the
//!    key stays for a TTL after the last renewal, so the late host still
//!    finds it. A plain lock would have expired under the job, and the
//!    late host, finding the lock free, would have run the job twice.
//!
//! Here a period's TTL lasts 1 second and the job 1.6 s, and the hosts are
//! threads, each with its own `Redlock` handle, as separate processes on
//! separate hosts would have.
//!
//! What to copy: `host`, what each host runs when its cron fires. Demo
//! scaffolding: `main` (hosts as threads, the local servers of `local`,
//! `examples/support/local.rs`, and the check that the job ran once).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, Lease, Redlock};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

/// The job's lock: one per period. A real one would be built from the date
/// the run is for, e.g. `format!("report:{date}")`.
const JOB: &str = "report:2026-11-23";
/// The period (a day, for a daily report; 1 s here). In production, use the
/// time left until the period ends, plus a margin for the clock skew between
/// the hosts' crons.
const PERIOD: Duration = Duration::from_secs(1);
/// How long the job itself takes: longer than the period's TTL.
const JOB_TIME: Duration = Duration::from_millis(1600);
/// The longest the lease is renewed: a job still running then stops.
const MAX_JOB: Duration = Duration::from_secs(60);

/// What a host did.
enum Outcome {
    Ran,
    Skipped,
    /// The job failed and the lock was released for another host to retry.
    Failed,
}

fn main() -> ExitCode {
    let (servers, urls) = local::masters(3);

    // Each host's cron fires at a slightly different moment; the last one
    // fires after the job has already finished on another host.
    let hosts = [
        ("host-a", Duration::from_millis(0)),
        ("host-b", Duration::from_millis(20)),
        ("host-c", Duration::from_millis(40)),
        ("host-d", Duration::from_millis(1900)),
    ];
    let started = Instant::now();
    let threads: Vec<_> = hosts
        .into_iter()
        .map(|(name, delay)| {
            let urls = urls.clone();
            thread::spawn(move || {
                thread::sleep(delay);
                let outcome = host(name, &urls, started);
                (name, outcome)
            })
        })
        .collect();

    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    let mut trouble = 0;
    for thread in threads {
        match thread.join().expect("host thread panicked") {
            (name, Ok(Outcome::Ran)) => ran.push(name),
            (name, Ok(Outcome::Skipped)) => skipped.push(name),
            (name, Ok(Outcome::Failed)) => {
                println!("{name}: the job failed");
                trouble += 1;
            }
            (name, Err(e)) => {
                // No quorum, say: this host cannot tell whether the job ran.
                // Skip this tick (or retry it), and alert.
                println!("{name}: could not ask the masters: {e}");
                trouble += 1;
            }
        }
    }
    println!();
    println!("{JOB} ran on: {}", ran.join(", "));
    println!("skipped by:   {}", skipped.join(", "));
    if let Some(servers) = &servers {
        // The key let_expire left behind, on each master (PTTL replies
        // `:milliseconds`).
        let left: Vec<String> = servers
            .iter()
            .map(|server| match server.command(&["PTTL", JOB]) {
                Ok(reply) => format!("{} ms", reply.trim_start_matches(':')),
                Err(e) => format!("? ({e})"),
            })
            .collect();
        println!("{JOB} expires on the masters in: {}", left.join(", "));
    }
    if ran.len() == 1 && trouble == 0 {
        ExitCode::SUCCESS
    } else {
        // (Run again within a period of an earlier run on the same masters,
        // and every host skips: that is the point.)
        println!(
            "expected exactly one run: {} runs, {trouble} failures",
            ran.len()
        );
        ExitCode::FAILURE
    }
}

/// What every host runs when its cron fires.
fn host(name: &str, urls: &[String], started: Instant) -> Result<Outcome, Error> {
    let at = || started.elapsed().as_millis();
    // A host is a process of its own, with a handle of its own. Building it
    // makes no connection yet.
    let redlock = Redlock::builder().nodes(urls).build()?;

    // One attempt: waiting would be pointless, whoever holds the lock is
    // running (or has run) this period's job.
    let Some(lock) = redlock.try_lock(JOB, PERIOD)? else {
        println!(
            "{:>5} ms {name}: {JOB} is taken: another host runs or ran it; skipping",
            at()
        );
        return Ok(Outcome::Skipped);
    };
    println!(
        "{:>5} ms {name}: got {JOB}, valid for {:.2?}: running the job",
        at(),
        lock.validity()
    );
    // The job may take longer than the TTL: a lease keeps the lock while
    // it runs (renewed in the background, for at most MAX_JOB).
    let lease = lock.keep_alive(MAX_JOB)?;
    match run_report(&lease) {
        Ok(()) => {
            // Keep the key for a TTL after the last renewal, so that no
            // late host runs the job again. The lease holds no connection:
            // nothing leaks.
            let kept = lease.let_expire();
            println!(
                "{:>5} ms {name}: done; {JOB} stays taken for another {kept:.2?}",
                at()
            );
            Ok(Outcome::Ran)
        }
        Err(why) => {
            println!("{:>5} ms {name}: job failed ({why}): releasing", at());
            // Let another host (or the next cron tick) try again. If even
            // the release fails, the key expires with the period.
            lease.unlock()?;
            Ok(Outcome::Failed)
        }
    }
}

/// The job itself (it just takes a while here), checking the lease
/// between its steps: a lease that ended (lost, or renewals failing until
/// its validity ran out) stops it.
fn run_report(lease: &Lease) -> Result<(), String> {
    let step = JOB_TIME / 8;
    for _ in 0..8 {
        lease.check().map_err(|e| format!("the lock ended: {e}"))?;
        thread::sleep(step);
    }
    Ok(())
}
