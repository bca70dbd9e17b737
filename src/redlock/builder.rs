//! `Builder`: every setting of a `Redlock`, checked by `build()`.

use super::Redlock;
use crate::conn::{Resolve, Resolver};
use crate::error::Error;
use crate::events::tell::Hook;
use crate::events::HandleEvent;
use crate::handle::config::{Settings, VoterUrls};
use crate::handle::Shared;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

impl Redlock {
    /// Starts configuring a client (kept beside [`Builder`](crate::Builder), so that the
    /// facade's two files do not name each other).
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// Configures and builds a [`Redlock`].
///
/// ```no_run
/// use std::time::Duration;
/// let redlock = redlock_sync::Redlock::builder()
///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .node_timeout(Duration::from_millis(20))
///     .lock_wait(Duration::from_secs(5))
///     .build()?;
/// assert_eq!(redlock.quorum(), 2);
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Builder {
    /// What was set (`pub(super)`: the settings for masters with replicas
    /// are in `replicas`).
    pub(super) settings: Settings,
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
    /// another). Host names are resolved by [`Builder::build`](crate::Builder::build),
    /// and again if the master may have moved (see [`Builder::resolver`]).
    pub fn nodes<I>(mut self, urls: I) -> Builder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.settings.voters.extend(
            urls.into_iter()
                .map(|u| VoterUrls::Node(u.as_ref().to_string())),
        );
        self
    }

    /// Adds one voter that is a whole Redis or Valkey Cluster, reached
    /// through `seeds`: URLs of any of its nodes, in the form of
    /// [`Builder::nodes`] (credentials, database and `rediss://` as for a
    /// standalone master; every node of the cluster is reached with the
    /// same ones). The voter casts one vote, whatever the number of its
    /// nodes: three independent clusters, or two clusters and a standalone
    /// master, are three voters. Each command goes to the master that owns
    /// its key's slot; the slot map is learnt from the cluster (no I/O
    /// here) and follows `MOVED` and `ASK` within a round.
    ///
    /// ```no_run
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .cluster(["redis://10.0.1.1:7000", "redis://10.0.1.2:7000"])
    ///     .cluster(["redis://10.0.2.1:7000", "redis://10.0.2.2:7000"])
    ///     .nodes(["redis://10.0.3.1:6379"])
    ///     .build()?;
    /// assert_eq!(redlock.quorum(), 2); // three voters
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn cluster<I>(mut self, seeds: I) -> Builder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.settings.voters.push(VoterUrls::Cluster(
            seeds.into_iter().map(|u| u.as_ref().to_string()).collect(),
        ));
        self
    }

    /// Redlock on the one cluster you run: the M masters of the cluster
    /// reached through `seeds` (URLs as for [`Builder::cluster`]) are M
    /// voters, as the Redlock articles' deployment of independent masters
    /// (at least 3; quorum `M/2 + 1`). Each voter's key of a lock carries
    /// a hash tag of a slot its master owned when the handle was built, so
    /// the keys of one lock live on M different masters. `build()` asks the
    /// cluster for its masters (the one setting that makes `build()` talk
    /// to a server, for at most the node timeout or 1 s): an unreachable
    /// cluster, or one of fewer than 3 masters, is
    /// [`ConfigError::TooFewShards`](crate::ConfigError::TooFewShards).
    ///
    /// What it gives and what it does not, against independent clusters:
    /// the masters of one cluster share its failure domain (its operators,
    /// its network, its configuration), and a shard's failover may lose a
    /// key its replica had not received, which counts against the quorum
    /// like a master restarted without persistence. After a resharding
    /// that puts two voters' slots on one master, that master votes once
    /// (the other voter's vote fails with
    /// [`NodeError::SharesMaster`](crate::NodeError::SharesMaster), and
    /// [`Redlock::health`](crate::Redlock::health) says so): rebuild the
    /// handle to spread the voters again.
    ///
    /// ```no_run
    /// let redlock = redlock_sync::Redlock::builder()
    ///     .cluster_shards(["redis://10.0.1.1:7000", "redis://10.0.1.2:7000"])
    ///     .build()?; // asks the cluster for its masters
    /// assert!(redlock.node_count() >= 3); // one voter per master
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn cluster_shards<I>(mut self, seeds: I) -> Builder
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.settings.voters.push(VoterUrls::Shards(
            seeds.into_iter().map(|u| u.as_ref().to_string()).collect(),
        ));
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

    /// Bounds [`Redlock::lock`]'s wait to `retries` fallback pauses
    /// (`retries` × (`retry_delay` + `retry_jitter`)), as it did before
    /// `lock` waited until it got the lock; 0 makes one attempt. Ignored
    /// when [`Builder::lock_wait`](crate::Builder::lock_wait) is given.
    /// Not set, `lock` waits without a time limit.
    #[deprecated(
        since = "0.2.0",
        note = "lock() waits until it gets the lock; bound the wait with Builder::lock_wait (Duration::ZERO: one attempt)"
    )]
    pub fn retry_count(mut self, retries: u32) -> Builder {
        self.settings.retry_count = Some(retries);
        self
    }

    /// The fallback pause between attempts while waiting for a held lock,
    /// before jitter ([`DEFAULT_RETRY_DELAY`](crate::DEFAULT_RETRY_DELAY)):
    /// a waiter tries again after it when nothing woke it sooner (release
    /// notices lost or refused by an ACL). Also the pause before retrying a
    /// failure that may pass (no quorum). A waiter that found the lock held
    /// sleeps no longer than the key has left to live (it asks the masters
    /// its `PTTL`), so a holder that crashed is replaced when its key
    /// expires, whatever this pause. Above zero and at most
    /// [`MAX_RETRY_DELAY`](crate::MAX_RETRY_DELAY) (one minute):
    /// [`Builder::build`](crate::Builder::build) refuses others with
    /// [`ConfigError::InvalidRetryDelay`](crate::ConfigError::InvalidRetryDelay).
    pub fn retry_delay(mut self, delay: Duration) -> Builder {
        self.settings.retry_delay = delay;
        self
    }

    /// The upper bound of the random time added to each fallback pause
    /// ([`DEFAULT_RETRY_JITTER`](crate::DEFAULT_RETRY_JITTER)), so that
    /// competing clients fall out of step. At most
    /// [`MAX_RETRY_DELAY`](crate::MAX_RETRY_DELAY)
    /// ([`ConfigError::InvalidRetryJitter`](crate::ConfigError::InvalidRetryJitter)).
    pub fn retry_jitter(mut self, jitter: Duration) -> Builder {
        self.settings.retry_jitter = jitter;
        self
    }

    /// Bounds how long [`Redlock::lock`] and [`Redlock::with_lock`] wait
    /// for a held lock (and retry failures that may pass) before they give
    /// up with [`Error::Contended`] (or the last failure), whose report
    /// says how long they waited. Not set, they wait until they get the
    /// lock, as `std::sync::Mutex::lock` does: ended only by
    /// [`Redlock::shutdown`], an error that retrying cannot fix, or masters
    /// out of reach for [`Builder::unreachable_limit`] in a row.
    /// `Duration::ZERO` makes one attempt; `Duration::MAX` (any wait too
    /// long for the clock) is no time limit. A call can wait otherwise:
    /// [`Redlock::try_lock_for`], [`Redlock::lock_waiting`],
    /// [`Redlock::try_lock_until`].
    pub fn lock_wait(mut self, wait: Duration) -> Builder {
        self.settings.lock_wait = Some(wait);
        self
    }

    /// How long a wait without a time limit ([`Redlock::lock`] and
    /// [`Redlock::with_lock`] without [`Builder::lock_wait`],
    /// [`Wait::NoLimit`](crate::Wait::NoLimit), `Duration::MAX`) goes on
    /// while no quorum of masters can be reached
    /// ([`DEFAULT_UNREACHABLE_LIMIT`](crate::DEFAULT_UNREACHABLE_LIMIT),
    /// 10 s): once tries have found no quorum for this long in a row, the
    /// wait ends with [`Error::NoQuorum`], whose report says so. A try that
    /// reaches a quorum (the lock held, say) starts the count again. Waits
    /// with a time limit retry unreachable masters until it ends.
    /// `Duration::MAX`: for as long as it takes; `Duration::ZERO`: the
    /// first try that finds no quorum ends the wait.
    pub fn unreachable_limit(mut self, limit: Duration) -> Builder {
        self.settings.unreachable_limit = limit;
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

    /// Whether this handle's waiters take turns (default: yes). Fair, a
    /// waiter announces itself on the resource's queue (one master chosen
    /// by the resource), and after a release only the first in the queue
    /// tries, the others a moment later if it does not: one acquisition
    /// round per handoff, waiters served in the order they came (see the
    /// guide's known limits, "Fairness").
    ///
    /// Off, this handle's waiters neither announce themselves nor look at
    /// the queue: each client tries at every release notice, as most
    /// Redlock clients' waiters do. The next holder then starts sooner
    /// after a release (the quickest of the waiters wins instead of the
    /// first in line), at the price of a round per waiting client per
    /// release, in which all but one fail, and no order: measured with four
    /// contenders (docs/performance.md), the handoff took about 0.8x the
    /// time and 2.6x the server commands. The threads of one handle still
    /// take turns among themselves. Fair waiters of other clients see
    /// these as barging in, like a client that does not wait.
    ///
    /// ```
    /// use redlock_sync::Redlock;
    ///
    /// // Latency over order: every waiting client races for the lock.
    /// let builder = Redlock::builder()
    ///     .nodes(["redis://127.0.0.1:6379"])
    ///     .fair_waiting(false);
    /// # let _ = builder;
    /// ```
    pub fn fair_waiting(mut self, fair: bool) -> Builder {
        self.settings.fair_waiting = fair;
        self
    }

    /// Group commit of concurrent acquisitions and releases (issue 35).
    /// Default: off, and off nothing changes.
    ///
    /// On, the threads of this handle that try to acquire a lock on one
    /// resource at the same moment ([`Redlock::try_lock`](crate::Redlock::try_lock),
    /// [`Redlock::lock`](crate::Redlock::lock)'s attempts, and the other calls of the
    /// single-resource API; not the set calls) share rounds: a thread that finds no
    /// acquisition of the handle in flight runs its own round as without
    /// the setting (no added system call or wait), and the threads that
    /// come while one is in flight queue; when it ends, the first of them
    /// runs every queued acquisition (up to 256) as one batch round, in
    /// which each master gets all their `SET`s in one write, each decided
    /// on its own. No thread is added.
    ///
    /// Releases ([`Lock::unlock`](crate::Lock::unlock), a lock's drop)
    /// join the same batches. A release never overtakes its lock's `SET`
    /// on a master that has not answered it: otherwise, or after a whole
    /// node timeout in the queue, its thread runs its own release round
    /// as without the setting (an unlock then takes up to about twice the
    /// node timeout). A release is never dropped.
    ///
    /// An acquisition's round budget (the node timeout, or less if the TTL
    /// leaves less) counts from when it is queued, not from when its batch
    /// is sent: one whose budget runs out while it waits in the queue fails
    /// with [`Error::QueueTimeout`](crate::Error::QueueTimeout), nothing
    /// sent. A batch ends by the earliest of its acquisitions' deadlines
    /// (so by each one's own), so a frozen master costs each of them at
    /// most its own deadline. One in a batch learns its result when the
    /// batch ends: an acquisition already decided may wait for another of
    /// the batch that still waits for a slow master. The validity of a
    /// lock taken in a batch counts from when it was queued.
    ///
    /// Only one round of the group is in flight at a time: a queued
    /// acquisition waits for the round in flight before its batch is sent,
    /// and that wait is taken from its budget; its batch then ends at the
    /// earliest deadline of its members. So with slow or remote masters,
    /// whose round trip is near the node timeout, acquisitions fail with
    /// this setting that would succeed without it (they run out of budget
    /// in the queue, or their batch's deadline passes before the slow
    /// masters answer). For example, with 30 ms added to each master's
    /// round trip, a 50 ms node timeout and 8 threads, 48 of 120
    /// acquisitions failed with it on and none off. Turn it on for masters
    /// that answer well within the node timeout.
    ///
    /// Not covered yet (they keep each call's own round): extensions
    /// and lease renewals, locks on several resources (and the set calls
    /// given one name), handles with [`fencing`](Builder::fencing), and
    /// handles with cluster voters.
    ///
    /// Seen from outside: a batch's round events are told by the thread
    /// that ran the batch, one per acquisition or release (so with the `tracing`
    /// feature they sit in that thread's call span, and that span's
    /// `masters_agreed` is the last acquisition's of the batch, not
    /// necessarily its own); a waiting call ([`Redlock::lock`](crate::Redlock::lock))
    /// that reaches its limit may end with `QueueTimeout` rather than
    /// `NoQuorum`; a thread that queued may see one spurious wake-up from
    /// `std::thread::park` after its call returned (as `park` allows).
    /// After a `fork`, the child never waits for the parent's session
    /// pool or group (it makes its own); other parts of the
    /// handle (a name's lookup, a new connection's handshake) can still
    /// wait for a lock a parent thread held at the fork, as without
    /// this setting.
    ///
    /// ```
    /// use redlock_sync::Redlock;
    ///
    /// // Many worker threads share this handle, each locking per request.
    /// let builder = Redlock::builder()
    ///     .nodes(["redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "redis://127.0.0.1:6381"])
    ///     .group_commit(true);
    /// # let _ = builder;
    /// ```
    pub fn group_commit(mut self, enabled: bool) -> Builder {
        self.settings.group_commit = enabled;
        self
    }

    /// Fencing tokens: every lock this handle takes, by any entry point,
    /// carries a token ([`Lock::fence_token`](crate::Lock::fence_token), [`Lease::fence_token`](crate::Lease::fence_token)),
    /// unique per resource and rising with the holders' turns across the N
    /// masters, for the protected resource to check (see the guide's
    /// "Fencing tokens", docs/guide/fencing.md, and `docs/fencing.md`). Default: off.
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
    /// [`Builder::fencing`](crate::Builder::fencing).
    pub fn fence_domain(mut self, domain: impl AsRef<[u8]>) -> Builder {
        self.settings.fence_domain = domain.as_ref().to_vec();
        self
    }

    /// A label stored with every lock this handle takes, saying who holds
    /// it (a host name, a process, a job: whatever you choose), for
    /// [`Redlock::inspect`](crate::Redlock::inspect) and `redlock status`
    /// to show to whoever looks at the lock, from any host. Default: none.
    ///
    /// The label goes in the lock's value after its secret and a `|`
    /// (`<40 hex digits>|<label>`): releases and extensions compare the
    /// whole value as before, and an inspection reads only the part after
    /// the secret (`GETRANGE key 40 105`), never the secret itself. It is
    /// no secret: anyone who can read the key can read it, so put nothing
    /// in it you would not log. Cost: the label's bytes and one more on
    /// each acquisition, release and extension; no allocation.
    ///
    /// Checked by [`Builder::build`](crate::Builder::build): 1 to
    /// [`MAX_HOLDER_LABEL_LEN`](crate::MAX_HOLDER_LABEL_LEN) (64) bytes,
    /// without control characters or `|`; otherwise
    /// [`ConfigError::HolderLabelEmpty`](crate::ConfigError::HolderLabelEmpty),
    /// [`HolderLabelTooLong`](crate::ConfigError::HolderLabelTooLong) or
    /// [`HolderLabelCharacter`](crate::ConfigError::HolderLabelCharacter).
    ///
    /// ```
    /// use redlock_sync::{ConfigError, Error, Redlock};
    /// let nodes = ["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"];
    /// let host = "web-3"; // e.g. from gethostname
    /// let redlock = Redlock::builder()
    ///     .nodes(nodes)
    ///     .holder_label(format!("{host} pid {}", std::process::id()))
    ///     .build()?; // checks the label; connects to nothing yet
    /// assert_eq!(redlock.quorum(), 2);
    /// // Elsewhere: redlock.inspect("orders:42")?.holder_label() == Some("web-3 pid 4242")
    ///
    /// let bad = Redlock::builder().nodes(nodes).holder_label("web|3").build();
    /// assert!(matches!(bad, Err(Error::Config(ConfigError::HolderLabelCharacter('|')))));
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn holder_label(mut self, label: impl Into<String>) -> Builder {
        self.settings.holder_label = Some(label.into());
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
    /// say. Refused by [`Builder::build`](crate::Builder::build) together with
    /// `allow_scripts(false)`.
    pub fn native_commands(mut self, enabled: bool) -> Builder {
        self.settings.native_commands = enabled;
        self
    }

    /// How many times one [`Lock`](crate::Lock) may be extended
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
    /// notice, by the timer or by its subscription's late confirmation,
    /// gave up), each lease's life (renewed, a renewal failed, lost and
    /// why) and each master's change of state (down, back, missing a
    /// right, release notices refused). Replaces a hook given before.
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

    /// Resolves the masters' host names with `resolver` (a service
    /// catalogue, a fixed table, ...) instead of the system's
    /// ([`SystemResolver`](crate::SystemResolver), the default).
    ///
    /// Host names are resolved by [`Builder::build`] (its failure fails the
    /// build), and again when a node's address may have changed: when a
    /// connection to it could not be made (refused, unreachable, no answer
    /// to the connect), and on its cluster's topology refresh; a cluster
    /// node met by name is looked up when first met. Those later lookups
    /// never hold a call up: each runs on a short-lived thread of its own
    /// (`redlock-resolve`), at most once a second per node and four at
    /// once per handle, and the next connection dials what it found
    /// (connections already open are kept until they fail). A lookup that
    /// fails leaves the node at the address it had. Both are told to the
    /// hook ([`MasterChange::Readdressed`](crate::MasterChange::Readdressed),
    /// [`MasterChange::Unresolved`](crate::MasterChange::Unresolved)). An
    /// address another voter's node has is never taken (one server never
    /// votes twice).
    pub fn resolver(mut self, resolver: impl Resolve) -> Builder {
        self.settings.resolver = Resolver(Arc::new(resolver));
        self
    }

    /// Trusts the CA certificate(s) in `pem` (one or more PEM
    /// `CERTIFICATE` blocks) for `rediss://` masters. Adds to any given
    /// before. The PEM is checked by [`Builder::build`](crate::Builder::build).
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
    /// `tls-native-roots`), read once by [`Builder::build`](crate::Builder::build), which fails if
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
    /// server, a node timeout that is zero or above
    /// [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT), or a retry delay
    /// that is zero or above [`MAX_RETRY_DELAY`](crate::MAX_RETRY_DELAY)
    /// (and a jitter above it). For TLS: a `rediss://` URL in a build without
    /// the feature `tls`, `rediss://` URLs with no trusted CA, `redis://`
    /// and `rediss://` URLs mixed, TLS settings with no `rediss://` URL,
    /// and PEM that does not parse. A holder label that is empty, too long
    /// or holds a character it may not (see [`Builder::holder_label`]).
    pub fn build(self) -> Result<Redlock, Error> {
        let config = self.settings.check()?;
        Ok(Redlock {
            shared: Arc::new(Shared::new(config)?),
        })
    }
}
