//! The figures an operator charts, from the events a handle tells its hook
//! (`Builder::events`): how long acquisitions waited (a histogram), how
//! often a lock was found held, how long locks were held, how many leases
//! were lost, which masters went down, and which refused release notices
//! (an ACL user without channel rights: waiters poll them). No dependency:
//! atomics, and the Prometheus text format printed at the end.
//!
//! ```sh
//! cargo run --release --example lock_metrics       # 3 local masters
//! cargo run --release --example lock_metrics -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! Four threads take turns on two hot locks for two seconds; meanwhile a
//! lease is held, and (with local masters) its key is deleted behind it, so
//! that the renewer finds it lost.
//!
//! What to copy: `Metrics` (the hook) and `Metrics::render`. The hook runs
//! on the threads that lock (and on the renewal thread for leases), inside
//! their calls: it only adds to atomics, and takes a mutex for a moment to
//! time holds. It never blocks and never calls back into the handle.
//! Demo scaffolding: `main`, and the local servers of `local`
//! (`examples/support/local.rs`).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{
    HandleEvent, LeaseChange, LeaseEvent, MasterChange, MasterEvent, Operation, Redlock,
    RoundEvent, RoundOutcome, WaitChange, WaitEvent,
};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

/// Upper bounds of the histograms' buckets, in milliseconds (the last
/// bucket, `+Inf`, takes the rest).
const BUCKETS_MS: [u64; 8] = [1, 2, 5, 10, 50, 100, 500, 1000];

/// A histogram: counts per bucket, their sum and count.
#[derive(Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS_MS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let ms = d.as_millis() as u64;
        let i = BUCKETS_MS
            .iter()
            .position(|&b| ms < b)
            .unwrap_or(BUCKETS_MS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text of the histogram named `name` (cumulative
    /// buckets, in seconds).
    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = BUCKETS_MS
                .get(i)
                .map_or("+Inf".to_string(), |ms| format!("{}", *ms as f64 / 1000.0));
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {}", self.count.load(Ordering::Relaxed));
    }
}

/// The hook: what operators chart.
#[derive(Default)]
struct Metrics {
    /// How long `lock()` waited for the locks it got (first try included).
    acquire_wait: Histogram,
    /// How long a lock was held: from its acquisition's end to its release.
    hold_time: Histogram,
    /// When each held lock was taken, by the thread that took it and its
    /// resource, to time its hold. (By thread too: another thread may take
    /// the lock, and be told so, before the release that let it is told.
    /// A lock released on another thread than the one that took it is not
    /// timed.)
    taken_at: Mutex<HashMap<(ThreadId, Vec<u8>), Instant>>,
    /// Acquisition attempts that found the lock held.
    contended: AtomicU64,
    /// Waits woken by a release notice, by the fallback timer, and by
    /// their subscription's late confirmation.
    woken_by_notice: AtomicU64,
    woken_by_timer: AtomicU64,
    woken_by_subscription: AtomicU64,
    /// Waits that gave up.
    gave_up: AtomicU64,
    /// Leases renewed, renewals failed, leases lost.
    renewed: AtomicU64,
    renewals_failed: AtomicU64,
    leases_lost: AtomicU64,
    /// Masters that went down, and came back.
    masters_down: AtomicU64,
    masters_back: AtomicU64,
    /// Masters that refused release notices (told once until they confirm
    /// a subscription again): not down, but their waiters poll.
    notices_refused: AtomicU64,
}

impl HandleEvent for Metrics {
    fn handle_round(&self, event: RoundEvent<'_>) {
        let key = || (thread::current().id(), event.resource().to_vec());
        match (event.operation(), event.outcome()) {
            (Operation::Acquire, RoundOutcome::Succeeded) => {
                let mut taken = self.taken_at.lock().unwrap_or_else(|e| e.into_inner());
                taken.insert(key(), Instant::now());
            }
            (Operation::Acquire, RoundOutcome::Contended) => {
                self.contended.fetch_add(1, Ordering::Relaxed);
            }
            (Operation::Release, _) => {
                let mut taken = self.taken_at.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(at) = taken.remove(&key()) {
                    self.hold_time.observe(at.elapsed());
                }
            }
            _ => {}
        }
    }

    fn handle_wait(&self, event: WaitEvent<'_>) {
        let counter = match event.change() {
            WaitChange::Acquired => {
                self.acquire_wait.observe(event.waited());
                return;
            }
            WaitChange::Woken(redlock_sync::WokenBy::Notice) => &self.woken_by_notice,
            WaitChange::Woken(redlock_sync::WokenBy::Subscribed) => &self.woken_by_subscription,
            WaitChange::Woken(_) => &self.woken_by_timer,
            WaitChange::GaveUp => &self.gave_up,
            // Counted by the round (`handle_round`), which also sees
            // `try_lock`'s contention.
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn handle_lease(&self, event: LeaseEvent<'_>) {
        let counter = match event.change() {
            LeaseChange::Renewed { .. } => &self.renewed,
            LeaseChange::RenewalFailed(_) => &self.renewals_failed,
            LeaseChange::Lost(_) => &self.leases_lost,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn handle_master(&self, event: MasterEvent<'_>) {
        match event.change() {
            MasterChange::Back => self.masters_back.fetch_add(1, Ordering::Relaxed),
            MasterChange::NoticesRefused(_) => self.notices_refused.fetch_add(1, Ordering::Relaxed),
            // A node's host name resolving elsewhere (or not) is no outage.
            MasterChange::Readdressed { .. } | MasterChange::Unresolved { .. } => return,
            _ => self.masters_down.fetch_add(1, Ordering::Relaxed),
        };
    }
}

impl Metrics {
    /// Everything, in the Prometheus text format.
    fn render(&self) -> String {
        let mut out = String::new();
        self.acquire_wait.render(
            "redlock_acquire_wait_seconds",
            "How long lock() waited for the locks it got.",
            &mut out,
        );
        self.hold_time.render(
            "redlock_hold_seconds",
            "How long locks were held.",
            &mut out,
        );
        let counters = [
            (
                "redlock_contended_total",
                "Attempts that found the lock held.",
                &self.contended,
            ),
            (
                "redlock_woken_by_notice_total",
                "Waits woken by a release notice.",
                &self.woken_by_notice,
            ),
            (
                "redlock_woken_by_timer_total",
                "Waits woken by the fallback timer.",
                &self.woken_by_timer,
            ),
            (
                "redlock_woken_by_subscription_total",
                "Waits woken when their subscription to release notices was confirmed late.",
                &self.woken_by_subscription,
            ),
            (
                "redlock_gave_up_total",
                "Waits that ran out.",
                &self.gave_up,
            ),
            (
                "redlock_lease_renewed_total",
                "Lease renewals.",
                &self.renewed,
            ),
            (
                "redlock_lease_renewal_failed_total",
                "Lease renewals that failed.",
                &self.renewals_failed,
            ),
            (
                "redlock_lease_lost_total",
                "Leases lost or expired.",
                &self.leases_lost,
            ),
            (
                "redlock_master_down_total",
                "Masters that went down.",
                &self.masters_down,
            ),
            (
                "redlock_master_back_total",
                "Masters that came back.",
                &self.masters_back,
            ),
            (
                "redlock_master_notices_refused_total",
                "Masters that refused release notices (grant &redlock-sync:released:*).",
                &self.notices_refused,
            ),
        ];
        for (name, help, value) in counters {
            let value = value.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        out
    }
}

fn main() {
    let (servers, urls) = local::masters(3);
    let metrics = Arc::new(Metrics::default());
    let redlock = Redlock::builder()
        .nodes(&urls)
        .lock_wait(Duration::from_secs(5))
        .events(Arc::clone(&metrics))
        .build()
        .expect("valid configuration");

    // A lease, whose key goes behind its back (with local masters).
    let lease = redlock
        .lock("metrics:lease", Duration::from_secs(1))
        .expect("free")
        .keep_alive(Duration::from_secs(60))
        .expect("renewed");

    // Four threads, two hot locks, two seconds.
    let until = Instant::now() + Duration::from_secs(2);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let redlock = redlock.clone();
            thread::spawn(move || {
                let resource = format!("metrics:hot:{}", i % 2);
                while Instant::now() < until {
                    match redlock.lock(&resource, Duration::from_secs(5)) {
                        Ok(lock) => {
                            thread::sleep(Duration::from_millis(3)); // the work
                            let _ = lock.unlock();
                        }
                        Err(e) => eprintln!("worker {i}: {e}"),
                    }
                }
            })
        })
        .collect();
    if let Some(servers) = &servers {
        thread::sleep(Duration::from_millis(500));
        for server in servers {
            let _ = server.command(&["DEL", "metrics:lease"]);
        }
        // Found at the next renewal, within two thirds of the TTL.
        match lease.wait_ended(Duration::from_secs(5)) {
            Some(why) => println!("the lease ended: {why}"),
            None => println!("the lease still holds"),
        }
    }
    for worker in workers {
        worker.join().expect("worker");
    }
    drop(lease);
    print!("{}", metrics.render());
}
