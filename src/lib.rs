//! A synchronous client for the [Redlock] distributed lock over N
//! independent Redis masters, for threads in non-async programs and for
//! lock-heavy hot paths.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let redlock = redlock_sync::Redlock::builder()
//!     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
//!     .node_timeout(Duration::from_millis(50)) // per-node deadline of one round
//!     .retry_count(3)
//!     .retry_delay(Duration::from_millis(200)) // plus random jitter
//!     .build()?;
//!
//! let mut lock = redlock.lock("orders:42", Duration::from_secs(10))?;
//! assert!(lock.validity() > Duration::from_secs(9));
//! lock.extend(Duration::from_secs(10))?;
//! lock.unlock()?;
//!
//! match redlock.try_lock(b"orders:43", Duration::from_secs(10))? {
//!     Some(lock) => drop(lock), // dropping releases, best effort
//!     None => println!("held by someone else"),
//! }
//! # Ok::<(), redlock_sync::Error>(())
//! ```
//!
//! # How a round works
//!
//! One thread writes the command (`SET key value NX PX ttl`, or a
//! compare-and-delete / compare-and-pexpire script) to every master's
//! non-blocking socket, then waits on all of them at once with `poll(2)`,
//! each master under its own deadline, and returns as soon as the outcome is
//! known: a quorum agreed, or a quorum became impossible. Replies it did not
//! wait for are read and checked before their connection carries another
//! command. A master that is down, frozen or slow costs a round at most its
//! deadline and never holds up the others.
//!
//! # Guarantees and limits
//!
//! See the README for what the lock guarantees under the Redlock model, and
//! what it cannot (a holder paused past its validity, server clock jumps,
//! masters restarted without persistence before the TTL has passed).
//!
//! [Redlock]: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/

// `unsafe` is denied everywhere; the one exception, `os`, says why.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![doc(test(attr(deny(warnings))))]

mod clock;
mod command;
mod conn;
mod error;
mod fanout;
mod health;
mod lock;
mod node;
mod os;
mod pool;
mod quorum;
mod redlock;
#[doc(hidden)]
pub mod resp;
mod transport;
mod value;

pub use error::{
    ConfigError, Error, IoError, NodeError, NodeOutcome, NodeReport, NodeStatus, Phase,
    ProtocolError, ServerError,
};
pub use health::NodeHealth;
pub use lock::{KeyState, Lock};
pub use redlock::{
    Builder, Redlock, DEFAULT_MAX_EXTENSIONS, DEFAULT_MAX_IDLE_CONNECTIONS, DEFAULT_NODE_TIMEOUT,
    DEFAULT_RETRY_COUNT, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, MAX_NODES, MAX_NODE_TIMEOUT,
    MAX_TTL, MIN_TTL,
};
pub use resp::{DecodeError, ServerErrorKind};
