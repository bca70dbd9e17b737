//! The blocking API: [`Builder`], [`Redlock`] and [`Lock`].

use crate::backoff::Backoff;
use crate::error::{ConfigError, Error};
use crate::fanout::{Masters, NodeSet, Session};
use crate::node::{redact, Node};
use crate::quorum::{drift, quorum, validity, Decision, Tally};
use crate::script::Command;
use crate::value::Value;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Default per-node deadline of one round: generous for a LAN (round trips
/// well under a millisecond), small next to any sensible TTL.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// Default number of retries after a failed [`Redlock::lock`] attempt.
pub const DEFAULT_RETRY_COUNT: u32 = 3;

/// Default pause between [`Redlock::lock`] attempts, before jitter.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);

/// Default upper bound of the random jitter added to each retry pause, so
/// that competing clients fall out of step instead of splitting the votes.
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);

/// Default limit on [`Lock::extend`] calls per lock. The Redlock spec asks
/// that extensions be bounded so a stuck holder cannot keep a lock forever.
pub const DEFAULT_MAX_EXTENSIONS: u32 = 100;

/// Default number of idle connections kept to each master (one per thread
/// that used the client concurrently, up to this many).
pub const DEFAULT_MAX_IDLE_CONNECTIONS: usize = 16;

/// A TTL must be at least this many times the node timeout, so that a round
/// that runs into its deadline still leaves most of the TTL as validity.
pub const MIN_TTL_PER_NODE_TIMEOUT: u32 = 10;

/// The longest TTL accepted (one year).
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The most masters one client can use (Redlock deployments use 3 to 7).
pub const MAX_NODES: usize = 64;

/// The longest node timeout accepted (one minute).
pub const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(60);

/// A session keeps its last lock's resource-name buffer for the next lock,
/// so that steady-state locking does not allocate; a buffer larger than
/// this is shrunk when the lock is released.
const KEPT_NAME_CAPACITY: usize = 1024;

/// Configures and builds a [`Redlock`].
///
/// ```no_run
/// use std::time::Duration;
/// let redlock = redlock_sync::Redlock::builder()
///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .node_timeout(Duration::from_millis(20))
///     .retry_count(5)
///     .build()?;
/// assert_eq!(redlock.quorum(), 2);
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    urls: Vec<String>,
    node_timeout: Duration,
    retry_count: u32,
    retry_delay: Duration,
    retry_jitter: Duration,
    max_extensions: u32,
    max_idle_connections: usize,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            urls: Vec::new(),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            retry_count: DEFAULT_RETRY_COUNT,
            retry_delay: DEFAULT_RETRY_DELAY,
            retry_jitter: DEFAULT_RETRY_JITTER,
            max_extensions: DEFAULT_MAX_EXTENSIONS,
            max_idle_connections: DEFAULT_MAX_IDLE_CONNECTIONS,
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        f.debug_struct("Builder")
            .field("urls", &urls)
            .field("node_timeout", &self.node_timeout)
            .field("retry_count", &self.retry_count)
            .field("retry_delay", &self.retry_delay)
            .field("retry_jitter", &self.retry_jitter)
            .field("max_extensions", &self.max_extensions)
            .field("max_idle_connections", &self.max_idle_connections)
            .finish()
    }
}

impl Builder {
    /// The masters, as `redis://[[user]:password@]host[:port][/db]` URLs
    /// (IPv6 hosts in brackets, credentials percent-encoded). Adds to any
    /// given before. Use 3 or 5 independent masters (not replicas of one
    /// another). Host names are resolved once, by [`Builder::build`].
    pub fn nodes<I>(mut self, urls: I) -> Builder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.urls
            .extend(urls.into_iter().map(|u| u.as_ref().to_string()));
        self
    }

    /// How long each master has to answer in one round (connecting included),
    /// [`DEFAULT_NODE_TIMEOUT`] by default. A master that misses it counts as
    /// failed for that round; the others are never held up by it.
    ///
    /// An acquisition first goes to the masters that have answered all our
    /// earlier commands, when they are enough for a quorum; one still
    /// undecided after a tenth of this timeout also asks the others, as soon
    /// as they have caught up.
    pub fn node_timeout(mut self, timeout: Duration) -> Builder {
        self.node_timeout = timeout;
        self
    }

    /// How many times [`Redlock::lock`] tries again after a failed attempt
    /// ([`DEFAULT_RETRY_COUNT`]); 0 means a single attempt.
    pub fn retry_count(mut self, retries: u32) -> Builder {
        self.retry_count = retries;
        self
    }

    /// The pause between attempts, before jitter ([`DEFAULT_RETRY_DELAY`]).
    pub fn retry_delay(mut self, delay: Duration) -> Builder {
        self.retry_delay = delay;
        self
    }

    /// The upper bound of the random time added to each pause
    /// ([`DEFAULT_RETRY_JITTER`]).
    pub fn retry_jitter(mut self, jitter: Duration) -> Builder {
        self.retry_jitter = jitter;
        self
    }

    /// How many times one [`Lock`] may be extended
    /// ([`DEFAULT_MAX_EXTENSIONS`]); further calls fail with
    /// [`Error::ExtensionLimit`].
    pub fn max_extensions(mut self, limit: u32) -> Builder {
        self.max_extensions = limit;
        self
    }

    /// How many idle connections to each master are kept for reuse
    /// ([`DEFAULT_MAX_IDLE_CONNECTIONS`]). Each thread locking at the same
    /// moment uses its own; beyond this many, they are closed after use.
    pub fn max_idle_connections(mut self, max: usize) -> Builder {
        self.max_idle_connections = max;
        self
    }

    /// Checks the configuration, parses the URLs and resolves host names.
    /// No connection is made: connections are opened by the first round
    /// that needs them.
    ///
    /// Fails with [`Error::Config`] for no nodes, a URL that does not parse
    /// or resolve, two URLs that lead to the same server, or a node timeout
    /// that is zero or above [`MAX_NODE_TIMEOUT`].
    pub fn build(self) -> Result<Redlock, Error> {
        if self.urls.is_empty() {
            return Err(ConfigError::NoNodes.into());
        }
        if self.urls.len() > MAX_NODES {
            return Err(ConfigError::TooManyNodes(self.urls.len()).into());
        }
        if self.node_timeout.is_zero() || self.node_timeout > MAX_NODE_TIMEOUT {
            return Err(ConfigError::InvalidNodeTimeout(self.node_timeout).into());
        }
        let nodes = self
            .urls
            .iter()
            .map(|url| Node::from_url(url))
            .collect::<Result<Vec<Node>, ConfigError>>()?;
        let mut seen = HashSet::new();
        for node in &nodes {
            if !seen.insert(node.addr) {
                return Err(ConfigError::DuplicateNode(node.name.clone()).into());
            }
        }
        let epoch = Instant::now();
        Ok(Redlock {
            shared: Arc::new(Shared {
                backoff: nodes.iter().map(|_| Backoff::new(epoch)).collect(),
                nodes,
                node_timeout: self.node_timeout,
                retry_count: self.retry_count,
                retry_delay: self.retry_delay,
                retry_jitter: self.retry_jitter,
                max_extensions: self.max_extensions,
                max_idle_sessions: self.max_idle_connections,
                pool: Mutex::new(Vec::new()),
            }),
        })
    }
}

/// A Redlock client over N independent Redis masters.
///
/// Cheap to clone (a shared handle) and safe to use from many threads at
/// once: each thread's round runs on its own connections, taken from a pool.
///
/// ```no_run
/// use std::time::Duration;
/// let redlock = redlock_sync::Redlock::builder()
///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
///     .build()?;
/// let lock = redlock.lock("orders:42", Duration::from_secs(10))?;
/// // ... work while lock.validity() is comfortably above zero ...
/// lock.unlock()?;
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
}

/// What every clone of a [`Redlock`] and every [`Lock`] shares.
struct Shared {
    nodes: Vec<Node>,
    backoff: Vec<Backoff>,
    node_timeout: Duration,
    retry_count: u32,
    retry_delay: Duration,
    retry_jitter: Duration,
    max_extensions: u32,
    max_idle_sessions: usize,
    /// Idle sessions (connections to every master).
    pool: Mutex<Vec<Session>>,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &s.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
            )
            .field("quorum", &quorum(s.nodes.len()))
            .field("node_timeout", &s.node_timeout)
            .field("retry_count", &s.retry_count)
            .field("retry_delay", &s.retry_delay)
            .field("retry_jitter", &s.retry_jitter)
            .field("max_extensions", &s.max_extensions)
            .finish_non_exhaustive()
    }
}

impl Redlock {
    /// Starts configuring a client.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Number of masters.
    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// Votes needed for a lock: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        quorum(self.shared.nodes.len())
    }

    /// Acquires `resource` for `ttl`, retrying per the configured policy
    /// while it is held by someone else or no quorum can be reached.
    ///
    /// The returned lock is valid for [`Lock::validity`]: the TTL minus the
    /// time the acquisition took and an allowance for clock drift. Fails
    /// with the last attempt's error: [`Error::Contended`],
    /// [`Error::NoQuorum`] or [`Error::TooSlow`], or at once with
    /// [`Error::Config`] for a TTL that is zero, above [`MAX_TTL`], or less
    /// than [`MIN_TTL_PER_NODE_TIMEOUT`] node timeouts.
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let resource = resource.as_ref();
        let mut retries_left = self.shared.retry_count;
        loop {
            match self.shared.acquire(resource, ttl) {
                Err(e) if e.is_retryable() && retries_left > 0 => {
                    retries_left -= 1;
                    std::thread::sleep(self.shared.retry_pause());
                }
                result => return result.map(|lock| lock.attach(&self.shared)),
            }
        }
    }

    /// Makes one attempt to acquire `resource` for `ttl`.
    ///
    /// `Ok(None)` means another client holds it. Errors are those of
    /// [`Redlock::lock`], except contention.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.try_lock(b"report:daily", Duration::from_secs(30))? {
    ///     Some(lock) => { /* we run the report */ lock.unlock()?; }
    ///     None => { /* someone else is running it */ }
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn try_lock(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<Option<Lock>, Error> {
        match self.shared.acquire(resource.as_ref(), ttl) {
            Ok(lock) => Ok(Some(lock.attach(&self.shared))),
            Err(Error::Contended(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// An acquisition that succeeded, before it is wrapped in a [`Lock`].
struct Acquired {
    resource: Vec<u8>,
    value: Value,
    valid_until: Instant,
    holders: NodeSet,
    session: Session,
}

impl Acquired {
    fn attach(self, shared: &Arc<Shared>) -> Lock {
        Lock {
            shared: Arc::clone(shared),
            resource: self.resource,
            value: self.value,
            valid_until: self.valid_until,
            holders: self.holders,
            extensions: 0,
            session: Some(self.session),
        }
    }
}

impl Shared {
    fn masters(&self) -> Masters<'_> {
        Masters {
            nodes: &self.nodes,
            backoff: &self.backoff,
        }
    }

    /// An idle session from the pool, or a new one.
    fn take_session(&self) -> Session {
        let idle = self.pool().pop();
        idle.unwrap_or_else(|| Session::new(self.nodes.len()))
    }

    /// Returns a session to the pool, or closes it (cleanly) if the pool is
    /// full.
    fn give_back(&self, mut session: Session) {
        let mut pool = self.pool();
        if pool.len() < self.max_idle_sessions {
            pool.push(session);
        } else {
            drop(pool);
            session.settle(self.node_timeout);
        }
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Vec<Session>> {
        // The pool is a stack, consistent after every push and pop, so a
        // panic elsewhere while it was held cannot leave it broken.
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The TTL in whole milliseconds (as sent with PX), checked against the
    /// limits.
    fn ttl_millis(&self, ttl: Duration) -> Result<u64, ConfigError> {
        if ttl > MAX_TTL {
            return Err(ConfigError::TtlTooLong(ttl));
        }
        let millis = ttl.as_millis() as u64; // <= MAX_TTL, so it fits
        if millis == 0 {
            return Err(ConfigError::ZeroTtl);
        }
        if ttl < self.node_timeout * MIN_TTL_PER_NODE_TIMEOUT {
            return Err(ConfigError::TtlTooShort {
                ttl,
                node_timeout: self.node_timeout,
            });
        }
        Ok(millis)
    }

    /// The pause before a retry: the delay plus a random jitter of up to
    /// `retry_jitter` (none if the OS generator fails: jitter only spreads
    /// clients apart, it protects nothing).
    fn retry_pause(&self) -> Duration {
        let max = u64::try_from(self.retry_jitter.as_nanos()).unwrap_or(u64::MAX);
        let jitter = match max {
            0 => 0,
            max => getrandom::u64().unwrap_or(0) % max.saturating_add(1),
        };
        self.retry_delay
            .saturating_add(Duration::from_nanos(jitter))
    }

    /// One acquisition attempt: SET NX PX on the masters at once; on
    /// failure, release on every master that was sent the SET (it may have
    /// landed where the answer was late, or a refusal we did not wait for).
    fn acquire(&self, resource: &[u8], ttl: Duration) -> Result<Acquired, Error> {
        let ttl_ms = self.ttl_millis(ttl)?;
        let ttl = Duration::from_millis(ttl_ms); // what the servers were told
        let value = Value::random()?;
        let acquire = Command::Acquire {
            resource,
            value: value.as_bytes(),
            ttl_ms,
        };
        let mut session = self.take_session();
        let masters = self.masters();
        let start = Instant::now();
        let all = NodeSet::all(self.nodes.len());
        let tally = session.run(masters, acquire, self.node_timeout, all);
        let elapsed = start.elapsed();
        let error = match tally.decision() {
            // Keys were set no earlier than `start`, so a quorum of them
            // lives until at least `start + ttl`, less the drift. The lock
            // keeps its session, so that its release and extensions follow
            // its SET on the same connections (see `Lock`).
            Decision::Reached if validity(ttl, elapsed).is_some() => {
                let mut name = std::mem::take(&mut session.name);
                name.extend_from_slice(resource);
                return Ok(Acquired {
                    resource: name,
                    value,
                    valid_until: start + ttl.saturating_sub(drift(ttl)),
                    holders: session.sent(),
                    session,
                });
            }
            Decision::Reached => Error::TooSlow { elapsed, ttl },
            _ => self.classify_failure(&tally, &session),
        };
        let release = Command::Release {
            resource,
            value: value.as_bytes(),
        };
        let sent = session.sent();
        session.send_only(masters, release, self.node_timeout, sent);
        self.give_back(session);
        Err(error)
    }

    /// The error for an acquisition round that could not reach a quorum.
    fn classify_failure(&self, tally: &Tally, session: &Session) -> Error {
        let report = session.report(&self.nodes);
        if tally.failures_prevent_quorum() {
            Error::NoQuorum(report)
        } else {
            Error::Contended(report)
        }
    }

    /// The error for an extend or unlock round that could not reach a quorum.
    fn classify_loss(&self, tally: &Tally, session: &Session) -> Error {
        let report = session.report(&self.nodes);
        if tally.refusals_prevent_quorum() {
            Error::LockLost(report)
        } else {
            Error::NoQuorum(report)
        }
    }
}

impl Drop for Shared {
    /// The last handle is gone: let the connections finish what they were
    /// sent (at most one node timeout), then close them.
    fn drop(&mut self) {
        let timeout = self.node_timeout;
        let pool = self.pool.get_mut().unwrap_or_else(PoisonError::into_inner);
        for session in pool.iter_mut() {
            session.settle(timeout);
        }
    }
}

/// A held lock.
///
/// It is valid for [`Lock::validity`]; act on it only while that is
/// comfortably above zero. Dropping a `Lock` releases it (best effort,
/// blocking for at most the node timeout); call [`Lock::unlock`] to learn
/// whether the release succeeded.
///
/// A held lock keeps the connections its acquisition used (one per master)
/// until it is released, so that its release and extensions follow its SET
/// in order on every master: a thread that holds several locks at once uses
/// a set of connections for each.
#[must_use = "dropping a Lock releases it at once"]
pub struct Lock {
    shared: Arc<Shared>,
    resource: Vec<u8>,
    value: Value,
    valid_until: Instant,
    /// The masters that were sent the acquisition: only they can hold the
    /// key, so only they are sent the release and extensions.
    holders: NodeSet,
    extensions: u32,
    /// The connections the acquisition went out on, kept until the release:
    /// a master may not have run the SET yet when the call returned (the
    /// round ends at quorum), and Redis runs the commands of one connection
    /// in order, so a release on the same connection can never overtake
    /// its SET. `None` once released.
    session: Option<Session>,
}

impl fmt::Debug for Lock {
    // The value is left out: knowing it lets anyone release the lock.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.resource.escape_ascii().to_string())
            .field("validity", &self.validity())
            .field("extensions", &self.extensions)
            .finish_non_exhaustive()
    }
}

impl Lock {
    /// The locked resource name.
    pub fn resource(&self) -> &[u8] {
        &self.resource
    }

    /// How much longer the lock is valid, from a monotonic clock, now.
    /// Zero once it has expired.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// The monotonic instant at which the lock stops being valid.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Sets the lock's TTL to `ttl` from now on every master where it is
    /// still ours.
    ///
    /// Succeeds only if a quorum confirmed within the new validity, computed
    /// from the instant the call started, as for acquisition. On failure the
    /// lock is never deleted, but its validity may shrink: a master that did
    /// apply the new TTL may now expire sooner, so the validity becomes the
    /// earlier of the old one and the new one. Fails with
    /// [`Error::Expired`] without contacting the masters if the validity
    /// already ran out, [`Error::LockLost`] if the lock is gone on enough
    /// masters, [`Error::NoQuorum`], [`Error::TooSlow`],
    /// [`Error::ExtensionLimit`] or [`Error::Config`] for an invalid TTL.
    pub fn extend(&mut self, ttl: Duration) -> Result<(), Error> {
        let shared = Arc::clone(&self.shared);
        let ttl_ms = shared.ttl_millis(ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        if self.extensions >= shared.max_extensions {
            return Err(Error::ExtensionLimit(shared.max_extensions));
        }
        let start = Instant::now();
        if let Some(overrun) = start.checked_duration_since(self.valid_until) {
            return Err(Error::Expired { overrun });
        }
        let extend = Command::Extend {
            resource: &self.resource,
            value: self.value.as_bytes(),
            ttl_ms,
        };
        // Only `unlock` (which consumes the lock) and `drop` take the
        // session, so a lock one can call `extend` on always has it.
        let Some(session) = self.session.as_mut() else {
            return Err(Error::Expired {
                overrun: Duration::ZERO,
            });
        };
        let tally = session.run(shared.masters(), extend, shared.node_timeout, self.holders);
        let elapsed = start.elapsed();
        let result = match tally.decision() {
            Decision::Reached if validity(ttl, elapsed).is_some() => Ok(()),
            Decision::Reached => Err(Error::TooSlow { elapsed, ttl }),
            _ => Err(shared.classify_loss(&tally, session)),
        };
        let new_end = start + ttl.saturating_sub(drift(ttl));
        match result {
            Ok(()) => {
                self.valid_until = new_end;
                self.extensions += 1;
            }
            Err(_) => self.valid_until = self.valid_until.min(new_end),
        }
        result
    }

    /// Releases the lock on every master (compare-and-delete: only where the
    /// key still holds this lock's value), in one round, without retries.
    ///
    /// Returns [`Error::Expired`] if the validity had already run out (the
    /// release is still sent), [`Error::LockLost`] if enough masters no
    /// longer held it, or [`Error::NoQuorum`] if too many could not be
    /// reached (their keys expire with the TTL).
    pub fn unlock(mut self) -> Result<(), Error> {
        let expired = Instant::now().checked_duration_since(self.valid_until);
        let released = self.release();
        match expired {
            Some(overrun) => Err(Error::Expired { overrun }),
            None => released,
        }
    }

    /// Releases on the lock's own session, then returns the session to the
    /// pool. Does nothing if already released.
    fn release(&mut self) -> Result<(), Error> {
        let Some(mut session) = self.session.take() else {
            return Ok(());
        };
        let release = Command::Release {
            resource: &self.resource,
            value: self.value.as_bytes(),
        };
        let shared = &self.shared;
        let tally = session.run(shared.masters(), release, shared.node_timeout, self.holders);
        let result = match tally.decision() {
            Decision::Reached => Ok(()),
            _ => Err(shared.classify_loss(&tally, &session)),
        };
        // The name buffer goes back with the session, for its next lock.
        let mut name = std::mem::take(&mut self.resource);
        name.clear();
        name.shrink_to(KEPT_NAME_CAPACITY);
        session.name = name;
        shared.give_back(session);
        result
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Best effort: the keys expire with the TTL anyway.
        let _ = self.release();
    }
}

// The promises the API makes, checked at compile time.
const _: () = {
    const fn shared_across_threads<T: Clone + Send + Sync + 'static>() {}
    const fn sent_across_threads<T: Send + 'static>() {}
    shared_across_threads::<Redlock>();
    sent_across_threads::<Lock>();
};

#[cfg(test)]
mod tests {
    use super::*;

    fn client(jitter: Duration) -> Redlock {
        Redlock::builder()
            .nodes(["redis://127.0.0.1:1"])
            .retry_delay(Duration::from_millis(5))
            .retry_jitter(jitter)
            .build()
            .expect("valid configuration")
    }

    #[test]
    fn retry_pause_is_the_delay_plus_bounded_jitter() {
        let redlock = client(Duration::from_millis(3));
        for _ in 0..200 {
            let pause = redlock.shared.retry_pause();
            assert!(pause >= Duration::from_millis(5) && pause <= Duration::from_millis(8));
        }
        assert_eq!(
            client(Duration::ZERO).shared.retry_pause(),
            Duration::from_millis(5)
        );
        // Absurd settings saturate instead of overflowing.
        assert!(client(Duration::MAX).shared.retry_pause() >= Duration::from_millis(5));
    }

    #[test]
    fn ttl_is_checked_and_rounded_down_to_milliseconds() {
        let redlock = client(Duration::ZERO); // node timeout 50 ms
        let shared = &redlock.shared;
        assert_eq!(shared.ttl_millis(Duration::from_micros(500_999)), Ok(500));
        assert_eq!(
            shared.ttl_millis(Duration::from_micros(999)),
            Err(ConfigError::ZeroTtl)
        );
        assert!(matches!(
            shared.ttl_millis(Duration::from_millis(499)),
            Err(ConfigError::TtlTooShort { .. })
        ));
        assert_eq!(shared.ttl_millis(MAX_TTL), Ok(MAX_TTL.as_millis() as u64));
    }
}
