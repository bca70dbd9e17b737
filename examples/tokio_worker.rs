//! A tokio program that takes locks (docs/tokio.md): workers on the
//! runtime take jobs from a queue, lock each job's resource on tokio's
//! blocking pool, do their async work while a lease keeps the lock
//! renewed, and release on the blocking pool again. One `Redlock` handle
//! serves the whole process; on Ctrl-C (or after a few seconds) the
//! program shuts the handle down, which ends every wait at once, lets the
//! workers finish, and stops.
//!
//! ```sh
//! cargo run --release --example tokio_worker       # 3 local masters
//! cargo run --release --example tokio_worker -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! What to copy: `acquire` and `release` (the only places a blocking call
//! runs), `work_on` (a lease held across `.await`s, checked between
//! steps), and `main`'s shutdown order. Demo scaffolding: the job queue,
//! the work itself, and the local servers of `local`
//! (`examples/support/local.rs`).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, Lease, Lock, Redlock, Wait};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Mutex};
use tokio::task::{spawn_blocking, JoinSet};

/// The lock's TTL: the lease renews it while the job runs.
const TTL: Duration = Duration::from_secs(5);
/// The longest a job may hold its lock.
const MAX_HOLD: Duration = Duration::from_secs(60);
/// How long a worker waits for a job's lock before it moves on: a bound
/// of the crate's own, so that no blocking thread waits longer.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Takes `resource` on the blocking pool: the call waits (for a held lock,
/// up to `LOCK_WAIT`; for the masters, up to a node timeout per round),
/// and a runtime thread must never wait. The lease is started there too:
/// the first one of a handle starts its renewal thread.
async fn acquire(redlock: &Redlock, resource: String) -> Result<Option<Lease>, Error> {
    let redlock = redlock.clone(); // a shared handle: the clone is cheap
    spawn_blocking(move || {
        match redlock.lock_waiting(&resource, TTL, Wait::For(LOCK_WAIT)) {
            Ok(lock) => lock.keep_alive(MAX_HOLD).map(Some),
            Err(e) if e.is_contention() => Ok(None), // someone else has it
            Err(e) => Err(e),
        }
    })
    .await
    .expect("the lock call does not panic")
}

/// Releases on the blocking pool. Dropping a `Lease` (or a `Lock`) on a
/// runtime thread would release it there, blocking that thread for up to
/// a node timeout: hand it here instead.
async fn release(lease: Lease) -> Result<(), Error> {
    spawn_blocking(move || lease.unlock())
        .await
        .expect("unlock does not panic")
}

/// One job: async steps under the lock, the lease checked before each
/// (`Lease::check` makes no round: it reads what the renewal thread
/// found), so that a lost lock stops the work before its next effect.
async fn work_on(lease: &Lease, job: u32) -> Result<u32, Error> {
    let mut done = 0;
    for _step in 0..3 {
        lease.check()?;
        tokio::time::sleep(Duration::from_millis(20)).await; // the async work
        done += 1;
    }
    println!("job {job}: {done} steps under the lock");
    Ok(done)
}

async fn worker(redlock: Redlock, jobs: Arc<Mutex<mpsc::Receiver<u32>>>) -> u32 {
    let mut finished = 0;
    loop {
        let Some(job) = jobs.lock().await.recv().await else {
            return finished; // the queue is closed and empty
        };
        let lease = match acquire(&redlock, format!("jobs:{}", job % 4)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                println!("job {job}: its lock stayed held; skipped");
                continue;
            }
            Err(e) if e.is_shut_down() => return finished, // stopping
            Err(e) => {
                eprintln!("job {job}: {e}");
                continue;
            }
        };
        let outcome = work_on(&lease, job).await;
        if let Err(e) = release(lease).await {
            eprintln!("job {job}: release: {e}"); // the key expires with its TTL
        }
        match outcome {
            Ok(_) => finished += 1,
            Err(e) => eprintln!("job {job}: stopped, the lock was lost: {e}"),
        }
    }
}

#[tokio::main]
async fn main() {
    let (_servers, urls) = local::masters(3);
    // One handle for the whole process, built once: it holds the
    // connection pool, the release notices' subscriptions and the renewal
    // thread, which every clone shares.
    let redlock = Redlock::builder()
        .nodes(&urls)
        .build()
        .expect("valid configuration");

    let (queue, jobs) = mpsc::channel(64);
    let jobs = Arc::new(Mutex::new(jobs));
    let mut workers = JoinSet::new();
    for _ in 0..8 {
        workers.spawn(worker(redlock.clone(), Arc::clone(&jobs)));
    }
    let producer = tokio::spawn(async move {
        for job in 0.. {
            if queue.send(job).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });

    // Stop on Ctrl-C, or after three seconds.
    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("Ctrl-C: stopping"),
        _ = tokio::time::sleep(Duration::from_secs(3)) => println!("stopping"),
    }
    // First the handle: every wait for a lock ends within milliseconds
    // (Error::ShutDown), so no blocking thread is left waiting; work under
    // a lock goes on and releases it. Then the queue, then the workers.
    redlock.shutdown();
    producer.abort();
    let mut finished = 0;
    while let Some(done) = workers.join_next().await {
        finished += done.expect("a worker panicked");
    }
    println!("{finished} jobs done");
    // Dropping the last handle closes its connections, waiting up to a
    // node timeout for them: on the blocking pool too.
    spawn_blocking(move || drop(redlock))
        .await
        .expect("dropping the handle does not panic");
}

// The lock types cross `.await`s and threads.
const _: () = {
    const fn sendable<T: Send + 'static>() {}
    sendable::<Lock>();
    sendable::<Lease>();
    sendable::<Redlock>();
};
