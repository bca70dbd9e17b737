//! A master that Sentinels watch, counted as one voter
//! (`Builder::sentinel`): the masters it has met (each with its reconnect
//! backoff), which of them rounds send to, and the watcher that finds it.
//!
//! The watcher is a thread of the voter's own, off the lock path: it asks
//! the sentinels, one after the other until one answers,
//! `SENTINEL GET-MASTER-ADDR-BY-NAME name`, then asks that node `ROLE`
//! (with the master's credentials, never the sentinels'), and only a node
//! that says it is a master becomes the one rounds send to. It asks at
//! once when a round suspects a failover (the master's connection failed,
//! or it answered `READONLY`, `LOADING`, `MASTERDOWN`, or its set-up
//! found a replica), every [`POLL_EVERY`] otherwise (a failover that
//! left our connection to the old master alive, behind a partition, is
//! seen then), and never more often than every [`ASK_EVERY`]. Each
//! exchange is bounded by the handle's node timeout (at least
//! [`MIN_ASK_TIMEOUT`]).
//!
//! A round never waits for the sentinels: it routes to the master known,
//! or, with none known yet, fails the voter at once
//! ([`NodeError::NoMaster`]). A lock command never goes to a node whose
//! connection has not shown it is a master: every new connection to a
//! Sentinel voter's master asks what the server is in its handshake (the
//! identity probes, `command::identity`, then `ROLE`, `command::role`),
//! and an acquisition waits for `ROLE`'s answer.

use super::cluster::ClusterNode;
use super::health::NodeState;
use crate::command::Role;
use crate::conn::{exchange, Found, Node};
use crate::error::{Error, NodeError, ProtocolError};
use crate::os::fork_generation;
use crate::resp::{encode_command, Arg, Reply};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Most masters one Sentinel voter keeps (each failover to a node not met
/// before adds one; a set of a master and its replicas rarely has ten).
pub(crate) const MAX_SENTINEL_MASTERS: usize = 64;

/// The node index a round routes to while no master is known: one past
/// the last, which has no node (the round fails the voter with
/// [`NodeError::NoMaster`]).
const NO_MASTER: usize = MAX_SENTINEL_MASTERS;

/// How often the watcher asks the sentinels at most.
pub(crate) const ASK_EVERY: Duration = Duration::from_millis(100);

/// How often the watcher asks the sentinels when nothing is suspected.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(1);

/// The shortest time one exchange with a sentinel or a master may take.
pub(crate) const MIN_ASK_TIMEOUT: Duration = Duration::from_millis(250);

/// A master that Sentinels watch, counted as one voter.
pub(crate) struct SentinelVoter {
    /// `sentinel(host:port,...;name)`: how reports and the health view
    /// name it.
    name: String,
    watch: Arc<Watch>,
}

/// What the voter shares with its watcher thread.
struct Watch {
    master_name: String,
    /// The sentinels (only their `AUTH` is sent, then the question).
    sentinels: Vec<Node>,
    /// The masters' settings (credentials, database, TLS, handshake): each
    /// master met is a sibling of it.
    template: Node,
    /// The masters met, in order. Append-only, so that a lane's node index
    /// stays valid; read without a lock.
    masters: Box<[OnceLock<Box<ClusterNode>>]>,
    len: AtomicUsize,
    /// Serialises additions to `masters`.
    adding: Mutex<()>,
    /// The master rounds send to, as its index + 1 (0: none known).
    current: AtomicUsize,
    /// What the last ask found when it found no master.
    problem: Mutex<String>,
    signal: Mutex<Signal>,
    wake: Condvar,
    timeout: Duration,
    epoch: Instant,
}

#[derive(Default)]
struct Signal {
    /// A round suspects a failover: ask at once.
    suspected: bool,
    /// The voter is gone: the watcher ends.
    stopped: bool,
    /// The process generation whose watcher runs (`None`: none yet, or a
    /// forked child's copy of the parent's, which does not run here).
    running: Option<u64>,
}

impl fmt::Debug for SentinelVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelVoter")
            .field("name", &self.name)
            .field("current", &self.watch.current())
            .finish_non_exhaustive()
    }
}

impl SentinelVoter {
    /// A voter for the master the sentinels `sentinels` (parsed URLs, with
    /// the sentinels' credentials) know as `master_name`, reached with
    /// `template`'s settings (its own credentials). Asks the sentinels
    /// once here (bounded by `timeout` per exchange; a voter whose
    /// sentinels do not answer is built all the same, and found later),
    /// and starts the watcher.
    pub(crate) fn new(
        sentinels: Vec<Node>,
        template: Node,
        master_name: String,
        timeout: Duration,
        epoch: Instant,
    ) -> Result<SentinelVoter, Error> {
        let name = format!(
            "sentinel({};{master_name})",
            sentinels
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        let watch = Arc::new(Watch {
            master_name,
            sentinels,
            template,
            masters: (0..MAX_SENTINEL_MASTERS).map(|_| OnceLock::new()).collect(),
            len: AtomicUsize::new(0),
            adding: Mutex::new(()),
            current: AtomicUsize::new(0),
            problem: Mutex::new("the sentinels were not asked yet".into()),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            timeout: timeout.max(MIN_ASK_TIMEOUT),
            epoch,
        });
        watch.ask();
        let voter = SentinelVoter { name, watch };
        voter.ensure_watcher().map_err(Error::System)?;
        Ok(voter)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Master `k`, if met.
    #[inline]
    pub(crate) fn node(&self, k: usize) -> Option<&ClusterNode> {
        self.watch.node(k)
    }

    /// The node rounds send to: the master known, or an index without a
    /// node while none is (see [`SentinelVoter::no_master`]).
    #[inline]
    pub(crate) fn route(&self) -> usize {
        self.watch.current().unwrap_or(NO_MASTER)
    }

    /// The master known, else the template (which no lock command uses:
    /// for the release notices' subscriber, which then hears nothing
    /// here until a master is known).
    pub(crate) fn primary(&self) -> &Node {
        match self.watch.current().and_then(|k| self.watch.node(k)) {
            Some(master) => &master.node,
            None => &self.watch.template,
        }
    }

    /// The address of the master known, if any.
    pub(crate) fn master_addr(&self) -> Option<std::net::SocketAddr> {
        let k = self.watch.current()?;
        self.watch.node(k).and_then(|n| n.node.addr())
    }

    /// Why a round cannot send to the voter: no master known.
    pub(crate) fn no_master(&self) -> NodeError {
        let problem = self
            .watch
            .problem
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        NodeError::NoMaster(problem)
    }

    /// A round saw what a failover looks like: the watcher asks the
    /// sentinels at once (within [`ASK_EVERY`] of its last ask).
    pub(crate) fn suspect(&self) {
        let mut signal = self.watch.signal();
        signal.suspected = true;
        let forked = signal.running != Some(fork_generation());
        drop(signal);
        self.watch.wake.notify_one();
        if forked {
            // A forked child has no watcher: start its own.
            let _ = self.ensure_watcher();
        }
    }

    /// Starts the watcher if this process has none.
    fn ensure_watcher(&self) -> std::io::Result<()> {
        let mut signal = self.watch.signal();
        let generation = fork_generation();
        if signal.running == Some(generation) {
            return Ok(());
        }
        let watch = Arc::downgrade(&self.watch);
        std::thread::Builder::new()
            .name("redlock-sentinel".into())
            .spawn(move || run(&watch))?;
        signal.running = Some(generation);
        Ok(())
    }
}

impl Drop for SentinelVoter {
    /// The watcher ends with its voter.
    fn drop(&mut self) {
        self.watch.signal().stopped = true;
        self.watch.wake.notify_all();
    }
}

/// The watcher: asks the sentinels when suspected or every [`POLL_EVERY`],
/// at most every [`ASK_EVERY`], until its voter is dropped.
fn run(watch: &Weak<Watch>) {
    let mut last_ask = Instant::now();
    loop {
        let Some(watch) = watch.upgrade() else {
            return;
        };
        {
            let mut signal = watch.signal();
            loop {
                if signal.stopped || signal.running != Some(fork_generation()) {
                    return;
                }
                let since = last_ask.elapsed();
                let due = if signal.suspected {
                    ASK_EVERY
                } else {
                    POLL_EVERY
                };
                if since >= due {
                    break;
                }
                signal = watch
                    .wake
                    .wait_timeout(signal, due - since)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            signal.suspected = false;
        }
        last_ask = Instant::now();
        watch.ask();
    }
}

impl Watch {
    fn signal(&self) -> std::sync::MutexGuard<'_, Signal> {
        self.signal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn current(&self) -> Option<usize> {
        self.current.load(Ordering::Acquire).checked_sub(1)
    }

    fn node(&self, k: usize) -> Option<&ClusterNode> {
        self.masters.get(k)?.get().map(|b| &**b)
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Asks the sentinels for the master, then the master for its role;
    /// makes it the one rounds send to if it is one. Each sentinel in turn
    /// until one names a master that says so. What went wrong is kept
    /// for [`NodeError::NoMaster`]; a master known stays until another is
    /// shown (a sentinel that does not answer says nothing of it).
    fn ask(&self) {
        let mut problems = Vec::new();
        for sentinel in &self.sentinels {
            let named = match self.ask_sentinel(sentinel) {
                Ok(Some(named)) => named,
                Ok(None) => {
                    problems.push(format!(
                        "{} knows no master named {:?}",
                        sentinel.name, self.master_name
                    ));
                    continue;
                }
                Err(e) => {
                    problems.push(format!("{}: {e}", sentinel.name));
                    continue;
                }
            };
            let Some(k) = self.master_at(&named.0, named.1) else {
                problems.push(format!(
                    "{} names {}:{}, which cannot be reached (no address, or too many masters met)",
                    sentinel.name, named.0, named.1
                ));
                continue;
            };
            let Some(master) = self.node(k) else { continue };
            match self.ask_role(&master.node) {
                Ok(()) => {
                    self.current.store(k + 1, Ordering::Release);
                    return;
                }
                Err(e) => problems.push(format!(
                    "{} names {}, which is no master now: {e}",
                    sentinel.name, master.node.name
                )),
            }
        }
        *self.problem.lock().unwrap_or_else(PoisonError::into_inner) = problems.join("; ");
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME`: the master's host and port, or
    /// `None` if the sentinel knows no such master.
    fn ask_sentinel(&self, sentinel: &Node) -> Result<Option<(String, u16)>, NodeError> {
        let mut command = Vec::new();
        encode_command(
            &mut command,
            &[
                Arg::Bytes(b"SENTINEL"),
                Arg::Bytes(b"GET-MASTER-ADDR-BY-NAME"),
                Arg::Bytes(self.master_name.as_bytes()),
            ],
        );
        let mut named = None;
        let deadline = Instant::now() + self.timeout;
        exchange(sentinel, &command, 1, deadline, |_, reply| {
            named = Some(master_addr(reply)?);
            Ok(false)
        })?;
        Ok(named.flatten())
    }

    /// `ROLE` on `master`: `Ok` only if it says it is a master.
    fn ask_role(&self, master: &Node) -> Result<(), NodeError> {
        let mut command = Vec::new();
        Role::encode(&mut command);
        let mut role = None;
        let deadline = Instant::now() + self.timeout;
        exchange(master, &command, 1, deadline, |_, reply| {
            role = Some(Role::judge(reply)?);
            Ok(false)
        })?;
        match role.map(|role| role.refusal()) {
            Some(None) => Ok(()),
            Some(Some(refusal)) => Err(refusal),
            None => Err(NodeError::Closed),
        }
    }

    /// The index of the master at `host:port`, added (a sibling of the
    /// template) if not met yet; `None` if it cannot be (no room, or the
    /// host does not resolve).
    fn master_at(&self, host: &str, port: u16) -> Option<usize> {
        let template = &self.template;
        // Looked up here, on the watcher's thread, off the lock path.
        let probe = template.sibling(host, port, Found::Now).ok()?;
        let addr = probe.addr()?;
        let find = |watch: &Watch| {
            (0..watch.len()).find(|&k| watch.node(k).is_some_and(|n| n.node.addr() == Some(addr)))
        };
        if let Some(k) = find(self) {
            return Some(k);
        }
        let _adding = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = find(self) {
            return Some(k);
        }
        let k = self.len();
        let slot = self.masters.get(k)?;
        let _ = slot.set(Box::new(ClusterNode {
            node: probe,
            backoff: NodeState::new(self.epoch),
        }));
        self.len.store(k + 1, Ordering::Release);
        Some(k)
    }
}

/// Reads `SENTINEL GET-MASTER-ADDR-BY-NAME`'s answer: `[host, port]`, or
/// nil for a name the sentinel does not know.
fn master_addr(reply: &Reply<'_>) -> Result<Option<(String, u16)>, NodeError> {
    let unexpected = || {
        NodeError::Protocol(ProtocolError::UnexpectedReply(format!(
            "{} to SENTINEL GET-MASTER-ADDR-BY-NAME",
            crate::command::describe(reply)
        )))
    };
    match reply {
        Reply::Nil | Reply::NilArray => Ok(None),
        Reply::Array(items) if items.len() == 2 => {
            let mut it = items.iter();
            match (it.next(), it.next()) {
                (Some(Reply::Bulk(host)), Some(Reply::Bulk(port))) => {
                    let host = std::str::from_utf8(host).map_err(|_| unexpected())?;
                    let port = std::str::from_utf8(port)
                        .ok()
                        .and_then(|p| p.parse().ok())
                        .ok_or_else(unexpected)?;
                    Ok(Some((host.to_string(), port)))
                }
                _ => Err(unexpected()),
            }
        }
        Reply::Array(items) if items.is_empty() => Ok(None),
        Reply::Error(line) => Err(NodeError::Server(crate::error::ServerError::from_line(
            line,
        ))),
        _ => Err(unexpected()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn addr(bytes: &[u8]) -> Result<Option<(String, u16)>, NodeError> {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("a reply")
        };
        master_addr(&reply)
    }

    #[test]
    fn reads_the_masters_address_or_its_absence() {
        assert_eq!(
            addr(b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n"),
            Ok(Some(("127.0.0.1".into(), 6380)))
        );
        assert_eq!(addr(b"*-1\r\n"), Ok(None));
        assert_eq!(addr(b"$-1\r\n"), Ok(None));
        assert!(matches!(
            addr(b"-ERR unknown command\r\n"),
            Err(NodeError::Server(_))
        ));
        for bad in [
            &b"*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n"[..],
            b"*2\r\n$9\r\n127.0.0.1\r\n:6380\r\n",
            b"*1\r\n$9\r\n127.0.0.1\r\n",
            b"+OK\r\n",
        ] {
            assert!(matches!(addr(bad), Err(NodeError::Protocol(_))), "{bad:?}");
        }
    }
}
