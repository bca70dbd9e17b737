//! Where a node is now: its address, and its host name looked up again
//! when it may have moved (a container restarted elsewhere, a managed
//! endpoint failed over), away from the rounds.
//!
//! A node's [`Address`] is a cell that every connection to it reads when
//! it dials (a lock held only to copy a `SocketAddr`: connections are
//! dialled rarely, and the cell allocates nothing). A node named by an IP
//! address never changes. One named by host is looked up again
//! ([`Address::readdress`]) when a connection to it could not be made, or
//! its cluster's topology was refreshed, or (a cluster node met during a
//! round) when it is first met:
//!
//! - **never inside a round**: a lookup (`getaddrinfo`) cannot be given a
//!   deadline, and takes seconds on an unanswering DNS server (glibc: 5 s
//!   per try, two tries). It runs on a short-lived thread of its own
//!   (`redlock-resolve`), which installs the answer and ends; the next
//!   connection to the node dials the new address, and connections
//!   already open are kept until they fail. No call waits for it.
//! - **bounded**: at most one lookup per node at a time, and one per
//!   [`RESOLVE_EVERY`] per node; at most [`MAX_LOOKUPS`] at once per
//!   handle (a request beyond them is dropped: the node's next failure
//!   asks again).
//! - **one server never votes twice**: an address that a node of another
//!   voter has is not taken (as `build()` refuses two URLs of one
//!   server); the node keeps its address, and the hook is told why.
//!
//! What changed is told to the handle's hook from the lookup's thread
//! ([`MasterChange::Readdressed`], and [`MasterChange::Unresolved`] once
//! per episode of failed lookups), with the feature `log` as log lines.

use super::resolve::Resolver;
use crate::events::tell::Hook;
use crate::events::{MasterChange, MasterEvent};
use crate::os::fork_generation;
use std::fmt;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

/// The shortest time between two lookups of one node's host name.
pub(crate) const RESOLVE_EVERY: Duration = Duration::from_secs(1);

/// Most lookups one handle runs at once (each on its own thread).
pub(crate) const MAX_LOOKUPS: usize = 4;

/// Why a node's host name is looked up again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// A connection to it could not be made (refused, unreachable, no
    /// answer to the connect): an address after the one that failed is
    /// preferred, if the name has several.
    Unreachable,
    /// Its cluster's topology was refreshed: the address it has is kept
    /// while the name still lists it.
    Refresh,
    /// A cluster node met during a round: it has no address yet.
    New,
}

/// What a handle's lookups share: the resolver, the hook they tell, and
/// every address cell (to keep one server from two voters).
pub(crate) struct Lookups {
    resolver: Resolver,
    hook: Hook,
    /// Per group (a voter as the builder was told it: a standalone
    /// master, or a cluster's seeds), the index and name events carry.
    groups: OnceLock<Vec<(usize, String)>>,
    /// Every address cell of the handle; its lock also serialises the
    /// installing of new addresses.
    cells: Mutex<Vec<Weak<Address>>>,
    /// Lookups running, in the process generation `running_in`.
    running: AtomicUsize,
    running_in: AtomicU64,
    epoch: Instant,
}

impl fmt::Debug for Lookups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookups")
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Lookups {
    /// The lookups of a handle that resolves with `resolver` and tells
    /// `hook`.
    pub(crate) fn new(resolver: Resolver, hook: Hook) -> Arc<Lookups> {
        Arc::new(Lookups {
            resolver,
            hook,
            groups: OnceLock::new(),
            cells: Mutex::new(Vec::new()),
            running: AtomicUsize::new(0),
            running_in: AtomicU64::new(fork_generation()),
            epoch: Instant::now(),
        })
    }

    /// Names the groups for the events: group `g` is told as voter
    /// `groups[g].0`, named `groups[g].1`.
    pub(crate) fn name_groups(&self, groups: Vec<(usize, String)>) {
        let _ = self.groups.set(groups);
    }

    /// Resolves `host` at once (when a handle is built: a blocking
    /// lookup never happens inside a round), to its first address.
    pub(crate) fn resolve_now(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        match self.resolver.0.resolve(host, port) {
            Ok(found) => found.first().copied().ok_or_else(|| "no addresses".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Takes one of the [`MAX_LOOKUPS`] places, if one is free.
    fn take_place(&self) -> bool {
        let generation = fork_generation();
        if self.running_in.load(Ordering::Relaxed) != generation {
            // A forked child: the parent's lookup threads are not here.
            self.running.store(0, Ordering::Relaxed);
            self.running_in.store(generation, Ordering::Relaxed);
        }
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < MAX_LOOKUPS).then_some(n + 1)
            })
            .is_ok()
    }

    fn give_place(&self) {
        let _ = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn cells(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Address>>> {
        // A list that every step leaves whole: poisoning is moot.
        self.cells.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the hook of a change of a node of group `group`.
    fn tell(&self, group: usize, change: MasterChange<'_>) {
        if let Some((index, name)) = self.groups.get().and_then(|g| g.get(group)) {
            self.hook.master(MasterEvent {
                index: *index,
                node: name,
                change,
            });
        }
    }
}

/// Where one node is now.
pub(crate) struct Address {
    /// The host name, if the node was named by one (else it never moves).
    host: Option<Box<str>>,
    /// The port the node was named with.
    port: u16,
    /// `host:port`, as the node is named.
    name: Box<str>,
    /// The address to dial (`None`: a cluster node whose name has not
    /// resolved yet).
    current: Mutex<Option<SocketAddr>>,
    /// Whether `current` is set (it is never unset): read without the
    /// lock where rounds route.
    resolved: AtomicBool,
    /// Whether a lookup moved it and no dial has used the new address
    /// yet: that dial skips the reconnect backoff, whose failures were at
    /// the old address.
    fresh: AtomicBool,
    /// The voter it belongs to, as the builder was told it (see
    /// `Lookups::groups`).
    group: usize,
    /// When the next lookup may start, in nanoseconds after the lookups'
    /// epoch.
    next_at: AtomicU64,
    /// The process generation a lookup runs in, plus one (0: none).
    running: AtomicU64,
    /// Whether a failed lookup was told and none succeeded since.
    told_unresolved: AtomicBool,
    lookups: Arc<Lookups>,
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Address")
            .field("name", &self.name)
            .field("current", &self.current())
            .finish_non_exhaustive()
    }
}

impl Address {
    /// The cell of node `name` of group `group`: at `current` (`None`
    /// until a lookup of `host` finds it), looked up again by `lookups`
    /// if it has a `host` name.
    pub(crate) fn new(
        lookups: &Arc<Lookups>,
        group: usize,
        name: String,
        host: Option<&str>,
        port: u16,
        current: Option<SocketAddr>,
    ) -> Arc<Address> {
        let cell = Arc::new(Address {
            host: host.map(Box::from),
            port,
            name: name.into_boxed_str(),
            current: Mutex::new(current),
            resolved: AtomicBool::new(current.is_some()),
            fresh: AtomicBool::new(false),
            group,
            next_at: AtomicU64::new(0),
            running: AtomicU64::new(0),
            told_unresolved: AtomicBool::new(false),
            lookups: Arc::clone(lookups),
        });
        lookups.cells().push(Arc::downgrade(&cell));
        cell
    }

    /// The address a new connection dials (`None`: not resolved yet).
    #[inline]
    pub(crate) fn current(&self) -> Option<SocketAddr> {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it has an address (one lookup of a cluster node met by
    /// name succeeded): one relaxed load, for routing.
    #[inline]
    pub(crate) fn is_resolved(&self) -> bool {
        self.resolved.load(Ordering::Relaxed)
    }

    /// Whether a lookup moved it since it was last dialled (see
    /// [`Address::take_fresh`]).
    #[inline]
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh.load(Ordering::Relaxed)
    }

    /// Whether a lookup moved it since it was last dialled; the dial that
    /// asks next is told no. A node moved this way is dialled at once,
    /// whatever its reconnect backoff says (its failures were at the old
    /// address), once.
    pub(crate) fn take_fresh(&self) -> bool {
        self.is_fresh() && self.fresh.swap(false, Ordering::Relaxed)
    }

    /// The port the node was named with.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The lookups it belongs to (a sibling's share them).
    pub(crate) fn lookups(&self) -> &Arc<Lookups> {
        &self.lookups
    }

    /// Its group (a sibling's is the same).
    pub(crate) fn group(&self) -> usize {
        self.group
    }

    /// Looks the host name up again, for `why`, on a thread of its own,
    /// unless the node has no host name, a lookup of it is running or
    /// started less than [`RESOLVE_EVERY`] before `now`, or the handle
    /// runs [`MAX_LOOKUPS`] already. Returns at once; the answer is
    /// installed when it comes.
    pub(crate) fn readdress(self: &Arc<Self>, why: Why, now: Instant) {
        if self.host.is_none() {
            return;
        }
        // Plus one: 0 means "none running".
        let generation = fork_generation().wrapping_add(1).max(1);
        if self.running.load(Ordering::Acquire) == generation {
            return;
        }
        let at = self.lookups.nanos(now);
        let due = self.next_at.load(Ordering::Relaxed);
        if at < due || !self.lookups.take_place() {
            return;
        }
        let next = at.saturating_add(RESOLVE_EVERY.as_nanos() as u64);
        if self
            .next_at
            .compare_exchange(due, next, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            // Another thread claimed this lookup.
            self.lookups.give_place();
            return;
        }
        self.running.store(generation, Ordering::Release);
        let cell = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("redlock-resolve".into())
            .spawn(move || cell.look_up(why));
        if spawned.is_err() {
            // No thread to be had (a resource limit): the next failure
            // asks again, after RESOLVE_EVERY.
            self.running.store(0, Ordering::Release);
            self.lookups.give_place();
        }
    }

    /// The lookup, on its own thread: resolve, install, tell.
    fn look_up(&self, why: Why) {
        let host = self.host.as_deref().unwrap_or_default();
        let found = catch_unwind(AssertUnwindSafe(|| {
            self.lookups.resolver.0.resolve(host, self.port)
        }));
        let outcome = match found {
            Ok(Ok(found)) if !found.is_empty() => self.install(&found, why),
            Ok(Ok(_)) => Outcome::Failed("no addresses".into()),
            Ok(Err(e)) => Outcome::Failed(e.to_string()),
            Err(_) => Outcome::Failed("the resolver panicked".into()),
        };
        // The next lookup comes a second after this one ended, on the
        // clock read now: the `now` its caller gave may be stale, and this
        // thread may have started late on a loaded machine (two lookups
        // 10 ms apart were seen when only the claim's time counted).
        let ended = self.lookups.nanos(Instant::now());
        self.next_at.fetch_max(
            ended.saturating_add(RESOLVE_EVERY.as_nanos() as u64),
            Ordering::AcqRel,
        );
        // Told before the lookup counts as ended: whoever sees it ended
        // (the next lookup, a test) sees its outcome told too. The next
        // one cannot start within RESOLVE_EVERY anyway.
        self.tell(&outcome);
        self.running.store(0, Ordering::Release);
        self.lookups.give_place();
    }

    /// Installs the address of `found` that `why` prefers (see [`choose`]),
    /// unless another voter's node has it.
    fn install(&self, found: &[SocketAddr], why: Why) -> Outcome {
        let cells = self.lookups.cells();
        let current = self.current();
        let taken = |addr: SocketAddr| {
            cells
                .iter()
                .filter_map(Weak::upgrade)
                .any(|other| other.group != self.group && other.current() == Some(addr))
        };
        match choose(found, current, why, taken) {
            Choice::Keep => Outcome::Kept,
            Choice::Use(to) => {
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(to);
                self.resolved.store(true, Ordering::Relaxed);
                self.fresh.store(current.is_some(), Ordering::Relaxed);
                Outcome::Moved { from: current, to }
            }
            Choice::Taken(addr) => Outcome::Failed(format!(
                "it resolves only to {addr}, the server of another voter (one server never \
                 votes twice)"
            )),
        }
    }

    fn tell(&self, outcome: &Outcome) {
        match outcome {
            Outcome::Kept | Outcome::Moved { from: None, .. } => {
                self.told_unresolved.store(false, Ordering::Relaxed);
            }
            Outcome::Moved {
                from: Some(from),
                to,
            } => {
                self.told_unresolved.store(false, Ordering::Relaxed);
                self.lookups.tell(
                    self.group,
                    MasterChange::Readdressed {
                        node: &self.name,
                        from: *from,
                        to: *to,
                    },
                );
            }
            Outcome::Failed(reason) => {
                if !self.told_unresolved.swap(true, Ordering::Relaxed) {
                    self.lookups.tell(
                        self.group,
                        MasterChange::Unresolved {
                            node: &self.name,
                            reason,
                            kept: self.current(),
                        },
                    );
                }
            }
        }
    }
}

/// What a lookup did.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The node keeps its address.
    Kept,
    /// The node moved (or, from `None`, was found).
    Moved {
        from: Option<SocketAddr>,
        to: SocketAddr,
    },
    /// The lookup failed, or found only other voters' servers: the node
    /// keeps its address.
    Failed(String),
}

/// Which address of a lookup's answer a node takes.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    /// The one it has.
    Keep,
    /// This one.
    Use(SocketAddr),
    /// None: every address found (the first shown) is another voter's.
    Taken(SocketAddr),
}

/// Picks from `found` (not empty) for a node at `current`, skipping what
/// is `taken`. After a failed connect, the addresses after the one that
/// failed come first (a name with several addresses, one of them down or
/// not served: `localhost` as `::1` and `127.0.0.1`, say), then it;
/// otherwise the current one is kept while the name lists it; else the
/// resolver's order.
fn choose(
    found: &[SocketAddr],
    current: Option<SocketAddr>,
    why: Why,
    taken: impl Fn(SocketAddr) -> bool,
) -> Choice {
    let at = current.and_then(|c| found.iter().position(|&a| a == c));
    let start = match (at, why) {
        (Some(i), Why::Unreachable) => i + 1,
        (Some(i), _) => i,
        (None, _) => 0,
    };
    let n = found.len();
    match (0..n).map(|k| found[(start + k) % n]).find(|&a| !taken(a)) {
        Some(a) if Some(a) == current => Choice::Keep,
        Some(a) => Choice::Use(a),
        None => Choice::Taken(found[0]),
    }
}

#[cfg(test)]
mod tests;
