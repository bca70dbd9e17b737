//! `redlock run`: take the lock, run the command under it, release it (or,
//! with `--keep`, leave it to its TTL), and say how it all ended.

use crate::args::{RunArgs, Wait};
use crate::child::{self, LockEnv};
use crate::duration::show;
use crate::exit::{self, Exit};
use crate::held::{Held, Taken};
use crate::json;
use crate::keep::{self, LetGo, Period};
use crate::masters;
use crate::output::{say, show_key, Progress};
use crate::supervise::{supervise, LossAlarm, Outcome, Plan, Stopped};
use crate::sys::{self, wake, SignalPipe, FORWARDED, SIGTSTP};
use redlock_sync::{Builder, Error, Redlock};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs `args`' command under the lock, and returns how the tool ends;
/// with `--json`, reports how it went on stderr at the end.
pub(crate) fn run(args: &RunArgs) -> Exit {
    let mut report = json::Run {
        key: match &args.keys[..] {
            [key] => Some(show_key(key.as_bytes())),
            _ => None,
        },
        keys: args
            .keys
            .iter()
            .map(|key| show_key(key.as_bytes()))
            .collect(),
        outcome: "failed",
        ..json::Run::default()
    };
    let exit = run_reporting(args, &mut report);
    if args.json {
        match exit {
            Exit::Code(code) => report.exit_code = Some(code),
            Exit::Signal(signal) => report.signal = Some(signal),
        }
        json::print_err(&report);
    }
    exit
}

/// [`run`], noting in `report` what happens.
fn run_reporting(args: &RunArgs, report: &mut json::Run) -> Exit {
    // First of all: from here on, a signal never ends the tool by its
    // default action, which would leave a lock granted meanwhile on the
    // masters until its TTL. During the acquisition it ends the wait (and
    // anything set is released); once the command runs, it goes to it.
    let signals = match SignalPipe::install() {
        Ok(signals) => signals,
        Err(error) => {
            let message = format!("cannot handle signals: {error}");
            say(&message);
            report.error = Some(message);
            return Exit::Code(exit::OS_ERROR);
        }
    };
    let keys = shown_keys(args);
    let with_alarm = |builder: Builder| {
        let builder = builder.fencing(args.fence).events(LossAlarm);
        let builder = match args.replica_ack {
            Some((replicas, timeout)) => {
                builder.replica_ack(replicas, timeout.unwrap_or(args.node_timeout / 2))
            }
            None => builder,
        };
        let builder = match &args.holder_label {
            Some(label) => builder.holder_label(label),
            None => builder,
        };
        match &args.fence_domain {
            Some(domain) => builder.fence_domain(domain),
            None => builder,
        }
    };
    let redlock = match masters::client(&args.masters, args.node_timeout, with_alarm) {
        Ok(redlock) => redlock,
        Err(failed) => {
            report.error = Some(failed.message);
            return failed.exit;
        }
    };
    report.masters = Some(redlock.node_count());

    let started = Instant::now();
    let acquired = acquire_watching(&redlock, args, &signals);
    report.acquire_us = Some(json::us(started.elapsed()));
    let lock = match acquired {
        Acquired::Lock(lock) => *lock,
        Acquired::Interrupted(signal) => {
            report.outcome = "interrupted";
            return Exit::Signal(signal);
        }
        Acquired::HeldElsewhere => {
            report.outcome = "held_elsewhere";
            if args.quiet {
                return Exit::Code(0);
            }
            say(&held_elsewhere(args, &keys));
            return Exit::Code(args.conflict_exit);
        }
        Acquired::Failed(error) => {
            let message = format!("cannot lock {keys}: {error}");
            say(&message);
            report.error = Some(message);
            return Exit::Code(exit::for_error(&error));
        }
    };
    let held = lock.held_by();
    report.acquired = true;
    report.confirmed_by = Some(held);
    report.validity_ms = Some(json::ms(lock.validity()));
    report.fence_token = lock.fence_token();
    if args.verbose {
        say(&format!(
            "locked {keys} in {} (confirmed by {held} of {} masters); valid for {}",
            show_micros(started.elapsed()),
            redlock.node_count(),
            show(lock.validity()),
        ));
        // With --fence: a master left out of fencing is the warning before
        // one more failure stops fenced locking. A ping reads the answers
        // (its probe's among them) of masters the acquisition did not wait
        // for.
        if args.fence {
            let _ = redlock.ping();
        }
        for master in redlock.health() {
            if let Some(fault) = master.fence_fault() {
                say(&format!(
                    "master {} is left out of fenced locks: {fault}",
                    master.node()
                ));
            }
        }
    }
    let period = args.keep.then(|| Period::of(&lock));
    let lease = match lock.keep_alive(args.max_hold.unwrap_or(Duration::MAX)) {
        Ok(lease) => lease,
        Err(error) => {
            let message = format!("cannot keep {keys} renewed: {error}");
            say(&message);
            report.error = Some(message);
            return Exit::Code(exit::for_error(&error));
        }
    };
    let lock_env = LockEnv {
        key: key_variable(args),
        fence_token: lease.fence_token(),
        valid_until_ms: (SystemTime::now() + lease.validity())
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
    };
    let mut child = match child::start(&args.command, &lock_env) {
        Ok(child) => child,
        // The lease is released as it drops.
        Err(error) => {
            let message = format!("cannot run {}: {error}", args.command);
            say(&message);
            report.outcome = "not_started";
            report.end = Some("released");
            report.error = Some(message);
            return Exit::Code(child::exit_status_for(&error));
        }
    };
    let plan = Plan {
        ttl: args.ttl,
        grace: args.grace,
    };
    let outcome = match supervise(&mut child, &lease, plan, &signals, args.verbose) {
        Ok(outcome) => outcome,
        Err(error) => {
            // waitpid failed: the command is not ours to watch any more.
            let message = format!("cannot watch the command: {error}");
            say(&message);
            report.error = Some(message);
            child.signal(libc::SIGKILL);
            return Exit::Code(exit::OS_ERROR);
        }
    };
    finish(outcome, lease, args, period, report)
}

/// How the acquisition ended.
enum Acquired {
    /// Boxed: a lock holds its value inline (up to 105 bytes with a holder
    /// label), which would make every variant as large.
    Lock(Box<Taken>),
    /// A signal that ends the tool came (this one): the wait was ended, and
    /// anything set released.
    Interrupted(i32),
    /// Held elsewhere (after the wait).
    HeldElsewhere,
    Failed(Error),
}

/// Takes the lock as [`acquire`] does, on a thread of its own, while this
/// thread reads the signals: one of [`FORWARDED`] ends the wait (the handle is
/// shut down: a round in flight finishes, and a lock it took is released);
/// SIGTSTP stops the tool.
fn acquire_watching(redlock: &Redlock, args: &RunArgs, signals: &SignalPipe) -> Acquired {
    let (done, result) = mpsc::channel();
    let mut interrupted = None;
    let outcome = thread::scope(|scope| {
        thread::Builder::new()
            .name("redlock-acquire".into())
            .spawn_scoped(scope, || {
                let _ = done.send(acquire(redlock, args));
                // After the send: the loop below finds the result when it
                // wakes.
                wake();
            })?;
        let mut received = Vec::new();
        loop {
            if let Ok(outcome) = result.try_recv() {
                return Ok(outcome);
            }
            signals.wait(Duration::from_secs(3600), &mut received);
            for signal in received.drain(..) {
                if FORWARDED.contains(&signal) && interrupted.is_none() {
                    interrupted = Some(signal);
                    redlock.shutdown();
                } else if signal == SIGTSTP {
                    sys::stop_self();
                }
            }
        }
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return Acquired::Failed(Error::System(error)),
    };
    match (interrupted, outcome) {
        (Some(signal), outcome) => {
            if let Ok(Some(lock)) = outcome {
                let _ = lock.unlock();
            }
            Acquired::Interrupted(signal)
        }
        (None, Ok(Some(lock))) => Acquired::Lock(Box::new(lock)),
        (None, Ok(None)) => Acquired::HeldElsewhere,
        (None, Err(error)) => Acquired::Failed(error),
    }
}

/// Takes the lock as `args.wait` says: one attempt, or attempts until the
/// wait ends, woken by releases (the library retries both a held lock and
/// a missing quorum within a wait). Without a limit, a lock held elsewhere
/// is waited for as long as it takes, and masters that cannot be reached
/// (no quorum) for the library's `unreachable_limit` in a row
/// (`DEFAULT_UNREACHABLE_LIMIT`, 10 s) end the wait. `Ok(None)`: held
/// elsewhere.
///
/// One key takes the single-resource calls; several take the set calls
/// (all keys or none on each master, nothing held while waiting), with the
/// same waits.
fn acquire(redlock: &Redlock, args: &RunArgs) -> Result<Option<Taken>, Error> {
    let set = match &args.keys[..] {
        [_] => None,
        keys => Some(keys.iter().map(|key| key.as_bytes())),
    };
    let one = args.keys[0].as_bytes();
    let wait = match args.wait {
        Wait::Once => {
            return match set {
                None => Ok(redlock.try_lock(one, args.ttl)?.map(Taken::One)),
                Some(keys) => Ok(redlock.try_lock_many(keys, args.ttl)?.map(Taken::Set)),
            }
        }
        Wait::UpTo(limit) => limit,
        Wait::NoLimit => Duration::MAX,
    };
    let _progress = if args.quiet {
        None
    } else {
        match set {
            None => Progress::start(one),
            Some(_) => Progress::start(shown_keys(args).as_bytes()),
        }
    };
    match set {
        None => Ok(redlock.try_lock_for(one, args.ttl, wait)?.map(Taken::One)),
        Some(keys) => Ok(redlock
            .try_lock_many_for(keys, args.ttl, wait)?
            .map(Taken::Set)),
    }
}

/// The keys as messages show them: `a`, or `a, b` for a set.
fn shown_keys(args: &RunArgs) -> String {
    let shown: Vec<String> = args
        .keys
        .iter()
        .map(|key| show_key(key.as_bytes()))
        .collect();
    shown.join(", ")
}

/// "is" or "are", after [`shown_keys`].
/// What is said when the lock is held elsewhere: of a set, only that
/// some of its keys are (which ones, the round does not tell).
fn held_elsewhere(args: &RunArgs, keys: &str) -> String {
    if args.keys.len() == 1 {
        format!("{keys} is held elsewhere")
    } else {
        format!("one or more of {keys} is held elsewhere")
    }
}

/// `REDLOCK_KEY` for the command: the key, or the keys of a set one per
/// line (sorted, each once).
fn key_variable(args: &RunArgs) -> std::ffi::OsString {
    let mut value = std::ffi::OsString::new();
    for (i, key) in args.keys.iter().enumerate() {
        if i > 0 {
            value.push("\n");
        }
        value.push(key);
    }
    value
}

/// Releases the lock (or, with `--keep`, leaves it to its TTL: `period` is
/// `Some`) and turns the outcome into the tool's exit.
fn finish(
    outcome: Outcome,
    lease: Held,
    args: &RunArgs,
    period: Option<Period>,
    report: &mut json::Run,
) -> Exit {
    // Whether the lock held until the command's end, whatever stopped it:
    // a loss the loop had not seen yet counts too. The validity decides
    // first (`check` says `HoldLimit` only while it lasts): a tool paused
    // past both the hold limit and the validity reports the loss.
    let lost = match lease.check() {
        Err(Error::HoldLimit { .. }) | Ok(_) => None,
        Err(error) => Some(error),
    };
    match (outcome.stopped, lost) {
        // What is left of the key goes, `--keep` or not: nothing is left
        // to keep (the renewer may have found it gone already: nothing to
        // report then). The loop said why it stopped the command.
        (Some(Stopped::Lost), _) => {
            let _ = lease.unlock();
            (report.outcome, report.end) = ("lost", Some("lost"));
            return Exit::Code(exit::LOCK_LOST);
        }
        (stopped, Some(error)) => {
            let _ = lease.unlock();
            let what = match stopped {
                Some(_) => "the command was stopped for --max-hold",
                None => "the command ended",
            };
            let message = format!("{what}, but the lock was lost before: {error}");
            say(&message);
            (report.outcome, report.end) = ("lost", Some("lost"));
            report.error = Some(message);
            return Exit::Code(exit::LOCK_LOST);
        }
        // The command ran, until --max-hold: the key goes as after any
        // other end.
        (Some(Stopped::HoldLimit), None) => {
            report.outcome = "max_hold";
            report.end = Some(match keep::let_go(lease, period) {
                LetGo::Kept(_) => "kept",
                LetGo::Released { result: Ok(()), .. } => "released",
                LetGo::Released {
                    result: Err(Error::LockLost(_)),
                    ..
                } => "lost",
                LetGo::Released { result: Err(_), .. } => "release_failed",
            });
            return Exit::Code(exit::MAX_HOLD);
        }
        (None, None) => {}
    }
    let key = shown_keys(args);
    let letting_go = Instant::now();
    let ended = keep::let_go(lease, period);
    report.outcome = "completed";
    if let Some(lost) = report_end(ended, &key, args.verbose, letting_go, report) {
        return lost;
    }
    match (outcome.status.code(), outcome.status.signal()) {
        (Some(code), _) => Exit::Code(code as u8),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(exit::OS_ERROR),
    }
}

/// Says what became of the key after a command that ended holding the
/// lock (a warning, or with `verbose` any outcome), `since` the hold ended,
/// and notes it in `report`; returns the exit when the release found the
/// lock lost.
fn report_end(
    ended: LetGo,
    key: &str,
    verbose: bool,
    since: Instant,
    report: &mut json::Run,
) -> Option<Exit> {
    let (result, period_over) = match ended {
        // The lease ended between the check and now (its validity ran
        // out): the command ended holding the lock, but nothing is kept.
        LetGo::Kept(Duration::ZERO) => {
            (report.end, report.kept_ms) = (Some("kept"), Some(0));
            say(&format!(
                "warning: {key} ran out as the command ended: nothing is kept (--keep)"
            ));
            return None;
        }
        LetGo::Kept(left) => {
            (report.end, report.kept_ms) = (Some("kept"), Some(json::ms(left)));
            if verbose {
                say(&format!(
                    "kept {key}: its key stays on the masters for {} more (--keep)",
                    show(left)
                ));
            }
            return None;
        }
        LetGo::Released {
            result,
            period_over,
        } => (result, period_over),
    };
    report.release_us = Some(json::us(since.elapsed()));
    report.end = Some(match &result {
        Ok(()) => "released",
        Err(Error::LockLost(_)) => "lost",
        Err(_) => "release_failed",
    });
    match result {
        Ok(()) if verbose => {
            let why = if period_over {
                " (--keep: the command outlived the lock's TTL, so its period is over)"
            } else {
                ""
            };
            say(&format!(
                "released {key} in {}{why}",
                show_micros(since.elapsed())
            ));
        }
        Ok(()) => {}
        Err(error @ Error::LockLost(_)) => {
            let message =
                format!("the command ended, but the release found the lock lost: {error}");
            say(&message);
            report.outcome = "lost";
            report.error = Some(message);
            return Some(Exit::Code(exit::LOCK_LOST));
        }
        Err(error) => {
            let message = format!(
                "warning: the release of {key} failed ({error}); the key expires with its TTL"
            );
            say(&message);
            report.error = Some(message);
        }
    }
    None
}

/// A short time with its sub-millisecond part: `0.42ms`, `12.3ms`, `1.5s`.
fn show_micros(d: Duration) -> String {
    match d.as_micros() {
        us if us < 10_000 => format!("{}.{:02}ms", us / 1000, us % 1000 / 10),
        us if us < 1_000_000 => format!("{}.{}ms", us / 1000, us % 1000 / 100),
        _ => show(d),
    }
}
