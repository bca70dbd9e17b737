//! Fencing tokens against an SQL database: the resource's row keeps the
//! last token that wrote it, and a write is one SQL statement that
//! succeeds only with a token at least that one. A holder that pauses past
//! its validity (a GC pause, a swapped-out process, SIGSTOP) comes back
//! after the lock passed on, and its late write changes no row.
//!
//! ```sh
//! cargo run --release --example fencing_sql       # 3 local masters, SQLite in a temporary file
//! cargo run --release --example fencing_sql -- --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
//! ```
//!
//! The recipe:
//!
//! 1. Build the handle with `fencing(true)`; initialise the fence domain
//!    once per deployment with `fence_init(0)` (refused, harmlessly, once
//!    it is done).
//! 2. Give the protected table a column for the last token that wrote
//!    each row (`last_token`, a `BIGINT`: tokens stay below 2^53).
//! 3. Make every write one statement conditioned on the token:
//!    `UPDATE ... SET ..., last_token = ?token WHERE id = ? AND last_token
//!    <= ?token`. One row changed: written; none: a newer holder wrote
//!    first, so stop. The check and the write are one atomic step, which is
//!    what makes a paused holder harmless; reading the token first and
//!    writing after would not be. (`<=` lets a holder write several times
//!    with its own token; tokens of one resource are never shared by two
//!    holders.) PostgreSQL and MySQL take the same statement.
//!
//! Here two workers are threads, each with its own database connection as
//! two processes would have: `slow` takes the lock and then stalls (a
//! sleep standing for a pause) past its TTL; `fast` takes the lock once it
//! expired and writes; `slow` wakes up and writes too, and is refused.
//!
//! What to copy: `create_table`, `worker` and `write`. Demo scaffolding:
//! `main` (the local servers of `local`, `examples/support/local.rs`, the
//! temporary database file, and the check of what the table kept).

// Demo scaffolding: local servers (`--nodes URL,...` uses yours instead).
#[path = "support/local.rs"]
mod local;

use redlock_sync::{Error, Redlock};
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

/// The lock's name, and the protected row's.
const RESOURCE: &str = "fencing-sql-demo";
const TTL: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let (_servers, urls) = local::masters(3);
    let database = TempFile(
        std::env::temp_dir().join(format!("redlock-fencing-sql-{}.sqlite", std::process::id())),
    );
    if let Err(e) = create_table(&database.0) {
        eprintln!("cannot create the table in {}: {e}", database.0.display());
        return ExitCode::from(2);
    }
    let redlock = match Redlock::builder().nodes(&urls).fencing(true).build() {
        Ok(redlock) => redlock,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match redlock.fence_init(0) {
        Ok(_) => println!("fence domain initialised"),
        Err(Error::FenceInitRefused(_)) => println!("fence domain already initialised"),
        Err(e) => {
            eprintln!("fence_init: {e}");
            return ExitCode::FAILURE;
        }
    }

    let (slow, fast) = thread::scope(|scope| {
        let (slow_handle, path) = (redlock.clone(), database.0.as_path());
        let slow = scope.spawn(move || worker("slow", &slow_handle, path, TTL * 3));
        thread::sleep(TTL * 2); // slow's lock has expired by now
        let fast = worker("fast", &redlock, &database.0, Duration::ZERO);
        (slow.join().expect("slow worker"), fast)
    });

    // What the table kept: the fast worker's write.
    let kept = Connection::open(&database.0).and_then(|db| {
        db.query_row(
            "SELECT data, last_token FROM resources WHERE name = ?1",
            params![RESOURCE],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
        )
    });
    match &kept {
        Ok((data, token)) => println!("the table kept {data:?}, written with token {token}"),
        Err(e) => println!("cannot read the table: {e}"),
    }
    match (slow, fast, kept) {
        (Ok(false), Ok(true), Ok((data, _))) if data == "written by fast" => ExitCode::SUCCESS,
        other => {
            println!("expected the slow worker refused and the fast one accepted: {other:?}");
            ExitCode::FAILURE
        }
    }
}

/// The protected table: a row per resource, with the last token that
/// wrote it (0: none yet).
fn create_table(path: &Path) -> rusqlite::Result<()> {
    let db = Connection::open(path)?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS resources (
             name       TEXT PRIMARY KEY,
             data       TEXT NOT NULL,
             last_token BIGINT NOT NULL DEFAULT 0
         )",
    )?;
    db.execute(
        "INSERT OR IGNORE INTO resources (name, data) VALUES (?1, '')",
        params![RESOURCE],
    )?;
    Ok(())
}

/// Takes the lock, stalls for `pause` (a stand-in for a GC pause), then
/// writes its name to the row with its token. `Ok(false)`: refused.
fn worker(name: &str, redlock: &Redlock, database: &Path, pause: Duration) -> Result<bool, Error> {
    // Each worker has its own connection, as separate processes would.
    let db = Connection::open(database).expect("the database opens");
    let lock = redlock.lock(RESOURCE, TTL)?;
    let token = lock.fence_token().expect("a fencing handle");
    println!("{name}: got the lock with token {token}");
    thread::sleep(pause);
    if !pause.is_zero() {
        // Too late: the lock has expired, and someone else may hold it.
        println!(
            "{name}: back after {pause:?}, validity left {:?}",
            lock.validity()
        );
    }
    let accepted = write(&db, token, &format!("written by {name}")).expect("the UPDATE runs");
    println!(
        "{name}: write with token {token} {}",
        if accepted {
            "accepted"
        } else {
            "REFUSED: a newer holder wrote first"
        }
    );
    let _ = lock.unlock();
    Ok(accepted)
}

/// Writes `data` only if `token` is at least the last token that wrote the
/// row: the check and the write in one statement. `Ok(false)`: refused.
fn write(db: &Connection, token: u64, data: &str) -> rusqlite::Result<bool> {
    // Tokens stay below 2^53, so they fit an i64 (SQL's BIGINT).
    let token = i64::try_from(token).expect("tokens stay below 2^53");
    let changed = db.execute(
        "UPDATE resources SET data = ?1, last_token = ?2
         WHERE name = ?3 AND last_token <= ?2",
        params![data, token, RESOURCE],
    )?;
    Ok(changed == 1)
}

/// Demo scaffolding: the database file, removed when the example ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
