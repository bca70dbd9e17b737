//! The event hook (`Builder::events`) told of locks on several resources
//! at once, against real servers: every round of a set (acquire, extend,
//! release), its lease's renewals and loss, and its waiter's progress
//! name every resource of the set (`resources()`), while `resource()`
//! stays the set's first name; a single lock's events are a set of one.

mod support;

use redlock_sync::{
    Error, HandleEvent, LeaseChange, LeaseEvent, Redlock, Resources, RoundEvent, WaitChange,
    WaitEvent,
};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::Cluster;

/// One event as the hook saw it: a short description, the names of
/// `resources()` and the name of `resource()`.
#[derive(Clone, Debug)]
struct Seen {
    what: String,
    names: Vec<Vec<u8>>,
    first: Vec<u8>,
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    fn note(&self, what: String, resources: Resources<'_>, first: &[u8]) {
        let names: Vec<Vec<u8>> = resources.iter().map(<[u8]>::to_vec).collect();
        // What the accessors say agrees with the names: else a bad line
        // that the test fails on.
        let agrees = names.len() == resources.len()
            && !resources.is_empty()
            && names.iter().all(|name| resources.contains(name))
            && names.windows(2).all(|pair| pair[0] < pair[1])
            && resources.first() == first;
        let what = match agrees {
            true => what,
            false => format!("bad {what}: {resources:?}"),
        };
        self.seen.lock().unwrap().push(Seen {
            what,
            names,
            first: first.to_vec(),
        });
    }

    fn all(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The events whose description is `what`.
    fn of(&self, what: &str) -> Vec<Seen> {
        self.all().into_iter().filter(|s| s.what == what).collect()
    }

    /// Waits up to `limit` for an event described `what`.
    fn wait_for(&self, what: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if !self.of(what).is_empty() {
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

impl HandleEvent for Recorder {
    fn handle_round(&self, event: RoundEvent<'_>) {
        let what = format!("round {:?} {:?}", event.operation(), event.outcome());
        self.note(what, event.resources(), event.resource());
    }

    fn handle_wait(&self, event: WaitEvent<'_>) {
        let what = match event.change() {
            WaitChange::Woken(_) => "wait Woken".to_string(),
            other => format!("wait {other:?}"),
        };
        self.note(what, event.resources(), event.resource());
    }

    fn handle_lease(&self, event: LeaseEvent<'_>) {
        let what = match event.change() {
            LeaseChange::Renewed { .. } => "lease renewed".to_string(),
            LeaseChange::Lost(Error::LockLost(_)) => "lease lost".to_string(),
            other => format!("lease {other:?}"),
        };
        self.note(what, event.resources(), event.resource());
    }
}

fn client(cluster: &Cluster, hook: &Arc<Recorder>) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100))
        .retry_jitter(Duration::from_millis(20))
        .events(Arc::clone(hook))
        .build()
        .expect("valid configuration")
}

fn names(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|name| name.as_bytes().to_vec()).collect()
}

/// Asserts that every event in `seen` names exactly `expected` (and its
/// first name), and that there is one at least.
fn all_name(seen: &[Seen], expected: &[Vec<u8>], what: &str) {
    assert!(!seen.is_empty(), "no {what} event");
    for event in seen {
        assert_eq!(event.names, expected, "{what}: {event:?}");
        assert_eq!(event.first, expected[0], "{what}: {event:?}");
    }
}

#[test]
fn a_sets_rounds_and_lease_events_name_every_resource() {
    let cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = client(&cluster, &hook);
    let set_names = names(&["ev:a", "ev:b", "ev:c"]);

    // Named out of order and with a repeat: the events show the set.
    let mut set = redlock
        .try_lock_many(["ev:c", "ev:a", "ev:b", "ev:a"], Duration::from_secs(10))
        .expect("no error")
        .expect("all free");
    set.extend(Duration::from_secs(10)).expect("extended");
    set.unlock().expect("released");
    all_name(
        &hook.of("round Acquire Succeeded"),
        &set_names,
        "acquisition",
    );
    all_name(&hook.of("round Extend Succeeded"), &set_names, "extension");
    all_name(&hook.of("round Release Succeeded"), &set_names, "release");

    // A contended attempt names the set it wanted.
    let single = redlock.lock("ev:b", Duration::from_secs(10)).expect("free");
    assert!(redlock
        .try_lock_many(["ev:a", "ev:b"], Duration::from_secs(10))
        .expect("no error")
        .is_none());
    all_name(
        &hook.of("round Acquire Contended"),
        &names(&["ev:a", "ev:b"]),
        "contended acquisition",
    );
    single.unlock().expect("released");

    // A lease on the set: renewals, and its loss once a key is deleted
    // behind it (the renewal's extension then finds the set not ours).
    let lease = redlock
        .lock_many(["ev:b", "ev:c", "ev:a"], Duration::from_secs(3))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewing");
    assert!(
        hook.wait_for("lease renewed", Duration::from_secs(10)),
        "{:#?}",
        hook.all()
    );
    for server in &cluster.servers {
        server.cmd(&["DEL", "ev:b"]);
    }
    let why = lease.wait_ended(Duration::from_secs(10)).expect("ended");
    assert!(matches!(why, Error::LockLost(_)), "{why}");
    assert!(hook.wait_for("lease lost", Duration::from_secs(2)));
    all_name(&hook.of("lease renewed"), &set_names, "lease renewal");
    all_name(&hook.of("lease lost"), &set_names, "lease loss");
    drop(lease);

    // A single lock's events are a set of one: its name.
    let lock = redlock
        .lock("ev:one", Duration::from_secs(10))
        .expect("free");
    lock.unlock().expect("released");
    let singles: Vec<Seen> = hook
        .all()
        .into_iter()
        .filter(|s| s.first == b"ev:one")
        .collect();
    assert_eq!(singles.len(), 2, "{singles:#?}");
    all_name(&singles, &names(&["ev:one"]), "single lock");

    let bad: Vec<Seen> = hook
        .all()
        .into_iter()
        .filter(|s| s.what.starts_with("bad"))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_set_waiters_progress_is_told_naming_every_resource() {
    let cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = Arc::new(client(&cluster, &hook));
    let holder = redlock
        .lock("wait:b", Duration::from_secs(30))
        .expect("free");
    let waiter = {
        let redlock = Arc::clone(&redlock);
        thread::spawn(move || {
            redlock.try_lock_many_for(
                ["wait:b", "wait:a"],
                Duration::from_secs(10),
                Duration::from_secs(20),
            )
        })
    };
    assert!(
        hook.wait_for("wait Contended", Duration::from_secs(10)),
        "{:#?}",
        hook.all()
    );
    holder.unlock().expect("released");
    let set = waiter
        .join()
        .expect("the waiter did not panic")
        .expect("no error")
        .expect("taken within the wait");
    set.unlock().expect("released");

    let set_names = names(&["wait:a", "wait:b"]);
    all_name(&hook.of("wait Contended"), &set_names, "contended");
    all_name(&hook.of("wait Woken"), &set_names, "woken");
    all_name(&hook.of("wait Acquired"), &set_names, "acquired");
    assert_eq!(hook.of("wait Acquired").len(), 1);
    assert!(hook.of("wait GaveUp").is_empty());

    // A wait that runs out gives up, naming the set.
    let holder = redlock
        .lock("wait:a", Duration::from_secs(30))
        .expect("free");
    let refused = redlock
        .try_lock_many_for(
            ["wait:a", "wait:b"],
            Duration::from_secs(10),
            Duration::from_millis(300),
        )
        .expect("no error");
    assert!(refused.is_none());
    all_name(&hook.of("wait GaveUp"), &set_names, "gave up");
    holder.unlock().expect("released");

    // A set taken on its first try tells no wait.
    let before = hook.all().len();
    let set = redlock
        .try_lock_many_for(
            ["wait:a", "wait:b"],
            Duration::from_secs(10),
            Duration::from_secs(5),
        )
        .expect("no error")
        .expect("free");
    set.unlock().expect("released");
    let after: Vec<Seen> = hook.all().split_off(before);
    assert!(
        after.iter().all(|s| s.what.starts_with("round")),
        "{after:#?}"
    );
}
