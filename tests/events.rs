//! The event hook (`Builder::events`), against real servers: it is told
//! every kind of event, a hook that panics does not break the handle, and
//! a lease's end is told (and `Lease::wait_ended` returns) within one
//! renewal round of the loss.

mod support;

use redlock_sync::{
    Error, FenceFault, HandleEvent, LeaseChange, LeaseEvent, MasterAnswer, MasterChange,
    MasterEvent, Operation, Redlock, RoundEvent, RoundOutcome, WaitEvent,
};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::{Cluster, RedisServer};

/// Every event, as a short owned line (`round Acquire Succeeded`,
/// `master 1 down`, ...), with when it came.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(String, Instant)>>,
}

impl Recorder {
    fn note(&self, line: String) {
        self.seen.lock().unwrap().push((line, Instant::now()));
    }

    fn kinds(&self) -> BTreeSet<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(l, _)| l.clone())
            .collect()
    }

    /// When `line` was first seen.
    fn when(&self, line: &str) -> Option<Instant> {
        let seen = self.seen.lock().unwrap();
        seen.iter().find(|(l, _)| l == line).map(|(_, at)| *at)
    }

    /// How many lines seen start with `prefix`.
    fn count(&self, prefix: &str) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|(l, _)| l.starts_with(prefix)).count()
    }

    /// Waits up to `limit` for `line`.
    fn wait_for(&self, line: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if self.when(line).is_some() {
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

impl HandleEvent for Recorder {
    fn handle_round(&self, event: RoundEvent<'_>) {
        // A panic here would be caught by the handle: a bad event is
        // recorded instead, and the test fails on it.
        let validity_when_due = event.validity().is_some()
            == (event.outcome() == RoundOutcome::Succeeded
                && event.operation() != Operation::Release);
        let agreed = event
            .masters()
            .filter(|(_, a)| *a == MasterAnswer::Agreed)
            .count();
        let quorum_when_due = event.outcome() != RoundOutcome::Succeeded
            || event.operation() == Operation::Release
            || agreed >= 2;
        if event.resource().is_empty() || !validity_when_due || !quorum_when_due {
            self.note(format!("bad {event:?}"));
        }
        self.note(format!(
            "round {:?} {:?}",
            event.operation(),
            event.outcome()
        ));
    }

    fn handle_wait(&self, event: WaitEvent<'_>) {
        self.note(format!("wait {:?}", event.change()));
    }

    fn handle_lease(&self, event: LeaseEvent<'_>) {
        let line = match event.change() {
            LeaseChange::Renewed { .. } => "lease renewed".to_string(),
            LeaseChange::RenewalFailed(_) => "lease renewal failed".to_string(),
            LeaseChange::Lost(Error::LockLost(_)) => "lease lost: gone".to_string(),
            LeaseChange::Lost(Error::Expired { .. }) => "lease lost: expired".to_string(),
            LeaseChange::Lost(other) => format!("lease lost: {other}"),
            LeaseChange::HoldLimit => "lease hold limit".to_string(),
            other => format!("lease {other:?}"),
        };
        self.note(line);
    }

    fn handle_master(&self, event: MasterEvent<'_>) {
        let line = match event.change() {
            MasterChange::Down(_) => format!("master {} down", event.index()),
            MasterChange::Back => format!("master {} back", event.index()),
            MasterChange::MissingRight(_) => format!("master {} missing a right", event.index()),
            MasterChange::NoticesRefused(error) => {
                format!("master {} refused notices: {}", event.index(), error.code())
            }
            MasterChange::FenceLeftOut(fault) => {
                format!("master {} fence left out: {fault:?}", event.index())
            }
            MasterChange::FenceBack => format!("master {} fence back", event.index()),
            other => format!("master {other:?}"),
        };
        self.note(line);
    }
}

fn client(cluster: &Cluster, hook: &Arc<Recorder>) -> Redlock {
    Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_millis(100))
        .retry_jitter(Duration::from_millis(20))
        .events(Arc::clone(hook))
        .build()
        .expect("valid configuration")
}

/// The URLs of `servers` for the ACL user `locker` (password `pw`).
fn locker_urls(servers: &[RedisServer]) -> Vec<String> {
    servers
        .iter()
        .map(|s| format!("redis://locker:pw@127.0.0.1:{}", s.port()))
        .collect()
}

fn delete_everywhere(cluster: &Cluster, key: &str) {
    for server in &cluster.servers {
        server.cmd(&["DEL", key]);
    }
}

#[test]
fn a_hook_sees_every_kind_of_event() {
    let mut cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = client(&cluster, &hook);
    let ttl = Duration::from_secs(10);

    // Rounds: acquire, extend, release, and a contended acquisition.
    let mut lock = redlock.lock("events:a", ttl).expect("free");
    lock.extend(ttl).expect("extended");
    assert!(redlock
        .try_lock("events:a", ttl)
        .expect("no error")
        .is_none());

    // Waits: contended, woken by the release's notice, acquired.
    let waiter = {
        let redlock = redlock.clone();
        thread::spawn(move || {
            let lock = redlock
                .try_lock_for("events:a", ttl, Duration::from_secs(30))
                .expect("no error")
                .expect("taken after the release");
            lock.unlock().expect("released");
        })
    };
    assert!(hook.wait_for("wait Contended", Duration::from_secs(10)));
    // Listening on every master before the release, so that it is woken by
    // the notice (a fixed pause could end first on a busy machine).
    let channel = &support::release_channel("events:a");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cluster.servers.iter().all(|server| {
        matches!(
            server.cmd(&["PUBSUB", "NUMSUB", channel]),
            support::OwnedReply::Array(items)
                if matches!(items.get(1), Some(support::OwnedReply::Integer(n)) if *n > 0)
        )
    }) {
        assert!(Instant::now() < deadline, "the waiter never subscribed");
        thread::sleep(Duration::from_millis(5));
    }
    lock.unlock().expect("released");
    waiter.join().expect("waiter");

    // Woken by the fallback timer, and gave up.
    let held = redlock.lock("events:b", ttl).expect("free");
    let none = redlock
        .try_lock_for("events:b", ttl, Duration::from_millis(400))
        .expect("no error");
    assert!(none.is_none());
    held.unlock().expect("released");

    // A lease: renewed; a renewal failed (two masters frozen); lost (its
    // key deleted); another held for its max_hold.
    let lease_ttl = Duration::from_secs(1);
    let lease = redlock
        .lock("events:lease", lease_ttl)
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    assert!(hook.wait_for("lease renewed", Duration::from_secs(5)));
    {
        let _frozen = (cluster.servers[1].pause(), cluster.servers[2].pause());
        assert!(hook.wait_for("lease renewal failed", Duration::from_secs(5)));
    }
    // Renewals may still succeed once the masters resume; then the key goes.
    thread::sleep(Duration::from_millis(300));
    delete_everywhere(&cluster, "events:lease");
    let why = lease.wait_ended(Duration::from_secs(10)).expect("lost");
    assert!(
        matches!(why, Error::LockLost(_) | Error::Expired { .. }),
        "{why}"
    );
    assert!(
        hook.wait_for("lease lost: gone", Duration::from_secs(1))
            || hook.wait_for("lease lost: expired", Duration::from_secs(1))
    );
    drop(lease);
    // Held past its hold limit before its first renewal (2 s in), which
    // notices it: the validity lasts a second after that, for `wait_ended`
    // to say the hold limit (past the validity it says Expired).
    let short = redlock
        .lock("events:short", Duration::from_secs(3))
        .expect("free")
        .keep_alive(Duration::from_millis(1200))
        .expect("renewed");
    assert!(hook.wait_for("lease hold limit", Duration::from_secs(5)));
    assert!(matches!(
        short.wait_ended(Duration::from_secs(5)),
        Some(Error::HoldLimit { .. })
    ));
    drop(short);

    // A master down (killed), then back (restarted).
    cluster.servers[2].kill();
    let _ = redlock.ping();
    assert!(hook.wait_for("master 2 down", Duration::from_secs(1)));
    cluster.servers[2].restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while hook.when("master 2 back").is_none() && Instant::now() < deadline {
        let _ = redlock.ping();
        thread::sleep(Duration::from_millis(100));
    }

    let kinds = hook.kinds();
    for kind in [
        "round Acquire Succeeded",
        "round Acquire Contended",
        "round Extend Succeeded",
        "round Release Succeeded",
        "wait Contended",
        "wait Woken(Notice)",
        "wait Woken(Timer)",
        "wait Acquired",
        "wait GaveUp",
        "lease renewed",
        "lease renewal failed",
        "lease hold limit",
        "master 2 down",
        "master 2 back",
    ] {
        assert!(
            kinds.contains(kind),
            "never told {kind:?}; told: {kinds:#?}"
        );
    }
    let bad: Vec<_> = kinds.iter().filter(|k| k.starts_with("bad ")).collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_master_without_the_right_to_release_is_told() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    for (i, server) in servers.iter().enumerate() {
        let rights = if i == 0 { "-@scripting" } else { "+@all" };
        server.cmd(&[
            "ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", rights,
        ]);
    }
    let urls = locker_urls(&servers);
    let hook = Arc::new(Recorder::default());
    // Scripts only: a server with native compare-and-delete (Valkey 9)
    // releases without any scripting right, so nothing would be missing.
    // A node timeout a loaded machine meets: a master slow to answer
    // would be told down.
    let redlock = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_secs(1))
        .native_commands(false)
        .events(Arc::clone(&hook))
        .build()
        .expect("valid configuration");
    let lock = redlock
        .try_lock("events:rights", Duration::from_secs(10))
        .expect("no error")
        .expect("two masters of three are a quorum");
    lock.unlock().expect("released");
    let _ = redlock.ping(); // reads every master's answers
    assert!(
        hook.wait_for("master 0 missing a right", Duration::from_secs(2)),
        "{:#?}",
        hook.kinds()
    );
    assert!(hook.when("master 0 down").is_none(), "told instead of down");
}

/// A master whose ACL user has no channel rights (Redis 7's default for
/// new users) refuses every waiter's subscription to release notices: the
/// hook is told so once per master (a missing right, with the server's
/// refusal), not once per waiter or per wait, and not as a master down.
/// (Before, only `health()` and the error of a wait said so: the hook was
/// told nothing.)
#[test]
fn a_master_refusing_release_notices_is_told_once_however_many_wait() {
    let cluster = Cluster::start_with(3, &["--user", "locker on >pw ~* resetchannels +@all"]);
    let ttl = Duration::from_secs(30);
    let holder = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    let held: Vec<_> = (0..4)
        .map(|i| holder.lock(format!("events:deaf:{i}"), ttl).expect("free"))
        .collect();
    let urls = locker_urls(&cluster.servers);
    let hook = Arc::new(Recorder::default());
    // A generous node timeout: no master is down, however loaded the
    // machine, so any "down" told would be the refusal's.
    let waiter = Redlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(100))
        .retry_jitter(Duration::from_millis(20))
        .events(Arc::clone(&hook))
        .build()
        .expect("valid configuration");
    let wait = Duration::from_secs(1);
    // Eight threads wait on one lock at once, then waits one after the
    // other on three more (each a new channel, refused again).
    thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                let none = waiter
                    .try_lock_for("events:deaf:0", ttl, wait)
                    .expect("no error");
                assert!(none.is_none(), "the lock is held");
            });
        }
    });
    for i in 1..4 {
        let none = waiter
            .try_lock_for(format!("events:deaf:{i}"), ttl, wait)
            .expect("no error");
        assert!(none.is_none(), "the lock is held");
    }
    for health in waiter.health() {
        assert!(
            health.release_notices_refused().is_some() && !health.is_failing(),
            "{health}"
        );
    }
    for master in 0..3 {
        let told = hook.count(&format!("master {master} refused notices: NOPERM"));
        assert_eq!(told, 1, "master {master}: {:#?}", hook.kinds());
    }
    let kinds = hook.kinds();
    assert!(
        !kinds
            .iter()
            .any(|k| k.ends_with(" down") || k.ends_with(" missing a right")),
        "{kinds:#?}"
    );
    for lock in held {
        lock.unlock().expect("released");
    }
}

/// A waiter whose subscription a quorum of masters confirms only after its
/// second try began (the try that follows the subscription, so that a
/// release before it is not missed) wakes when they confirm, told as
/// `WokenBy::Subscribed`: a release may have gone unheard meanwhile.
///
/// Two masters of three are frozen (SIGSTOP) before the waiter's first
/// try: their connections are accepted by the kernel, but nothing is
/// answered, so the subscription waits for them past the node timeout and
/// the waiter's second try starts unconfirmed. They resume only once that
/// try's round has ended, and the confirmations come while the waiter
/// waits for its turn. The fallback pause (a minute) cannot fire first.
#[test]
fn a_waiter_wakes_when_its_subscription_is_confirmed_late() {
    let cluster = Cluster::start(3);
    let ttl = Duration::from_secs(30);
    let holder = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid configuration");
    let held = holder.lock("events:late", ttl).expect("free");
    let hook = Arc::new(Recorder::default());
    let waiter = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_secs(60))
        .retry_jitter(Duration::ZERO)
        .events(Arc::clone(&hook))
        .build()
        .expect("valid configuration");
    waiter.ping().expect("every master answers");
    let frozen = (cluster.servers[1].pause(), cluster.servers[2].pause());
    let waiting = {
        let waiter = waiter.clone();
        thread::spawn(move || {
            waiter
                .try_lock_for("events:late", ttl, Duration::from_secs(30))
                .expect("no error")
                .expect("taken after the release")
                .unlock()
                .expect("released");
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while hook.count("round Acquire") < 2 {
        assert!(Instant::now() < deadline, "{:#?}", hook.kinds());
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(hook.count("wait Woken"), 0, "{:#?}", hook.kinds());
    drop(frozen);
    assert!(
        hook.wait_for("wait Woken(Subscribed)", Duration::from_secs(10)),
        "{:#?}",
        hook.kinds()
    );
    held.unlock().expect("released");
    waiting.join().expect("the waiter took the lock");
    assert_eq!(hook.count("wait Woken(Timer)"), 0, "{:#?}", hook.kinds());
}

/// Panics on every event.
struct Panicky;

impl HandleEvent for Panicky {
    fn handle_round(&self, _: RoundEvent<'_>) {
        panic!("a hook that panics (on purpose)");
    }

    fn handle_wait(&self, _: WaitEvent<'_>) {
        panic!("a hook that panics (on purpose)");
    }

    fn handle_lease(&self, _: LeaseEvent<'_>) {
        panic!("a hook that panics (on purpose)");
    }
}

#[test]
fn a_hook_that_panics_does_not_break_the_handle() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(50))
        .events(Panicky)
        .build()
        .expect("valid configuration");
    let ttl = Duration::from_secs(10);
    for _ in 0..3 {
        let mut lock = redlock.lock("events:panicky", ttl).expect("taken");
        lock.extend(ttl).expect("extended");
        lock.unlock().expect("released");
    }
    // Waiting (its events panic too) still ends as it should.
    let held = redlock.lock("events:panicky", ttl).expect("taken");
    let none = redlock
        .try_lock_for("events:panicky", ttl, Duration::from_millis(200))
        .expect("no error");
    assert!(none.is_none());
    held.unlock().expect("released");
    // The renewal thread survives its hook's panics.
    let lease = redlock
        .lock("events:panicky-lease", Duration::from_millis(600))
        .expect("taken")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    thread::sleep(Duration::from_millis(1500));
    assert!(lease.check().is_ok(), "renewed through the panics");
    lease.unlock().expect("released");
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.total_keys() != 0 {
        assert!(Instant::now() < deadline, "keys left behind");
        thread::sleep(Duration::from_millis(10));
    }
}

/// The renewal period of a lease with `ttl` and `node_timeout` (see
/// `Lock::keep_alive`): renewed when about a third of the TTL is left.
fn renewal_period(ttl: Duration) -> Duration {
    ttl - ttl / 3
}

#[test]
fn a_lost_lease_is_told_within_one_renewal_round() {
    let cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = client(&cluster, &hook);
    let ttl = Duration::from_secs(3);
    let lease = redlock
        .lock("events:gone", ttl)
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    // The key deleted behind the holder: found at the next renewal, within
    // one renewal period, and told at the end of that round.
    delete_everywhere(&cluster, "events:gone");
    let deleted = Instant::now();
    let why = lease.wait_ended(Duration::MAX).expect("ended");
    let woke = Instant::now();
    assert!(matches!(why, Error::LockLost(_)), "{why}");
    assert!(hook.wait_for("lease lost: gone", Duration::from_secs(1)));
    let told = hook.when("lease lost: gone").expect("the hook was told");
    let delay = woke.saturating_duration_since(deleted);
    eprintln!(
        "key deleted -> wait_ended: {delay:?} (renewal period {:?}); hook -> waiter {:?}",
        renewal_period(ttl),
        woke.saturating_duration_since(told)
    );
    assert!(
        delay < renewal_period(ttl) + Duration::from_secs(1),
        "loss found after {delay:?}"
    );
    assert!(
        woke.saturating_duration_since(told) < Duration::from_millis(500),
        "the waiter woke {:?} after the renewer found the loss",
        woke.saturating_duration_since(told)
    );
    drop(lease);

    // Every master frozen: the renewals fail until the validity runs out,
    // and the waiter learns it then, by its own clock.
    let lease = redlock
        .lock("events:frozen", ttl)
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    let frozen: Vec<_> = cluster.servers.iter().map(RedisServer::pause).collect();
    // The end lies between `earliest` and `latest` (the validity is read
    // between two clock reads): "not before the end" is checked against
    // the first, "how late" against the second, so that a thread delayed
    // between the reads cannot fail either.
    let before = Instant::now();
    let validity = lease.validity();
    let (earliest, latest) = (before + validity, Instant::now() + validity);
    let why = lease.wait_ended(Duration::MAX).expect("ended");
    let woke = Instant::now();
    drop(frozen);
    assert!(matches!(why, Error::Expired { .. }), "{why}");
    let late = woke.saturating_duration_since(latest);
    eprintln!("validity end -> wait_ended: {late:?}");
    assert!(
        woke + Duration::from_millis(5) >= earliest,
        "woke before the end"
    );
    assert!(
        late < Duration::from_millis(500),
        "woke {late:?} after the end"
    );
    drop(lease);
}

#[test]
fn wait_ended_times_out_while_the_lease_holds() {
    let cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = client(&cluster, &hook);
    let lease = redlock
        .lock("events:held", Duration::from_secs(1))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");
    let start = Instant::now();
    assert!(lease.wait_ended(Duration::from_millis(1500)).is_none());
    assert!(start.elapsed() >= Duration::from_millis(1500));
    assert!(hook.when("lease renewed").is_some());
    lease.unlock().expect("released");
}

/// Issue 31, item 7: a fenced handle's master that lost its fence anchor
/// (restarted empty) is told once, as left out, however many acquisitions
/// it answers without counting (and not as down: it answers); the health
/// view says so with what to run; and it is told once when it counts
/// again after the repair.
#[test]
fn a_master_that_lost_its_fence_anchor_is_told_once_until_repaired() {
    let mut cluster = Cluster::start(3);
    let hook = Arc::new(Recorder::default());
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .fencing(true)
        .node_timeout(Duration::from_millis(500))
        .events(Arc::clone(&hook))
        .build()
        .expect("valid configuration");
    redlock.fence_init(0).expect("fence_init");
    let ttl = Duration::from_secs(10);
    redlock
        .try_lock("anchor", ttl)
        .unwrap()
        .expect("free")
        .unlock()
        .unwrap();
    let (left_out, back) = ("master 0 fence left out", "master 0 fence back");
    let (left_before, back_before) = (hook.count(left_out), hook.count(back));

    cluster.servers[0].restart(); // without persistence: no anchor
    let _ = redlock.ping(); // a new connection, whose probe finds none
    for _ in 0..5 {
        let lock = redlock
            .try_lock("anchor", ttl)
            .unwrap()
            .expect("B and C count");
        lock.unlock().unwrap();
    }
    assert_eq!(hook.count(left_out), left_before + 1, "{:?}", hook.kinds());
    assert!(
        hook.kinds().contains("master 0 fence left out: Unanchored"),
        "{:?}",
        hook.kinds()
    );
    let health = &redlock.health()[0];
    assert_eq!(health.fence_fault(), Some(FenceFault::Unanchored));
    assert!(!health.is_failing(), "it answers: {health}");
    assert!(health.to_string().contains("fence_repair"), "{health}");
    assert_eq!(hook.count(back), back_before);

    redlock.fence_repair().expect("B and C kept their counters");
    for _ in 0..3 {
        let lock = redlock.try_lock("anchor", ttl).unwrap().expect("free");
        lock.unlock().unwrap();
    }
    assert_eq!(hook.count(back), back_before + 1, "{:?}", hook.kinds());
    assert_eq!(hook.count(left_out), left_before + 1, "{:?}", hook.kinds());
    assert_eq!(redlock.health()[0].fence_fault(), None);
}

/// The guide's monitoring recipe ("Alerting before a quorum is lost",
/// docs/guide/monitoring.md):
/// the masters failing in `health()`, and the alert when the healthy ones
/// are down to the quorum. Returns the lines it would print.
fn watch(redlock: &Redlock) -> Vec<String> {
    let health = redlock.health();
    let healthy = health.iter().filter(|h| !h.is_failing()).count();
    let mut printed: Vec<String> = health
        .iter()
        .filter(|node| node.is_failing())
        .map(|node| format!("warn: {node}"))
        .collect();
    if healthy <= redlock.quorum() {
        printed.push(format!(
            "alert: {healthy} of {} masters healthy; one more failure stops locking",
            redlock.node_count()
        ));
    }
    printed
}

/// Leases renewed on five healthy loopback masters: a renewal round is
/// decided by the first three answers, and the other two masters, whose
/// answers were not needed, are not failures (their replies are read
/// later, as a single lock's round does). It once recorded them as "timed
/// out during reply": `MasterChange::Down` then `Back` after nearly every
/// renewal, and the recipe alerted. Then one master frozen (SIGSTOP): it,
/// and only it, is told down and failing, and back once it resumes.
#[test]
fn renewals_on_healthy_masters_tell_no_master_down_and_the_recipe_stays_quiet() {
    let cluster = Cluster::start(5);
    let hook = Arc::new(Recorder::default());
    let redlock = client(&cluster, &hook);
    // Renewed about every 150 ms (see `Lock::keep_alive`); eight leases
    // taken together are renewed together, eight extensions per round.
    let ttl = Duration::from_millis(450);
    let leases: Vec<_> = (0..8)
        .map(|k| {
            redlock
                .lock(format!("events:healthy:{k}"), ttl)
                .expect("free")
                .keep_alive(Duration::from_secs(120))
                .expect("kept alive")
        })
        .collect();
    let mut printed = Vec::new();
    let mut polls = 0;
    // At least 20 renewal rounds, however slowly a loaded machine runs
    // them; the recipe polled all along.
    let limit = Instant::now() + Duration::from_secs(60);
    while hook.count("lease renewed") < 20 * leases.len() {
        assert!(
            Instant::now() < limit,
            "fewer than 20 renewal rounds in 60 s"
        );
        printed.extend(watch(&redlock));
        polls += 1;
        thread::sleep(Duration::from_millis(10));
    }
    printed.extend(watch(&redlock));
    let renewed = hook.count("lease renewed");
    let downs = hook.count("master ");
    eprintln!("{renewed} renewals, {polls} polls of the recipe, {downs} master events");
    assert_eq!(hook.count("lease renewal failed"), 0);
    assert_eq!(
        downs,
        0,
        "master events on healthy masters: {:#?}",
        hook.kinds()
    );
    assert!(printed.is_empty(), "the recipe printed: {printed:#?}");

    // A master really frozen: renewals go on (four answer), and the frozen
    // one is told down, and shows failing, from the next renewal round on.
    let frozen = cluster.servers[4].pause();
    assert!(
        hook.wait_for("master 4 down", Duration::from_secs(10)),
        "the frozen master was never told down: {:#?}",
        hook.kinds()
    );
    let printed = watch(&redlock);
    assert!(
        printed.len() == 1
            && printed[0].starts_with(&format!("warn: {}", cluster.servers[4].addr())),
        "{printed:#?}"
    );
    drop(frozen);
    assert!(
        hook.wait_for("master 4 back", Duration::from_secs(10)),
        "{:#?}",
        hook.kinds()
    );
    let kinds = hook.kinds();
    let masters: Vec<_> = kinds.iter().filter(|k| k.starts_with("master ")).collect();
    assert_eq!(masters, ["master 4 back", "master 4 down"], "{kinds:#?}");
    assert_eq!(hook.count("lease renewal failed"), 0);
    for lease in leases {
        lease.unlock().expect("released");
    }
}
