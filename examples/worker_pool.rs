//! A pool of worker threads that take jobs from a queue and lock the item
//! each job is about, so that no two workers process the same item at once:
//! not when an item is queued twice (a redelivered message, a duplicate
//! event), and not when other processes on other hosts work on the same
//! items through the same masters.
//!
//! ```sh
//! cargo run --release --example worker_pool       # 3 local masters
//! cargo run --release --example worker_pool -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! All the workers share one `Redlock`: a clone is a cheap handle to the
//! same client (and the same connection pool), safe to use from any thread.
//! Each job is locked as `orders:{id}` with `lock()`, which waits while
//! another worker has that item, woken by its release. An in-process check counts any
//! overlap: two workers inside the same item at the same time. There must
//! be none; the program exits with status 1 otherwise.
//!
//! What to copy: `worker`, and the one shared `Redlock` built in `main`.
//! Demo scaffolding: the queue of fake jobs, the in-process `Check`, and
//! the local servers (`local`, `examples/support/local.rs`).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::Redlock;
use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WORKERS: usize = 8;
/// Distinct order ids; each is queued 3 times (twice in a row, once later),
/// so that two workers often want the same item at the same moment.
const ITEMS: u64 = 300;
/// How long processing one item takes.
const WORK: Duration = Duration::from_millis(1);
/// Far longer than processing an item takes; it only matters when a worker
/// dies holding a lock: its item is free again once the TTL has passed.
const TTL: Duration = Duration::from_secs(5);

/// The in-process check: which items are being processed right now, and
/// what was seen. (It proves nothing across processes; here all workers
/// are in this one, so it sees every overlap.)
#[derive(Default)]
struct Check {
    /// The items some worker is processing, under its lock.
    inside: Mutex<HashSet<u64>>,
    overlaps: AtomicUsize,
    /// How many workers are after each item (waiting for it, or holding it).
    wanting: Mutex<HashMap<u64, usize>>,
    /// Times a worker went after an item another worker was already after:
    /// one of them waited in `lock()` for the other.
    waited: AtomicUsize,
    processed: AtomicUsize,
    failed: AtomicUsize,
}

impl Check {
    /// A worker goes after `id`: how many are after it now, this one
    /// included.
    fn wanted(&self, id: u64) -> usize {
        let mut wanting = self.wanting.lock().expect("check");
        let count = wanting.entry(id).or_default();
        *count += 1;
        *count
    }

    /// A worker is done with `id`.
    fn done_with(&self, id: u64) {
        let mut wanting = self.wanting.lock().expect("check");
        if let Some(count) = wanting.get_mut(&id) {
            *count -= 1;
            if *count == 0 {
                wanting.remove(&id);
            }
        }
    }
}

fn main() -> ExitCode {
    let (_servers, urls) = local::masters(3);

    // One client for the whole pool. A worker that finds its item busy
    // waits in `lock()` until the holder releases it (the release wakes it;
    // it does not poll), for at most `lock_wait`.
    let redlock = match Redlock::builder()
        .nodes(&urls)
        .lock_wait(Duration::from_secs(5))
        .build()
    {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("bad configuration: {e}");
            return ExitCode::from(2);
        }
    };

    // The queue: every id twice in a row, then every id once more.
    let (jobs, queue) = mpsc::channel::<u64>();
    let queue = Arc::new(Mutex::new(queue)); // one receiver, shared by the workers
    let ids = (0..ITEMS).flat_map(|id| [id, id]).chain(0..ITEMS);
    let mut queued = 0;
    for id in ids {
        jobs.send(id).expect("the queue is open");
        queued += 1;
    }
    drop(jobs); // workers stop once the queue is empty

    let check = Arc::new(Check::default());
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            // A clone per worker: the same client, not a new one.
            let (redlock, queue, check) = (redlock.clone(), queue.clone(), check.clone());
            thread::spawn(move || worker(&redlock, &queue, &check))
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker thread panicked");
    }
    let elapsed = started.elapsed();

    let processed = check.processed.load(Ordering::SeqCst);
    let overlaps = check.overlaps.load(Ordering::SeqCst);
    println!(
        "{queued} jobs ({ITEMS} items, each queued 3 times) by {WORKERS} workers in {elapsed:.2?}"
    );
    println!(
        "throughput: {:.0} jobs/s (each holds its lock for {WORK:?} of work)",
        processed as f64 / elapsed.as_secs_f64()
    );
    println!("processed: {processed}");
    println!(
        "two workers were after the same item at once: {} times (one waited for the other)",
        check.waited.load(Ordering::SeqCst)
    );
    println!("failed jobs: {}", check.failed.load(Ordering::SeqCst));
    println!("overlaps (two workers inside one item at once): {overlaps}");
    if overlaps == 0 && processed == queued {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One worker: take a job, lock its item, process it, unlock; until the
/// queue is empty.
fn worker(redlock: &Redlock, queue: &Mutex<mpsc::Receiver<u64>>, check: &Check) {
    loop {
        // Take the next job. The guard on the queue is dropped at the end of
        // this statement, so that workers do not hold the queue while they
        // work (in `while let Ok(id) = queue.lock()...recv()`, it would be
        // held for the whole loop body, and the workers would take turns).
        let next = queue.lock().expect("queue").recv();
        let Ok(id) = next else {
            return; // the queue is empty and closed
        };
        // For the demo's statistics: is another worker after this item too?
        if check.wanted(id) > 1 {
            check.waited.fetch_add(1, Ordering::Relaxed);
        }
        // Waits while another worker (here or elsewhere) holds the item.
        let lock = match redlock.lock(format!("orders:{id}"), TTL) {
            Ok(lock) => lock,
            Err(e) => {
                // Still held after `lock_wait`, or the masters are
                // unreachable: a real worker would put the job back on the
                // queue (or leave the message unacknowledged).
                eprintln!("orders:{id}: not processed: {e}");
                check.failed.fetch_add(1, Ordering::Relaxed);
                check.done_with(id);
                continue;
            }
        };

        // The in-process check: nobody else may be inside this item.
        if !check.inside.lock().expect("check").insert(id) {
            eprintln!("overlap: two workers inside orders:{id}");
            check.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        thread::sleep(WORK); // process the order
        check.inside.lock().expect("check").remove(&id);

        // Before making the result visible (a commit, an ack), make sure
        // the lock was still valid: if the work overran the TTL, someone
        // else may be processing the same item by now.
        if lock.validity().is_zero() {
            eprintln!("orders:{id}: the lock expired during the work: discarding the result");
            check.failed.fetch_add(1, Ordering::Relaxed);
            drop(lock); // releases it, best effort
            check.done_with(id);
            continue;
        }
        check.processed.fetch_add(1, Ordering::Relaxed);

        // Release at once, so that a worker waiting for this item gets it
        // now. If the release fails (no quorum), the key expires with the
        // TTL: the item is only delayed.
        if let Err(e) = lock.unlock() {
            eprintln!("orders:{id}: release failed, it frees itself in {TTL:?}: {e}");
        }
        check.done_with(id);
    }
}
