//! A lock lost while the command runs: the command is stopped (SIGTERM to
//! its group at once, SIGKILL after the grace) and dead before the lock's
//! validity could have ended, and `redlock` exits 75.
//!
//! The stated bounds (see `supervise`): a loss the renewer finds (the key
//! deleted behind the tool) is acted on at the end of the renewal round,
//! which comes when a third of the TTL is left, so at most two thirds of
//! the TTL (plus a round) after the loss; a lock that cannot be renewed
//! (a majority of masters down) gets SIGTERM with the grace (cut to a sixth
//! of the TTL) plus a tenth of the TTL of validity left, and SIGKILL a
//! tenth of the TTL before its end.

#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{collect, is_alive, number, redlock_run, signal, until, wall_ms, Scratch};
use std::fs;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};
use support::Cluster;

const KEY: &str = "job:loss";

/// Starts `redlock run` with `options` on a script that writes its pid, the
/// validity deadline it was given, and (with `on_term`) runs `on_term` on
/// SIGTERM; then `body`.
fn start(
    cluster: &Cluster,
    scratch: &Scratch,
    options: &[&str],
    on_term: &str,
    body: &str,
) -> Child {
    let script = format!(
        "trap '{on_term}' TERM; echo $REDLOCK_VALID_UNTIL_MS > {until}; echo $$ > {pid}; {body}",
        until = scratch.file("valid_until"),
        pid = scratch.file("pid"),
    );
    let mut args = options.to_vec();
    args.extend([KEY, "-c", &script]);
    redlock_run(cluster, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock")
}

/// Records when SIGTERM came, and exits 0 (see `term_at`).
fn record_term(scratch: &Scratch) -> String {
    format!("{}; exit 0", touch_term(scratch))
}

/// The trap's record of SIGTERM: a file created by the shell itself. A
/// `date` run from the trap would give the time after a fork and an exec,
/// which a busy machine can delay by far more than the bounds below allow
/// for; the file's creation is stamped by the kernel as the shell, woken by
/// the signal, opens it.
fn touch_term(scratch: &Scratch) -> String {
    format!(": > {}", scratch.file("term"))
}

/// When the command's trap ran (wall clock, ms): the modification time of
/// the file `touch_term` creates, once it exists.
fn term_at(scratch: &Scratch) -> u128 {
    let path = scratch.path().join("term");
    until("the command to record SIGTERM", || path.exists());
    fs::metadata(&path)
        .and_then(|meta| meta.modified())
        .expect("the file's modification time")
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
}

/// Sleeps in the background and waits for it, so that a trap runs at once.
const WAIT_LONG: &str = "sleep 60 & wait";

/// When a process died, as a poll saw it (wall clock, ms): it died after
/// `last_alive` (taken before the look that found it alive) and before
/// `seen_dead` (taken after the look that found it gone). A busy machine
/// that delays the looks widens the interval, never moves it past the
/// death: "died before T" is checked with `last_alive`, "died after T"
/// with `seen_dead`.
struct Death {
    last_alive: u128,
    seen_dead: u128,
}

/// Polls until process `pid` is gone.
fn death_of(pid: u32) -> Death {
    let mut last_alive = wall_ms();
    until("the command to die", || {
        let looked = wall_ms();
        let alive = is_alive(pid);
        if alive {
            last_alive = looked;
        }
        !alive
    });
    Death {
        last_alive,
        seen_dead: wall_ms(),
    }
}

fn delete_everywhere(cluster: &Cluster) {
    for server in &cluster.servers {
        server.cmd(&["DEL", KEY]);
    }
}

#[test]
fn a_lock_deleted_behind_redlock_stops_the_command_within_two_thirds_of_the_ttl() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let ttl = Duration::from_secs(2);
    let started = Instant::now();
    let tool = start(
        &cluster,
        &scratch,
        &["--ttl", "2s"],
        &record_term(&scratch),
        WAIT_LONG,
    );
    scratch.wait_for("pid");
    delete_everywhere(&cluster);
    let deleted = wall_ms();
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(done.stderr.contains("lock lost"), "{}", done.stderr);
    let term = term_at(&scratch);
    // Two thirds of the TTL, plus a generous allowance for a busy host.
    let bound = ttl.as_millis() * 2 / 3 + 500;
    assert!(
        term - deleted <= bound,
        "SIGTERM {} ms after the deletion (bound {bound} ms)",
        term - deleted
    );
}

/// Starts a run (TTL 3 s) as `start` does, and kills two of the three
/// masters once the command runs: renewals fail from then on.
fn start_then_lose_a_majority(
    cluster: &mut Cluster,
    scratch: &Scratch,
    on_term: &str,
    body: &str,
) -> (Child, u32) {
    let tool = start(cluster, scratch, &["--ttl", "3s"], on_term, body);
    let pid = number(&scratch.wait_for("pid")) as u32;
    cluster.servers[1].kill();
    cluster.servers[2].kill();
    (tool, pid)
}

#[test]
fn killing_a_majority_of_masters_stops_the_command_before_the_validity_ends() {
    let mut cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let on_term = record_term(&scratch);
    let (tool, _) = start_then_lose_a_majority(&mut cluster, &scratch, &on_term, WAIT_LONG);
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(
        done.stderr.contains("could not be renewed"),
        "{}",
        done.stderr
    );
    let valid_until = number(&scratch.wait_for("valid_until"));
    let term = term_at(&scratch);
    assert!(
        term < valid_until,
        "SIGTERM at {term}, validity to {valid_until}"
    );
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_before_the_validity_ends() {
    let mut cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    // `trap '' TERM`: the shell and its sleeps ignore SIGTERM.
    let body = "while :; do sleep 0.05; done";
    let (tool, pid) = start_then_lose_a_majority(&mut cluster, &scratch, "", body);
    let died = death_of(pid);
    let valid_until = number(&scratch.wait_for("valid_until"));
    assert!(
        died.last_alive < valid_until,
        "alive at {}, validity to {valid_until}",
        died.last_alive
    );
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
}

#[test]
fn the_grace_separates_sigterm_from_sigkill() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    // The shell notes SIGTERM and carries on: only SIGKILL ends it.
    let on_term = touch_term(&scratch);
    let tool = start(
        &cluster,
        &scratch,
        &["--ttl", "2s", "--grace", "400ms"],
        &on_term,
        "while :; do sleep 0.05; done",
    );
    let pid = number(&scratch.wait_for("pid")) as u32;
    delete_everywhere(&cluster);
    let died = death_of(pid);
    let term = term_at(&scratch);
    // Alive until at least `last_alive`, dead by `seen_dead`: each bound
    // with the end of that interval which a slow poll cannot make wrong.
    assert!(
        died.seen_dead.saturating_sub(term) >= 300 && died.last_alive.saturating_sub(term) <= 1400,
        "SIGKILL between {} and {} ms after SIGTERM (grace 400 ms)",
        died.last_alive.saturating_sub(term),
        died.seen_dead.saturating_sub(term)
    );
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
}

/// Waits (sleeping) until the wall clock passes `ms` (Unix milliseconds)
/// by half a second.
fn sleep_past(ms: u128) {
    while wall_ms() < ms + 500 {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stopped for `--max-hold`, the command outlives the lock's validity
/// while `redlock` is paused before its SIGKILL: the lock ran out while the
/// command ran, so the exit is the loss's, 75, not `--max-hold`'s 124
/// (issue 31, item 12).
#[test]
fn a_run_stopped_for_max_hold_and_paused_past_the_validity_exits_75() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    // The shell notes SIGTERM and carries on: only SIGKILL ends it, which
    // comes a tenth of the TTL before the validity ends at the latest.
    let on_term = format!("date +%s%3N > {}", scratch.file("term"));
    let tool = start(
        &cluster,
        &scratch,
        &["--ttl", "4s", "--max-hold", "300ms", "--grace", "30s"],
        &on_term,
        "while :; do sleep 0.05; done",
    );
    let pid = number(&scratch.wait_for("pid")) as u32;
    scratch.wait_for("term");
    signal(tool.id(), libc::SIGSTOP);
    assert!(
        is_alive(pid),
        "the command died before redlock was paused: the machine is too slow for this test"
    );
    let valid_until = number(&scratch.wait_for("valid_until"));
    sleep_past(valid_until);
    signal(tool.id(), libc::SIGCONT);
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(done.stderr.contains("lost"), "{}", done.stderr);
}

/// The command ends while `redlock` is paused past both its `--max-hold`
/// and the lock's validity: the lock did not hold to the command's end, so
/// its status is not passed through; the exit is 75 (issue 31, item 12).
#[test]
fn a_command_that_ends_while_redlock_is_paused_past_hold_limit_and_validity_exits_75() {
    let cluster = Cluster::start(3);
    let scratch = Scratch::new();
    let started = Instant::now();
    let body = format!(
        "while [ ! -e {go} ]; do sleep 0.01; done; exit 5",
        go = scratch.file("go")
    );
    let tool = start(
        &cluster,
        &scratch,
        &["--ttl", "2s", "--max-hold", "1s"],
        "",
        &body,
    );
    let pid = number(&scratch.wait_for("pid")) as u32;
    signal(tool.id(), libc::SIGSTOP);
    std::fs::write(scratch.file("go"), "").unwrap();
    until("the command to end", || !is_alive(pid));
    let valid_until = number(&scratch.wait_for("valid_until"));
    sleep_past(valid_until);
    signal(tool.id(), libc::SIGCONT);
    let done = collect(tool, started);
    assert_eq!(done.status.code(), Some(75), "{done:?}");
    assert!(
        done.stderr
            .contains("the command ended, but the lock was lost"),
        "{}",
        done.stderr
    );
}
