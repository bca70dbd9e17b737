//! Work that outlasts its lock's TTL: take the lock with a short TTL and
//! extend it as the work goes, in steps, and stop at once if it is lost.
//!
//! ```sh
//! cargo run --release --example long_task       # 3 local masters
//! cargo run --release --example long_task -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! Why a short TTL that is extended, rather than one long enough for the
//! whole job? If the holder dies, the lock is free again within one TTL,
//! not after the longest the job could ever take.
//!
//! The recipe: before each step, if `lock.validity()` has fallen below a
//! third of the TTL, `lock.extend(ttl)`. Each step must take well under
//! that third, so that the lock cannot run out in the middle of one. If an
//! extension fails with `is_lock_lost()`, the lock is gone (its validity
//! is now zero) and someone else may hold it: stop at once, without
//! finishing the step or committing anything. Any other failure (no
//! quorum for a moment) leaves the lock valid for what `validity()` says:
//! carry on while that covers the next step, and try again before it.
//!
//! (`lock.renew_if_below(EXTEND_BELOW, TTL)` does the check and the
//! extension in one call; the extension is spelled out here to show each
//! outcome.)
//!
//! Three runs: one undisturbed, one in which the process stalls past its
//! validity (a long GC pause, a swapped-out or stopped process), and, with
//! local masters, one in which the key vanishes from the masters (as if
//! they had restarted without persistence).
//!
//! Then the same work with the renewal in the background:
//! `lock.keep_alive(max_hold)` returns a `Lease` that the handle's renewal
//! thread extends while the work runs, for at most `max_hold`; the work
//! only checks `lease.check()` before each step (one atomic read). Two
//! runs: undisturbed, and stalled past the validity (the renewal thread
//! stalls with the process, and the lease says so when it resumes).
//!
//! What to copy: `long_task` (extending by hand) or `leased_task` (a
//! lease), without their `during_step` argument. Demo scaffolding: `main`,
//! the fault injection (`during_step`, `stall_the_process`) and the local
//! servers (`local`, `examples/support/local.rs`).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, Redlock};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

/// The lock's TTL: how long the lock outlives a holder that died.
const TTL: Duration = Duration::from_secs(2);
/// Extend when less than this is left. One step, plus the time an
/// extension takes, must fit in it with room to spare.
const EXTEND_BELOW: Duration = Duration::from_millis(2000 / 3);
/// One step of the work.
const STEP: Duration = Duration::from_millis(300);
/// 15 steps of 300 ms: 4.5 s, more than twice the TTL.
const STEPS: u32 = 15;

fn main() -> ExitCode {
    let (servers, urls) = local::masters(3);
    let redlock = match Redlock::builder()
        .nodes(&urls)
        // Extensions are bounded, so that a stuck holder cannot keep the
        // lock forever: 20 extensions of 2 s allow about 30 s of work here.
        // (The default is 100.)
        .max_extensions(20)
        .build()
    {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let mut as_expected = true;

    println!("\n1. undisturbed: {STEPS} steps of {STEP:?} under a {TTL:?} TTL");
    let result = long_task(&redlock, "long-task:1", |_| {});
    println!("   -> {}", outcome(&result));
    as_expected &= result.is_ok();

    println!("\n2. the process stalls for 2.5 s during step 4");
    let result = long_task(&redlock, "long-task:2", |step| {
        if step == 4 {
            thread::sleep(Duration::from_millis(2500));
        }
    });
    println!("   -> {}", outcome(&result));
    as_expected &= result.as_ref().is_err_and(Error::is_lock_lost);

    if let Some(servers) = &servers {
        // The loss shows only at the next extension (step 6): steps 4 and 5
        // run unprotected, unknowingly. To notice sooner, extend more often
        // (each extension is one round on the masters).
        // (The key is deleted everywhere: a lock is often on only two of
        // the three masters, and an extension also sets the key where it is
        // free, so deleting it on two masters may leave enough to extend.)
        println!("\n3. the key vanishes from the masters during step 3");
        let result = long_task(&redlock, "long-task:3", |step| {
            if step == 3 {
                for server in servers {
                    server.command(&["DEL", "long-task:3"]).expect("DEL");
                }
            }
        });
        println!("   -> {}", outcome(&result));
        as_expected &= result.as_ref().is_err_and(Error::is_lock_lost);
    }

    println!("\n4. with a lease renewed in the background: {STEPS} steps");
    let result = leased_task(&redlock, "long-task:4", |_| {});
    println!("   -> {}", outcome(&result));
    as_expected &= result.is_ok();

    println!("\n5. with a lease, the process stalls for 2.5 s during step 4");
    let result = leased_task(&redlock, "long-task:5", |step| {
        if step == 4 {
            stall_the_process(Duration::from_millis(2500));
        }
    });
    println!("   -> {}", outcome(&result));
    as_expected &= result.as_ref().is_err_and(Error::is_lock_lost);

    if as_expected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The long task: lock, then work step by step, extending as needed.
/// Returns the number of steps done, or why it stopped.
///
/// `during_step` is the demo's fault injection (it runs inside each step);
/// it is not part of the recipe.
fn long_task(
    redlock: &Redlock,
    resource: &str,
    mut during_step: impl FnMut(u32),
) -> Result<u32, Error> {
    let mut lock = redlock.lock(resource, TTL)?;
    let started = Instant::now();
    let at = || format!("{:>5} ms", started.elapsed().as_millis());
    println!(
        "   {} locked {resource}, valid for {}",
        at(),
        ms(lock.validity())
    );

    for step in 1..=STEPS {
        let left = lock.validity();
        if left < EXTEND_BELOW {
            match lock.extend(TTL) {
                Ok(()) => println!(
                    "   {} step {step:>2}: {} left: extended, valid for {}",
                    at(),
                    ms(left),
                    ms(lock.validity())
                ),
                Err(e) if e.is_lock_lost() => {
                    // Gone: another client may hold it already. Stop now,
                    // before doing (or committing) anything more.
                    println!(
                        "   {} step {step:>2}: {} left: extend failed, the lock is lost \
                         (validity now {}): stopping",
                        at(),
                        ms(left),
                        ms(lock.validity())
                    );
                    return Err(e);
                }
                Err(e) if lock.validity() <= STEP => {
                    // Still ours, but not for long enough to do a step.
                    println!(
                        "   {} step {step:>2}: extend failed, too little left: stopping",
                        at()
                    );
                    return Err(e);
                }
                Err(e) => {
                    // No quorum for now (masters down or slow): the lock
                    // is still ours for validity(); go on, and try again
                    // before the next step.
                    println!(
                        "   {} step {step:>2}: extend failed, trying again later: {e}",
                        at()
                    );
                }
            }
        }
        do_step(step);
        during_step(step);
    }

    // Done: release now rather than let others wait for the TTL.
    let steps = STEPS;
    lock.unlock()?;
    println!("   {} all {steps} steps done, released", at());
    Ok(steps)
}

/// The same work under a lease: the handle's renewal thread extends the
/// lock in the background; each step only checks the lease first.
fn leased_task(
    redlock: &Redlock,
    resource: &str,
    mut during_step: impl FnMut(u32),
) -> Result<u32, Error> {
    // Renewed for at most a minute: a stuck holder cannot keep it longer.
    let lease = redlock
        .lock(resource, TTL)?
        .keep_alive(Duration::from_secs(60))?;
    let started = Instant::now();
    let at = || format!("{:>5} ms", started.elapsed().as_millis());
    for step in 1..=STEPS {
        match lease.check() {
            Ok(left) if step % 5 == 1 => println!("   {} step {step:>2}: {} left", at(), ms(left)),
            Ok(_) => {}
            Err(e) => {
                // Lost, expired (the renewal could not keep up, or the
                // process stalled), or held for `max_hold`: stop now.
                println!("   {} step {step:>2}: the lease is gone: stopping", at());
                return Err(e);
            }
        }
        do_step(step);
        during_step(step);
    }
    lease.unlock()?;
    println!("   {} all {STEPS} steps done, released", at());
    Ok(STEPS)
}

/// Stops the whole process (every thread, the renewal thread too) for `d`,
/// as a stop-the-world pause or `SIGSTOP` would: a sleeping thread would
/// not do, since the renewal thread would keep the lock alive meanwhile.
fn stall_the_process(d: Duration) {
    let me = std::process::id().to_string();
    // A helper process sends SIGCONT after `d`; then we stop ourselves.
    let waker = std::process::Command::new("sh")
        .args(["-c", &format!("sleep {}; kill -CONT {me}", d.as_secs_f64())])
        .spawn();
    if waker.is_ok() {
        let _ = std::process::Command::new("kill")
            .args(["-STOP", &me])
            .status();
    }
}

/// One step of the work: short, and safe to stop after.
fn do_step(_step: u32) {
    thread::sleep(STEP);
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

fn outcome(result: &Result<u32, Error>) -> String {
    match result {
        Ok(steps) => format!("finished all {steps} steps"),
        Err(e) if e.is_lock_lost() => format!("stopped, the lock was lost: {e}"),
        Err(e) => format!("stopped: {e}"),
    }
}
