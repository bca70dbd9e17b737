//! The feature `log` and locks on several resources at once, against real
//! servers: a set's round, wait and lease lines name the whole set as
//! `{a, b}`, and a set of 1000 names gives a line of bounded length that
//! says how many names it leaves out.
//! (`cargo test --features log --test log_sets`.)

mod support;

use redlock_sync::Redlock;
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};
use support::Cluster;

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

/// The lines at `level` that contain `part`.
fn logged(level: log::Level, part: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|(l, line)| *l == level && line.contains(part))
        .map(|(_, line)| line.clone())
        .collect()
}

fn all_lines() -> Vec<String> {
    LINES
        .lock()
        .unwrap()
        .iter()
        .map(|(_, l)| l.clone())
        .collect()
}

fn client(cluster: &Cluster) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(100))
        .build()
        .expect("valid configuration")
}

#[test]
fn a_sets_lines_name_the_whole_set() {
    capture();
    let cluster = Cluster::start(3);
    let redlock = Arc::new(client(&cluster));
    let ttl = Duration::from_secs(10);

    let mut set = redlock
        .try_lock_many(["logset:b", "logset:a"], ttl)
        .expect("no error")
        .expect("free");
    set.extend(ttl).expect("extended");
    set.unlock().expect("released");
    for line in [
        "Acquire {logset:a, logset:b}: Succeeded",
        "Extend {logset:a, logset:b}: Succeeded",
        "Release {logset:a, logset:b}: Succeeded",
    ] {
        assert_eq!(
            logged(log::Level::Debug, line).len(),
            1,
            "{line}: {:#?}",
            all_lines()
        );
    }

    // A waiter for the set: its lines name both resources.
    let holder = redlock.lock("logset:b", ttl).expect("free");
    let waiter = {
        let redlock = Arc::clone(&redlock);
        thread::spawn(move || {
            redlock.try_lock_many_for(["logset:a", "logset:b"], ttl, Duration::from_secs(20))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while logged(
        log::Level::Debug,
        "waiting for {logset:a, logset:b}: Contended",
    )
    .is_empty()
    {
        assert!(Instant::now() < deadline, "{:#?}", all_lines());
        thread::sleep(Duration::from_millis(5));
    }
    holder.unlock().expect("released");
    let set = waiter
        .join()
        .expect("no panic")
        .expect("no error")
        .expect("taken within the wait");
    assert_eq!(
        logged(
            log::Level::Debug,
            "waiting for {logset:a, logset:b}: Acquired"
        )
        .len(),
        1,
        "{:#?}",
        all_lines()
    );

    // A lease on it, lost: the warning names the set.
    let lease = set.keep_alive(Duration::from_secs(60)).expect("renewing");
    for server in &cluster.servers {
        server.cmd(&["DEL", "logset:a"]);
    }
    assert!(lease.wait_ended(Duration::from_secs(20)).is_some());
    drop(lease);
    let deadline = Instant::now() + Duration::from_secs(2);
    while logged(log::Level::Warn, "lease {logset:a, logset:b} lost").is_empty() {
        assert!(Instant::now() < deadline, "{:#?}", all_lines());
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_set_of_1000_names_logs_a_bounded_line() {
    capture();
    let cluster = Cluster::start(3);
    let redlock = client(&cluster);
    let names: Vec<String> = (0..1000).map(|i| format!("big:{i:04}")).collect();
    let set = redlock
        .try_lock_many(&names, Duration::from_secs(30))
        .expect("no error")
        .expect("free");
    set.unlock().expect("released");
    for operation in ["Acquire", "Release"] {
        let lines = logged(log::Level::Debug, &format!("{operation} {{big:0000, "));
        assert_eq!(lines.len(), 1, "{operation}: {:#?}", all_lines());
        let line = &lines[0];
        // The first 8 names, then how many more: not the 1000 names
        // (about 9 KB), whatever the round's timings add.
        assert!(
            line.contains("big:0007, ... 992 more}: Succeeded"),
            "{line}"
        );
        assert!(!line.contains("big:0008"), "{line}");
        assert!(line.len() < 300, "{} bytes: {line}", line.len());
    }
}
