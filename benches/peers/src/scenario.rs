//! The scenarios, and how one is run: its own servers, every client
//! connected and warmed up, then rounds in which the clients take turns,
//! each for one time window, in an order that rotates every round.

use crate::clients::{self, Client, Kind, Watched};
use crate::measure::{ClientRun, Metric, RoundStats, Window};
use crate::redis;
use std::thread;
use std::time::Duration;

/// What every scenario shares.
pub struct Settings {
    pub rounds: usize,
    pub clients: Vec<Kind>,
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
    /// Client instances per client kind, each on its own thread.
    pub threads: usize,
    /// How long each client runs per round.
    pub window: Duration,
    /// Whether one master is stopped (SIGSTOP) during the rounds.
    pub freeze_one: bool,
    pub metrics: &'static [Metric],
}

/// Masters started when `--nodes` is not given (unless `single_master`).
pub const MASTERS: usize = 5;
/// Warm-up per client instance, before the rounds: connections opened,
/// scripts loaded, caches filled.
const WARM_UP: Duration = Duration::from_millis(50);
/// Names each client instance cycles through: a fresh resource per pair.
const NAMES: usize = 1000;
/// In S3, the `redlock` crate (no timeouts) blocks on a stopped master:
/// an attempt that takes longer than this counts as "hangs".
const HANG_LIMIT: Duration = Duration::from_secs(2);

pub const SCENARIOS: [Scenario; 4] = [
    Scenario {
        id: "s1",
        single_master: false,
        threads: 1,
        window: Duration::from_millis(200),
        freeze_one: false,
        metrics: &[
            Metric::AcquireP50,
            Metric::AcquireP99,
            Metric::ReleaseP50,
            Metric::PairsPerSec,
        ],
    },
    Scenario {
        id: "s2",
        single_master: true,
        threads: 1,
        window: Duration::from_millis(200),
        freeze_one: false,
        metrics: &[Metric::AcquireP50, Metric::AcquireP99, Metric::PairsPerSec],
    },
    Scenario {
        id: "s3",
        single_master: false,
        threads: 1,
        window: Duration::from_millis(200),
        freeze_one: true,
        metrics: &[Metric::AcquireP50, Metric::AcquireP99, Metric::SuccessPct],
    },
    Scenario {
        id: "s4",
        single_master: false,
        threads: 4,
        window: Duration::from_millis(400),
        freeze_one: false,
        metrics: &[Metric::PairsPerSec],
    },
];

impl Scenario {
    /// The table's title line.
    pub fn title(&self, settings: &Settings) -> String {
        let masters = match (&settings.nodes, self.single_master) {
            (_, true) => 1,
            (Some(nodes), false) => nodes.len(),
            (None, false) => MASTERS,
        };
        let masters = match masters {
            1 => "N=1 master".to_string(),
            n => format!("N={n} masters"),
        };
        let frozen = if self.freeze_one {
            ", first one stopped (SIGSTOP)"
        } else {
            ""
        };
        let threads = match self.threads {
            1 => "1 thread".to_string(),
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

    /// Runs the scenario: one entry per client, in `settings.clients` order.
    pub fn run(&self, settings: &Settings) -> Result<Vec<ClientRun>, String> {
        let servers = Servers::for_scenario(self, settings)?;
        let nodes = servers.nodes();
        let tls_nodes = servers.tls_nodes();
        let mut contenders: Vec<Contender> = settings
            .clients
            .iter()
            .map(|&kind| Contender::connect(kind, self, &nodes, tls_nodes.as_deref(), settings))
            .collect();
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
                let stats = contender.run_round(settings.ttl, self.window);
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
}

impl Servers {
    fn for_scenario(scenario: &Scenario, settings: &Settings) -> Result<Servers, String> {
        match &settings.nodes {
            Some(_) if scenario.freeze_one => Err(
                "skipped: it stops a master, which needs servers it started (no --nodes)".into(),
            ),
            Some(nodes) if scenario.single_master => Ok(Servers::Given(nodes[..1].to_vec())),
            Some(nodes) => Ok(Servers::Given(nodes.clone())),
            None if !redis::redis_server_available() => Err(redis::how_to_get_a_server()),
            None => {
                let count = if scenario.single_master { 1 } else { MASTERS };
                if !settings.clients.contains(&Kind::OursTls) {
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
        }
    }
}

/// One client kind in a scenario: its instances (one per thread), each with
/// its own resource names, and its figures so far.
struct Contender {
    instances: Vec<(Box<dyn Client>, Vec<String>)>,
    result: ClientRun,
}

impl Contender {
    /// Connects `scenario.threads` instances; on failure, none, with a note.
    fn connect(
        kind: Kind,
        scenario: &Scenario,
        nodes: &[String],
        tls_nodes: Option<&[String]>,
        settings: &Settings,
    ) -> Contender {
        let mut result = ClientRun {
            kind,
            rounds: Vec::new(),
            note: None,
        };
        let mut instances = Vec::new();
        for thread in 0..scenario.threads {
            let client = match clients::connect(kind, nodes, tls_nodes, settings.node_timeout) {
                // Without a timeout of its own, it would block the run.
                Ok(client) if kind == Kind::Redlock && scenario.freeze_one => {
                    Box::new(Watched::new(client, HANG_LIMIT)) as Box<dyn Client>
                }
                Ok(client) => client,
                Err(e) => {
                    result.note = Some(format!("could not connect: {e}"));
                    return Contender {
                        instances: Vec::new(),
                        result,
                    };
                }
            };
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
            instances.push((client, names));
        }
        Contender { instances, result }
    }

    /// Runs every instance for `window`, side by side; `None` if there is
    /// nothing to run or a client hangs (noted).
    fn run_round(&mut self, ttl: Duration, window: Duration) -> Option<RoundStats> {
        if self.instances.is_empty() || self.hangs() {
            return None;
        }
        let merged = match self.instances.as_mut_slice() {
            [(client, names)] => Window::run(client.as_mut(), names, ttl, window),
            instances => Window::merge(thread::scope(|scope| {
                let handles: Vec<_> = instances
                    .iter_mut()
                    .map(|(client, names)| {
                        scope.spawn(|| Window::run(client.as_mut(), names, ttl, window))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("a client thread panicked"))
                    .collect()
            })),
        };
        if self.hangs() {
            self.result.note = Some(format!(
                "hangs: an attempt took over {HANG_LIMIT:?}; left out from then on"
            ));
            return None;
        }
        Some(merged.stats())
    }

    fn hangs(&self) -> bool {
        self.instances.iter().any(|(client, _)| client.hangs())
    }
}
