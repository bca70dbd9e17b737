//! An invalid configuration or argument: what the limit is, by node address,
//! never with a password.

use super::rounded::rounded;
use std::time::Duration;

/// An invalid configuration or argument. Each message says what the limit
/// is. Messages name nodes by address and never include a password.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Both scripts ([`Builder::allow_scripts`](crate::Builder::allow_scripts))
    /// and native commands
    /// ([`Builder::native_commands`](crate::Builder::native_commands)) are
    /// off: no lock could ever be released.
    #[error("scripts and native commands are both off: nothing could release a lock (allow one of them)")]
    NoWayToRelease,
    /// Fencing ([`Builder::fencing`](crate::Builder::fencing)) with scripts
    /// off ([`Builder::allow_scripts`](crate::Builder::allow_scripts)): the
    /// fence counter is counted atomically with the `SET NX` by a script,
    /// and no server has a native command for that (docs/fencing.md,
    /// section 11).
    #[error("fencing needs scripts: its counter is read atomically with the lock by a script, and servers have no native command for it (allow scripts, or turn fencing off)")]
    FencingNeedsScripts,
    /// The replica guard ([`Builder::replica_ack`](crate::Builder::replica_ack))
    /// has a zero timeout (a master could never confirm in time), or waits
    /// for no replica and no local fsync (it would guard nothing).
    #[error("the replica guard waits for {replicas} replicas for {}: it needs a timeout above zero and at least one replica (or WAITAOF's local fsync)", rounded(.timeout))]
    InvalidReplicaAck {
        /// The replicas asked for.
        replicas: u32,
        /// The timeout given.
        timeout: Duration,
    },
    /// [`Builder::replica_ack_aof`](crate::Builder::replica_ack_aof) without
    /// [`Builder::replica_ack`](crate::Builder::replica_ack): it says how
    /// the guard waits, and there is no guard.
    #[error(
        "replica_ack_aof needs the replica guard: call Builder::replica_ack(replicas, timeout) too"
    )]
    ReplicaAckAofWithoutGuard,
    /// No node URL was given.
    #[error("no nodes given: pass one or more redis:// URLs to Builder::nodes (3 or 5 independent masters)")]
    NoNodes,
    /// The single-cluster mode
    /// ([`Builder::cluster_shards`](crate::Builder::cluster_shards)) found
    /// fewer than three masters (or none: the cluster did not answer in
    /// time).
    #[error("the single-cluster mode needs a cluster of at least 3 masters: {cluster} showed {found} ({report})")]
    TooFewShards {
        /// The cluster, by its seeds.
        cluster: String,
        /// How many masters it showed.
        found: usize,
        /// What its seeds answered.
        report: String,
    },
    /// A Sentinel voter ([`Builder::sentinel`](crate::Builder::sentinel))
    /// was given no sentinel URL.
    #[error("a Sentinel voter needs at least one sentinel: pass the redis:// URLs of its sentinels to Builder::sentinel")]
    NoSentinels,
    /// A Sentinel voter was given an empty master name.
    #[error("a Sentinel voter needs the name its sentinels know the master by (sentinel monitor NAME ...), not an empty one")]
    NoMasterName,
    /// A cluster voter was given no seed URL.
    #[error("a cluster voter needs at least one seed: pass the redis:// URL of one or more of its nodes to Builder::cluster")]
    NoSeeds,
    /// Two URLs lead to the same server (same address and port), which would
    /// let one server cast two votes.
    #[error("node {0} is given twice: two URLs reach the same server, which would vote twice")]
    DuplicateNode(String),
    /// The resource name is empty: a lock is stored under its resource
    /// name, and an empty key is no name anyone else would use on purpose.
    #[error("the resource name is empty: name the lock (it is the key the lock is stored under on each master)")]
    EmptyResource,
    /// A node URL could not be parsed.
    #[error("invalid node URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as it may be shown: its scheme and host, with `***`
        /// for the rest (a URL that does not parse cannot say where its
        /// credentials end: a password may hold a `,`, a blank or an `@`).
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A node's host name did not resolve.
    #[error("cannot resolve node {node}: {reason}")]
    Unresolvable {
        /// The node's `host:port`.
        node: String,
        /// The resolver's answer.
        reason: String,
    },
    /// The node timeout is zero or longer than
    /// [`MAX_NODE_TIMEOUT`](crate::MAX_NODE_TIMEOUT).
    #[error("a node timeout of {} is out of range: it must be above zero and at most 60s", rounded(.0))]
    InvalidNodeTimeout(Duration),
    /// The fallback pause ([`Builder::retry_delay`](crate::Builder::retry_delay))
    /// is zero or longer than [`MAX_RETRY_DELAY`](crate::MAX_RETRY_DELAY).
    #[error("a retry delay of {} is out of range: it must be above zero and at most 60s", rounded(.0))]
    InvalidRetryDelay(Duration),
    /// The fallback pause's jitter
    /// ([`Builder::retry_jitter`](crate::Builder::retry_jitter)) is longer
    /// than [`MAX_RETRY_DELAY`](crate::MAX_RETRY_DELAY).
    #[error("a retry jitter of {} is out of range: it must be at most 60s", rounded(.0))]
    InvalidRetryJitter(Duration),
    /// The resource name (this many bytes) is longer than
    /// [`MAX_RESOURCE_LEN`](crate::MAX_RESOURCE_LEN): its release channel
    /// would be longer than the client can read back, so its waiters could
    /// not hear it released.
    #[error("a resource name of {0} bytes is too long: at most 65504 bytes (MAX_RESOURCE_LEN)")]
    ResourceTooLong(usize),
    /// A lock on several resources
    /// ([`Redlock::try_lock_many`](crate::Redlock::try_lock_many)) was
    /// given no name: locking nothing is almost always a bug upstream (a
    /// filter that removed everything), and an empty set would protect
    /// nothing.
    #[error("the set of resources is empty: name at least one resource to lock")]
    ResourceSetEmpty,
    /// A lock on several resources was given more names than
    /// [`MAX_SET_LEN`](crate::MAX_SET_LEN) (counted as given, duplicates
    /// included; reading stopped at `given`).
    #[error("a set of {given} or more resource names is too large: at most {max} (MAX_SET_LEN, duplicates counted)")]
    ResourceSetTooLarge {
        /// How many names were read when the limit was passed.
        given: usize,
        /// The limit.
        max: usize,
    },
    /// A lock on several resources was given more bytes of names than
    /// [`MAX_SET_BYTES`](crate::MAX_SET_BYTES), all names together
    /// (counted as given, duplicates included; reading stopped at `bytes`).
    #[error("the names of a set of resources take {bytes} bytes or more: at most {max} (MAX_SET_BYTES, duplicates counted)")]
    ResourceSetNamesTooLong {
        /// How many bytes of names were read when the limit was passed.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A lock on several resources was asked of a handle it cannot be
    /// taken with yet: the reason says which setting. Refused before any
    /// I/O (never a partial set, never a server's `CROSSSLOT`).
    #[error("a lock on several resources is not supported on this handle yet: {0}")]
    ResourceSetUnsupported(SetUnsupported),
    /// The holder label ([`Builder::holder_label`](crate::Builder::holder_label))
    /// is empty.
    #[error("the holder label is empty: give one (a host name, a process) or do not set it")]
    HolderLabelEmpty,
    /// The holder label (this many bytes) is longer than
    /// [`MAX_HOLDER_LABEL_LEN`](crate::MAX_HOLDER_LABEL_LEN).
    #[error("a holder label of {0} bytes is too long: at most 64 bytes (MAX_HOLDER_LABEL_LEN)")]
    HolderLabelTooLong(usize),
    /// The holder label holds this character: a control character (a
    /// terminal or a log would act on it), or `|`, which separates the
    /// label from the lock's secret in the lock's value.
    #[error("a holder label may not hold {0:?}: control characters and '|' (which separates it from the lock's secret) are refused")]
    HolderLabelCharacter(char),
    /// The TTL is too short to leave any validity: the lock must outlast
    /// the allowance for clock drift (TTL/100 + 2 ms), so the shortest TTL
    /// is [`MIN_TTL`](crate::MIN_TTL).
    #[error("a TTL of {} leaves no validity: it must be more than the clock-drift allowance of TTL/100 + 2ms, so at least 3ms", rounded(.0))]
    TtlTooShort(Duration),
    /// More than [`MAX_NODES`](crate::MAX_NODES) nodes were given.
    #[error("{0} nodes given; at most 64 are supported")]
    TooManyNodes(usize),
    /// The TTL exceeds [`MAX_TTL`](crate::MAX_TTL).
    #[error("a TTL of {} is longer than the maximum of 365 days", rounded(.0))]
    TtlTooLong(Duration),
    /// A `rediss://` URL in a build without the crate feature `tls`.
    #[error("node URL {0:?} needs TLS, which this build lacks: enable redlock-sync's cargo feature `tls`")]
    TlsNotEnabled(String),
    /// `rediss://` URLs, and no CA to check their certificates against.
    #[error("rediss:// URLs need a trusted CA: call Builder::tls_root_ca_pem with your CA's PEM certificate (or enable the feature tls-webpki-roots or tls-native-roots and call tls_webpki_roots or tls_native_roots)")]
    TlsNoRoots,
    /// Some URLs are `redis://` and others `rediss://`: refused, so that
    /// no master of a TLS deployment is reached in plaintext by a typo.
    #[error("redis:// and rediss:// URLs are mixed: use rediss:// for every master, or for none")]
    MixedSchemes,
    /// TLS settings were given but every URL is `redis://`: refused, so
    /// that a deployment meant to be secured is not silently plaintext.
    #[error("TLS settings were given but no URL is rediss://: use rediss:// URLs")]
    TlsUnused,
    /// A TLS setting is invalid (PEM that does not parse, a key that does
    /// not fit its certificate). The message never shows key material.
    #[error("invalid TLS setting: {0}")]
    InvalidTls(String),
    /// A fence operation (`Redlock::fence_init`, `fence_repair`) on a
    /// handle built without `Builder::fencing(true)`.
    #[error("this handle does not fence: build it with Builder::fencing(true)")]
    FencingOff,
    /// A fence counter start above 2^53 (tokens are exact Lua numbers).
    #[error("a fence counter start of {0} is above 2^53")]
    FenceStartTooLarge(u64),
    /// The fence domain was initialised on another number of masters than
    /// this handle names (docs/fencing.md, "Members"): clients of one
    /// domain that name different sets of masters may both find a quorum
    /// and hand out the same token. Every client of a domain must name
    /// the same masters.
    #[error("the fence domain was initialised on {initialised} masters, this handle names {configured}: every client of a fence domain must name the same masters")]
    FenceMasterCount {
        /// How many masters this handle names.
        configured: usize,
        /// How many the domain was initialised on (`fence_init`).
        initialised: usize,
    },
    /// Two masters this handle names carry anchors of different
    /// initialisations of the fence domain (two `fence_init` runs under one
    /// name, on different sets of masters): they belong to different
    /// domains.
    #[error("masters {first} and {second} were initialised as different fence domains (separate fence_init runs): every client of a fence domain must name the same masters, initialised together")]
    FenceMastersDiffer {
        /// One master (`host:port`).
        first: String,
        /// One whose anchor names another domain.
        second: String,
    },
    /// Two masters this handle names hold the same place in the fence
    /// domain: the same server under two names, or a server given the
    /// place of a member that lost its data by a repair run from a client
    /// that named it instead of the member.
    #[error("masters {first} and {second} are the same member of the fence domain (one server under two names?): every client of a fence domain must name each of its masters once")]
    FenceMasterTwice {
        /// One master (`host:port`).
        first: String,
        /// The other, in the same place.
        second: String,
    },
}

/// Why a handle cannot take a lock on several resources yet (see
/// [`ConfigError::ResourceSetUnsupported`]).
///
/// ```no_run
/// use redlock_sync::{ConfigError, Error, SetUnsupported};
/// let fenced = redlock_sync::Redlock::builder()
///     .cluster(["redis://10.0.0.1:7000"])
///     .fencing(true)
///     .build()?;
/// match fenced.try_lock_many(["a", "b"], std::time::Duration::from_secs(5)) {
///     Err(Error::Config(ConfigError::ResourceSetUnsupported(SetUnsupported::FencingAcrossSlots))) => {
///         // "a" and "b" are in two slots: name them {t}:a and {t}:b
///     }
///     other => println!("{other:?}"),
/// }
/// # Ok::<(), redlock_sync::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetUnsupported {
    /// The handle fences ([`Builder::fencing`](crate::Builder::fencing))
    /// and has a cluster voter ([`Builder::cluster`](crate::Builder::cluster)),
    /// and the set's keys fall in two hash slots or more: its one token
    /// would have to be final in each slot's counter (one fence column per
    /// slot), which is designed, not built. Keys that share a hash tag
    /// (`{order:7}:a`, `{order:7}:b`) are in one slot and are taken. Refused
    /// before any I/O: nothing is written.
    #[error("fencing is on and the set's keys span hash slots on a cluster voter (a fenced set there needs its keys in one slot: a shared hash tag)")]
    FencingAcrossSlots,
}
