//! The scenarios, and how one is run: its own servers, every client
//! connected and warmed up, then rounds in which the clients take turns,
//! each for one time window, in an order that rotates every round.

use crate::clients::{self, Client, Kind, Target, Watched};
use crate::cluster::RedisCluster;
use crate::measure::{self, ClientRun, Metric, RoundStats};
use crate::redis::{self, RedisServer};
use crate::servers::Sample;
use crate::workers::{RslockTasks, Workers};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// What every scenario shares.
pub struct Settings {
    pub rounds: usize,
    /// The clients `--clients` named; `None`: each scenario's own list.
    pub clients: Option<Vec<Kind>>,
    /// `HOST:PORT` of existing masters; `None`: start servers per scenario.
    pub nodes: Option<Vec<String>>,
    pub ttl: Duration,
    pub node_timeout: Duration,
}

/// One scenario of the benchmark.
pub struct Scenario {
    /// "s1" .. "s4", as given to `--scenarios`.
    pub id: &'static str,
    /// One master instead of five (with `--nodes`: the first one given).
    pub single_master: bool,
    /// Workers per client kind, each on its own thread (rslock's, when
    /// `shared`: tasks).
    pub threads: usize,
    /// The workers share one client where the kind allows it (ours: one
    /// handle; ref-batch: one batcher; rslock: one `LockManager`, its
    /// workers tasks on a multi-thread runtime); the others get a client
    /// per thread. Otherwise every worker has a client of its own.
    pub shared: bool,
    /// How long each client runs per round.
    pub window: Duration,
    /// Whether one master is stopped (SIGSTOP) during the rounds.
    pub freeze_one: bool,
    /// 0: the voters are standalone masters. Otherwise this many Redis
    /// Clusters of [`CLUSTER_SHARDS`] masters each, each cluster one voter.
    pub clusters: usize,
    pub metrics: &'static [Metric],
    /// The clients it runs unless `--clients` names others.
    pub clients: &'static [Kind],
    /// Whether it runs when `--scenarios` is not given.
    pub by_default: bool,
    /// The client the ratios in parentheses are taken to.
    pub baseline: Kind,
    /// A second client every other one is compared with, on lines of
    /// their own under the table.
    pub also: Option<Kind>,
}

/// Masters started when `--nodes` is not given (unless `single_master`).
pub const MASTERS: usize = 5;
/// Masters of each cluster in the cluster scenarios (no replicas: no
/// replication work that a standalone master does not do either).
pub const CLUSTER_SHARDS: usize = 3;
/// Warm-up per client instance, before the rounds: connections opened,
/// scripts loaded, caches filled.
const WARM_UP: Duration = Duration::from_millis(50);
/// In scenarios that read the servers' counters, the pause after a window
/// before they are read again: the commands still queued then are the
/// window's client's.
const SETTLE: Duration = Duration::from_millis(20);
/// Names each client instance cycles through: a fresh resource per pair.
const NAMES: usize = 1000;
/// In S3, the `redlock` crate (no timeouts) blocks on a stopped master:
/// an attempt that takes longer than this counts as "hangs".
const HANG_LIMIT: Duration = Duration::from_secs(2);

pub const SCENARIOS: [Scenario; 10] = [
    Scenario {
        id: "s1",
        single_master: false,
        threads: 1,
        shared: false,
        window: Duration::from_millis(200),
        freeze_one: false,
        clusters: 0,
        metrics: &[
            Metric::AcquireP50,
            Metric::AcquireP99,
            Metric::ReleaseP50,
            Metric::PairsPerSec,
        ],
        clients: &Kind::ALL,
        by_default: true,
        baseline: Kind::Reference,
        also: None,
    },
    Scenario {
        id: "s2",
        single_master: true,
        threads: 1,
        shared: false,
        window: Duration::from_millis(200),
        freeze_one: false,
        clusters: 0,
        metrics: &[Metric::AcquireP50, Metric::AcquireP99, Metric::PairsPerSec],
        clients: &Kind::ALL,
        by_default: true,
        baseline: Kind::Reference,
        also: None,
    },
    Scenario {
        id: "s3",
        single_master: false,
        threads: 1,
        shared: false,
        window: Duration::from_millis(200),
        freeze_one: true,
        clusters: 0,
        metrics: &[Metric::AcquireP50, Metric::AcquireP99, Metric::SuccessPct],
        clients: &Kind::ALL,
        by_default: true,
        baseline: Kind::Reference,
        also: None,
    },
    Scenario {
        id: "s4",
        single_master: false,
        threads: 4,
        shared: false,
        window: Duration::from_millis(400),
        freeze_one: false,
        clusters: 0,
        metrics: &[Metric::PairsPerSec],
        clients: &Kind::ALL,
        by_default: true,
        baseline: Kind::Reference,
        also: None,
    },
    Scenario {
        id: "c1",
        single_master: false,
        threads: 1,
        shared: false,
        window: Duration::from_millis(200),
        freeze_one: false,
        clusters: 3,
        metrics: &[
            Metric::AcquireP50,
            Metric::AcquireP99,
            Metric::ReleaseP50,
            Metric::PairsPerSec,
            Metric::ServerCpuPerPair,
        ],
        clients: &Kind::ALL,
        by_default: true,
        baseline: Kind::Reference,
        also: None,
    },
    many_threads_one_client("k1", 1),
    many_threads_one_client("k8", 8),
    many_threads_one_client("k32", 32),
    many_threads_one_client("k64", 64),
    // M1 (issue 36): one thread, 5 masters; one lock against a set of K
    // (one call) and the same K as single locks in sorted order, K = 2, 8,
    // 64, in one run (the clients take turns in each round). Only when
    // named (`--scenarios m1`).
    Scenario {
        id: "m1",
        single_master: false,
        threads: 1,
        shared: false,
        window: Duration::from_millis(300),
        freeze_one: false,
        clusters: 0,
        metrics: &[
            Metric::AcquireP50,
            Metric::AcquireP99,
            Metric::ReleaseP50,
            Metric::PairsPerSec,
            Metric::ServerCpuPerPair,
        ],
        clients: &SET_CLIENTS,
        by_default: false,
        baseline: Kind::Ours,
        also: None,
    },
];

/// The clients of M1: one lock, then per K the set and the sorted singles.
const SET_CLIENTS: [Kind; 7] = [
    Kind::Ours,
    Kind::OursSet2,
    Kind::OursSorted2,
    Kind::OursSet8,
    Kind::OursSorted8,
    Kind::OursSet64,
    Kind::OursSorted64,
];

/// The clients of the K scenarios: ours (one handle, with the default
/// pool, with an idle session kept per thread, and with group commit too),
/// `ref-notify` (a client
/// per thread, as a program with a client per thread does today), rslock
/// (one manager shared by tasks) and the batched reference (the limit).
const MANY_THREADS_CLIENTS: [Kind; 6] = [
    Kind::RefNotify,
    Kind::Ours,
    Kind::OursIdle,
    Kind::OursGroup,
    Kind::Rslock,
    Kind::RefBatch,
];

/// Scenario K`threads` (issue 35): 5 masters, `threads` threads sharing
/// one client, each taking and releasing locks on resources of its own as
/// fast as it can. Only when named (`--scenarios k1,k8,k32,k64`).
const fn many_threads_one_client(id: &'static str, threads: usize) -> Scenario {
    Scenario {
        id,
        single_master: false,
        threads,
        shared: true,
        window: Duration::from_millis(500),
        freeze_one: false,
        clusters: 0,
        metrics: &[
            Metric::PairsPerSec,
            Metric::AcquireP50,
            Metric::AcquireP99,
            Metric::ServerCpuPerPair,
            Metric::ClientCpuPerPair,
        ],
        clients: &MANY_THREADS_CLIENTS,
        by_default: false,
        baseline: Kind::RefNotify,
        also: Some(Kind::RefBatch),
    }
}

impl Scenario {
    /// The table's title line.
    pub fn title(&self, settings: &Settings) -> String {
        let masters = match (&settings.nodes, self.single_master) {
            (_, true) => 1,
            (Some(nodes), false) => nodes.len(),
            (None, false) => MASTERS,
        };
        let masters = match masters {
            _ if self.clusters > 0 => format!(
                "N={} voters, each a cluster of {CLUSTER_SHARDS} masters (no replicas)",
                self.clusters
            ),
            1 => "N=1 master".to_string(),
            n => format!("N={n} masters"),
        };
        let frozen = if self.freeze_one {
            ", first one stopped (SIGSTOP)"
        } else {
            ""
        };
        let threads = match self.threads {
            1 if !self.shared => "1 thread".to_string(),
            n if self.shared => format!(
                "{n} thread(s) sharing one client (ours: one handle; ref-batch: one batcher; \
                 rslock: one LockManager, {n} tasks on a multi-thread tokio runtime; \
                 ref-notify: a client per thread), a resource of its own per pair"
            ),
            n => format!("{n} threads, each with its own client"),
        };
        format!(
            "{}: {masters}{frozen}, {threads}; TTL {:?}, node timeout {:?}; \
             {} rounds × {:?}",
            self.id.to_uppercase(),
            settings.ttl,
            settings.node_timeout,
            settings.rounds,
            self.window
        )
    }

    /// The clients it runs: those `--clients` named, or its own.
    pub fn clients(&self, settings: &Settings) -> Vec<Kind> {
        settings
            .clients
            .clone()
            .unwrap_or_else(|| self.clients.to_vec())
    }

    /// Runs the scenario: one entry per client, in [`Scenario::clients`]
    /// order.
    pub fn run(&self, settings: &Settings) -> Result<Vec<ClientRun>, String> {
        let servers = Servers::for_scenario(self, settings)?;
        let nodes = servers.nodes();
        let tls_nodes = servers.tls_nodes();
        let cluster_masters = servers.cluster_masters();
        let target = match &servers {
            Servers::Clusters(_) => Target::Clusters(&cluster_masters),
            _ => Target::Masters {
                nodes: &nodes,
                tls_nodes: tls_nodes.as_deref(),
            },
        };
        let mut contenders: Vec<Contender> = self
            .clients(settings)
            .iter()
            .map(|&kind| Contender::connect(kind, self, target, settings))
            .collect();
        // The servers' counters, read around each window, if a metric needs them.
        let sampled = self
            .metrics
            .iter()
            .any(|m| matches!(m, Metric::ServerCpuPerPair));
        let sampled_servers = if sampled {
            servers.started()
        } else {
            Vec::new()
        };
        for contender in &mut contenders {
            contender.run_round(settings.ttl, WARM_UP);
        }
        // Resumed (SIGCONT) when dropped, also on a panic.
        let frozen = if self.freeze_one {
            Some(servers.pause_first()?)
        } else {
            None
        };
        for round in 0..settings.rounds {
            eprintln!("{}: round {}/{}", self.id, round + 1, settings.rounds);
            // A,B,C,D then B,C,D,A, ...: no client always goes first.
            let first = round % contenders.len().max(1);
            for index in (first..contenders.len()).chain(0..first) {
                let contender = &mut contenders[index];
                let before = (!sampled_servers.is_empty())
                    .then(|| Sample::take(&sampled_servers))
                    .transpose()?;
                let client_cpu = measure::process_cpu_us();
                let mut stats = contender.run_round(settings.ttl, self.window);
                if before.is_some() {
                    // Replies a client no longer waits for (the masters
                    // beyond the quorum) may still be queued at a master:
                    // their work belongs to this window.
                    thread::sleep(SETTLE);
                }
                if let Some(stats) = stats.as_mut() {
                    stats.set_client_cpu(measure::process_cpu_us() - client_cpu);
                }
                if let (Some(before), Some(stats)) = (before, stats.as_mut()) {
                    let used = Sample::take(&sampled_servers)?.since(&before);
                    stats.set_server_cpu(used.cpu_us);
                    contender
                        .result
                        .servers
                        .get_or_insert_with(Sample::default)
                        .accumulate(&used);
                }
                contender.result.rounds.push(stats);
            }
        }
        drop(frozen);
        Ok(contenders.into_iter().map(|c| c.result).collect())
    }
}

/// The masters of one scenario: started for it (with a TLS port each, in
/// the same order, when `ours-tls` runs), or given.
enum Servers {
    Started(redis::Cluster, Vec<u16>),
    Given(Vec<String>),
    /// Redis Clusters started for a cluster scenario.
    Clusters(Vec<RedisCluster>),
}

impl Servers {
    fn for_scenario(scenario: &Scenario, settings: &Settings) -> Result<Servers, String> {
        match &settings.nodes {
            Some(_) if scenario.clusters > 0 => {
                Err("skipped: it runs on clusters it starts (no --nodes)".into())
            }
            None if scenario.clusters > 0 => {
                if !redis::redis_server_available() {
                    return Err(redis::how_to_get_a_server());
                }
                Ok(Servers::Clusters(RedisCluster::start_many(
                    scenario.clusters,
                    CLUSTER_SHARDS,
                    0,
                )))
            }
            Some(_) if scenario.freeze_one => Err(
                "skipped: it stops a master, which needs servers it started (no --nodes)".into(),
            ),
            Some(nodes) if scenario.single_master => Ok(Servers::Given(nodes[..1].to_vec())),
            Some(nodes) => Ok(Servers::Given(nodes.clone())),
            None if !redis::redis_server_available() => Err(redis::how_to_get_a_server()),
            None => {
                let count = if scenario.single_master { 1 } else { MASTERS };
                if !scenario.clients(settings).contains(&Kind::OursTls) {
                    return Ok(Servers::Started(redis::Cluster::start(count), Vec::new()));
                }
                // Each its own TLS port, so started one by one.
                let ports: Vec<u16> = (0..count).map(|_| crate::tls::free_port()).collect();
                let servers = ports
                    .iter()
                    .map(|&port| {
                        let args = crate::tls::server_args(port);
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        redis::RedisServer::start_with(&args)
                    })
                    .collect();
                Ok(Servers::Started(redis::Cluster { servers }, ports))
            }
        }
    }

    /// `HOST:PORT` of each master.
    fn nodes(&self) -> Vec<String> {
        match self {
            Servers::Started(cluster, _) => cluster
                .servers
                .iter()
                .map(|s| s.addr().to_string())
                .collect(),
            Servers::Given(nodes) => nodes.clone(),
            Servers::Clusters(_) => Vec::new(),
        }
    }

    /// Per cluster, `HOST:PORT` of each of its masters (empty without
    /// clusters).
    fn cluster_masters(&self) -> Vec<Vec<String>> {
        match self {
            Servers::Clusters(clusters) => clusters
                .iter()
                .map(|cluster| {
                    cluster
                        .masters()
                        .into_iter()
                        .map(|m| cluster.node(m).addr().to_string())
                        .collect()
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every server the run started (none if they were given).
    fn started(&self) -> Vec<&RedisServer> {
        match self {
            Servers::Started(cluster, _) => cluster.servers.iter().collect(),
            Servers::Given(_) => Vec::new(),
            Servers::Clusters(clusters) => clusters.iter().flat_map(|c| c.nodes()).collect(),
        }
    }

    /// `HOST:PORT` of each master's TLS port, if the run started them so.
    fn tls_nodes(&self) -> Option<Vec<String>> {
        match self {
            Servers::Started(_, ports) if !ports.is_empty() => Some(
                ports
                    .iter()
                    .map(|port| format!("127.0.0.1:{port}"))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Stops the first master until the guard is dropped.
    fn pause_first(&self) -> Result<redis::PauseGuard<'_>, String> {
        match self {
            Servers::Started(cluster, _) => Ok(cluster.servers[0].pause()),
            Servers::Given(_) => Err("cannot stop a master given with --nodes".into()),
            Servers::Clusters(_) => Err("no master is stopped in the cluster scenarios".into()),
        }
    }
}

/// One client kind in a scenario: its workers, each with its own resource
/// names, and its figures so far.
struct Contender {
    /// `None` if it could not connect or runs not here (noted).
    workers: Option<Workers>,
    names: Vec<Arc<Vec<String>>>,
    result: ClientRun,
}

impl Contender {
    /// Connects its workers' client(s); on failure, none, with a note.
    fn connect(
        kind: Kind,
        scenario: &Scenario,
        target: Target<'_>,
        settings: &Settings,
    ) -> Contender {
        let mut result = ClientRun {
            kind,
            rounds: Vec::new(),
            note: None,
            servers: None,
        };
        let names = (0..scenario.threads)
            .map(|thread| {
                let names = (0..NAMES)
                    .map(|i| {
                        format!(
                            "peers:{}:{}:{}:{thread}:{i}",
                            std::process::id(),
                            scenario.id,
                            kind.name()
                        )
                    })
                    .collect();
                Arc::new(names)
            })
            .collect();
        if matches!(target, Target::Clusters(_)) && !kind.runs_on_clusters() {
            result.note = Some("not run: takes no cluster as a voter".into());
            return Contender {
                workers: None,
                names,
                result,
            };
        }
        let workers = Contender::workers(kind, scenario, target, settings);
        if let Err(e) = &workers {
            result.note = Some(format!("could not connect: {e}"));
        }
        Contender {
            workers: workers.ok(),
            names,
            result,
        }
    }

    fn workers(
        kind: Kind,
        scenario: &Scenario,
        target: Target<'_>,
        settings: &Settings,
    ) -> Result<Workers, String> {
        let threads = scenario.threads;
        if scenario.shared {
            if let Some(client) =
                clients::connect_shared(kind, target, settings.node_timeout, threads)?
            {
                return Ok(Workers::Shared { client, threads });
            }
            if let (Kind::Rslock, Target::Masters { nodes, .. }) = (kind, target) {
                let urls = nodes.iter().map(|node| format!("redis://{node}")).collect();
                let rslock = RslockTasks::connect(urls)?;
                return Ok(Workers::Tasks {
                    rslock,
                    tasks: threads,
                });
            }
        }
        let clients = (0..threads)
            .map(|_| {
                let client = clients::connect(kind, target, settings.node_timeout, threads)?;
                // Without a timeout of its own, it would block the run.
                Ok(if kind == Kind::Redlock && scenario.freeze_one {
                    Box::new(Watched::new(client, HANG_LIMIT)) as Box<dyn Client>
                } else {
                    client
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Workers::PerThread(clients))
    }

    /// Runs every worker for `window`, side by side; `None` if there is
    /// nothing to run or a client hangs (noted).
    fn run_round(&mut self, ttl: Duration, window: Duration) -> Option<RoundStats> {
        let workers = self.workers.as_mut()?;
        if workers.hangs() || workers.count() == 0 {
            return None;
        }
        let merged = workers.run(&self.names, ttl, window);
        if workers.hangs() {
            self.result.note = Some(format!(
                "hangs: an attempt took over {HANG_LIMIT:?}; left out from then on"
            ));
            return None;
        }
        Some(merged.stats())
    }
}
