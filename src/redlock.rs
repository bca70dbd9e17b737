//! The blocking API's entry points: [`Builder`] and [`Redlock`]; the calls
//! that wait as the caller says, and the shutdown that ends waits, are in
//! `waiting`.

use crate::command::Command;
use crate::error::{Error, NodeReport};
use crate::events::tell::Hook;
use crate::events::HandleEvent;
use crate::handle::config::Settings;
use crate::handle::Shared;
use crate::lock::acquire::acquire;
use crate::lock::inspect::{inspect, Inspection};
use crate::lock::lease::Lease;
use crate::lock::wait::{acquire_within, Wait};
use crate::lock::Lock;
use crate::quorum::{quorum, Decision, NodeSet, Rule};
use crate::round::{NodeHealth, Plan};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod waiting;

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
#[derive(Clone, Default)]
pub struct Builder {
    settings: Settings,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.settings.debug_as("Builder", f)
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
        self.settings
            .urls
            .extend(urls.into_iter().map(|u| u.as_ref().to_string()));
        self
    }

    /// How long each master has to answer in one round (connecting
    /// included), [`DEFAULT_NODE_TIMEOUT`](crate::DEFAULT_NODE_TIMEOUT) by default; at most
    /// [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT). A master that misses it counts as failed for
    /// that round; the others are never held up by it. A round that sets or
    /// extends a key also ends once what the TTL leaves is used up, since a
    /// later quorum could give no validity.
    ///
    /// An acquisition first goes to the masters that have answered all our
    /// earlier commands, when they are enough for a quorum; one still
    /// undecided after a tenth of its time also asks the others, as soon
    /// as they have caught up.
    pub fn node_timeout(mut self, timeout: Duration) -> Builder {
        self.settings.node_timeout = timeout;
        self
    }

    /// Sets [`Redlock::lock`]'s wait for a held lock, unless
    /// [`Builder::lock_wait`] sets it: `retry_count` times the fallback pause
    /// (`retry_delay` + `retry_jitter`), 0.9 s with the defaults. 0 means a
    /// single attempt. ([`DEFAULT_RETRY_COUNT`](crate::DEFAULT_RETRY_COUNT).)
    pub fn retry_count(mut self, retries: u32) -> Builder {
        self.settings.retry_count = retries;
        self
    }

    /// The fallback pause between attempts while waiting for a held lock,
    /// before jitter ([`DEFAULT_RETRY_DELAY`](crate::DEFAULT_RETRY_DELAY)): a waiter tries again after
    /// it when no release notice wakes it sooner (notices lost, refused by
    /// an ACL, or a lock that expired instead of being released). Also the
    /// pause before retrying a failure that may pass (no quorum). Any
    /// length is accepted: one that outlasts the wait (up to
    /// `Duration::MAX`) means that only a release heard starts a try.
    pub fn retry_delay(mut self, delay: Duration) -> Builder {
        self.settings.retry_delay = delay;
        self
    }

    /// The upper bound of the random time added to each fallback pause
    /// ([`DEFAULT_RETRY_JITTER`](crate::DEFAULT_RETRY_JITTER)), so that competing clients fall out of
    /// step.
    pub fn retry_jitter(mut self, jitter: Duration) -> Builder {
        self.settings.retry_jitter = jitter;
        self
    }

    /// How long [`Redlock::lock`] and [`Redlock::with_lock`] wait for a
    /// held lock (and retry failures that may pass) before they give up.
    /// Without this, `retry_count` fallback pauses. `Duration::ZERO` makes
    /// one attempt; `Duration::MAX` (any wait too long for the clock)
    /// waits without limit. A call can wait otherwise:
    /// [`Redlock::lock_waiting`], [`Redlock::try_lock_until`].
    pub fn lock_wait(mut self, wait: Duration) -> Builder {
        self.settings.lock_wait = Some(wait);
        self
    }

    /// Whether releases publish a notice for waiting clients, and waiting
    /// listens for them (default: yes). Off, a waiter tries again only
    /// after each fallback pause. A notice costs each master a `PUBLISH`
    /// inside the release script, about 0.8 µs of server time when nobody
    /// listens.
    pub fn release_notices(mut self, enabled: bool) -> Builder {
        self.settings.release_notices = enabled;
        self
    }

    /// Fencing tokens: every lock this handle takes, by any entry point,
    /// carries a token ([`Lock::fence_token`], [`Lease::fence_token`]),
    /// unique per resource and rising with the holders' turns across the N
    /// masters, for the protected resource to check (see the README's
    /// "Fencing tokens" and `docs/fencing.md`). Default: off.
    ///
    /// A lock is returned only with its token final: when it cannot be
    /// made final, the acquisition releases what it set and fails
    /// ([`Error::FenceUnavailable`], [`Error::FenceUnanchored`],
    /// [`Error::FenceExhausted`]). The fence domain must be initialised
    /// once per deployment with [`Redlock::fence_init`]; a master that
    /// lost its state is left out until [`Redlock::fence_repair`].
    ///
    /// Cost: the acquisition runs a script instead of `SET`, and a second
    /// round when the masters that granted it disagree on the counter
    /// (after lost races); each new connection probes the domain once.
    pub fn fencing(mut self, enabled: bool) -> Builder {
        self.settings.fencing = enabled;
        self
    }

    /// The fence domain of a fencing handle (`"default"` by default): one
    /// counter per domain per master (a hash `redlock-sync:fence:<domain>`)
    /// serves every resource the handle locks, so the counters' memory
    /// stays one small key whatever the number of resource names. Tokens
    /// are unique per resource, not across resources. A heavily contended
    /// resource can be given a domain of its own (each domain is
    /// initialised with [`Redlock::fence_init`]). Used only with
    /// [`Builder::fencing`].
    pub fn fence_domain(mut self, domain: impl AsRef<[u8]>) -> Builder {
        self.settings.fence_domain = domain.as_ref().to_vec();
        self
    }

    /// Whether Lua scripts may run on the masters (default: yes). Off, the
    /// client never sends one (nor loads one): it releases with `DELIFEQ`
    /// (Valkey 9.0+) or `DELEX … IFEQ` (Redis 8.4+), extends with `SET …
    /// IFEQ`, and announces releases with a `PUBLISH` behind them, so that
    /// an ACL user without any scripting right (`-@scripting`), or a
    /// server whose policy bans scripts, can lock, extend, release and
    /// wait. A master without those commands (or whose ACL user may not
    /// run them) is then never locked through: it fails with
    /// [`CannotRelease::NativeMissing`](crate::CannotRelease::NativeMissing),
    /// which names what it lacks. On, every master uses the native
    /// commands where it has them and the scripts elsewhere.
    pub fn allow_scripts(mut self, allowed: bool) -> Builder {
        self.settings.allow_scripts = allowed;
        self
    }

    /// Whether the masters' native compare-and-delete and compare-and-set
    /// commands are used where they have them (default: yes; see
    /// [`NodeHealth::release_form`](crate::NodeHealth::release_form)). Off,
    /// releases and extensions always run the scripts: to compare costs,
    /// say. Refused by [`Builder::build`] together with
    /// `allow_scripts(false)`.
    pub fn native_commands(mut self, enabled: bool) -> Builder {
        self.settings.native_commands = enabled;
        self
    }

    /// How many times one [`Lock`] may be extended
    /// ([`DEFAULT_MAX_EXTENSIONS`](crate::DEFAULT_MAX_EXTENSIONS)); further calls fail with
    /// [`Error::ExtensionLimit`].
    pub fn max_extensions(mut self, limit: u32) -> Builder {
        self.settings.max_extensions = limit;
        self
    }

    /// How many idle sessions (one connection to each master) are kept for
    /// reuse ([`DEFAULT_MAX_IDLE_CONNECTIONS`](crate::DEFAULT_MAX_IDLE_CONNECTIONS)). Each call in progress uses
    /// one; a held lock uses none. Beyond this many, a session is closed
    /// after its call once it owes no replies (checked without waiting).
    pub fn max_idle_connections(mut self, max: usize) -> Builder {
        self.settings.max_idle_connections = max;
        self
    }

    /// Installs `hook`, which is then told what the handle does: each
    /// round's end (operation, resource, each master's answer, time,
    /// validity), each waiting call's progress (contended, woken by a
    /// notice or by the timer, gave up), each lease's life (renewed, a
    /// renewal failed, lost and why) and each master's change of state
    /// (down, back, missing a right). Replaces a hook given before.
    ///
    /// The events borrow what the handle has: installing a hook adds no
    /// allocation to locking. Each method runs on the thread that made the
    /// event, within the call: a hook must be quick, must not block and
    /// must not call back into this handle; a hook that panics is caught
    /// and the handle goes on (see [`HandleEvent`] for the details).
    ///
    /// ```no_run
    /// use redlock_sync::{HandleEvent, LeaseChange, LeaseEvent};
    ///
    /// struct Alarm;
    /// impl HandleEvent for Alarm {
    ///     fn handle_lease(&self, event: LeaseEvent<'_>) {
    ///         if let LeaseChange::Lost(error) = event.change() {
    ///             eprintln!("lost {}: {error}", event.resource().escape_ascii());
    ///         }
    ///     }
    /// }
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
    ///     .events(Alarm)
    ///     .build()?;
    /// # drop(redlock);
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn events(mut self, hook: impl HandleEvent) -> Builder {
        self.settings.events = Hook::new(Arc::new(hook));
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
        self.settings.tls.add_root_pem(pem.as_ref());
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
        self.settings
            .tls
            .set_identity(cert_chain_pem.as_ref(), private_key_pem.as_ref());
        self
    }

    /// Also trusts the public web PKI's roots (Mozilla's list, compiled in
    /// with the feature `tls-webpki-roots`): for managed services whose
    /// certificates a public CA issues.
    #[cfg(feature = "tls-webpki-roots")]
    pub fn tls_webpki_roots(mut self) -> Builder {
        self.settings.tls.use_webpki_roots();
        self
    }

    /// Also trusts the platform's certificate store (feature
    /// `tls-native-roots`), read once by [`Builder::build`], which fails if
    /// it finds no usable certificate there.
    #[cfg(feature = "tls-native-roots")]
    pub fn tls_native_roots(mut self) -> Builder {
        self.settings.tls.use_native_roots();
        self
    }

    /// Checks the configuration, parses the URLs and resolves host names.
    /// No connection is made: connections are opened by the first round
    /// that needs them.
    ///
    /// Fails with [`Error::Config`] for no nodes, more than [`MAX_NODES`](crate::MAX_NODES), a
    /// URL that does not parse or resolve, two URLs that lead to the same
    /// server, or a node timeout that is zero or above
    /// [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT). For TLS: a `rediss://` URL in a build without
    /// the feature `tls`, `rediss://` URLs with no trusted CA, `redis://`
    /// and `rediss://` URLs mixed, TLS settings with no `rediss://` URL,
    /// and PEM that does not parse.
    pub fn build(self) -> Result<Redlock, Error> {
        let config = self.settings.check()?;
        Ok(Redlock {
            shared: Arc::new(Shared::new(config)?),
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
            .field("allow_scripts", &s.allow_scripts)
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

    /// Whether Lua scripts may run on the masters (see
    /// [`Builder::allow_scripts`]).
    pub fn allows_scripts(&self) -> bool {
        self.shared.allow_scripts
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
    /// [`Error::is_retryable`]: rejected credentials, say); with
    /// [`Error::ShutDown`] once the handle is shut down
    /// ([`Redlock::shutdown`]); and before any I/O with [`Error::Config`]
    /// for an empty resource name, or a TTL below [`MIN_TTL`](crate::MIN_TTL) or above
    /// [`MAX_TTL`](crate::MAX_TTL).
    #[must_use = "dropping the Lock releases it at once"]
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock, Error> {
        let shared = &self.shared;
        acquire_within(shared, resource.as_ref(), ttl, Wait::For(shared.lock_wait))
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
    /// is one attempt, as [`Redlock::try_lock`]; `Duration::MAX` waits
    /// without limit (see [`Wait::NoLimit`]).
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
        none_if_held(self.lock_waiting(resource, ttl, Wait::For(wait)))
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
        none_if_held(
            acquire(&self.shared, resource.as_ref(), ttl)
                .map(|acquired| Lock::new(&self.shared, acquired)),
        )
    }

    /// Runs `work` while holding `resource`: acquires it as
    /// [`Redlock::lock`] does (waiting for it), keeps it renewed for at
    /// most `max_hold` (see [`Lock::keep_alive`]), and releases it when
    /// `work` returns or panics (the panic then continues). `work` gets the
    /// [`Lease`]: check it before each step that must happen
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
        work: impl FnOnce(&Lease) -> R,
    ) -> Result<R, Error> {
        let wait = Wait::For(self.shared.lock_wait);
        self.with_lock_waiting(resource, ttl, max_hold, wait, work)
    }

    /// Looks at `resource`'s lock without taking it: one round of `PTTL`
    /// on every master (waiting for each up to the node timeout), which
    /// says whether each holds the key and for how long. The lock's value
    /// is never read. See [`Inspection`] for what the answers mean.
    ///
    /// Fails with [`Error::NoQuorum`] (with what each master did) when
    /// fewer than a quorum answered: then nothing can be said. Before any
    /// I/O, with [`Error::Config`] for an empty resource name.
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let seen = redlock.inspect("orders:42")?;
    /// match seen.held_for() {
    ///     Some(left) => println!("held on a quorum for at least {left:?} more"),
    ///     None if seen.is_free() => println!("free"),
    ///     None => println!("neither held nor free on a quorum: {seen}"),
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn inspect(&self, resource: impl AsRef<[u8]>) -> Result<Inspection, Error> {
        inspect(&self.shared, resource.as_ref())
    }

    /// Runs one round of `PING` on every master (connecting where needed)
    /// and reports what each did, waiting for every answer up to the node
    /// timeout. `Ok` if a quorum answered (locks can be taken), otherwise
    /// [`Error::NoQuorum`] with the same report. The round also refreshes
    /// [`Redlock::health`].
    ///
    /// It dials every master it has no connection to, also one in its
    /// reconnect backoff, and one whose last failure was permanent (a
    /// refused password, a missing right): so the ping after the operator
    /// fixed a master sees it fixed.
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
        let all = NodeSet::all(shared.nodes.len());
        let plan = Plan::everyone(Command::Ping, all, Instant::now() + shared.node_timeout);
        let tally = session.run(shared.masters(), plan);
        let report = session.report(&shared.nodes);
        shared.pool.give_back(session);
        match tally.decision(Rule::Everyone) {
            Decision::Reached => Ok(report),
            _ => Err(Error::NoQuorum(report)),
        }
    }

    /// Initialises the handle's fence domain ([`Builder::fencing`]): every
    /// master must answer and have no anchor for it yet; each is then
    /// anchored with the counter `start` in a fresh epoch, recording its
    /// server run, so that tokens start at `start + 1`. A deployment step,
    /// run once per domain (by the operator or the deploying program),
    /// never by the library on its own: it cannot tell a new deployment
    /// from one whose masters all lost their state, where restarting the
    /// tokens would let them go back.
    ///
    /// `start`: 0 for a new deployment; after losing a majority of the
    /// masters' state (then delete the domain's hash on the survivors
    /// first), at least the largest token any protected resource accepted.
    ///
    /// Fails with [`Error::FenceInitRefused`] (nothing written) if a master
    /// did not answer or is already anchored, [`Error::NoQuorum`] if some
    /// anchors failed (those written are sources for
    /// [`Redlock::fence_repair`], which anchors the rest), and
    /// [`Error::Config`] on a handle that does not fence or for a `start`
    /// above 2^53. Returns what each master did.
    pub fn fence_init(&self, start: u64) -> Result<NodeReport, Error> {
        crate::lock::fence::operator::init(&self.shared, start)
    }

    /// Repairs the handle's fence domain after masters lost their state
    /// (a restart without persistence, `FLUSHALL`, an eviction) or
    /// restarted (a restart can roll a counter back): reads the counters
    /// of the masters still anchored by their current server run behind a
    /// barrier (a fresh epoch, which turns away acquisitions decided
    /// before it), and anchors the others with the largest. Safe at any
    /// time, also while locks are taken; concurrent repairs only cost
    /// availability. Until it runs, such masters are left out of fenced
    /// acquisitions (fail closed): locks keep working while a quorum
    /// counts, and fail with [`Error::FenceUnanchored`] otherwise.
    ///
    /// Fails with [`Error::NoQuorum`] if fewer than a quorum of masters
    /// are still anchored (nothing is anchored then: see
    /// [`Redlock::fence_init`] for losing a majority), and [`Error::Config`]
    /// on a handle that does not fence. Returns what each master did in the
    /// last step (the anchors, or the barrier when nothing needed one).
    pub fn fence_repair(&self) -> Result<NodeReport, Error> {
        crate::lock::fence::operator::repair(&self.shared)
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

/// An acquisition's result as the `try_` calls return it: `Ok(None)` for a
/// lock held by others.
fn none_if_held(result: Result<Lock, Error>) -> Result<Option<Lock>, Error> {
    match result {
        Ok(lock) => Ok(Some(lock)),
        Err(Error::Contended(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
