//! The blocking API's entry points: [`Builder`] and [`Redlock`], and the
//! acquisition round they run.

use crate::clock::BootInstant;
use crate::command::Command;
use crate::conn::{redact, Node};
use crate::error::{ConfigError, Error, NodeReport};
use crate::lock::Lock;
use crate::notify::message::Message;
use crate::notify::{name_order, queue_master, Notices};
use crate::os;
use crate::pool::{Pool, Ticket};
use crate::quorum::{drift, quorum, validity, Decision, NodeSet, Rule, Tally};
use crate::renew::Renewer;
use crate::round::{lag_limit, Masters, NodeHealth, NodeState, Plan};
use crate::value::Value;
use crate::wait::acquire_within;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
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

/// Default number of idle sessions (one connection to each master) kept for
/// reuse: one per thread that used the client concurrently, up to this many.
pub const DEFAULT_MAX_IDLE_CONNECTIONS: usize = 16;

/// The shortest TTL accepted: anything shorter is used up by the allowance
/// for clock drift (TTL/100 + 2 ms) and could never give a valid lock.
pub const MIN_TTL: Duration = Duration::from_millis(3);

/// The longest TTL accepted (one year).
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The most masters one client can use (Redlock deployments use 3 to 7).
pub const MAX_NODES: usize = 64;

/// The longest node timeout accepted (one minute).
pub const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(60);

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
    lock_wait: Option<Duration>,
    release_notices: bool,
    #[cfg(feature = "tls")]
    tls: crate::conn::TlsOptions,
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
            lock_wait: None,
            release_notices: true,
            #[cfg(feature = "tls")]
            tls: crate::conn::TlsOptions::default(),
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        let mut s = f.debug_struct("Builder");
        s.field("urls", &urls)
            .field("node_timeout", &self.node_timeout)
            .field("retry_count", &self.retry_count)
            .field("retry_delay", &self.retry_delay)
            .field("retry_jitter", &self.retry_jitter)
            .field("max_extensions", &self.max_extensions)
            .field("max_idle_connections", &self.max_idle_connections)
            .field("lock_wait", &self.lock_wait)
            .field("release_notices", &self.release_notices);
        // Hand-written Debug of its own: the client key is never shown.
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls);
        s.finish()
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

    /// How long each master has to answer in one round (connecting
    /// included), [`DEFAULT_NODE_TIMEOUT`] by default; at most
    /// [`MAX_NODE_TIMEOUT`]. A master that misses it counts as failed for
    /// that round; the others are never held up by it. A round that sets or
    /// extends a key also ends once what the TTL leaves is used up, since a
    /// later quorum could give no validity.
    ///
    /// An acquisition first goes to the masters that have answered all our
    /// earlier commands, when they are enough for a quorum; one still
    /// undecided after a tenth of its time also asks the others, as soon
    /// as they have caught up.
    pub fn node_timeout(mut self, timeout: Duration) -> Builder {
        self.node_timeout = timeout;
        self
    }

    /// Sets [`Redlock::lock`]'s wait for a held lock, unless
    /// [`Builder::lock_wait`] sets it: `retry_count` times the fallback pause
    /// (`retry_delay` + `retry_jitter`), 0.9 s with the defaults. 0 means a
    /// single attempt. ([`DEFAULT_RETRY_COUNT`].)
    pub fn retry_count(mut self, retries: u32) -> Builder {
        self.retry_count = retries;
        self
    }

    /// The fallback pause between attempts while waiting for a held lock,
    /// before jitter ([`DEFAULT_RETRY_DELAY`]): a waiter tries again after
    /// it when no release notice wakes it sooner (notices lost, refused by
    /// an ACL, or a lock that expired instead of being released). Also the
    /// pause before retrying a failure that may pass (no quorum). Any
    /// length is accepted: one that outlasts the wait (up to
    /// `Duration::MAX`) means that only a release heard starts a try.
    pub fn retry_delay(mut self, delay: Duration) -> Builder {
        self.retry_delay = delay;
        self
    }

    /// The upper bound of the random time added to each fallback pause
    /// ([`DEFAULT_RETRY_JITTER`]), so that competing clients fall out of
    /// step.
    pub fn retry_jitter(mut self, jitter: Duration) -> Builder {
        self.retry_jitter = jitter;
        self
    }

    /// How long [`Redlock::lock`] waits for a held lock (and retries
    /// failures that may pass) before it gives up. Without this,
    /// `retry_count` fallback pauses. `Duration::ZERO` makes one attempt.
    pub fn lock_wait(mut self, wait: Duration) -> Builder {
        self.lock_wait = Some(wait);
        self
    }

    /// Whether releases publish a notice for waiting clients, and waiting
    /// listens for them (default: yes). Off, a waiter tries again only
    /// after each fallback pause. A notice costs each master a `PUBLISH`
    /// inside the release script, about 0.8 µs of server time when nobody
    /// listens.
    pub fn release_notices(mut self, enabled: bool) -> Builder {
        self.release_notices = enabled;
        self
    }

    /// How many times one [`Lock`] may be extended
    /// ([`DEFAULT_MAX_EXTENSIONS`]); further calls fail with
    /// [`Error::ExtensionLimit`].
    pub fn max_extensions(mut self, limit: u32) -> Builder {
        self.max_extensions = limit;
        self
    }

    /// How many idle sessions (one connection to each master) are kept for
    /// reuse ([`DEFAULT_MAX_IDLE_CONNECTIONS`]). Each call in progress uses
    /// one; a held lock uses none. Beyond this many, a session is closed
    /// after its call once it owes no replies (checked without waiting).
    pub fn max_idle_connections(mut self, max: usize) -> Builder {
        self.max_idle_connections = max;
        self
    }

    /// Trusts the CA certificate(s) in `pem` (one or more PEM
    /// `CERTIFICATE` blocks) for `rediss://` masters. Adds to any given
    /// before. The PEM is checked by [`Builder::build`].
    ///
    /// Every `rediss://` master's certificate must chain to a trusted CA
    /// and be valid now for the URL's host (its DNS name, or its IP
    /// address in the certificate's IP SANs). There is no way to turn
    /// verification off.
    ///
    /// ```no_run
    /// let ca = std::fs::read("/etc/redis/tls/ca.crt").expect("CA certificate");
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .nodes(["rediss://redis-1.internal:6380", "rediss://redis-2.internal:6380", "rediss://redis-3.internal:6380"])
    ///     .tls_root_ca_pem(ca)
    ///     .build()?;
    /// # drop(redlock);
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_ca_pem(mut self, pem: impl AsRef<[u8]>) -> Builder {
        self.tls.add_root_pem(pem.as_ref());
        self
    }

    /// Presents this client certificate (a PEM chain, leaf first) and
    /// private key (PEM: PKCS#8, PKCS#1 or SEC1) to `rediss://` masters
    /// that ask for one (mutual TLS: `tls-auth-clients yes`, the default of
    /// redis-server's TLS configuration). Replaces any given before. The
    /// key is never shown by `Debug` or in errors.
    #[cfg(feature = "tls")]
    pub fn tls_client_identity_pem(
        mut self,
        cert_chain_pem: impl AsRef<[u8]>,
        private_key_pem: impl AsRef<[u8]>,
    ) -> Builder {
        self.tls
            .set_identity(cert_chain_pem.as_ref(), private_key_pem.as_ref());
        self
    }

    /// Also trusts the public web PKI's roots (Mozilla's list, compiled in
    /// with the feature `tls-webpki-roots`): for managed services whose
    /// certificates a public CA issues.
    #[cfg(feature = "tls-webpki-roots")]
    pub fn tls_webpki_roots(mut self) -> Builder {
        self.tls.use_webpki_roots();
        self
    }

    /// Also trusts the platform's certificate store (feature
    /// `tls-native-roots`), read once by [`Builder::build`], which fails if
    /// it finds no usable certificate there.
    #[cfg(feature = "tls-native-roots")]
    pub fn tls_native_roots(mut self) -> Builder {
        self.tls.use_native_roots();
        self
    }

    /// Checks the configuration, parses the URLs and resolves host names.
    /// No connection is made: connections are opened by the first round
    /// that needs them.
    ///
    /// Fails with [`Error::Config`] for no nodes, more than [`MAX_NODES`], a
    /// URL that does not parse or resolve, two URLs that lead to the same
    /// server, or a node timeout that is zero or above
    /// [`MAX_NODE_TIMEOUT`]. For TLS: a `rediss://` URL in a build without
    /// the feature `tls`, `rediss://` URLs with no trusted CA, `redis://`
    /// and `rediss://` URLs mixed, TLS settings with no `rediss://` URL,
    /// and PEM that does not parse.
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
        #[allow(unused_mut)] // without the feature `tls`
        let mut nodes = nodes;
        let secure = nodes.iter().filter(|n| n.is_secure()).count();
        if secure > 0 && secure < nodes.len() {
            return Err(ConfigError::MixedSchemes.into());
        }
        #[cfg(feature = "tls")]
        {
            if secure == 0 && self.tls.is_set() {
                return Err(ConfigError::TlsUnused.into());
            }
            if secure > 0 {
                let config = self.tls.client_config()?;
                for target in nodes.iter_mut().filter_map(|n| n.tls.as_mut()) {
                    target.configure(&config);
                }
            }
        }
        let mut seen = HashSet::new();
        for node in &nodes {
            if !seen.insert(node.addr) {
                return Err(ConfigError::DuplicateNode(node.name.clone()).into());
            }
        }
        // Without this, a forked child could not tell its parent's
        // connections from its own. It fails only without memory.
        os::watch_forks().map_err(Error::System)?;
        let epoch = Instant::now();
        let lock_wait = self.lock_wait.unwrap_or_else(|| {
            self.retry_delay
                .saturating_add(self.retry_jitter)
                .saturating_mul(self.retry_count)
        });
        Ok(Redlock {
            shared: Arc::new(Shared {
                states: nodes.iter().map(|_| NodeState::new(epoch)).collect(),
                pool: Pool::new(nodes.len(), self.max_idle_connections),
                notices: Notices::new(nodes.len()).map_err(Error::System)?,
                release_notices: self.release_notices,
                name_order: name_order(&nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>()),
                lock_wait,
                nodes,
                node_timeout: self.node_timeout,
                retry_count: self.retry_count,
                retry_delay: self.retry_delay,
                retry_jitter: self.retry_jitter,
                max_extensions: self.max_extensions,
                renewer: Renewer::new(),
            }),
        })
    }
}

/// A Redlock client over N independent Redis masters.
///
/// Cheap to clone (a shared handle) and safe to use from many threads at
/// once: each call runs on its own connections, taken from a pool.
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
    pub(crate) shared: Arc<Shared>,
}

/// What every clone of a [`Redlock`] and every [`Lock`] shares.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Node>,
    pub(crate) states: Vec<NodeState>,
    pub(crate) node_timeout: Duration,
    /// How long `lock` waits for a held lock.
    lock_wait: Duration,
    /// Whether releases publish notices and waiters listen for them.
    pub(crate) release_notices: bool,
    pub(crate) notices: Notices,
    /// The masters by name (see `notify::name_order`).
    name_order: Vec<usize>,
    retry_count: u32,
    retry_delay: Duration,
    retry_jitter: Duration,
    pub(crate) max_extensions: u32,
    pub(crate) pool: Pool,
    /// Renews the handle's leases (see `renew`).
    pub(crate) renewer: Renewer,
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
            .field("lock_wait", &s.lock_wait)
            .field("release_notices", &s.release_notices)
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

    /// Acquires `resource` for `ttl`, waiting while it is held by someone
    /// else (and retrying failures that may pass, such as a missing
    /// quorum) for at most the configured wait ([`Builder::lock_wait`];
    /// by default `retry_count` fallback pauses, 0.9 s). It waits the way
    /// [`Redlock::try_lock_for`] does: woken by the release.
    ///
    /// The returned lock is valid for [`Lock::validity`]: the TTL minus the
    /// time the acquisition took and an allowance for clock drift. Fails
    /// with the last attempt's error: [`Error::Contended`] if the lock is
    /// still held, [`Error::NoQuorum`] or [`Error::TooSlow`]; at once,
    /// without retrying, for an error that retrying cannot fix (see
    /// [`Error::is_retryable`]: rejected credentials, say); and before any
    /// I/O with [`Error::Config`] for a TTL below [`MIN_TTL`] or above
    /// [`MAX_TTL`].
    #[must_use = "dropping the Lock releases it at once"]
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let shared = &self.shared;
        acquire_within(shared, resource.as_ref(), ttl, shared.lock_wait)
            .map(|acquired| Lock::new(shared, acquired))
    }

    /// Acquires `resource` for `ttl`, waiting at most `wait` while it is
    /// held by others: `Ok(None)` if it is still held when `wait` runs out.
    ///
    /// While it waits, the thread sleeps until a release of the lock is
    /// announced by any master (releases publish a notice; see
    /// [`Builder::release_notices`]) and then tries at once, so the next
    /// holder starts within a few round trips of the release. A fallback
    /// pause (`retry_delay` plus random `retry_jitter`) covers notices that
    /// do not come. A failure that may pass (no quorum, a round too slow) is
    /// retried within `wait`, on the next release heard or after the
    /// fallback pause; when `wait` runs out it is returned as the error.
    /// Errors that retrying cannot fix are returned at once. `wait` of zero
    /// is one attempt, as [`Redlock::try_lock`].
    ///
    /// Waiting is not fair: a thread that arrives later may get the lock
    /// first.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.try_lock_for("orders:42", Duration::from_secs(10), Duration::from_secs(2))? {
    ///     Some(lock) => lock.unlock()?,
    ///     None => println!("still held after 2 s"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    #[must_use = "dropping the Lock releases it at once"]
    pub fn try_lock_for(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Lock>, Error> {
        let shared = &self.shared;
        match acquire_within(shared, resource.as_ref(), ttl, wait) {
            Ok(acquired) => Ok(Some(Lock::new(shared, acquired))),
            Err(Error::Contended(_)) => Ok(None),
            Err(e) => Err(e),
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
    #[must_use = "dropping the Lock releases it at once"]
    pub fn try_lock(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<Option<Lock>, Error> {
        match self.shared.acquire(resource.as_ref(), ttl) {
            Ok(lock) => Ok(Some(Lock::new(&self.shared, lock))),
            Err(Error::Contended(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `work` while holding `resource`: acquires it as
    /// [`Redlock::lock`] does (waiting for it), keeps it renewed for at
    /// most `max_hold` (see [`Lock::keep_alive`]), and releases it when
    /// `work` returns or panics (the panic then continues). `work` gets the
    /// [`Lease`](crate::Lease): check it before each step that must happen
    /// under the lock.
    ///
    /// Returns what `work` returned, or the error that kept the lock from
    /// being taken. The release at the end is best effort, as dropping a
    /// lock: if it fails, the key expires with its TTL, and `work`'s result
    /// is returned all the same.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let (ttl, max_hold) = (Duration::from_secs(10), Duration::from_secs(300));
    /// let rows = redlock.with_lock("report:daily", ttl, max_hold, |lease| {
    ///     let mut rows = 0;
    ///     while rows < 1000 && lease.check().is_ok() {
    ///         rows += 1; // one step of the work
    ///     }
    ///     rows
    /// })?;
    /// println!("{rows} rows");
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn with_lock<R>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        max_hold: Duration,
        work: impl FnOnce(&crate::Lease) -> R,
    ) -> Result<R, Error> {
        let lease = self.lock(resource, ttl)?.keep_alive(max_hold)?;
        // Dropped, and so released, also if `work` panics.
        let result = work(&lease);
        let _ = lease.unlock();
        Ok(result)
    }

    /// Runs one round of `PING` on every master (connecting where needed)
    /// and reports what each did, waiting for every answer up to the node
    /// timeout. `Ok` if a quorum answered (locks can be taken), otherwise
    /// [`Error::NoQuorum`] with the same report. The round also refreshes
    /// [`Redlock::health`].
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// match redlock.ping() {
    ///     Ok(report) if report.iter().all(|s| s.outcome() == &redlock_sync::NodeOutcome::Agreed) => {}
    ///     Ok(report) => eprintln!("degraded, still a quorum: {report}"),
    ///     Err(e) => eprintln!("locking is unavailable: {e}"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn ping(&self) -> Result<NodeReport, Error> {
        let shared = &self.shared;
        let mut session = shared.pool.take();
        let plan = Plan {
            command: Command::Ping,
            to: NodeSet::all(shared.nodes.len()),
            others: None,
            rule: Rule::Everyone,
            deadline: Instant::now() + shared.node_timeout,
            despite_backoff: true,
            skip: NodeSet::EMPTY,
            unawaited: false,
        };
        let tally = session.run(shared.masters(), plan);
        let report = session.report(&shared.nodes);
        shared.pool.give_back(session);
        match tally.decision(Rule::Everyone) {
            Decision::Reached => Ok(report),
            _ => Err(Error::NoQuorum(report)),
        }
    }

    /// What this handle (all its clones and threads) knows of each master,
    /// in the configured order: failures in a row, the last failure and
    /// when, when it last answered and how fast, and whether it refused
    /// release notices to a waiting thread. Reads counters the rounds keep
    /// anyway; makes no round.
    pub fn health(&self) -> Vec<NodeHealth> {
        let now = Instant::now();
        let refusals = self.shared.notices.refusals();
        self.shared
            .nodes
            .iter()
            .zip(&self.shared.states)
            .zip(refusals)
            .map(|((node, state), refused)| {
                state
                    .snapshot(&node.name, now)
                    .with_notices_refused(refused)
            })
            .collect()
    }
}

/// An acquisition that succeeded, before it is wrapped in a [`Lock`].
pub(crate) struct Acquired {
    pub(crate) resource: Vec<u8>,
    pub(crate) value: Value,
    /// When the acquisition started, and the TTL it set.
    pub(crate) started: BootInstant,
    pub(crate) ttl: Duration,
    pub(crate) valid_until: BootInstant,
    /// The masters that were sent the SET.
    pub(crate) holders: NodeSet,
    /// The masters that answered yes.
    pub(crate) agreed: NodeSet,
    pub(crate) ticket: Ticket,
}

impl Shared {
    /// The masters, for a round. Every call of the handle that talks to
    /// them (each lock, unlock, extension, ping and lease renewal) starts
    /// here, so this is also where channels that lingered past their time
    /// are unsubscribed (see `notify`): one atomic load when none is due.
    pub(crate) fn masters(&self) -> Masters<'_> {
        self.notices.tidy(&self.nodes);
        Masters {
            nodes: &self.nodes,
            states: &self.states,
            lag_limit: lag_limit(self.node_timeout),
        }
    }

    /// The TTL in whole milliseconds (as sent with PX), checked against the
    /// limits.
    pub(crate) fn ttl_millis(&self, ttl: Duration) -> Result<u64, ConfigError> {
        if ttl > MAX_TTL {
            return Err(ConfigError::TtlTooLong(ttl));
        }
        if ttl < MIN_TTL {
            return Err(ConfigError::TtlTooShort(ttl));
        }
        Ok(ttl.as_millis() as u64) // <= MAX_TTL, so it fits
    }

    /// How long a round that sets or extends keys with `ttl` may take: the
    /// node timeout, or less if that is all the TTL leaves (a quorum
    /// reached later would leave no validity).
    pub(crate) fn round_budget(&self, ttl: Duration) -> Duration {
        self.node_timeout
            .min(ttl.saturating_sub(drift(ttl)))
            .max(Duration::from_millis(1))
    }

    /// The pause before a retry: the delay plus a random jitter of up to
    /// `retry_jitter` (none if the OS generator fails: jitter only spreads
    /// clients apart, it protects nothing).
    pub(crate) fn retry_pause(&self) -> Duration {
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
    pub(crate) fn acquire(&self, resource: &[u8], ttl: Duration) -> Result<Acquired, Error> {
        let ttl_ms = self.ttl_millis(ttl)?;
        let ttl = Duration::from_millis(ttl_ms); // what the servers were told
        let value = Value::random()?;
        let mut session = self.pool.take();
        let masters = self.masters();
        let boot_start = BootInstant::now();
        let plan = Plan {
            command: Command::Acquire {
                resource,
                value: value.as_bytes(),
                ttl_ms,
            },
            to: NodeSet::all(self.nodes.len()),
            others: None,
            rule: Rule::Acquire,
            deadline: Instant::now() + self.round_budget(ttl),
            despite_backoff: false,
            skip: NodeSet::EMPTY,
            unawaited: false,
        };
        let round_deadline = plan.deadline;
        let tally = session.run(masters, plan);
        let elapsed = BootInstant::now().saturating_since(boot_start);
        let error = match tally.decision(Rule::Acquire) {
            // Keys were set no earlier than the start, so a quorum of them
            // lives until at least `start + ttl`, less the drift.
            Decision::Reached if validity(ttl, elapsed).is_some() => {
                let mut name = std::mem::take(&mut session.name);
                name.extend_from_slice(resource);
                let holders = session.sent();
                let acquired = Acquired {
                    resource: name,
                    value,
                    started: boot_start,
                    ttl,
                    valid_until: boot_start.saturating_add(ttl.saturating_sub(drift(ttl))),
                    holders,
                    agreed: session.agreed(),
                    ticket: Ticket {
                        progress: Arc::clone(session.progress()),
                        tag: session.last_tags().0,
                        masters: holders,
                    },
                };
                self.pool.give_back(session);
                return Ok(acquired);
            }
            Decision::Reached => Error::TooSlow { elapsed, ttl },
            _ => self.classify_failure(&tally, &session.report(&self.nodes)),
        };
        let release = Plan {
            command: Command::Release {
                resource,
                value: value.as_bytes(),
                notify: None,
            },
            // A master that refused the SET did not set our key.
            to: session.sent().difference(session.declined()),
            others: None,
            rule: Rule::Release,
            deadline: Instant::now() + self.node_timeout,
            despite_backoff: true,
            skip: NodeSet::EMPTY,
            unawaited: true,
        };
        session.send_only(masters, release, round_deadline);
        self.pool.give_back(session);
        Err(error)
    }

    /// Publishes `message` on `channel` on master `master` without waiting
    /// for the answer (see `notify`): a waiter's word to the others, which
    /// may be lost without harm.
    pub(crate) fn announce(&self, master: usize, channel: &[u8], message: Message) {
        let (payload, len) = message.encode();
        let mut session = self.pool.take();
        let mut to = NodeSet::EMPTY;
        to.insert(master);
        let deadline = Instant::now() + self.node_timeout;
        let plan = Plan {
            command: Command::Publish {
                channel,
                message: &payload[..len],
            },
            to,
            others: None,
            rule: Rule::Everyone,
            deadline,
            despite_backoff: false,
            skip: NodeSet::EMPTY,
            unawaited: true,
        };
        session.send_only(self.masters(), plan, deadline);
        self.pool.give_back(session);
    }

    /// The master whose messages order `resource`'s waiters (see `notify`).
    pub(crate) fn queue_master(&self, resource: &[u8]) -> usize {
        queue_master(resource, &self.name_order)
    }

    /// The error for an acquisition round that could not reach a quorum.
    fn classify_failure(&self, tally: &Tally, report: &NodeReport) -> Error {
        if tally.failures_prevent_quorum() {
            Error::NoQuorum(report.clone())
        } else {
            Error::Contended(report.clone())
        }
    }
}

impl Drop for Shared {
    /// The last handle is gone: let the connections finish what they were
    /// sent (at most one node timeout in all), then close them.
    fn drop(&mut self) {
        self.pool.close_all(self.node_timeout);
    }
}

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
        assert_eq!(shared.ttl_millis(Duration::from_millis(3)), Ok(3));
        for short in [Duration::ZERO, Duration::from_micros(2_999)] {
            assert_eq!(
                shared.ttl_millis(short),
                Err(ConfigError::TtlTooShort(short))
            );
        }
        assert_eq!(shared.ttl_millis(MAX_TTL), Ok(MAX_TTL.as_millis() as u64));
        // The shortest TTL still leaves some validity.
        assert!(validity(MIN_TTL, Duration::ZERO).is_some());
        assert!(validity(Duration::from_millis(2), Duration::ZERO).is_none());
    }

    #[test]
    fn a_round_never_outlasts_what_the_ttl_leaves() {
        let redlock = client(Duration::ZERO); // node timeout 50 ms
        let shared = &redlock.shared;
        assert_eq!(
            shared.round_budget(Duration::from_secs(10)),
            Duration::from_millis(50)
        );
        // 30 ms - (0.3 ms + 2 ms) of drift
        assert_eq!(
            shared.round_budget(Duration::from_millis(30)),
            Duration::from_micros(27_700)
        );
    }
}
