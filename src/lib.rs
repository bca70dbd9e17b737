//! A synchronous client for the [Redlock] distributed lock over N
//! independent Redis (or Valkey) masters, for threads in non-async programs
//! and for lock-heavy hot paths.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let redlock = redlock_sync::Redlock::builder()
//!     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
//!     .node_timeout(Duration::from_millis(50)) // per-master deadline of one round
//!     .lock_wait(Duration::from_secs(2)) // at most this long (default: until it gets it)
//!     .build()?;
//!
//! let mut lock = redlock.lock("orders:42", Duration::from_secs(10))?; // woken by the release
//! assert!(lock.validity() > Duration::from_secs(9));
//! lock.extend(Duration::from_secs(10))?;
//! lock.unlock()?;
//!
//! match redlock.try_lock(b"orders:43", Duration::from_secs(10))? {
//!     Some(lock) => drop(lock), // dropping releases, best effort
//!     None => println!("held by someone else"),
//! }
//!
//! let wait = Duration::from_millis(500);
//! if let Some(lock) = redlock.try_lock_for("orders:44", Duration::from_secs(10), wait)? {
//!     lock.unlock()?;
//! }
//! # Ok::<(), redlock_sync::Error>(())
//! ```
//!
//! # What is guaranteed
//!
//! Under the Redlock model (N independent masters, no replication between
//! them; process clocks that advance at about the same rate; a crashed
//! master stays down longer than the largest TTL before it rejoins):
//!
//! - **Mutual exclusion.** A [`Lock`] is returned only if a quorum (`N/2 +
//!   1`) of masters set the key to a fresh random value within less than the
//!   TTL. [`Lock::validity`] is `TTL - elapsed - (TTL/100 + 2 ms)`, counted
//!   from the start of the acquisition on a clock that keeps running while
//!   the host is suspended. Two holders are never both inside their
//!   validity, and a lock whose validity ran out is never valid again (an
//!   extension counts only if confirmed before the validity ends).
//! - **Only our own key is touched.** Release and extend compare the value;
//!   a late unlock cannot affect the next holder.
//! - **No deadlock.** Keys expire with their TTL.
//! - **No lock that could not be released.** A master where the ACL user
//!   may not run the release and extension scripts (checked by each new
//!   connection) is never sent a `SET`: it fails with
//!   [`NodeError::CannotRelease`], which says what to grant.
//! - **Fault tolerance.** While a majority of masters answers, locks can be
//!   taken, extended and released (see [`Lock::unlock`] for exactly when a
//!   release counts as done). A failed acquisition releases what it set.
//! - **Bounded waiting.** No call waits on a master past its deadline (the
//!   node timeout, or less when the TTL leaves less); [`Redlock::lock`] and
//!   [`Redlock::try_lock_for`] wait for a held lock at most their wait
//!   budget; dropping the last handle waits at most one node timeout in
//!   all.
//! - **Held as long as the work needs, within a bound.** [`Lock::keep_alive`]
//!   returns a [`Lease`] that one thread per handle renews, in batched
//!   rounds, until it is released, found lost or expired, or held for its
//!   `max_hold`; [`Lease::check`] is one atomic read and never optimistic
//!   (a paused holder sees the lease gone when it resumes, and a lease that
//!   ended stays ended). [`Lock::renew_if_below`] renews without a thread.
//! - **Woken by the release.** A thread waiting for a held lock sleeps until
//!   a master announces the lock's release, then tries at once; waiters take
//!   turns in line (one acquisition round per handoff), and a fallback timer
//!   covers releases nobody hears. Messages only ever make a waiter try or
//!   hold back: every lock comes from a quorum of `SET NX`.
//! - **Never a stale answer.** Every command is tagged, and its answer
//!   counts only when the tag comes back behind it; a connection that sends
//!   anything malformed, mistyped or unsolicited is discarded.
//! - **Bounded memory**, and **no secrets in output**: passwords never
//!   appear in `Debug`, `Display` or errors.
//! - **Connections scale with calls, not with locks**; a forked child never
//!   uses its parent's connections or uses or releases its parent's locks
//!   and leases.
//! - **Fencing tokens**, with [`Builder::fencing`]: every lock carries a
//!   token ([`Lock::fence_token`]), unique per resource and rising with the
//!   holders' turns across the N masters even when timing fails, for the
//!   protected resource to check ([`REFEREE_LUA`]; the guide's "Fencing
//!   tokens", docs/guide/fencing.md).
//!
//! # Known limits
//!
//! A holder paused (GC, swap, SIGSTOP) past its validity can act after the
//! lock passed to someone else: only a fencing token checked by the
//! protected resource prevents that ([`Builder::fencing`]); without one,
//! check [`Lock::validity`] before acting. A clock jump on a master, or a master
//! restarted empty before the TTL passed, can let a lock be taken twice. A
//! master that lies (answers `+OK` without setting the key) can grant a
//! lock. Waiting is not fair: waiters are served in the order they
//! announced themselves only while everyone hears that order, and a client
//! that does not wait can take the lock first. Waiting needs rights on the
//! channels `redlock-sync:released:*` (else waiters fall back to polling,
//! and [`Redlock::health`] and the event hook say so).
//! The README lists the rest, and the guide (docs/guide/limits.md) has
//! each in full.
//!
//! # Errors
//!
//! [`Error`] says what happened, with a per-master [`NodeReport`]; its
//! predicates answer the usual questions ([`Error::is_contention`],
//! [`Error::is_retryable`], [`Error::is_auth_failure`], ...).
//! [`Redlock::health`] and [`Redlock::ping`] show failing masters before
//! locking fails.
//!
//! # Examples
//!
//! The repository's `examples/` hold runnable recipes: a job that runs at
//! most once per period (`cron_job`), a pool of worker threads
//! (`worker_pool`), work that outlasts its TTL (`long_task`), handling each
//! error (`errors`), monitoring the masters (`monitoring`), the feature
//! `metrics` served by a Prometheus exporter (`lock_metrics`) and locking
//! from tokio's blocking pool (`tokio_worker`).
//!
//! # Cargo features
//!
//! All off by default. `tls`: `rediss://` masters (with `tls-webpki-roots`
//! and `tls-native-roots` for more trusted roots). `log`: log lines through
//! the `log` facade. `metrics`: counters, gauges and histograms through
//! the `metrics` facade. `tracing`: a span per call and structured events
//! through `tracing`. The repository's docs/observability.md lists every
//! metric, span and event.
//!
//! [Redlock]: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/

// `unsafe` is denied everywhere; the one exception, `os`, says why.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod clock;
// A cluster seen without I/O (slots, tags, redirects, topology, the slot
// map); public only with the `fuzzing` feature, for the fuzz targets.
#[cfg(feature = "fuzzing")]
pub mod cluster;
#[cfg(not(feature = "fuzzing"))]
#[allow(unreachable_pub)] // public items, reachable with the `fuzzing` feature
mod cluster;
mod command;
mod conn;
mod error;
mod events;
mod handle;
mod holder;
mod lock;
mod names;
mod os;
mod quorum;
mod redlock;
mod round;
// The RESP codec is public only with the `fuzzing` feature, which the fuzz
// targets and the codec benchmark enable; it is no part of the API.
#[cfg(feature = "fuzzing")]
pub mod resp;
#[cfg(not(feature = "fuzzing"))]
#[allow(unreachable_pub)] // public items, reachable with the `fuzzing` feature
mod resp;
mod value;

// The crate's shape: layers, circles, lengths (see docs/design.md).
#[cfg(test)]
mod tests;

// The README's code compiles.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The guide's code compiles too: every page of docs/guide, so that a Rust
// block added to any of them is tested.
#[cfg(doctest)]
mod guide_doctests {
    #[doc = include_str!("../docs/guide/README.md")]
    struct Index;
    #[doc = include_str!("../docs/guide/clusters.md")]
    struct Clusters;
    #[doc = include_str!("../docs/guide/coming-from.md")]
    struct ComingFrom;
    #[doc = include_str!("../docs/guide/configuration.md")]
    struct Configuration;
    #[doc = include_str!("../docs/guide/demo-and-tests.md")]
    struct DemoAndTests;
    #[doc = include_str!("../docs/guide/errors.md")]
    struct Errors;
    #[doc = include_str!("../docs/guide/events.md")]
    struct Events;
    #[doc = include_str!("../docs/guide/exactly-once.md")]
    struct ExactlyOnce;
    #[doc = include_str!("../docs/guide/fencing-runbook.md")]
    struct FencingRunbook;
    #[doc = include_str!("../docs/guide/fencing.md")]
    struct Fencing;
    #[doc = include_str!("../docs/guide/guarantees.md")]
    struct Guarantees;
    #[doc = include_str!("../docs/guide/leases.md")]
    struct Leases;
    #[doc = include_str!("../docs/guide/limits.md")]
    struct Limits;
    #[doc = include_str!("../docs/guide/monitoring.md")]
    struct Monitoring;
    #[doc = include_str!("../docs/guide/native-commands.md")]
    struct NativeCommands;
    #[doc = include_str!("../docs/guide/recipes.md")]
    struct Recipes;
    #[doc = include_str!("../docs/guide/replicas.md")]
    struct Replicas;
    #[doc = include_str!("../docs/guide/sets.md")]
    struct Sets;
    #[doc = include_str!("../docs/guide/the-tool.md")]
    struct TheTool;
    #[doc = include_str!("../docs/guide/tls.md")]
    struct Tls;
    #[doc = include_str!("../docs/guide/waiting.md")]
    struct Waiting;
}

// The unit tests count allocations with the integration tests' allocator.
#[cfg(test)]
#[allow(unreachable_pub, dead_code)]
#[path = "../tests/support/alloc.rs"]
mod counting_alloc;
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: counting_alloc::CountingAllocator = counting_alloc::CountingAllocator;

pub use command::CommandForm;
pub use conn::{Resolve, SystemResolver};
pub use error::{
    CannotRelease, ConfigError, Error, EvictingPolicy, FenceFault, IoError, NodeError, NodeOutcome,
    NodeReport, NodeStatus, NotAVoter, Phase, ProtocolError, ServerError, SetUnsupported, TlsError,
};
pub use events::{
    HandleEvent, LeaseChange, LeaseEvent, MasterAnswer, MasterChange, MasterEvent, Operation,
    Resources, RoundEvent, RoundOutcome, WaitChange, WaitEvent, WokenBy,
};
#[allow(deprecated)]
pub use handle::config::DEFAULT_RETRY_COUNT;
pub use handle::config::{
    DEFAULT_MAX_EXTENSIONS, DEFAULT_MAX_IDLE_CONNECTIONS, DEFAULT_NODE_TIMEOUT,
    DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, DEFAULT_UNREACHABLE_LIMIT, MAX_NODES,
    MAX_NODE_TIMEOUT, MAX_RESOURCE_LEN, MAX_RETRY_DELAY, MAX_TTL, MIN_TTL,
};
pub use holder::MAX_HOLDER_LABEL_LEN;
pub use lock::inspect::{Inspection, KeyOnMaster};
pub use lock::lease::Lease;
pub use lock::many::inspect::SetInspection;
pub use lock::many::lease::LeaseSet;
pub use lock::many::LockSet;
pub use lock::wait::Wait;
pub use lock::{KeyState, Lock};
pub use names::{MAX_SET_BYTES, MAX_SET_LEN};
pub use redlock::builder::Builder;
pub use redlock::work_error::WithLockError;
pub use redlock::Redlock;
pub use resp::{DecodeError, ServerErrorKind};
pub use round::NodeHealth;

/// The resource's half of fencing ([`Builder::fencing`]) for a resource
/// kept in Redis (any server, the lock's masters or another): a Lua script
/// that writes only with a token at least the largest it accepted, both
/// atomically. Run it with `EVAL` (or `EVALSHA` after `SCRIPT LOAD`):
///
/// ```text
/// EVAL <REFEREE_LUA> 2 <largest-accepted key> <data key> <token> <data>
/// ```
///
/// It answers 1 when it wrote (the data, and the token as the largest
/// accepted), 0 when it refused (a newer holder wrote first: stop), and an
/// `ERR` error for a token that is not an integer in `1..=2^53`. A holder
/// may write several times with its token. For SQL and other stores, see
/// the guide's "Fencing tokens" (docs/guide/fencing.md) and the example
/// `fencing_sql`.
pub const REFEREE_LUA: &str = command::fence::REFEREE;
