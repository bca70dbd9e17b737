//! Group commit (`Builder::group_commit`): concurrent acquisitions and
//! releases of one handle, each of one resource and without fencing,
//! batched into one round whose commands reach every master in one write.
//!
//! A leader/follower scheme, with no thread of its own. A caller that
//! finds no round of the group in flight leads: it runs the lock layer's
//! own round (`lock::acquire::acquire_on`, or the lock's release),
//! unchanged (one uncontended mutex taken twice is all it adds). Callers that come while a round is
//! in flight queue a request and park. The thread that ran a round hands
//! the lead to the first queued caller before it returns; that caller
//! takes every queued request (at most [`MAX_BATCH`]) and runs them as one
//! batch round (`batch`, one op per request), posts each request's result
//! and unparks its owner, tells the hook, then hands the lead on again.
//!
//! A release must not overtake its lock's `SET` on a master that has not
//! answered it (see `pool`): a batch takes the session the first queued
//! release's `SET` went out on if it is idle, and a release whose `SET`
//! is unsettled on another session is not sent: its owner is told
//! [`Done::Unbatched`] and runs its own release round, as without the
//! group. So is a release that the group cannot send (its deadline passed
//! in the queue, the handle was shut down, a leader failed): a release is
//! never dropped. A batch ends by the deadlines of all the requests it
//! took, sent or not, so an unlock waits for at most its node timeout in
//! the group, then up to another in a round of its own.
//!
//! One round of the group is in flight at a time. A queued request's
//! budget counts from when it is queued, so the wait for the round in
//! flight is taken from it, and its batch ends at the earliest deadline
//! of its members (a master merely slow that has not answered by then is
//! charged a missed deadline). Slow or remote masters, whose round trip
//! is near the node timeout, therefore lose from the setting: in the
//! review of issue 35, with 30 ms added to each master's round trip, a
//! 50 ms node timeout and 8 threads of 15 locks each, 48 of 120
//! acquisitions failed with group commit on and none off (4 threads: 10
//! of 60 on, none off; with 20 ms added, none failed either way, at 0.64
//! of the throughput without the group).
//!
//! Deadlines: a request's deadline is fixed when it is queued (the round
//! budget of its TTL, as a round's own); a batch's is the earliest of its
//! requests', so never past its leader's. A queued caller whose deadline
//! passes before a batch took its request takes it out of the queue and
//! fails with `Error::QueueTimeout` (nothing was sent; retryable); so
//! does a request found expired by a leader taking a batch or handing the
//! lead on: such a request is never given the lead, and a caller handed
//! the lead whose own deadline passed before it woke runs no batch but
//! hands the lead on at once. A caller whose request is in a batch waits
//! for the batch, which ends by the batch's deadline
//! (at most its own) plus the time to post the results: a decided
//! request's owner is told when the whole batch ends, not as soon as its
//! own op is decided (a request that needs a slow master can keep the
//! others' owners waiting, each at most until its own deadline).
//!
//! A leader that panics inside a batch round (only a bug can make it)
//! posts an error to every request of the batch not yet told (`Posting`)
//! and hands the lead on (`Lead`'s drop), so no caller waits for it; but
//! it releases nothing more: the keys of the ops it granted (no lock
//! owns them) and of the failed ops whose releases it had not sent yet
//! stay on the masters until their TTL.
//!
//! Shutdown (`Redlock::shutdown`): every request still queued fails at
//! once with `Error::ShutDown`, nothing sent; a leader that finds the
//! handle shut down sends nothing and fails the requests it took so; a
//! batch already in flight ends by its deadline.
//!
//! After a `fork`, the child never touches the parent's group (whose
//! mutexes a thread of the parent, absent from the child, may have held
//! at the fork): its first call makes the child a group of its own (see
//! `os::fork_generation`), and its first caller leads afresh.

mod batch;
mod request;

pub(crate) use batch::{Done, Handle, Release};
use batch::{Part, Scratch};
pub(crate) use request::Request;
use request::{expired, lock, post, post_later, wake_later, Stage};

use crate::clock::BootInstant;
use crate::error::Error;
use crate::os::fork_generation;
use crate::round::KEPT_NAME_CAPACITY;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Instant;

/// The most requests one batch round takes.
pub(crate) const MAX_BATCH: usize = 256;

/// A handle's group: who leads, and who waits.
#[derive(Debug)]
pub(crate) struct Group {
    /// The process generation the group belongs to (see
    /// `os::fork_generation`).
    generation: u64,
    state: Mutex<State>,
    /// The leader's buffers (one batch runs at a time).
    buffers: Mutex<Buffers>,
    /// Name buffers for queued requests: a granted lock carries off its
    /// request's, and gives it back here when released through the group
    /// (so that the group allocates no name per call).
    names: Mutex<Vec<Vec<u8>>>,
    /// A forked child's own group, made by its first call: the child never
    /// touches the parent's mutexes, which a thread of the parent (absent
    /// from the child) may have held at the fork.
    forked: OnceLock<Box<Group>>,
}

/// A batch's requests and parts, and the batch's own buffers, kept with
/// their capacity from batch to batch.
struct Buffers {
    taken: Vec<Arc<Request>>,
    parts: Vec<Part>,
    scratch: Scratch,
}

impl fmt::Debug for Buffers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffers").finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Whether a caller leads (a round of the group is in flight, or the
    /// lead is being handed over).
    busy: bool,
    queue: VecDeque<Arc<Request>>,
    /// Requests done with, for reuse (no allocation per queued call in
    /// steady state).
    spare: Vec<Arc<Request>>,
}

/// What [`Group::enter`] found.
pub(crate) enum Entry<'g> {
    /// No round in flight: run the caller's own round, then drop the lead
    /// (which hands it on).
    Lead(Lead<'g>),
    /// Queued: [`Group::wait`] for the result.
    Queued(Arc<Request>),
}

/// The lead of a group, handed on when dropped (a panic included).
pub(crate) struct Lead<'g> {
    group: &'g Group,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        // A lead taken before a fork (a hook that forks while its thread
        // leads) is the parent's: the child must not touch that group.
        if fork_generation() == self.group.generation {
            self.group.hand_off();
        }
    }
}

impl Group {
    pub(crate) fn new() -> Group {
        Group {
            generation: fork_generation(),
            state: Mutex::new(State::default()),
            buffers: Mutex::new(Buffers {
                taken: Vec::new(),
                parts: Vec::new(),
                scratch: Scratch::keeping(MAX_BATCH),
            }),
            names: Mutex::new(Vec::new()),
            forked: OnceLock::new(),
        }
    }

    /// The group of this process: this one, or in a forked child its own.
    fn here(&self) -> &Group {
        if fork_generation() == self.generation {
            return self;
        }
        self.forked.get_or_init(|| Box::new(Group::new())).here()
    }

    /// Leads if no round is in flight; else queues a request to acquire
    /// `resource` (`ttl_ms` checked), whose round must end by `deadline`.
    pub(crate) fn enter(&self, resource: &[u8], ttl_ms: u64, deadline: Instant) -> Entry<'_> {
        self.enter_with(resource, ttl_ms, None, deadline)
    }

    /// Leads if no round is in flight; else queues `release` of
    /// `resource`, to be sent by `deadline` (else its owner sends it).
    pub(crate) fn enter_release(
        &self,
        resource: &[u8],
        release: Release,
        deadline: Instant,
    ) -> Entry<'_> {
        self.enter_with(resource, 0, Some(release), deadline)
    }

    fn enter_with(
        &self,
        resource: &[u8],
        ttl_ms: u64,
        release: Option<Release>,
        deadline: Instant,
    ) -> Entry<'_> {
        let group = self.here();
        let mut state = group.state();
        if !state.busy {
            state.busy = true;
            return Entry::Lead(Lead { group });
        }
        let request = state.spare.pop().unwrap_or_default();
        {
            let mut inner = lock(&request.inner);
            inner.stage = Stage::Queued;
            inner.thread = Some(thread::current());
            inner.resource.clear();
            if inner.resource.capacity() < resource.len() {
                // Its last buffer went to a lock it granted.
                if let Some(spare) = group.take_name() {
                    inner.resource = spare;
                }
            }
            inner.resource.extend_from_slice(resource);
            inner.ttl_ms = ttl_ms;
            inner.releasing = release.is_some();
            inner.release = release;
            inner.deadline = Some(deadline);
            inner.started = Some(BootInstant::now());
            inner.result = None;
        }
        state.queue.push_back(Arc::clone(&request));
        Entry::Queued(request)
    }

    /// Waits for `request`'s result: leads the group when handed the lead
    /// (running batches until its own request is done), or gives up once
    /// its deadline passes while it is still queued (a release is then
    /// [`Done::Unbatched`]).
    pub(crate) fn wait(&self, shared: Handle<'_>, request: Arc<Request>) -> Result<Done, Error> {
        self.here().wait_here(shared, request)
    }

    fn wait_here(&self, shared: Handle<'_>, request: Arc<Request>) -> Result<Done, Error> {
        loop {
            let mut inner = lock(&request.inner);
            match inner.stage {
                Stage::Done => {
                    let result = inner.result.take().unwrap_or_else(|| {
                        // Every path to `Done` stores a result first.
                        Err(Error::System(io::Error::other("no result posted")))
                    });
                    inner.thread = None;
                    inner.release = None;
                    drop(inner);
                    self.recycle(request);
                    return result;
                }
                Stage::Lead => {
                    drop(inner);
                    let lead = Lead { group: self };
                    // Our own request is the first the batch takes (or,
                    // if its deadline passed, is told so and none runs).
                    self.lead(shared, &request);
                    drop(lead);
                    continue;
                }
                Stage::Taken => {
                    drop(inner);
                    // The batch's leader posts the result within the
                    // batch's deadline (at most ours); it unparks us.
                    thread::park();
                }
                Stage::Queued => {
                    let deadline = inner.deadline.unwrap_or_else(Instant::now);
                    let now = Instant::now();
                    // Shut down after `Group::shut_down` looked at the
                    // queue (the caller's check of the flag came before
                    // it was set): it leaves by itself.
                    let stopped = shared.stop.is_set();
                    if now < deadline && !stopped {
                        drop(inner);
                        thread::park_timeout(deadline - now);
                        continue;
                    }
                    drop(inner);
                    if let Some(result) = self.leave(&request, stopped) {
                        lock(&request.inner).release = None;
                        return result;
                    }
                }
            }
        }
    }

    /// Takes a request whose deadline passed, or whose handle was shut
    /// down (`stopped`), out of the queue, if it is still there: its
    /// result, nothing sent (an acquisition's error, or a release's
    /// [`Done::Unbatched`]).
    fn leave(&self, request: &Arc<Request>, stopped: bool) -> Option<Result<Done, Error>> {
        if fork_generation() != self.generation {
            let mut inner = lock(&request.inner);
            inner.refuse(Error::Forked);
            return inner.result.take();
        }
        let mut state = self.state();
        let mut inner = lock(&request.inner);
        if inner.stage != Stage::Queued {
            return None;
        }
        let error = match stopped {
            true => Error::ShutDown,
            false => expired(&inner),
        };
        inner.refuse(error);
        let result = inner.result.take();
        drop(inner);
        state.queue.retain(|r| !Arc::ptr_eq(r, request));
        result
    }

    /// Runs one batch of the queued requests, the first of which is the
    /// caller's own, `own`: none if its deadline passed (the lead is then
    /// handed on at once), and never past its deadline.
    /// Once the handle is shut down, it sends nothing: every request it
    /// took fails with `Error::ShutDown`.
    fn lead(&self, shared: Handle<'_>, own: &Arc<Request>) {
        // Uncontended: only the leader takes it. Consistent after a panic
        // (a batch's leftovers are cleared before the next one).
        let mut guard = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        let buffers = &mut *guard;
        buffers.taken.clear();
        buffers.parts.clear();
        self.take(own, &mut buffers.taken, &mut buffers.parts);
        let taken = &buffers.taken;
        if taken.is_empty() {
            return;
        }
        if shared.stop.is_set() {
            for request in taken {
                let mut inner = lock(&request.inner);
                inner.refuse(Error::ShutDown);
                post(inner);
            }
            buffers.taken.clear();
            buffers.parts.clear();
            return;
        }
        let mut posting = Posting { taken, done: 0 };
        // Each result posted (its owner woken) before the hook is told.
        batch::run(
            shared,
            &mut buffers.parts,
            &mut buffers.scratch,
            |(result, name)| {
                let mut inner = lock(&taken[posting.done].inner);
                if name.capacity() > 0 {
                    // Kept for its next use (shrunk if a long name grew it).
                    let mut name = name;
                    name.shrink_to(KEPT_NAME_CAPACITY);
                    inner.resource = name;
                }
                inner.result = Some(result);
                post(inner);
                posting.done += 1;
            },
        );
        drop(posting);
        buffers.taken.clear();
    }

    /// Takes the batch the leader `own` runs into `taken` and `parts`: its
    /// own request first, then the queued requests (at most [`MAX_BATCH`]
    /// in all) whose deadlines have not passed; those that have are told
    /// so. None, its own request told so, if its own deadline passed: it
    /// would run the others' batch past its own deadline. The batch ends
    /// by the earliest of its requests' deadlines, so by the leader's own.
    fn take(&self, own: &Arc<Request>, taken: &mut Vec<Arc<Request>>, parts: &mut Vec<Part>) {
        let mut state = self.state();
        // The lead was handed to the queue's first request, which only
        // its owner takes out: `own` is at the front.
        let Some(at) = state.queue.iter().position(|r| Arc::ptr_eq(r, own)) else {
            // Unreachable; told, so that its owner does not lead again.
            let mut inner = lock(&own.inner);
            let error = io::Error::other("the group's lead without its request");
            inner.refuse(Error::System(error));
            post(inner);
            return;
        };
        let mut next = state.queue.remove(at);
        let mut later = Vec::new();
        while let Some(request) = next {
            let mut inner = lock(&request.inner);
            let now = Instant::now();
            match inner.deadline {
                Some(deadline) if deadline > now => {
                    inner.stage = Stage::Taken;
                    parts.push(Part {
                        resource: std::mem::take(&mut inner.resource),
                        ttl_ms: inner.ttl_ms,
                        release: inner.release.take(),
                        started: inner.started.unwrap_or_else(BootInstant::now),
                        deadline,
                    });
                    drop(inner);
                    taken.push(request);
                }
                _ => {
                    // Too late to send: fails as if it had left itself.
                    let error = expired(&inner);
                    inner.refuse(error);
                    post_later(inner, &mut later);
                    if taken.is_empty() {
                        // The leader's own: it runs no batch.
                        break;
                    }
                }
            }
            next = match taken.len() < MAX_BATCH {
                true => state.queue.pop_front(),
                false => None,
            };
        }
        drop(state);
        wake_later(later);
    }

    /// A spare name buffer, for a request or a lock (see `Group::names`).
    pub(crate) fn take_name(&self) -> Option<Vec<u8>> {
        self.here()
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// Takes back the name buffer of a lock released through the group
    /// (see `Group::names`), for the next queued acquisition; kept only up
    /// to [`MAX_BATCH`] of them.
    pub(crate) fn give_name(&self, mut name: Vec<u8>) {
        let group = self.here();
        name.clear();
        name.shrink_to(KEPT_NAME_CAPACITY);
        let mut names = group.names.lock().unwrap_or_else(PoisonError::into_inner);
        if names.len() < MAX_BATCH {
            names.push(name);
        }
    }

    /// The round in flight ended: the first queued caller leads next, or
    /// nobody does.
    fn hand_off(&self) {
        let mut state = self.state();
        let mut later = Vec::new();
        while let Some(first) = state.queue.front() {
            let mut inner = lock(&first.inner);
            if matches!(inner.deadline, Some(d) if d > Instant::now()) {
                inner.stage = Stage::Lead;
                let owner = inner.thread.clone();
                drop(inner);
                // Woken once both mutexes are free: it takes the
                // request's at once, and the group's to take its batch.
                drop(state);
                if let Some(owner) = owner {
                    owner.unpark();
                }
                wake_later(later);
                return;
            }
            // Its deadline passed while it was queued: told so, never
            // given the lead (it would run the others' batch past it).
            let error = expired(&inner);
            inner.refuse(error);
            post_later(inner, &mut later);
            state.queue.pop_front();
        }
        state.busy = false;
        drop(state);
        wake_later(later);
    }

    /// The handle was shut down (its flag already set): every request
    /// still queued fails with `Error::ShutDown` now, nothing sent. A
    /// request handed the lead is left to its owner (already woken), whose
    /// batch sends nothing once the handle is shut down; requests in a
    /// batch in flight learn its result by its deadline.
    pub(crate) fn shut_down(&self) {
        let group = self.here();
        let mut state = group.state();
        let mut later = Vec::new();
        state.queue.retain(|request| {
            let mut inner = lock(&request.inner);
            if inner.stage != Stage::Queued {
                return true;
            }
            inner.refuse(Error::ShutDown);
            post_later(inner, &mut later);
            false
        });
        drop(state);
        wake_later(later);
    }

    /// Keeps a done request for reuse. The leader that posted its result
    /// may still hold a clone for a moment, but never touches it again.
    fn recycle(&self, request: Arc<Request>) {
        // Not in a forked child on the parent's group (a hook that forked
        // while its thread led): a parent thread may have held the mutex.
        if fork_generation() != self.generation {
            return;
        }
        let mut state = self.state();
        if state.spare.len() < MAX_BATCH {
            state.spare.push(request);
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Consistent after every step, so a panic elsewhere while it was
        // held cannot leave it broken.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Posts an error to every taken request not yet done when the batch
/// ends early (a panic): no caller waits for a leader that is gone.
struct Posting<'a> {
    taken: &'a [Arc<Request>],
    done: usize,
}

impl Drop for Posting<'_> {
    fn drop(&mut self) {
        for request in &self.taken[self.done..] {
            let mut inner = lock(&request.inner);
            if inner.result.is_none() {
                let error = io::Error::other("the group commit's leader failed");
                inner.refuse(Error::System(error));
            }
            post(inner);
        }
    }
}

#[cfg(test)]
mod tests;
