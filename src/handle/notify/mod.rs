//! Release notices and the advisory queue: how a thread waiting for a held
//! lock learns, from messages on the resource's channel, that it may try
//! again now, and whether it is its turn.
//!
//! Each `Redlock` handle has at most one subscriber connection per master,
//! shared by all its waiting threads and subscribed to the channels they
//! wait on (`redlock-sync:released:<resource>`). There is no background
//! thread: one waiting thread at a time reads the subscriber connections
//! (the *leader*) and hands what it read to the others, which sleep on a
//! condition variable; when the leader stops waiting, another takes over.
//! So a lone waiter reads its messages itself, without a thread hop (the
//! leader's cycle is in `leader`).
//!
//! A master may refuse a subscription (an ACL user without rights on the
//! channels): its waiters then poll. The refusal is kept for `health()`
//! and for the error of a wait that ran out, and the hook is told of it
//! once, until that master confirms a subscription again.
//!
//! Every master that runs a release publishes its notice (see `message`);
//! the copies carry the same notice, so a release counts once. Waiters also
//! announce themselves on one master chosen by the resource (the queue's
//! master), and say when they took the lock or gave up: every subscriber
//! hears that master's messages in the same order, so all agree on who
//! waited first (see `channel`). A message is only ever a hint: it makes a
//! waiter try an acquisition, or hold back for a moment, and never grants
//! anything. What the waiters do with it is `lock::wait`'s business.
//!
//! A channel nobody waits on any more stays subscribed for [`LINGER`], so
//! that a thread that waits over and over does not subscribe over and over,
//! and knows the queue when it comes back.

pub(crate) mod any;
mod channel;
mod leader;
pub(crate) mod message;
mod sharded;
mod subscriber;

pub(crate) use crate::command::channel::channel_of;
use crate::command::channel::{channel_len, key_of};
use crate::error::ServerError;
use crate::events::tell::Hook;
use crate::os::fork_generation;
use crate::quorum::quorum;
use crate::round::Voter;
use channel::HERE;
pub(crate) use channel::{Channel, Heard};
pub(crate) use message::can_subscribe;
use message::{Id, Message};
use sharded::VoterSubs;
use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use subscriber::Event;

/// How long a channel stays subscribed after its last waiter left.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// Most channels kept subscribed without a waiter.
const MAX_LINGERING: usize = 64;

/// The masters' indexes in the order of their names: the order in which
/// [`queue_master`] picks, the same for every client configured with the
/// same masters, whatever order it lists them in.
pub(crate) fn name_order(names: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| names[i]);
    order
}

/// The master whose messages order `resource`'s queue, given the masters'
/// [`name_order`]: spread over the masters by resource.
pub(crate) fn queue_master(resource: &[u8], name_order: &[usize]) -> usize {
    // FNV-1a: stable across processes and builds, unlike the std hasher.
    let hash = resource.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let pick = hash % name_order.len().max(1) as u64;
    name_order.get(pick as usize).copied().unwrap_or(0)
}

/// A handle's release notices.
pub(crate) struct Notices {
    state: Mutex<State>,
    /// Number of masters.
    masters: usize,
    /// Per voter, whether it is a cluster (its notices are sharded).
    clusters: Vec<bool>,
    /// A byte written here wakes the leader (a channel was added).
    wake_write: UnixStream,
    wake_read: UnixStream,
    /// When [`Notices::tidy`] has something to do (the first lingering
    /// channel expires), in nanoseconds after `base`; `u64::MAX`: never.
    tidy_at: AtomicU64,
    base: Instant,
    /// Set while any channel is known (waited on, or lingering).
    any_channels: AtomicBool,
    /// Set by [`Notices::interrupt`]: every wait ends at once.
    interrupted: AtomicBool,
    /// Who is told that a master refused release notices.
    hook: Hook,
}

struct State {
    /// Each voter's subscriber connections; `None` while the leader reads
    /// them.
    subscribers: Option<Vec<VoterSubs>>,
    /// By resource (not by channel name, so that looking one up needs no
    /// allocation).
    channels: HashMap<Vec<u8>, Channel>,
    /// The process generation the connections belong to (see `os`).
    generation: u64,
    /// Per master: its last refusal of a subscription (an ACL without
    /// channel rights: waiters then poll), until it confirms one. The
    /// hook is told when one is set where there was none: once per master
    /// until it confirms a subscription, however many threads wait.
    refusals: Vec<Option<ServerError>>,
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

impl Notices {
    /// Notices for `voters`, whose refusals of release notices are told to
    /// `hook`. No connection is made until a thread waits.
    pub(crate) fn new(voters: &[Voter], hook: Hook) -> std::io::Result<Notices> {
        let (wake_read, wake_write) = UnixStream::pair()?;
        wake_read.set_nonblocking(true)?;
        wake_write.set_nonblocking(true)?;
        let masters = voters.len();
        let clusters: Vec<bool> = voters.iter().map(|v| v.cluster().is_some()).collect();
        Ok(Notices {
            state: Mutex::new(State {
                subscribers: Some(fresh(&clusters)),
                channels: HashMap::new(),
                generation: fork_generation(),
                refusals: vec![None; masters],
            }),
            masters,
            clusters,
            wake_write,
            wake_read,
            tidy_at: AtomicU64::new(u64::MAX),
            base: Instant::now(),
            any_channels: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            hook,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every field is consistent after each update.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.generation != fork_generation() {
            // A forked child: the connections are the parent's (closing our
            // copies leaves the parent's open).
            state.generation = fork_generation();
            state.subscribers = Some(fresh(&self.clusters));
            state.channels.clear();
            state.refusals.iter_mut().for_each(|r| *r = None);
        }
        state
    }

    /// Per master, its last refusal to subscribe us to release notices, if
    /// it has confirmed none since (see [`Interest::refused`]).
    pub(crate) fn refusals(&self) -> Vec<Option<ServerError>> {
        self.state().refusals.clone()
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether any channel is known: if not, none is subscribed (one
    /// atomic load, for the path of a lock taken without waiting).
    pub(crate) fn has_channels(&self) -> bool {
        self.any_channels.load(Ordering::Relaxed)
    }

    /// Whether `resource`'s channel is subscribed (a quorum of masters
    /// confirmed it) already: someone of this handle waited on it lately.
    pub(crate) fn is_subscribed(&self, resource: &[u8]) -> bool {
        let state = self.state();
        state
            .channels
            .get(resource)
            .is_some_and(Channel::subscribed_by_quorum)
    }

    /// Ends every wait on the channels, now and from now on (the handle
    /// was shut down): sleepers on a channel are woken, and so is the
    /// thread reading the subscriber connections.
    pub(crate) fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Release);
        let _ = (&self.wake_write).write(&[1]);
        // Under the state's lock, which a sleeper holds while it looks at
        // the flag and until it sleeps: none misses this.
        self.state().hand_over();
    }

    /// This handle released `resource`'s lock (the one with `notice`): its
    /// own waiters, if any, hear of it now, as if from a master (the
    /// masters' copies of the notice then count as the same release). One
    /// atomic load when nobody waits.
    pub(crate) fn released_here(&self, resource: &[u8], notice: Id) {
        if !self.has_channels() {
            return;
        }
        let mut state = self.state();
        if let Some(channel) = state.channels.get_mut(resource) {
            if channel.apply(HERE, Message::Released(notice), Instant::now()) {
                channel.wake();
            }
        }
    }

    /// Starts waiting on `resource`'s channel, whose queue `queue_master`
    /// orders; the waiter leaves on drop.
    pub(crate) fn join<'a>(
        &'a self,
        voters: &'a [Voter],
        resource: &[u8],
        queue_master: usize,
    ) -> Interest<'a> {
        let mut state = self.state();
        let entry = state
            .channels
            .entry(resource.to_vec())
            .or_insert_with(|| Channel::new(queue_master, self.masters));
        entry.waiters += 1;
        entry.idle_since = None;
        let subscribed = !entry.confirmed.is_empty();
        self.any_channels.store(true, Ordering::Relaxed);
        drop(state);
        if !subscribed {
            // A leader, if any, subscribes at once.
            let _ = (&self.wake_write).write(&[1]);
        }
        Interest {
            notices: self,
            voters,
            resource: resource.to_vec(),
            queue_master,
        }
    }

    /// Unsubscribes from the channels that lingered past [`LINGER`], if no
    /// thread is waiting: cheap to call often (one atomic load while no
    /// channel lingers, and a look at the clock until one's time is up),
    /// never blocks.
    pub(crate) fn tidy(&self, voters: &[Voter]) {
        let tidy_at = self.tidy_at.load(Ordering::Relaxed);
        if tidy_at == u64::MAX {
            return;
        }
        let now = Instant::now();
        if self.nanos(now) < tidy_at {
            return;
        }
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        let Some(mut subs) = state.subscribers.take() else {
            return;
        };
        let wanted = state.wanted(now);
        let next = state
            .channels
            .values()
            .filter_map(|c| c.idle_since)
            .min()
            .map_or(u64::MAX, |since| self.nanos(since + LINGER));
        self.tidy_at.store(next, Ordering::Relaxed);
        self.any_channels
            .store(!wanted.is_empty(), Ordering::Relaxed);
        let wanted: Vec<&[u8]> = wanted.iter().map(Vec::as_slice).collect();
        for (sub, voter) in subs.iter_mut().zip(voters) {
            sub.maintain(voter, &wanted, now);
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
        self.channels
            .keys()
            .map(|resource| {
                let mut channel = Vec::with_capacity(channel_len(resource));
                channel_of(resource, &mut channel);
                channel
            })
            .collect()
    }

    /// The state of the channel named `channel`, if it is one of ours.
    fn channel_mut(&mut self, channel: &[u8]) -> Option<&mut Channel> {
        self.channels.get_mut(key_of(channel)?)
    }

    /// Applies what the leader read, and wakes the threads concerned.
    /// Returns the masters whose refusal starts a new episode (none was
    /// kept for them: they never refused, or confirmed a subscription
    /// since), with the refusal: the hook is to be told of these.
    fn apply(&mut self, events: Vec<(usize, Event)>, now: Instant) -> Vec<(usize, ServerError)> {
        let mut newly_refused = Vec::new();
        for (master, event) in events {
            match event {
                Event::Message { channel, message } => {
                    if let Some(entry) = self.channel_mut(&channel) {
                        if entry.apply(master, message, now) {
                            entry.wake();
                        }
                    }
                }
                Event::Subscribed(channel) => {
                    self.refusals[master] = None;
                    if let Some(entry) = self.channel_mut(&channel) {
                        if entry.ever_confirmed.contains(master) {
                            // Subscribed again after a lost connection: a
                            // release may have gone unheard meanwhile.
                            entry.new_release(now);
                        }
                        entry.confirmed.insert(master);
                        entry.ever_confirmed.insert(master);
                        entry.changed();
                        entry.wake();
                    }
                }
                Event::Refused(channel, error) => {
                    if self.refusals[master].is_none() {
                        newly_refused.push((master, error.clone()));
                    }
                    self.refusals[master] = Some(error);
                    if let Some(entry) = self.channel_mut(&channel) {
                        entry.refused.insert(master);
                        entry.changed();
                        entry.wake();
                    }
                }
                // The master (or, for a cluster voter, every node of it) no
                // longer has these subscriptions: releases go unheard until
                // it confirms them again. (`Moved` is told as `Lost` once
                // no node of the voter hears the channel: see `sharded`.)
                Event::Lost(lost) => {
                    for channel in lost {
                        self.unheard(master, &channel);
                    }
                }
                Event::Moved(channel, _) => self.unheard(master, &channel),
            }
        }
        newly_refused
    }

    /// Master `master` no longer hears `channel`: its subscription is gone.
    fn unheard(&mut self, master: usize, channel: &[u8]) {
        if let Some(entry) = self.channel_mut(channel) {
            entry.confirmed.remove(master);
            if master == entry.queue_master {
                // Its messages in the gap are lost: the queue's order too.
                entry.forget_queue();
            }
            entry.changed();
        }
    }

    /// Wakes the threads of every channel that has some asleep, so that
    /// one of them takes the lead.
    fn hand_over(&self) {
        for entry in self.channels.values() {
            entry.wake();
        }
    }
}

/// One waiter's interest in a channel; it leaves when dropped.
pub(crate) struct Interest<'a> {
    notices: &'a Notices,
    voters: &'a [Voter],
    resource: Vec<u8>,
    queue_master: usize,
}

impl fmt::Debug for Interest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interest").finish_non_exhaustive()
    }
}

impl Interest<'_> {
    /// Runs `f` on the channel's state.
    pub(crate) fn view<R>(&self, f: impl FnOnce(&mut Channel) -> R) -> R {
        let mut state = self.notices.state();
        match state.channels.get_mut(&self.resource) {
            Some(channel) => f(channel),
            // A channel lives while it has waiters; only a fork (which
            // clears the state in the child) could take it away meanwhile:
            // then nothing is known of it.
            None => f(&mut Channel::new(self.queue_master, self.voters.len())),
        }
    }

    /// Waits until a quorum of masters confirmed the subscription (or too
    /// many refused it, or `until`). A release after this is not missed.
    pub(crate) fn subscribed(&self, until: Instant) -> bool {
        let n = self.voters.len();
        let q = quorum(n);
        let mut settled = false;
        self.wait_for(until, |c| {
            let (confirmed, refused) = (c.confirmed.len(), c.refused.len());
            settled = confirmed >= q;
            settled || refused > n - q
        });
        settled
    }

    /// How many masters refused this channel's subscription (so that this
    /// waiter hears no release from them), and the last refusal heard;
    /// `None` if none did.
    pub(crate) fn refused(&self) -> Option<(usize, ServerError)> {
        let state = self.notices.state();
        let refused = state.channels.get(&self.resource)?.refused;
        let error = refused
            .iter()
            .find_map(|m| state.refusals.get(m)?.clone())?;
        Some((refused.len(), error))
    }

    /// Takes in what the subscriber connections hold already, without
    /// waiting, unless another thread is reading them (it keeps the state
    /// current then).
    pub(crate) fn refresh(&self) {
        let notices = self.notices;
        let mut state = notices.state();
        if let Some(subs) = state.subscribers.take() {
            let now = Instant::now();
            let wanted = state.wanted(now);
            drop(state);
            drop(notices.lead_once(self.voters, subs, &wanted, now));
        }
    }

    /// The waiting loop: until `done` holds for the channel or `until`,
    /// reading the subscriber connections whenever no other thread does.
    /// `done` is asked again after every change to the channel. Ends at
    /// once when the handle is shut down ([`Notices::interrupt`]).
    pub(crate) fn wait_for(&self, until: Instant, mut done: impl FnMut(&mut Channel) -> bool) {
        let notices = self.notices;
        let mut state = notices.state();
        loop {
            if notices.interrupted.load(Ordering::Acquire) {
                return;
            }
            let Some(channel) = state.channels.get_mut(&self.resource) else {
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
            if let Some(subs) = state.subscribers.take() {
                let wanted = state.wanted(now);
                drop(state);
                state = notices.lead_once(self.voters, subs, &wanted, until);
                continue;
            }
            if let Some(channel) = state.channels.get_mut(&self.resource) {
                channel.sleepers += 1;
            }
            state = wakeup
                .wait_timeout(state, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            if let Some(channel) = state.channels.get_mut(&self.resource) {
                channel.sleepers -= 1;
            }
        }
    }
}

impl Drop for Interest<'_> {
    fn drop(&mut self) {
        let notices = self.notices;
        let mut state = notices.state();
        if let Some(entry) = state.channels.get_mut(&self.resource) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                let now = Instant::now();
                entry.idle_since = Some(now);
                notices
                    .tidy_at
                    .fetch_min(notices.nanos(now + LINGER), Ordering::Relaxed);
            }
        }
        // If this thread was the only one able to lead, another may now.
        state.hand_over();
    }
}

/// No subscriber connection yet, for voters that are clusters or not.
fn fresh(clusters: &[bool]) -> Vec<VoterSubs> {
    clusters
        .iter()
        .map(|&cluster| VoterSubs::new(cluster))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_master_goes_by_name_not_by_order() {
        let names = ["b:1", "a:1", "c:1"];
        let reordered = ["c:1", "b:1", "a:1"];
        let (order, reorder) = (name_order(&names), name_order(&reordered));
        for resource in [&b"orders:1"[..], b"orders:2", b"x", b""] {
            let i = queue_master(resource, &order);
            let j = queue_master(resource, &reorder);
            assert_eq!(names[i], reordered[j]);
        }
        // Resources spread over the masters.
        let picked: std::collections::HashSet<usize> = (0..64)
            .map(|n| queue_master(format!("r{n}").as_bytes(), &order))
            .collect();
        assert_eq!(picked.len(), 3);
    }
}
