//! The feature `log`: the lines the handle writes through the `log`
//! facade, against real servers: a debug line per round, warnings for a
//! lost lease, a master down and a master refusing release notices; and
//! never a lock value or a password.
//! (`cargo test --features log --test log`.)

mod support;

use redlock_sync::Redlock;
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};
use support::RedisServer;

/// Every line logged, with its level.
static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{}: {}", record.target(), record.args());
        LINES.lock().unwrap().push((record.level(), line));
    }

    fn flush(&self) {}
}

/// Installs [`Capture`] (once per process: the tests share it).
fn capture() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("the only logger");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

fn lines() -> Vec<(log::Level, String)> {
    LINES.lock().unwrap().clone()
}

fn logged(level: log::Level, part: &str) -> bool {
    lines()
        .iter()
        .any(|(l, line)| *l == level && line.contains(part))
}

const PASSWORD: &str = "s3cret-pw-9f2c";

/// The value of `key` on `server`, once it is there (waited for, up to a
/// bound).
fn eventually_get(server: &RedisServer, key: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = server.get(key) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "the key never reached the master"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_log_tells_rounds_losses_and_failures_without_values_or_passwords() {
    capture();
    let mut servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_with(&["--requirepass", PASSWORD]).with_admin_auth(&[PASSWORD]))
        .collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://:{PASSWORD}@127.0.0.1:{}", s.port()))
        .collect();
    let redlock = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(200))
        .build()
        .expect("valid configuration");

    // A round: the lock's value, read from a master, is in no line.
    let lock = redlock
        .lock("log:job", Duration::from_secs(10))
        .expect("free");
    // The call returned at a quorum: master 0 may run its SET a moment
    // later.
    let value = eventually_get(&servers[0], b"log:job");
    lock.unlock().expect("released");
    assert!(
        logged(log::Level::Debug, "Acquire log:job: Succeeded"),
        "{:#?}",
        lines()
    );
    assert!(
        logged(log::Level::Debug, "Release log:job: Succeeded"),
        "{:#?}",
        lines()
    );

    // A lease lost: its key deleted behind it.
    let lease = redlock
        .lock("log:lease", Duration::from_secs(1))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    // On every master before it is deleted there (the call returned at a
    // quorum).
    let lease_value = eventually_get(&servers[0], b"log:lease");
    for server in &servers {
        eventually_get(server, b"log:lease");
    }
    for server in &servers {
        server.cmd(&["DEL", "log:lease"]);
    }
    assert!(lease.wait_ended(Duration::from_secs(5)).is_some());
    drop(lease);
    let deadline = Instant::now() + Duration::from_secs(2);
    while !logged(log::Level::Warn, "lease log:lease lost") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        logged(log::Level::Warn, "lease log:lease lost"),
        "{:#?}",
        lines()
    );

    // A master down.
    servers[2].kill();
    let _ = redlock.ping();
    let down = format!("master 127.0.0.1:{} is down", servers[2].port());
    assert!(logged(log::Level::Warn, &down), "{:#?}", lines());

    let value = String::from_utf8_lossy(&value).into_owned();
    let lease_value = String::from_utf8_lossy(&lease_value).into_owned();
    for (_, line) in lines() {
        assert!(line.starts_with("redlock_sync: "), "{line}");
        assert!(!line.contains(PASSWORD), "a password in {line:?}");
        assert!(!line.contains(&value), "a lock value in {line:?}");
        assert!(!line.contains(&lease_value), "a lock value in {line:?}");
        // Nor its first 16 characters (the release notice).
        assert!(!line.contains(&value[..16]), "a lock's notice in {line:?}");
    }
}

/// A master whose ACL user has no channel rights refuses release notices
/// to every waiter: one warning per master, however many wait, naming the
/// right to grant, and not the password.
#[test]
fn the_log_warns_once_per_master_that_refuses_release_notices() {
    capture();
    let user = format!("locker on >{PASSWORD} ~* resetchannels +@all");
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_with(&["--user", &user]))
        .collect();
    let urls = || -> Vec<String> {
        servers
            .iter()
            .map(|s| format!("redis://locker:{PASSWORD}@127.0.0.1:{}", s.port()))
            .collect()
    };
    let ttl = Duration::from_secs(30);
    // Node timeouts a loaded machine meets: the waiters must be refused
    // for the lock being held, not for a master slow to answer.
    let holder = Redlock::builder()
        .nodes(urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    let held = holder.lock("log:deaf", ttl).expect("free");
    let waiter = Redlock::builder()
        .nodes(urls())
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(100))
        .build()
        .expect("valid configuration");
    thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let none = waiter
                    .try_lock_for("log:deaf", ttl, Duration::from_secs(1))
                    .expect("no error");
                assert!(none.is_none(), "the lock is held");
            });
        }
    });
    held.unlock().expect("released");
    for server in &servers {
        let master = format!("master 127.0.0.1:{} lacks a right", server.port());
        let warnings: Vec<String> = lines()
            .into_iter()
            .filter(|(level, line)| *level == log::Level::Warn && line.contains(&master))
            .map(|(_, line)| line)
            .collect();
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let warning = &warnings[0];
        assert!(
            warning.contains("refused release notices (NOPERM")
                && warning.contains("ACL SETUSER <user> &redlock-sync:released:*"),
            "{warning}"
        );
        assert!(!warning.contains(PASSWORD), "a password in {warning:?}");
    }
}

/// Issue 31, item 7: a fenced handle's master that lost its fence anchor
/// gets one warning, with what to run, however many acquisitions it
/// answers without counting; and one line when it counts again.
#[test]
fn the_log_warns_once_when_a_master_is_left_out_of_fencing() {
    capture();
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let redlock = Redlock::builder()
        .nodes(urls)
        .fencing(true)
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid configuration");
    redlock.fence_init(0).expect("fence_init");
    let ttl = Duration::from_secs(10);
    redlock
        .try_lock("log:fence", ttl)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let master = format!("master 127.0.0.1:{}", servers[0].port());
    let about = |level: log::Level, what: &str| -> Vec<String> {
        lines()
            .into_iter()
            .filter(|(l, line)| *l == level && line.contains(&master) && line.contains(what))
            .map(|(_, line)| line)
            .collect()
    };
    // (fence_init's own probe found no anchor yet, and told it.)
    let (left_out, counts) = (
        "is left out of fenced locks",
        "counts for fenced locks again",
    );
    let before = about(log::Level::Warn, left_out).len();
    let back_before = about(log::Level::Info, counts).len();
    servers[0].restart(); // without persistence: no anchor
    let _ = redlock.ping();
    for _ in 0..5 {
        let lock = redlock
            .try_lock("log:fence", ttl)
            .unwrap()
            .expect("two count");
        lock.unlock().unwrap();
    }
    let warnings = about(log::Level::Warn, left_out);
    assert_eq!(warnings.len(), before + 1, "{warnings:#?}");
    let warning = warnings.last().unwrap();
    assert!(
        warning.contains("no fence anchor") && warning.contains("fence_repair"),
        "{warning}"
    );
    redlock.fence_repair().expect("a quorum kept its counter");
    let back = about(log::Level::Info, counts);
    assert_eq!(back.len(), back_before + 1, "{back:#?}");
}
