//! Release notices: how a thread waiting for a held lock learns, from a
//! message the release publishes, that it may try again now.
//!
//! Each `Redlock` handle has at most one subscriber connection per master,
//! shared by all its waiting threads and subscribed to the channels they
//! wait on (`redlock-sync:released:<resource>`). There is no background
//! thread: one waiting thread at a time reads the subscriber connections
//! (the *leader*) and hands notices to the others, which sleep on a
//! condition variable; when the leader stops waiting, another takes over.
//! So a lone waiter reads its notices itself, without a thread hop.
//!
//! A notice is only a hint that a lock may be free: it makes a waiter try
//! an acquisition at once, and never grants anything. Every master that
//! runs a release publishes its notice; the copies carry the same payload
//! (the start of the released value), so a release counts once, and the
//! copies are kept as hints for a waiter whose attempt lost to a master
//! that had not yet run the release. A channel nobody waits on any more
//! stays subscribed for [`LINGER`], so that a thread that waits over and
//! over does not subscribe over and over.

mod subscriber;

use crate::fanout::NodeSet;
use crate::node::Node;
use crate::os::{fork_generation, PollSet};
use crate::quorum::quorum;
use std::collections::HashMap;
use std::fmt;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
pub(crate) use subscriber::NOTICE_LEN;
use subscriber::{Event, SubConn};

/// The prefix of the channel a release of `resource` publishes on.
pub(crate) const CHANNEL_PREFIX: &[u8] = b"redlock-sync:released:";

/// How long a channel stays subscribed after its last waiter left.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// Most channels kept subscribed without a waiter.
const MAX_LINGERING: usize = 64;

/// Appends the channel of `resource` to `out`.
pub(crate) fn channel_of(resource: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(CHANNEL_PREFIX);
    out.extend_from_slice(resource);
}

/// A handle's release notices.
pub(crate) struct Notices {
    state: Mutex<State>,
    /// Number of masters.
    masters: usize,
    /// A byte written here wakes the leader (a channel was added).
    wake_write: UnixStream,
    wake_read: UnixStream,
    /// Set while channels linger, so that [`Notices::tidy`] is worth a look.
    lingering: AtomicBool,
}

struct State {
    /// One per master; `None` while the leader reads them.
    subscribers: Option<Vec<SubConn>>,
    /// By channel name.
    channels: HashMap<Vec<u8>, Channel>,
    /// The process generation the connections belong to (see `os`).
    generation: u64,
}

/// What is known of one channel.
struct Channel {
    waiters: usize,
    /// Distinct releases seen.
    releases: u64,
    /// Copies of releases seen, and resubscriptions (a release may have
    /// been missed while a connection was down): hints to try again.
    hints: u64,
    /// The last release's notice, to tell copies from new releases.
    last: [u8; NOTICE_LEN],
    /// One in-process attempt per release: a new release sets it, the
    /// waiter that takes it tries.
    ticket: bool,
    /// The masters that confirmed or refused the subscription.
    confirmed: NodeSet,
    refused: NodeSet,
    /// When the last waiter left.
    idle_since: Option<Instant>,
    wakeup: Arc<Condvar>,
}

impl fmt::Debug for Notices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("Notices")
            .field("channels", &state.channels.len())
            .field("leading", &state.subscribers.is_none())
            .finish_non_exhaustive()
    }
}

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A new release was seen, and this thread may try.
    Release,
    /// A copy of a release, or a resubscription: worth one more try.
    Hint,
    /// The time ran out.
    Timeout,
}

/// Where a waiter stands: what it has seen of its channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    releases: u64,
    hints: u64,
}

impl Notices {
    /// Notices for `masters` masters. No connection is made until a
    /// thread waits.
    pub(crate) fn new(masters: usize) -> std::io::Result<Notices> {
        let (wake_read, wake_write) = UnixStream::pair()?;
        wake_read.set_nonblocking(true)?;
        wake_write.set_nonblocking(true)?;
        Ok(Notices {
            state: Mutex::new(State {
                subscribers: Some(fresh(masters)),
                channels: HashMap::new(),
                generation: fork_generation(),
            }),
            masters,
            wake_write,
            wake_read,
            lingering: AtomicBool::new(false),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every field is consistent after each update.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.generation != fork_generation() {
            // A forked child: the connections are the parent's (closing our
            // copies leaves the parent's open).
            state.generation = fork_generation();
            state.subscribers = Some(fresh(self.masters));
            state.channels.clear();
        }
        state
    }

    /// Starts waiting on `channel`'s notices; the waiter leaves on drop.
    pub(crate) fn join<'a>(&'a self, nodes: &'a [Node], channel: &[u8]) -> Interest<'a> {
        let mut state = self.state();
        let entry = state
            .channels
            .entry(channel.to_vec())
            .or_insert_with(|| Channel {
                waiters: 0,
                releases: 0,
                hints: 0,
                last: [0; NOTICE_LEN],
                ticket: false,
                confirmed: NodeSet::EMPTY,
                refused: NodeSet::EMPTY,
                idle_since: None,
                wakeup: Arc::new(Condvar::new()),
            });
        entry.waiters += 1;
        entry.idle_since = None;
        let subscribed = !entry.confirmed.is_empty();
        drop(state);
        if !subscribed {
            // A leader, if any, subscribes at once.
            let _ = (&self.wake_write).write(&[1]);
        }
        Interest {
            notices: self,
            nodes,
            channel: channel.to_vec(),
        }
    }

    /// Unsubscribes from the channels that lingered past [`LINGER`], if no
    /// thread is waiting: cheap to call often (one atomic load when nothing
    /// lingers), never blocks.
    pub(crate) fn tidy(&self, nodes: &[Node]) {
        if !self.lingering.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        let Some(mut subs) = state.subscribers.take() else {
            return;
        };
        let now = Instant::now();
        let wanted = state.wanted(now);
        self.lingering.store(!wanted.is_empty(), Ordering::Relaxed);
        let wanted: Vec<&[u8]> = wanted.iter().map(Vec::as_slice).collect();
        for (sub, node) in subs.iter_mut().zip(nodes) {
            sub.maintain(node, &wanted, now);
        }
        state.subscribers = Some(subs);
    }
}

impl State {
    /// The channels to be subscribed to: those with waiters, and those
    /// that lost their last one less than [`LINGER`] ago (at most
    /// [`MAX_LINGERING`]). The others are forgotten.
    fn wanted(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut lingering: Vec<(Instant, Vec<u8>)> = Vec::new();
        self.channels
            .retain(|name, channel| match channel.idle_since {
                None => true,
                Some(since) if now.saturating_duration_since(since) < LINGER => {
                    lingering.push((since, name.clone()));
                    true
                }
                Some(_) => false,
            });
        if lingering.len() > MAX_LINGERING {
            lingering.sort();
            let drop = lingering.len() - MAX_LINGERING;
            for (_, name) in lingering.drain(..drop) {
                self.channels.remove(&name);
            }
        }
        self.channels.keys().cloned().collect()
    }

    /// Applies what the leader read.
    fn apply(&mut self, events: Vec<(usize, Event)>) {
        for (master, event) in events {
            match event {
                Event::Notice { channel, notice } => {
                    let Some(entry) = self.channels.get_mut(&channel) else {
                        continue;
                    };
                    if notice != entry.last {
                        entry.last = notice;
                        entry.releases += 1;
                        entry.ticket = true;
                        entry.wakeup.notify_one();
                    } else {
                        entry.hints += 1;
                        entry.wakeup.notify_all();
                    }
                }
                Event::Subscribed(channel) => {
                    if let Some(entry) = self.channels.get_mut(&channel) {
                        entry.confirmed.insert(master);
                        entry.hints += 1; // a release may have come before
                        entry.wakeup.notify_all();
                    }
                }
                Event::Refused(channel) => {
                    if let Some(entry) = self.channels.get_mut(&channel) {
                        entry.refused.insert(master);
                        entry.wakeup.notify_all();
                    }
                }
                Event::Lost => {
                    for entry in self.channels.values_mut() {
                        entry.confirmed.remove(master);
                    }
                }
            }
        }
    }

    /// Wakes one waiter on every channel that has some, so that one of
    /// them takes the lead.
    fn hand_over(&self) {
        for entry in self.channels.values() {
            if entry.waiters > 0 {
                entry.wakeup.notify_one();
            }
        }
    }
}

/// One waiter's interest in a channel; it leaves when dropped.
pub(crate) struct Interest<'a> {
    notices: &'a Notices,
    nodes: &'a [Node],
    channel: Vec<u8>,
}

impl fmt::Debug for Interest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interest").finish_non_exhaustive()
    }
}

impl Interest<'_> {
    /// What has been seen on the channel so far.
    pub(crate) fn seen(&self) -> Seen {
        let state = self.notices.state();
        state
            .channels
            .get(&self.channel)
            .map_or(Seen::default(), |c| Seen {
                releases: c.releases,
                hints: c.hints,
            })
    }

    /// Waits until a quorum of masters confirmed the subscription (or too
    /// many refused it, or `until`). A release after this is not missed.
    pub(crate) fn subscribed(&self, until: Instant) -> bool {
        let n = self.nodes.len();
        let q = quorum(n);
        let mut settled = false;
        self.wait_for(until, |c| {
            let (confirmed, refused) = (c.confirmed.len(), c.refused.len());
            settled = confirmed >= q;
            settled || refused > n - q
        });
        settled
    }

    /// Whether enough masters refused the subscription (an ACL without
    /// channel rights) that notices cannot be relied on.
    pub(crate) fn refused(&self) -> bool {
        let state = self.notices.state();
        let n = self.nodes.len();
        state
            .channels
            .get(&self.channel)
            .is_some_and(|c| c.refused.len() > n - quorum(n))
    }

    /// Waits for a release after `seen` for which this thread takes the
    /// ticket, or, with `hints`, also for a copy or resubscription after
    /// `seen`; at most until `until`.
    pub(crate) fn wait(&self, seen: Seen, hints: bool, until: Instant) -> Wake {
        let mut wake = Wake::Timeout;
        self.wait_for(until, |c| {
            if c.releases > seen.releases && c.ticket {
                c.ticket = false;
                wake = Wake::Release;
                true
            } else if hints && (c.hints > seen.hints || c.releases > seen.releases) {
                wake = Wake::Hint;
                true
            } else {
                false
            }
        });
        wake
    }

    /// The waiting loop: until `done` holds for the channel or `until`,
    /// reading the subscriber connections whenever no other thread does.
    fn wait_for(&self, until: Instant, mut done: impl FnMut(&mut Channel) -> bool) {
        let notices = self.notices;
        let mut state = notices.state();
        loop {
            let Some(channel) = state.channels.get_mut(&self.channel) else {
                return;
            };
            if done(channel) {
                return;
            }
            let wakeup = Arc::clone(&channel.wakeup);
            let now = Instant::now();
            if now >= until {
                return;
            }
            if let Some(mut subs) = state.subscribers.take() {
                let wanted = state.wanted(now);
                drop(state);
                let events = lead(notices, self.nodes, &mut subs, &wanted, until);
                state = notices.state();
                state.apply(events);
                state.subscribers = Some(subs);
                state.hand_over();
                continue;
            }
            state = wakeup
                .wait_timeout(state, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Interest<'_> {
    fn drop(&mut self) {
        let notices = self.notices;
        let mut state = notices.state();
        if let Some(entry) = state.channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                entry.idle_since = Some(Instant::now());
                notices.lingering.store(true, Ordering::Relaxed);
            }
        }
        // If this thread was the only one able to lead, another may now.
        state.hand_over();
    }
}

/// A subscriber connection (not yet connected) per master.
fn fresh(masters: usize) -> Vec<SubConn> {
    (0..masters).map(|_| SubConn::new()).collect()
}

/// One cycle of the leader: brings the connections in line with `wanted`,
/// waits (until `until`, or a retry is due) for any of them or the wake
/// pipe, and returns what they said.
fn lead(
    notices: &Notices,
    nodes: &[Node],
    subs: &mut [SubConn],
    wanted: &[Vec<u8>],
    until: Instant,
) -> Vec<(usize, Event)> {
    let now = Instant::now();
    let wanted: Vec<&[u8]> = wanted.iter().map(Vec::as_slice).collect();
    for (sub, node) in subs.iter_mut().zip(nodes) {
        sub.maintain(node, &wanted, now);
    }
    let mut poll = PollSet::default();
    let wake_slot = poll.add(notices.wake_read.as_raw_fd(), true, false);
    let mut polled = Vec::with_capacity(subs.len());
    for (i, sub) in subs.iter().enumerate() {
        if let Some((fd, read, write)) = sub.interest() {
            poll.add(fd, read, write);
            polled.push(i);
        }
    }
    let wake_at = subs
        .iter()
        .filter_map(SubConn::retry_at)
        .fold(until, Instant::min);
    let mut events = Vec::new();
    if poll.wait(wake_at.saturating_duration_since(now)).is_err() {
        return events;
    }
    if poll.ready(wake_slot).readable {
        let mut drain = [0u8; 64];
        while matches!((&notices.wake_read).read(&mut drain), Ok(n) if n > 0) {}
    }
    let now = Instant::now();
    for (slot, &i) in polled.iter().enumerate() {
        let ready = poll.ready(slot + 1);
        if ready.readable || ready.writable {
            subs[i].service(ready.writable, ready.readable, now, &mut |event| {
                events.push((i, event))
            });
        }
    }
    events
}
