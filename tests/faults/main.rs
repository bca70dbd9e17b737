//! The fault-injection suite: real redis-server masters are killed, frozen
//! and slowed while several processes contend for one lock, and an
//! independent referee checks mutual exclusion (see `worker.rs`). Scripted
//! fake nodes play hostile servers (see `hostile.rs`).
//!
//! The tests run one at a time (they share the machine's two cores with
//! the servers and children they start) and bound every wait generously:
//! they check what the client does, not how fast a loaded machine is.

#[path = "../support/mod.rs"]
mod support;

mod client;
mod hang;
mod hostile;
mod process;
mod worker;

use client::Client;
use process::Running;
use redlock_sync::Redlock;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, OwnedReply, RedisServer};
use worker::wall_ms;

/// One fault test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a contention run is set up.
struct Contention {
    processes: usize,
    threads: usize,
    run: Duration,
    ttl: Duration,
    node_timeout: Duration,
    hold: Duration,
}

impl Default for Contention {
    fn default() -> Contention {
        Contention {
            processes: 3,
            threads: 2,
            run: Duration::from_secs(9),
            ttl: Duration::from_secs(2),
            node_timeout: Duration::from_millis(50),
            hold: Duration::from_millis(1),
        }
    }
}

/// Starts a child process of this test binary in `mode` (see `worker.rs`).
fn spawn_child(mode: &str, env: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    Command::new(exe)
        .args([
            "worker::child_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FAULT_MODE", mode)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child process")
}

fn child_env(masters: &Cluster, c: &Contention) -> Vec<(&'static str, String)> {
    vec![
        ("FAULT_NODES", masters.urls().join(",")),
        ("FAULT_RESOURCE", "fault-suite-lock".to_string()),
        ("FAULT_TTL_MS", c.ttl.as_millis().to_string()),
        (
            "FAULT_NODE_TIMEOUT_MS",
            c.node_timeout.as_millis().to_string(),
        ),
        ("FAULT_RUN_MS", c.run.as_millis().to_string()),
        ("FAULT_HOLD_MS", c.hold.as_millis().to_string()),
        ("FAULT_THREADS", c.threads.to_string()),
    ]
}

/// Contending child processes, started together.
struct Contenders {
    children: Vec<Running>,
    started_ms: u64,
}

impl Contenders {
    fn start(masters: &Cluster, referee: &RedisServer, c: &Contention) -> Contenders {
        let mut env = child_env(masters, c);
        env.push(("FAULT_REFEREE", referee.addr().to_string()));
        let children = (0..c.processes)
            .map(|p| {
                let mut env = env.clone();
                env.push(("FAULT_ID", format!("p{p}")));
                Running::new(spawn_child("contend", &env))
            })
            .collect();
        Contenders {
            children,
            started_ms: wall_ms(),
        }
    }

    /// Sleeps until `offset` after the start.
    fn at(&self, offset: Duration) -> u64 {
        let target = self.started_ms + offset.as_millis() as u64;
        let now = wall_ms();
        if target > now {
            thread::sleep(Duration::from_millis(target - now));
        }
        wall_ms()
    }

    /// Waits for every child (bounded) and merges what they reported.
    fn finish(self, run: Duration) -> Report {
        let limit = Instant::now() + run + Duration::from_secs(60);
        let mut report = Report::default();
        for child in self.children {
            report.absorb(&collect(child, limit));
        }
        report
    }
}

/// Waits for a contending child until `limit` and returns its stdout; panics
/// if it failed, or if it still runs at `limit` (then with what it was doing).
fn collect(mut child: Running, limit: Instant) -> String {
    if !child.exited_by(limit) {
        let what = hang::describe_and_kill(child);
        panic!("a contending child process hangs: {what}");
    }
    let output = child.end();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "child failed: {}\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// The suite's own harness: a child that writes more than a pipe holds
/// (64 KiB on Linux; a contending child writes some 35-65 KiB) before it exits
/// is collected with all it wrote, not left blocked on its stdout until
/// `collect` calls it a hang.
#[test]
fn a_child_writing_more_than_a_pipe_holds_is_collected() {
    let bytes = 1 << 20;
    let child = spawn_child("chatter", &[("FAULT_BYTES", bytes.to_string())]);
    let stdout = collect(
        Running::new(child),
        Instant::now() + Duration::from_secs(60),
    );
    assert!(stdout.len() >= bytes, "{} bytes of {bytes}", stdout.len());
}

/// Everything the children reported.
#[derive(Default, Debug)]
struct Report {
    /// When each lock was taken (its attempt returned it; wall clock, ms).
    acquisitions: Vec<u64>,
    /// Each lock's attempt: when it began and when it returned the lock.
    attempts: Vec<(u64, u64)>,
    violations: usize,
    bad_validity: usize,
    max_call: Duration,
    /// What the longest call was (see `worker::Tally`).
    slowest: String,
    errors: BTreeMap<String, usize>,
    /// Lines that explain a violation or a bad validity.
    evidence: Vec<String>,
}

impl Report {
    fn absorb(&mut self, stdout: &str) {
        for line in stdout.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("ACQ") => {
                    let mut time = || -> u64 {
                        words
                            .next()
                            .and_then(|w| w.parse().ok())
                            .expect("ACQ times")
                    };
                    let (began, taken) = (time(), time());
                    self.acquisitions.push(taken);
                    self.attempts.push((began, taken));
                }
                Some("VIOLATION" | "BAD_VALIDITY") => self.evidence.push(line.to_string()),
                Some("SUMMARY") => {
                    let (mut max_call, mut slowest) = (Duration::ZERO, String::new());
                    for field in words {
                        let (key, value) = field.split_once('=').expect("key=value");
                        match key {
                            "violations" => self.violations += value.parse::<usize>().unwrap(),
                            "bad_validity" => self.bad_validity += value.parse::<usize>().unwrap(),
                            "max_call_us" => {
                                max_call = Duration::from_micros(value.parse().unwrap())
                            }
                            "slowest" => slowest = value.to_string(),
                            "errors" => {
                                for kind in value.split(',').filter(|k| !k.is_empty()) {
                                    let (name, n) = kind.split_once(':').expect("kind:count");
                                    *self.errors.entry(name.to_string()).or_default() +=
                                        n.parse::<usize>().unwrap();
                                }
                            }
                            _ => {}
                        }
                    }
                    if max_call > self.max_call {
                        (self.max_call, self.slowest) = (max_call, slowest);
                    }
                }
                _ => {}
            }
        }
    }

    /// Acquisitions whose whole attempt, from its start to the lock's
    /// return, lies between two wall-clock instants: the lock was granted
    /// then, whatever a busy machine delayed. The times are whole
    /// milliseconds: an attempt that began in `from`'s own millisecond may
    /// have begun before `from`, so only later ones count. (CI once counted
    /// one attempt, 1 795 931 799 890-891 ms: the last lock granted before
    /// the gap the kills made; at this resolution it may have begun before
    /// the last kill ended.)
    fn granted_within(&self, from: u64, to: u64) -> usize {
        self.attempts
            .iter()
            .filter(|&&(began, taken)| began > from && taken < to)
            .count()
    }

    /// Acquisitions between two wall-clock instants.
    fn between(&self, from: u64, to: u64) -> usize {
        self.acquisitions
            .iter()
            .filter(|&&at| at >= from && at < to)
            .count()
    }

    fn assert_safe(&self) {
        assert_eq!(
            self.violations, 0,
            "mutual exclusion violated: {:#?}",
            self.evidence
        );
        assert_eq!(
            self.bad_validity, 0,
            "a lock with no or too much validity: {:#?}",
            self.evidence
        );
    }
}

/// Waits (bounded) for `condition`, for effects that follow a call.
fn eventually(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < until, "not within {limit:?}: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// The live masters' key count (a killed master has none).
fn live_keys(masters: &Cluster) -> i64 {
    masters.total_keys()
}

/// Fault 1: one master, then a second of five, is killed with SIGKILL
/// during contention and restarted (empty) only after more than the TTL.
#[test]
fn minority_loss_keeps_locking_and_leaves_no_keys() {
    let _serial = serial();
    let mut masters = Cluster::start(5);
    let referee = RedisServer::start();
    let c = Contention::default();
    let run = Contenders::start(&masters, &referee, &c);
    let delayed = c.ttl + Duration::from_millis(500);

    let ms = Duration::from_millis;
    let t_one_down = run.at(ms(1500));
    masters.servers[1].kill();
    let t_two_down = run.at(ms(3000));
    masters.servers[3].kill();
    let t_first_back = run.at(ms(1500) + delayed);
    masters.servers[1].restart();
    let t_both_back = run.at(ms(3000) + delayed);
    masters.servers[3].restart();
    let report = run.finish(c.run);
    let t_end = wall_ms();

    report.assert_safe();
    let grace = 300; // let each phase settle before counting
    for (phase, from, to) in [
        ("all up", run_start(&report, t_one_down), t_one_down),
        ("one down", t_one_down + grace, t_two_down),
        ("two down", t_two_down + grace, t_first_back),
        ("one back", t_first_back + grace, t_both_back),
        ("both back", t_both_back + grace, t_end),
    ] {
        assert!(
            report.between(from, to) > 0,
            "no progress while {phase}: {report:?}"
        );
    }
    assert!(
        report.max_call < Duration::from_secs(2),
        "a call blocked {:?} ({})",
        report.max_call,
        report.slowest
    );
    // The restarted masters were used again by the same clients.
    for i in [1, 3] {
        assert!(
            masters.servers[i].calls_of("set") > 0,
            "master {i} not used after its restart"
        );
    }
    // Failed attempts and releases left nothing behind (checked well
    // before the TTL could have cleaned up).
    eventually("no keys left behind", Duration::from_millis(1000), || {
        live_keys(&masters) == 0
    });
}

/// When the children started (their first acquisition, or the first mark).
fn run_start(report: &Report, first_mark: u64) -> u64 {
    report
        .acquisitions
        .iter()
        .copied()
        .min()
        .unwrap_or(first_mark)
        .min(first_mark)
}

/// Fault 2: one master is frozen with SIGSTOP for several seconds.
///
/// The contending processes check safety. How fast locking goes is measured
/// separately, by a thread here that locks and unlocks resources nobody
/// else uses: under contention the rate depends on how votes split between
/// clients (four live masters split 2-2 more often than five split at all),
/// which is Redlock's nature, not the client's.
#[test]
fn a_frozen_master_costs_nothing_while_a_quorum_answers() {
    let _serial = serial();
    let masters = Cluster::start(5);
    let referee = RedisServer::start();
    let c = Contention::default();
    let run = Contenders::start(&masters, &referee, &c);
    // Rounds never wait for the frozen master, so this timeout only decides
    // how long a stall of the whole (loaded, two-CPU) machine may be before
    // a pair fails: every pair here must succeed.
    let redlock = Redlock::builder()
        .nodes(masters.urls())
        .node_timeout(Duration::from_millis(250))
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    let end = Instant::now() + c.run - Duration::from_millis(500);
    let ms = Duration::from_millis;
    let (pairs, slowest, t_frozen, t_resumed) = thread::scope(|s| {
        let measuring = s.spawn(|| {
            let (mut pairs, mut slowest, mut i) = (Vec::new(), Duration::ZERO, 0u64);
            while Instant::now() < end {
                i += 1;
                let started = Instant::now();
                // A long TTL, so that a key the frozen master kept after
                // its release would still be there to find.
                let lock = redlock.try_lock(format!("solo{i}"), Duration::from_secs(60));
                let lock = lock.expect("no error").expect("uncontended");
                lock.unlock().expect("released");
                slowest = slowest.max(started.elapsed());
                pairs.push(wall_ms());
            }
            (pairs, slowest)
        });
        let t_frozen = run.at(ms(3000));
        let frozen = masters.servers[2].pause(); // resumed on drop, even on panic
        let t_resumed = run.at(ms(7000));
        drop(frozen);
        let (pairs, slowest) = measuring.join().expect("measuring thread");
        (pairs, slowest, t_frozen, t_resumed)
    });
    let report = run.finish(c.run);
    report.assert_safe();
    assert!(
        report.max_call < Duration::from_secs(1),
        "a call blocked {:?} ({})",
        report.max_call,
        report.slowest
    );
    assert!(
        report.between(t_frozen + 300, t_resumed) > 0,
        "no progress while frozen"
    );
    assert!(
        report.between(t_resumed + 300, wall_ms()) > 0,
        "no progress after the resume"
    );

    let rate = |from: u64, to: u64| {
        pairs.iter().filter(|&&at| at >= from && at < to).count() as f64 * 1000.0
            / (to - from) as f64
    };
    let healthy = rate(t_frozen - 2000, t_frozen);
    let frozen = rate(t_frozen + 300, t_resumed);
    assert!(healthy > 0.0);
    // Rounds that waited for the frozen master (250 ms each) would fall to
    // a few pairs per second; a fifth of the rate before keeps a margin for
    // the loaded machine's stalls (half failed once in 25 runs of the
    // whole binary beside other tests: 527 pairs/s against 2 580).
    assert!(
        frozen >= healthy * 0.2,
        "a frozen master slowed locking: {frozen:.0} pairs/s against {healthy:.0} before"
    );
    assert!(slowest < Duration::from_secs(1), "a pair took {slowest:?}");
    // Once resumed, the frozen master runs what it was sent in order: each
    // release after its SET. None of the released locks may be left there.
    let solo_keys = || match masters.servers[2].cmd(&["KEYS", "solo*"]) {
        OwnedReply::Array(keys) => keys.len(),
        other => panic!("KEYS: {other:?}"),
    };
    eventually(
        "the frozen master kept released locks",
        Duration::from_secs(5),
        || solo_keys() == 0,
    );
}

/// Fault 3: `DEBUG SLEEP` on one master and `CLIENT PAUSE ... WRITE` on
/// another, over and over, with a short TTL.
#[test]
fn slow_masters_never_yield_a_lock_without_validity() {
    let _serial = serial();
    let masters = Cluster::start_with(5, &["--enable-debug-command", "yes"]);
    let referee = RedisServer::start();
    let c = Contention {
        ttl: Duration::from_millis(600),
        node_timeout: Duration::from_millis(50),
        ..Contention::default()
    };
    let run = Contenders::start(&masters, &referee, &c);
    let end = Instant::now() + c.run - Duration::from_secs(1);
    thread::scope(|s| {
        s.spawn(|| {
            while Instant::now() < end {
                masters.servers[0].cmd(&["DEBUG", "SLEEP", "0.25"]);
                thread::sleep(Duration::from_millis(150));
            }
        });
        s.spawn(|| {
            while Instant::now() < end {
                masters.servers[1].cmd(&["CLIENT", "PAUSE", "300", "WRITE"]);
                thread::sleep(Duration::from_millis(450));
            }
        });
    });
    let report = run.finish(c.run);
    report.assert_safe();
    assert!(!report.acquisitions.is_empty(), "no progress: {report:?}");
    assert!(
        report.max_call < Duration::from_secs(1),
        "a call blocked {:?} ({})",
        report.max_call,
        report.slowest
    );
    assert!(
        masters.servers[0].calls_of("debug") > 3,
        "the slow-downs did not happen"
    );
}

/// Fault 4: three of five masters are killed; calls fail fast with a typed
/// error and no lock; after a delayed restart, locking resumes.
#[test]
fn a_majority_down_fails_fast_then_recovers() {
    let _serial = serial();
    let mut masters = Cluster::start(5);
    let referee = RedisServer::start();
    let c = Contention::default();
    let run = Contenders::start(&masters, &referee, &c);
    let ms = Duration::from_millis;
    let t_down = run.at(ms(2000));
    for i in [0, 2, 4] {
        masters.servers[i].kill();
    }
    let t_killed = wall_ms();
    let t_back = run.at(ms(2000) + c.ttl + ms(500));
    for i in [0, 2, 4] {
        masters.servers[i].restart();
    }
    let report = run.finish(c.run);
    report.assert_safe();
    assert!(
        report.between(t_down - 1500, t_down) > 0,
        "no progress before the fault"
    );
    // No attempt begun once the majority was down (after the kills) and
    // ended before the restarts began could get a lock. (A lock taken just
    // before the kills may be returned after them on a busy machine: only
    // the attempt's whole span tells.)
    assert_eq!(
        report.granted_within(t_killed, t_back),
        0,
        "a lock without a quorum: {report:?}"
    );
    assert!(
        report.errors.get("NoQuorum").copied().unwrap_or(0) > 0,
        "{:?}",
        report.errors
    );
    assert!(
        report.max_call < Duration::from_secs(1),
        "a call blocked {:?} ({})",
        report.max_call,
        report.slowest
    );
    let resumed = report.acquisitions.iter().filter(|&&at| at >= t_back).min();
    let resumed = resumed.unwrap_or_else(|| panic!("locking never resumed: {report:?}"));
    assert!(
        resumed - t_back < 3000,
        "locking resumed only after {} ms",
        resumed - t_back
    );
}

/// Fault 5: a process holding the lock is killed with SIGKILL. Another gets
/// the lock once it expires, and not before the holder's validity ended.
#[test]
fn a_crashed_holders_lock_passes_on_after_it_expires() {
    let _serial = serial();
    let masters = Cluster::start(5);
    let ttl = Duration::from_secs(2);
    let c = Contention {
        ttl,
        ..Contention::default()
    };
    let mut holder = spawn_child("hold", &child_env(&masters, &c));
    // Read the holder's output on a thread, so that waiting for it is bounded.
    let stdout = holder.stdout.take().expect("stdout");
    let (lines, received) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let held_until: u64 = loop {
        match received.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                if let Some(at) = line.strip_prefix("HELD ") {
                    break at.parse().expect("HELD time");
                }
            }
            Err(e) => {
                let _ = holder.kill();
                panic!("the holder never reported its lock: {e}");
            }
        }
    };
    holder.kill().expect("SIGKILL the holder");
    let killed_at = wall_ms();
    holder.wait().expect("reap the holder");

    // A node timeout a loaded machine meets (the default, 50 ms, was seen
    // missed by three masters of five here): an attempt is refused while
    // the crashed holder's keys live, never failed for want of answers.
    let redlock = Redlock::builder()
        .nodes(masters.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let lock = loop {
        if let Some(lock) = redlock.try_lock("fault-suite-lock", ttl).expect("no error") {
            break lock;
        }
        assert!(
            wall_ms() < killed_at + ttl.as_millis() as u64 + 3000,
            "never acquired"
        );
        thread::sleep(Duration::from_millis(5));
    };
    let acquired_at = wall_ms();
    assert!(
        acquired_at >= held_until,
        "acquired {} ms before the crashed holder's validity ended",
        held_until - acquired_at
    );
    lock.unlock().unwrap();
}

/// Fault 7: after many thousands of pairs, and after faults, each master
/// sees a bounded number of connections and no file descriptor leaks.
#[test]
fn connections_stay_bounded_through_load_and_faults() {
    let _serial = serial();
    let mut masters = Cluster::start(5);
    let threads = 4;
    let open_fds = || {
        std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .count()
    };
    let baseline = open_fds();
    let redlock = Redlock::builder()
        .nodes(masters.urls())
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    let hammer = |redlock: &Redlock, pairs: usize| {
        thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for i in 0..pairs {
                        if let Ok(Some(lock)) =
                            redlock.try_lock(format!("hyg{t}-{i}"), Duration::from_secs(5))
                        {
                            let _ = lock.unlock();
                        }
                    }
                });
            }
        });
    };
    // At most one connection per thread per master, plus the admin client.
    let bounded = |masters: &Cluster, stage: &str| {
        for (i, server) in masters.servers.iter().enumerate() {
            let OwnedReply::Bulk(list) = server.cmd(&["CLIENT", "LIST"]) else {
                panic!("CLIENT LIST")
            };
            let clients = list
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            assert!(
                clients <= threads + 1,
                "{stage}: master {i} has {clients} connections"
            );
        }
        let fds = open_fds();
        assert!(
            fds <= baseline + threads * 5 + 4,
            "{stage}: {fds} fds open, {baseline} before"
        );
    };

    hammer(&redlock, 2500);
    bounded(&masters, "after 10 000 pairs");

    masters.servers[0].kill();
    hammer(&redlock, 200);
    masters.servers[0].restart();
    {
        let _frozen = masters.servers[1].pause();
        hammer(&redlock, 200);
    }
    hammer(&redlock, 500);
    bounded(&masters, "after a kill, a restart and a freeze");

    drop(redlock);
    assert!(
        open_fds() <= baseline + 1,
        "sockets outlived the client: {} > {baseline}",
        open_fds()
    );
}

/// Fault 8: lock values never repeat, and knowing a resource is not enough
/// to release someone's lock on it.
#[test]
fn lock_values_are_unique_and_unguessable() {
    let _serial = serial();
    let masters = Cluster::start(3);
    // 10 000 acquisitions that must each succeed: rounds of up to 1 s (the
    // default node timeout, 50 ms, can be missed on a loaded machine).
    let patient = || {
        Redlock::builder()
            .nodes(masters.urls())
            .node_timeout(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let redlock = patient();
    let mut inspect: Vec<Client> = masters
        .servers
        .iter()
        .map(|s| Client::connect(&s.addr().to_string()))
        .collect();
    let mut seen = HashSet::new();
    let count = 10_000;
    for i in 0..count {
        let resource = format!("unique{}", i % 64);
        let lock = redlock
            .lock(&resource, Duration::from_secs(10))
            .expect("acquired");
        // A quorum holds the value when the call returns; the last master
        // may still be processing its SET.
        let values: Vec<Vec<u8>> = inspect
            .iter_mut()
            .filter_map(|c| match c.call(&[b"GET", resource.as_bytes()]) {
                OwnedReply::Bulk(value) => Some(value),
                _ => None,
            })
            .collect();
        assert!(
            values.len() >= 2,
            "the value is on fewer than a quorum of masters"
        );
        assert!(
            values.windows(2).all(|w| w[0] == w[1]),
            "masters disagree: {values:?}"
        );
        let value = values[0].clone();
        assert_eq!(value.len(), 40);
        assert!(value
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(
            seen.insert(value),
            "a lock value repeated after {i} acquisitions"
        );
        lock.unlock().expect("released");
    }
    assert_eq!(seen.len(), count);

    // Another handle, or anyone who knows only the resource, cannot release
    // a held lock: the release compares the value.
    let holder = redlock.lock("guarded", Duration::from_secs(10)).unwrap();
    let other = patient();
    assert!(other
        .try_lock("guarded", Duration::from_secs(10))
        .unwrap()
        .is_none());
    let guess = "0123456789abcdef0123456789abcdef01234567";
    for server in &masters.servers {
        let deleted = server.command(&[
            b"EVAL",
            b"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end",
            b"1",
            b"guarded",
            guess.as_bytes(),
        ]);
        assert_eq!(deleted, Ok(OwnedReply::Integer(0)));
    }
    assert!(
        !format!("{holder:?}").contains(
            &String::from_utf8_lossy(&masters.servers[0].get(b"guarded").unwrap()).to_string()
        ),
        "Debug shows the lock value"
    );
    holder.unlock().expect("still held by its owner");
}
