//! The handle's configuration: the settings a [`Builder`](crate::Builder)
//! gathers, their defaults and limits, and their validation, which turns
//! them into what a handle is made of (URLs parsed and resolved, TLS
//! configured, the wait's default computed).

use crate::command::channel::{CHANNEL_PREFIX, TAG_PART};
use crate::command::fence::domain_key;
use crate::command::ReplicaAck;
#[cfg(feature = "tls")]
use crate::conn::TlsOptions;
use crate::conn::{redact, Lookups, Node, Resolver};
use crate::error::{ConfigError, Error};
use crate::events::tell::Hook;
use crate::holder::Label;
use crate::resp::MAX_BULK_LEN;
use crate::round::discover;
use crate::round::{ClusterVoter, SentinelVoter, Voter};
use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

/// Default per-node deadline of one round: generous for a LAN (round trips
/// well under a millisecond), small next to any sensible TTL.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// What [`Builder::retry_count`](crate::Builder::retry_count) was before
/// [`Redlock::lock`](crate::Redlock::lock) waited until it got the lock:
/// `lock` then gave up after this many fallback pauses (0.9 s). No longer a
/// default: `lock` waits without a time limit unless
/// [`Builder::lock_wait`](crate::Builder::lock_wait) (or `retry_count`) is
/// given.
#[deprecated(
    since = "0.2.0",
    note = "lock() waits until it gets the lock; bound it with Builder::lock_wait"
)]
pub const DEFAULT_RETRY_COUNT: u32 = 3;

/// Default fallback pause of a waiting call, before jitter: it tries again
/// after it when nothing woke it sooner (see
/// [`Builder::retry_delay`](crate::Builder::retry_delay)).
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);

/// Default upper bound of the random jitter added to each retry pause, so
/// that competing clients fall out of step instead of splitting the votes.
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);

/// The longest fallback pause accepted, and the longest jitter (one
/// minute): the pause is what a waiter falls back on when no release
/// notice comes and masters do not answer; longer would let a wait miss a
/// free lock for as long.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// Default of [`Builder::unreachable_limit`](crate::Builder::unreachable_limit):
/// a wait without a time limit ([`Redlock::lock`](crate::Redlock::lock)
/// unless `lock_wait` is set, [`Wait::NoLimit`](crate::Wait::NoLimit)) ends
/// with [`Error::NoQuorum`](crate::Error::NoQuorum) once no quorum of
/// masters could be reached for this long in a row (as the `redlock`
/// command's wait).
pub const DEFAULT_UNREACHABLE_LIMIT: Duration = Duration::from_secs(10);

/// The longest resource name accepted, in bytes: 65 504, so that the
/// name's release channel (`redlock-sync:released:{TAG}` and the lock key,
/// which in the single-cluster mode starts with a `{TAG}` of its voter's)
/// is at most the 64 KiB the client's codec reads back (the server names
/// the channel in each message to a waiter). Longer names are refused by
/// every call that takes one, before any I/O, with
/// [`ConfigError::ResourceTooLong`]: a lock is never taken that its
/// waiters could not hear released.
pub const MAX_RESOURCE_LEN: usize = MAX_BULK_LEN - CHANNEL_PREFIX.len() - 2 * TAG_PART;

/// Default limit on [`Lock::extend`](crate::Lock::extend) calls per lock. The Redlock spec asks
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

/// How long `build()` waits at least for a cluster of the single-cluster
/// mode to say what its masters are (the node timeout, if longer).
const SHARDS_DISCOVERY: Duration = Duration::from_secs(1);

/// The most masters one client can use (Redlock deployments use 3 to 7).
pub const MAX_NODES: usize = 64;

/// The longest node timeout accepted (one minute).
pub const MAX_NODE_TIMEOUT: Duration = Duration::from_secs(60);

/// One voter as a [`Builder`](crate::Builder) was told it.
#[derive(Clone)]
pub(crate) enum VoterUrls {
    /// A standalone master (`Builder::nodes`).
    Node(String),
    /// A cluster, by the URLs of some of its nodes (`Builder::cluster`).
    Cluster(Vec<String>),
    /// A cluster whose masters are voters each (`Builder::cluster_shards`).
    Shards(Vec<String>),
    /// A master that Sentinels watch (`Builder::sentinel`): the
    /// sentinels' URLs and the master's name.
    Sentinel(Vec<String>, String),
}

impl VoterUrls {
    /// Every URL it names.
    fn urls(&self) -> &[String] {
        match self {
            VoterUrls::Node(url) => std::slice::from_ref(url),
            VoterUrls::Cluster(seeds) | VoterUrls::Shards(seeds) => seeds,
            VoterUrls::Sentinel(sentinels, _) => sentinels,
        }
    }
}

/// What a [`Builder`](crate::Builder) was told, not yet checked.
#[derive(Clone)]
pub(crate) struct Settings {
    /// The voters, in order.
    pub(crate) voters: Vec<VoterUrls>,
    pub(crate) node_timeout: Duration,
    /// Given only by the deprecated `Builder::retry_count`.
    pub(crate) retry_count: Option<u32>,
    pub(crate) retry_delay: Duration,
    pub(crate) retry_jitter: Duration,
    pub(crate) max_extensions: u32,
    pub(crate) max_idle_connections: usize,
    /// `None`: no time limit (unless `retry_count` sets one).
    pub(crate) lock_wait: Option<Duration>,
    /// How long masters may be out of reach in a row before a wait
    /// without a time limit ends.
    pub(crate) unreachable_limit: Duration,
    pub(crate) release_notices: bool,
    /// Whether waiters queue (see `Builder::fair_waiting`).
    pub(crate) fair_waiting: bool,
    /// Fencing tokens (see `Builder::fencing`).
    pub(crate) fencing: bool,
    /// Group commit of concurrent acquisitions (`Builder::group_commit`).
    pub(crate) group_commit: bool,
    /// The fence domain's name (see `Builder::fence_domain`).
    pub(crate) fence_domain: Vec<u8>,
    /// Stored with each lock's value (see `Builder::holder_label`).
    pub(crate) holder_label: Option<String>,
    /// What the handle tells of what it does (`Builder::events`).
    pub(crate) events: Hook,
    pub(crate) allow_scripts: bool,
    pub(crate) native_commands: bool,
    /// The replica guard (`Builder::replica_ack`): replicas and timeout.
    pub(crate) replica_ack: Option<(u32, Duration)>,
    /// How it waits (`Builder::replica_ack_aof`): `Some(local)` for
    /// `WAITAOF`.
    pub(crate) replica_ack_aof: Option<bool>,
    /// The credentials of every Sentinel voter's master
    /// (`Builder::sentinel_master_auth`): user and password (`None`: no
    /// `AUTH`). Unset: those of the voter's first sentinel URL.
    pub(crate) sentinel_master_auth: Option<(Option<String>, Option<String>)>,
    /// How host names are resolved (`Builder::resolver`).
    pub(crate) resolver: Resolver,
    #[cfg(feature = "tls")]
    pub(crate) tls: TlsOptions,
}

/// The fence domain of a handle that names none.
pub(crate) const DEFAULT_FENCE_DOMAIN: &[u8] = b"default";

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            voters: Vec::new(),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            retry_count: None,
            retry_delay: DEFAULT_RETRY_DELAY,
            retry_jitter: DEFAULT_RETRY_JITTER,
            max_extensions: DEFAULT_MAX_EXTENSIONS,
            max_idle_connections: DEFAULT_MAX_IDLE_CONNECTIONS,
            lock_wait: None,
            unreachable_limit: DEFAULT_UNREACHABLE_LIMIT,
            release_notices: true,
            fair_waiting: true,
            fencing: false,
            group_commit: false,
            fence_domain: DEFAULT_FENCE_DOMAIN.to_vec(),
            holder_label: None,
            events: Hook::default(),
            allow_scripts: true,
            native_commands: true,
            replica_ack: None,
            replica_ack_aof: None,
            sentinel_master_auth: None,
            resolver: Resolver::default(),
            #[cfg(feature = "tls")]
            tls: TlsOptions::default(),
        }
    }
}

impl Settings {
    /// Shows the settings as the `Debug` of a struct named `name`: the URLs
    /// without their credentials, and no TLS client key.
    pub(crate) fn debug_as(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let voters: Vec<String> = self
            .voters
            .iter()
            .map(|voter| match voter {
                VoterUrls::Node(url) => redact(url),
                VoterUrls::Cluster(seeds) | VoterUrls::Shards(seeds) => format!(
                    "{}({})",
                    match voter {
                        VoterUrls::Shards(_) => "cluster_shards",
                        _ => "cluster",
                    },
                    seeds
                        .iter()
                        .map(|u| redact(u))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                VoterUrls::Sentinel(sentinels, master) => format!(
                    "sentinel({}; {master:?})",
                    sentinels
                        .iter()
                        .map(|u| redact(u))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect();
        let mut s = f.debug_struct(name);
        s.field("voters", &voters)
            .field("node_timeout", &self.node_timeout)
            .field("retry_count", &self.retry_count)
            .field("retry_delay", &self.retry_delay)
            .field("retry_jitter", &self.retry_jitter)
            .field("max_extensions", &self.max_extensions)
            .field("max_idle_connections", &self.max_idle_connections)
            .field("lock_wait", &self.lock_wait)
            .field("unreachable_limit", &self.unreachable_limit)
            .field("release_notices", &self.release_notices)
            .field("fair_waiting", &self.fair_waiting)
            .field("fencing", &self.fencing)
            .field("group_commit", &self.group_commit)
            .field(
                "fence_domain",
                &self.fence_domain.escape_ascii().to_string(),
            )
            .field("holder_label", &self.holder_label)
            .field("events", &self.events)
            .field("allow_scripts", &self.allow_scripts)
            .field("native_commands", &self.native_commands)
            .field("replica_ack", &self.replica_ack)
            .field("replica_ack_aof", &self.replica_ack_aof)
            .field(
                "sentinel_master_auth",
                // The password is never shown.
                &self.sentinel_master_auth.as_ref().map(|(user, password)| {
                    (
                        user.as_deref(),
                        password.as_ref().map(|_| "<set, withheld>"),
                    )
                }),
            )
            .field("resolver", &self.resolver);
        // Hand-written Debug of its own: the client key is never shown.
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls);
        s.finish()
    }

    /// Checks the settings, parses the URLs and resolves host names (see
    /// [`Builder::build`](crate::Builder::build) for what is refused).
    pub(crate) fn check(self) -> Result<Config, Error> {
        if self.voters.is_empty() {
            return Err(ConfigError::NoNodes.into());
        }
        if self.voters.len() > MAX_NODES {
            return Err(ConfigError::TooManyNodes(self.voters.len()).into());
        }
        if self.node_timeout.is_zero() || self.node_timeout > MAX_NODE_TIMEOUT {
            return Err(ConfigError::InvalidNodeTimeout(self.node_timeout).into());
        }
        if self.retry_delay.is_zero() || self.retry_delay > MAX_RETRY_DELAY {
            return Err(ConfigError::InvalidRetryDelay(self.retry_delay).into());
        }
        if self.retry_jitter > MAX_RETRY_DELAY {
            return Err(ConfigError::InvalidRetryJitter(self.retry_jitter).into());
        }
        if !self.allow_scripts && !self.native_commands {
            return Err(ConfigError::NoWayToRelease.into());
        }
        for voter in &self.voters {
            match voter {
                VoterUrls::Sentinel(sentinels, _) if sentinels.is_empty() => {
                    return Err(ConfigError::NoSentinels.into())
                }
                VoterUrls::Sentinel(_, master) if master.is_empty() => {
                    return Err(ConfigError::NoMasterName.into())
                }
                _ if voter.urls().is_empty() => return Err(ConfigError::NoSeeds.into()),
                _ => {}
            }
        }
        let replica_ack = self.replica_ack()?;
        let holder_label = self.holder_label.as_deref().map(Label::new).transpose()?;
        // Every URL parsed, resolved and set up the same way, voter by
        // voter; each voter as given is a group of addresses (see
        // `conn::address`).
        let lookups = Lookups::new(self.resolver.clone(), self.events.clone());
        let mut parsed: Vec<Vec<Node>> = self
            .voters
            .iter()
            .enumerate()
            .map(|(group, voter)| {
                let cluster = matches!(voter, VoterUrls::Cluster(_) | VoterUrls::Shards(_));
                voter
                    .urls()
                    .iter()
                    .map(|url| {
                        let (scripts, native) = (self.allow_scripts, self.native_commands);
                        Node::from_url(url, scripts, native, cluster, &lookups, group)
                    })
                    .collect::<Result<Vec<Node>, ConfigError>>()
            })
            .collect::<Result<_, _>>()?;
        let all = || parsed.iter().flatten();
        let secure = all().filter(|n| n.is_secure()).count();
        if secure > 0 && secure < all().count() {
            return Err(ConfigError::MixedSchemes.into());
        }
        #[cfg(feature = "tls")]
        {
            if secure == 0 && self.tls.is_set() {
                return Err(ConfigError::TlsUnused.into());
            }
            if secure > 0 {
                let config = self.tls.client_config()?;
                for target in parsed.iter_mut().flatten().filter_map(|n| n.tls.as_mut()) {
                    target.configure(&config);
                }
            }
        }
        // One server never votes twice: no address is given twice, within a
        // voter (a cluster's seeds) or across voters. (Seeds of one cluster
        // that name different nodes of it are one voter, as meant.)
        // Sentinels cast no vote: several Sentinel voters may share them
        // (their masters are checked once found, below).
        let mut seen = HashSet::new();
        let voting = self
            .voters
            .iter()
            .zip(&parsed)
            .filter(|(voter, _)| !matches!(voter, VoterUrls::Sentinel(..)));
        for node in voting.flat_map(|(_, nodes)| nodes) {
            if !seen.insert(node.addr()) {
                return Err(ConfigError::DuplicateNode(node.name.clone()).into());
            }
        }
        let mut sentinel_voters = HashSet::new();
        for voter in &self.voters {
            if let VoterUrls::Sentinel(sentinels, master) = voter {
                let mut key = sentinels.clone();
                key.sort();
                if !sentinel_voters.insert((key, master.clone())) {
                    return Err(
                        ConfigError::DuplicateNode(format!("sentinel(...;{master})")).into(),
                    );
                }
            }
        }
        // Fencing needs scripts on every master (docs/fencing.md, section
        // 11): a mode that never runs scripts refuses it.
        if self.fencing && !self.allow_scripts {
            return Err(ConfigError::FencingNeedsScripts.into());
        }
        if let Some(guard) = replica_ack {
            for node in parsed.iter_mut().flatten() {
                node.guard_replicas(guard);
            }
        }
        // The key of the fence domain's hash on a standalone master (a
        // cluster voter's are made from it: docs/fencing.md, "Key layout").
        // A cluster node's probe names no hash: it serves many slots, each
        // with its own (the scripts check the slot's on every call).
        let fence = self.fencing.then(|| domain_key(&self.fence_domain));
        if let Some(key) = &fence {
            for (voter, nodes) in self.voters.iter().zip(parsed.iter_mut()) {
                let key = matches!(voter, VoterUrls::Node(_)).then_some(key.as_slice());
                for node in nodes {
                    node.probe_fence(key);
                }
            }
        }
        let epoch = Instant::now();
        let mut voters = Vec::new();
        // Per group, the voter its addresses' changes are told as.
        let mut groups = Vec::new();
        for (voter, mut nodes) in self.voters.iter().zip(parsed) {
            let first = voters.len();
            match voter {
                // A replica or a Sentinel given as a master is refused by
                // its handshake's identity probe (see `command::identity`).
                VoterUrls::Node(_) => voters.push(Voter::Standalone(nodes.remove(0))),
                VoterUrls::Sentinel(_, master) => {
                    let mut template = match &self.sentinel_master_auth {
                        Some((user, password)) => nodes[0].with_credentials(
                            user.as_deref().map(str::as_bytes),
                            password.as_deref().map(str::as_bytes),
                        ),
                        None => nodes[0].clone(),
                    };
                    template.check_role();
                    voters.push(Voter::Sentinel(SentinelVoter::new(
                        nodes,
                        template,
                        master.clone(),
                        self.node_timeout,
                        epoch,
                    )?))
                }
                VoterUrls::Cluster(_) => {
                    voters.push(Voter::Cluster(ClusterVoter::new(nodes, epoch)?))
                }
                // The one setting that asks a server: how many masters.
                VoterUrls::Shards(_) => voters.extend(discover::shards(
                    nodes,
                    self.node_timeout.max(SHARDS_DISCOVERY),
                )?),
            }
            let told_as = match (voter, voters.get(first)) {
                // The single-cluster mode's voters share its nodes.
                (VoterUrls::Shards(_), Some(made)) => made.cluster().map_or("", |c| c.name()),
                (_, Some(made)) => made.name(),
                (_, None) => "",
            };
            groups.push((first, told_as.to_string()));
        }
        lookups.name_groups(groups);
        if voters.len() > MAX_NODES {
            return Err(ConfigError::TooManyNodes(voters.len()).into());
        }
        // A master the sentinels named that is also another voter.
        for (i, voter) in voters.iter().enumerate() {
            if let Voter::Sentinel(sentinel) = voter {
                let Some(addr) = sentinel.master_addr() else {
                    continue;
                };
                let twice = voters.iter().enumerate().any(|(j, other)| {
                    j != i
                        && match other {
                            Voter::Standalone(node) => node.addr() == Some(addr),
                            Voter::Sentinel(other) => other.master_addr() == Some(addr),
                            _ => false,
                        }
                });
                if twice {
                    return Err(ConfigError::DuplicateNode(sentinel.primary().name.clone()).into());
                }
            }
        }
        // `lock_wait` bounds `lock`; so does `retry_count`, deprecated, as
        // it did before `lock` waited until it got the lock. Neither: no
        // time limit.
        let lock_wait = self.lock_wait.or_else(|| {
            self.retry_count.map(|count| {
                self.retry_delay
                    .saturating_add(self.retry_jitter)
                    .saturating_mul(count)
            })
        });
        Ok(Config {
            voters,
            node_timeout: self.node_timeout,
            lock_wait,
            release_notices: self.release_notices,
            fair_waiting: self.fair_waiting,
            allow_scripts: self.allow_scripts,
            unreachable_limit: self.unreachable_limit,
            retry_delay: self.retry_delay,
            retry_jitter: self.retry_jitter,
            max_extensions: self.max_extensions,
            max_idle_connections: self.max_idle_connections,
            group_commit: self.group_commit,
            fence,
            holder_label,
            events: self.events,
        })
    }
}

impl Settings {
    /// The replica guard, checked: a timeout above zero, and something to
    /// wait for.
    fn replica_ack(&self) -> Result<Option<ReplicaAck>, ConfigError> {
        let Some((replicas, timeout)) = self.replica_ack else {
            return match self.replica_ack_aof {
                Some(_) => Err(ConfigError::ReplicaAckAofWithoutGuard),
                None => Ok(None),
            };
        };
        let local = self.replica_ack_aof == Some(true);
        if timeout.is_zero() || (replicas == 0 && !local) {
            return Err(ConfigError::InvalidReplicaAck { replicas, timeout });
        }
        Ok(Some(ReplicaAck {
            replicas,
            timeout,
            aof: self.replica_ack_aof,
        }))
    }
}

/// Checked settings: what a handle is made of.
pub(crate) struct Config {
    pub(crate) voters: Vec<Voter>,
    pub(crate) node_timeout: Duration,
    /// `lock`'s wait: `None`, no time limit.
    pub(crate) lock_wait: Option<Duration>,
    pub(crate) release_notices: bool,
    pub(crate) fair_waiting: bool,
    pub(crate) allow_scripts: bool,
    pub(crate) unreachable_limit: Duration,
    pub(crate) retry_delay: Duration,
    pub(crate) retry_jitter: Duration,
    pub(crate) max_extensions: u32,
    pub(crate) max_idle_connections: usize,
    /// Whether concurrent acquisitions are batched (`Builder::group_commit`).
    pub(crate) group_commit: bool,
    /// The fence domain's key, for a handle that fences.
    pub(crate) fence: Option<Vec<u8>>,
    /// Stored after each lock value's secret (`Builder::holder_label`).
    pub(crate) holder_label: Option<Label>,
    pub(crate) events: Hook,
}
