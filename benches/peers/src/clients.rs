//! The clients under comparison, behind one interface: a "pair" is one
//! acquire attempt and, if it succeeded, the release, each timed.

use crate::batched::Batched;
use crate::cluster_reference::ClusterReference;
use crate::reference::Reference;
use crate::sets::OursSet;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// One acquire attempt and its release.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    /// How long the acquire attempt took, successful or not.
    pub acquire: Duration,
    /// How long the release took; `None` if there was nothing to release.
    pub release: Option<Duration>,
    /// Acquired, and released without a reported error.
    pub ok: bool,
}

impl Pair {
    /// The acquire that started at `started` failed just now.
    pub fn acquire_failed(started: Instant) -> Pair {
        Pair {
            acquire: started.elapsed(),
            release: None,
            ok: false,
        }
    }

    /// Acquired between `started` and `acquired`, released just now.
    pub fn released(started: Instant, acquired: Instant, release_ok: bool) -> Pair {
        Pair {
            acquire: acquired - started,
            release: Some(acquired.elapsed()),
            ok: release_ok,
        }
    }
}

/// A lock client, driven synchronously.
pub trait Client: Send {
    /// Tries once to lock `resource` for `ttl`; releases it if that worked.
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair;

    /// Whether the client is stuck and must not be used any more.
    fn hangs(&self) -> bool {
        false
    }
}

/// A lock client that many threads use at once, through `&self`.
pub trait SharedClient: Send + Sync {
    /// Tries once to lock `resource` for `ttl`; releases it if that worked.
    fn pair(&self, resource: &str, ttl: Duration) -> Pair;
}

/// Which client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Reference,
    /// The reference made to do the server work `ours` does (SET on every
    /// master, queued behind owed replies; the release publishes), as the
    /// wider harness's `ref-notify`. A client per thread.
    RefNotify,
    /// The batched reference (src/batched.rs): `ours`' server work, every
    /// thread's commands pipelined per master. One shared by all threads.
    RefBatch,
    Ours,
    /// Ours keeping as many idle sessions as the scenario has threads
    /// (`max_idle_connections`; the default keeps 16): with more threads
    /// than that on one handle, the default closes and opens sessions
    /// (each a handshake with every master) all the time. Only by name.
    OursIdle,
    /// `ours-idle` with group commit (`Builder::group_commit(true)`): the
    /// threads' concurrent acquisitions batched. Only by name.
    OursGroup,
    /// Ours with the scripts forced (`native_commands(false)`): against
    /// `ours` on a server with the native commands (Valkey 9.1), what they
    /// change. Only by name (`--clients ours,ours-scripts`).
    OursScripts,
    OursTls,
    /// Ours taking a set of 2, 8 or 64 resources in one call
    /// (`try_lock_many`), and the same resources as that many single
    /// locks taken one after another in sorted order (src/sets.rs).
    OursSet2,
    OursSorted2,
    OursSet8,
    OursSorted8,
    OursSet64,
    OursSorted64,
    Rslock,
    Redlock,
}

impl Kind {
    /// Every client, in the order of the tables and of the first round.
    pub const ALL: [Kind; 5] = [
        Kind::Reference,
        Kind::Ours,
        Kind::OursTls,
        Kind::Rslock,
        Kind::Redlock,
    ];

    /// Every client `--clients` takes.
    pub const NAMED: [Kind; 16] = [
        Kind::Reference,
        Kind::RefNotify,
        Kind::RefBatch,
        Kind::Ours,
        Kind::OursIdle,
        Kind::OursGroup,
        Kind::OursScripts,
        Kind::OursTls,
        Kind::OursSet2,
        Kind::OursSorted2,
        Kind::OursSet8,
        Kind::OursSorted8,
        Kind::OursSet64,
        Kind::OursSorted64,
        Kind::Rslock,
        Kind::Redlock,
    ];

    /// For the set clients: how many resources, and whether they are taken
    /// as single locks in sorted order (else as one set).
    pub fn set_shape(self) -> Option<(usize, bool)> {
        match self {
            Kind::OursSet2 => Some((2, false)),
            Kind::OursSorted2 => Some((2, true)),
            Kind::OursSet8 => Some((8, false)),
            Kind::OursSorted8 => Some((8, true)),
            Kind::OursSet64 => Some((64, false)),
            Kind::OursSorted64 => Some((64, true)),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Reference => "reference",
            Kind::RefNotify => "ref-notify",
            Kind::RefBatch => "ref-batch",
            Kind::Ours => "ours",
            Kind::OursIdle => "ours-idle",
            Kind::OursGroup => "ours-group",
            Kind::OursScripts => "ours-scripts",
            Kind::OursTls => "ours-tls",
            Kind::OursSet2 => "ours-set2",
            Kind::OursSorted2 => "ours-sorted2",
            Kind::OursSet8 => "ours-set8",
            Kind::OursSorted8 => "ours-sorted8",
            Kind::OursSet64 => "ours-set64",
            Kind::OursSorted64 => "ours-sorted64",
            Kind::Rslock => "rslock",
            Kind::Redlock => "redlock",
        }
    }

    /// What the client is, and how it is set up here.
    pub fn description(self) -> &'static str {
        match self {
            Kind::Reference => {
                "hand-written poll(2) fan-out (src/reference.rs; on cluster voters \
                 src/cluster_reference.rs, routed by slot): the floor"
            }
            Kind::RefNotify => {
                "the reference doing ours' server work (SET to every master, queued behind \
                 owed replies; the release script publishes), as the wider harness's \
                 ref-notify; a client per thread"
            }
            Kind::RefBatch => {
                "batched reference (src/batched.rs): ours' commands (SET+ECHO, ours' release \
                 script+ECHO; where DELIFEQ exists DELIFEQ+PUBSUB NUMSUB+ECHO), every thread's \
                 pipelined per master by one I/O thread; one shared by all threads"
            }
            Kind::Ours => "redlock-sync (this checkout), one attempt (lock_wait 0)",
            Kind::OursIdle => {
                "redlock-sync (this checkout), one attempt (lock_wait 0), \
                 max_idle_connections = the scenario's threads (the default keeps 16 idle sessions)"
            }
            Kind::OursGroup => {
                "redlock-sync (this checkout), one attempt (lock_wait 0), \
                 max_idle_connections = the scenario's threads, group_commit(true): \
                 concurrent acquisitions and releases batched"
            }
            Kind::OursScripts => {
                "redlock-sync (this checkout), one attempt (lock_wait 0), scripts forced \
                 (native_commands(false)): releases and extensions by EVALSHA"
            }
            Kind::OursTls => {
                "redlock-sync over TLS (rediss://, feature tls: rustls + ring, TLS 1.3, \
                 ECDSA P-256 server certificate, no client certificate) to the same servers' \
                 TLS ports; only with servers the run starts"
            }
            Kind::OursSet2 | Kind::OursSet8 | Kind::OursSet64 => {
                "redlock-sync (this checkout), one attempt at a set of K resources in one call \
                 (try_lock_many: one script per master), released by LockSet::unlock"
            }
            Kind::OursSorted2 | Kind::OursSorted8 | Kind::OursSorted64 => {
                "redlock-sync (this checkout), the same K resources as K single locks taken \
                 one after another in sorted order (try_lock each; on a failure the ones held \
                 are released), then released one by one"
            }
            Kind::Rslock => {
                "rslock 0.10.0 on a tokio current-thread runtime (K1-K64: one LockManager \
                 shared by tasks on a multi-thread runtime), 1 attempt; no timeout setting \
                 (redis-rs default: 500 ms per response)"
            }
            Kind::Redlock => {
                "redlock 2.0.0, 1 attempt; no timeouts, a new connection per command, \
                 masters one after the other"
            }
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::NAMED.into_iter().find(|kind| kind.name() == name)
    }
}

/// The servers a client is made for.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// Standalone masters, `HOST:PORT` each, and their TLS ports
    /// (`HOST:PORT` each) if the run started them so.
    Masters {
        nodes: &'a [String],
        tls_nodes: Option<&'a [String]>,
    },
    /// Whole clusters, each one voter: the `HOST:PORT` of its masters.
    Clusters(&'a [Vec<String>]),
}

/// Creates a `kind` client for `target`. `node_timeout` applies to the
/// clients that have one (reference, ours).
pub fn connect(
    kind: Kind,
    target: Target<'_>,
    node_timeout: Duration,
    threads: usize,
) -> Result<Box<dyn Client>, String> {
    let (nodes, tls_nodes) = match target {
        Target::Masters { nodes, tls_nodes } => (nodes, tls_nodes),
        Target::Clusters(clusters) => return connect_to_clusters(kind, clusters, node_timeout),
    };
    let urls: Vec<String> = nodes.iter().map(|node| format!("redis://{node}")).collect();
    Ok(match kind {
        Kind::Reference => {
            Box::new(Reference::connect(nodes, node_timeout).map_err(|e| e.to_string())?)
        }
        Kind::RefNotify => {
            Box::new(Reference::connect_notify(nodes, node_timeout).map_err(|e| e.to_string())?)
        }
        Kind::RefBatch => Box::new(Owned(
            Batched::connect(nodes, node_timeout).map_err(|e| e.to_string())?,
        )),
        Kind::Ours => Box::new(Ours::connect(&urls, node_timeout, true)?),
        Kind::OursIdle => Box::new(Ours::connect_idle(&urls, node_timeout, threads, false)?),
        Kind::OursGroup => Box::new(Ours::connect_idle(&urls, node_timeout, threads, true)?),
        Kind::OursScripts => Box::new(Ours::connect(&urls, node_timeout, false)?),
        Kind::OursTls => {
            let tls_nodes = tls_nodes.ok_or("TLS needs servers the run starts (no --nodes)")?;
            let urls: Vec<String> = tls_nodes.iter().map(|n| format!("rediss://{n}")).collect();
            Box::new(Ours::connect_tls(&urls, node_timeout)?)
        }
        Kind::OursSet2
        | Kind::OursSorted2
        | Kind::OursSet8
        | Kind::OursSorted8
        | Kind::OursSet64
        | Kind::OursSorted64 => {
            let (k, sorted) = kind.set_shape().expect("a set client");
            Box::new(OursSet::connect(&urls, node_timeout, k, sorted)?)
        }
        Kind::Rslock => Box::new(Rslock::connect(urls)?),
        Kind::Redlock => Box::new(RedlockCrate::connect(urls)),
    })
}

/// A `kind` client whose voters are the `clusters` (`HOST:PORT` of each
/// one's masters).
fn connect_to_clusters(
    kind: Kind,
    clusters: &[Vec<String>],
    node_timeout: Duration,
) -> Result<Box<dyn Client>, String> {
    let seeds: Vec<Vec<String>> = clusters
        .iter()
        .map(|nodes| nodes.iter().map(|n| format!("redis://{n}")).collect())
        .collect();
    Ok(match kind {
        Kind::Reference => {
            Box::new(ClusterReference::connect(clusters, node_timeout).map_err(|e| e.to_string())?)
        }
        Kind::Ours => Box::new(Ours::connect_clusters(&seeds, node_timeout, true)?),
        Kind::OursScripts => Box::new(Ours::connect_clusters(&seeds, node_timeout, false)?),
        Kind::OursTls
        | Kind::OursIdle
        | Kind::OursGroup
        | Kind::OursSet2
        | Kind::OursSorted2
        | Kind::OursSet8
        | Kind::OursSorted8
        | Kind::OursSet64
        | Kind::OursSorted64
        | Kind::Rslock
        | Kind::Redlock
        | Kind::RefNotify
        | Kind::RefBatch => {
            return Err(format!(
                "{} does not run on cluster voters here",
                kind.name()
            ))
        }
    })
}

impl Kind {
    /// Whether the client runs in the cluster scenarios (a cluster as one
    /// voter): ours, and the hand-written cluster reference.
    pub fn runs_on_clusters(self) -> bool {
        matches!(self, Kind::Reference | Kind::Ours | Kind::OursScripts)
    }
}

/// Creates one `kind` client for many threads to share, for the kinds that
/// are shared so (ours, ref-batch); `None` for the others, which get a
/// client per thread (rslock shares its manager between tasks: see
/// `workers`).
pub fn connect_shared(
    kind: Kind,
    target: Target<'_>,
    node_timeout: Duration,
    threads: usize,
) -> Result<Option<Box<dyn SharedClient>>, String> {
    let Target::Masters { nodes, tls_nodes } = target else {
        return Ok(None);
    };
    let urls: Vec<String> = nodes.iter().map(|node| format!("redis://{node}")).collect();
    Ok(Some(match kind {
        Kind::Ours => Box::new(Ours::connect(&urls, node_timeout, true)?),
        Kind::OursIdle => Box::new(Ours::connect_idle(&urls, node_timeout, threads, false)?),
        Kind::OursGroup => Box::new(Ours::connect_idle(&urls, node_timeout, threads, true)?),
        Kind::OursScripts => Box::new(Ours::connect(&urls, node_timeout, false)?),
        Kind::OursTls => {
            let tls_nodes = tls_nodes.ok_or("TLS needs servers the run starts (no --nodes)")?;
            let urls: Vec<String> = tls_nodes.iter().map(|n| format!("rediss://{n}")).collect();
            Box::new(Ours::connect_tls(&urls, node_timeout)?)
        }
        Kind::RefBatch => {
            Box::new(Batched::connect(nodes, node_timeout).map_err(|e| e.to_string())?)
        }
        Kind::Reference
        | Kind::RefNotify
        | Kind::OursSet2
        | Kind::OursSorted2
        | Kind::OursSet8
        | Kind::OursSorted8
        | Kind::OursSet64
        | Kind::OursSorted64
        | Kind::Rslock
        | Kind::Redlock => return Ok(None),
    }))
}

/// A shared client used by one thread alone.
struct Owned<T>(T);

impl<T: SharedClient> Client for Owned<T> {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        self.0.pair(resource, ttl)
    }
}

impl Client for ClusterReference {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Some(held) = self.acquire(resource, ttl) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        let released = self.release(resource, &held);
        Pair::released(started, acquired, released)
    }
}

impl Client for Reference {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Some(held) = self.acquire(resource, ttl) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        let released = self.release(resource, &held);
        Pair::released(started, acquired, released)
    }
}

/// redlock-sync, this project.
struct Ours {
    redlock: redlock_sync::Redlock,
}

impl Ours {
    fn connect(urls: &[String], node_timeout: Duration, native: bool) -> Result<Ours, String> {
        let redlock = redlock_sync::Redlock::builder()
            .nodes(urls)
            .node_timeout(node_timeout)
            .lock_wait(Duration::ZERO) // One attempt per pair, as for every client here.
            .native_commands(native)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Ours { redlock })
    }

    /// As `connect`, keeping `max_idle` idle sessions, with group commit
    /// if `group`.
    fn connect_idle(
        urls: &[String],
        node_timeout: Duration,
        max_idle: usize,
        group: bool,
    ) -> Result<Ours, String> {
        let redlock = redlock_sync::Redlock::builder()
            .nodes(urls)
            .node_timeout(node_timeout)
            .lock_wait(Duration::ZERO)
            .max_idle_connections(max_idle)
            .group_commit(group)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Ours { redlock })
    }

    /// One voter per cluster, reached through its `seeds` (URLs).
    fn connect_clusters(
        seeds: &[Vec<String>],
        node_timeout: Duration,
        native: bool,
    ) -> Result<Ours, String> {
        let mut builder = redlock_sync::Redlock::builder();
        for cluster in seeds {
            builder = builder.cluster(cluster);
        }
        let redlock = builder
            .node_timeout(node_timeout)
            .lock_wait(Duration::ZERO)
            .native_commands(native)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Ours { redlock })
    }

    fn connect_tls(urls: &[String], node_timeout: Duration) -> Result<Ours, String> {
        let redlock = redlock_sync::Redlock::builder()
            .nodes(urls)
            .tls_root_ca_pem(crate::tls::ca_pem())
            .node_timeout(node_timeout)
            .lock_wait(Duration::ZERO)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Ours { redlock })
    }
}

impl Client for Ours {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        SharedClient::pair(self, resource, ttl)
    }
}

impl SharedClient for Ours {
    fn pair(&self, resource: &str, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Ok(Some(lock)) = self.redlock.try_lock(resource, ttl) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        let released = lock.unlock().is_ok();
        Pair::released(started, acquired, released)
    }
}

/// The `rslock` crate (async, on redis-rs multiplexed connections), driven
/// the way a synchronous program would: `block_on` on a current-thread
/// runtime. It has no timeout setting of its own; redis-rs's defaults apply
/// (500 ms per response, 1 s to connect).
struct Rslock {
    runtime: tokio::runtime::Runtime,
    manager: rslock::LockManager,
}

impl Rslock {
    fn connect(urls: Vec<String>) -> Result<Rslock, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let mut manager = rslock::LockManager::new(urls);
        // One attempt (the delay is unused then, but must not be zero: it
        // bounds a random sample).
        manager.set_retry(1, Duration::from_millis(1));
        Ok(Rslock { runtime, manager })
    }
}

impl Client for Rslock {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Ok(lock) = self.runtime.block_on(self.manager.lock(resource, ttl)) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        // Best effort: the release reports nothing.
        self.runtime.block_on(lock.release());
        Pair::released(started, acquired, true)
    }
}

/// The `redlock` crate (synchronous, redis-rs 0.23): it opens a new
/// connection for every command, one master after the other, with no
/// timeout.
struct RedlockCrate {
    redlock: redlock::RedLock,
}

impl RedlockCrate {
    fn connect(urls: Vec<String>) -> RedlockCrate {
        let mut redlock = redlock::RedLock::new(urls);
        // One attempt (the delay must be at least 1: it bounds a random sample).
        redlock.set_retry(1, 1);
        RedlockCrate { redlock }
    }
}

impl Client for RedlockCrate {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        let ttl_ms = ttl.as_millis() as usize;
        let started = Instant::now();
        let Ok(Some(lock)) = self.redlock.lock(resource.as_bytes(), ttl_ms) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        // Best effort: the release reports nothing.
        self.redlock.unlock(&lock);
        Pair::released(started, acquired, true)
    }
}

/// Runs a client that may block forever on a worker thread, and gives up
/// on it for good once a pair takes longer than `limit`.
///
/// A stuck worker is left behind: it finishes when its server answers
/// again (a stopped one is resumed at the end of its scenario), finds the
/// request channel closed and exits.
pub struct Watched {
    requests: mpsc::Sender<(String, Duration)>,
    answers: mpsc::Receiver<Pair>,
    limit: Duration,
    hung: bool,
}

impl Watched {
    pub fn new(mut inner: Box<dyn Client>, limit: Duration) -> Watched {
        let (requests, work) = mpsc::channel::<(String, Duration)>();
        let (results, answers) = mpsc::channel();
        thread::spawn(move || {
            for (resource, ttl) in work {
                if results.send(inner.pair(&resource, ttl)).is_err() {
                    return;
                }
            }
        });
        Watched {
            requests,
            answers,
            limit,
            hung: false,
        }
    }
}

impl Client for Watched {
    fn pair(&mut self, resource: &str, ttl: Duration) -> Pair {
        let hung = Pair {
            acquire: self.limit,
            release: None,
            ok: false,
        };
        if self.hung || self.requests.send((resource.to_string(), ttl)).is_err() {
            return hung;
        }
        // The worker times the pair itself: the channels are not counted.
        self.answers.recv_timeout(self.limit).unwrap_or_else(|_| {
            self.hung = true;
            hung
        })
    }

    fn hangs(&self) -> bool {
        self.hung
    }
}
