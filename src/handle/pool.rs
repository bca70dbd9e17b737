//! The sessions of one `Redlock` handle: taken for the length of one call,
//! given back after it, never waited on with a lock held.
//!
//! Connections scale with concurrent calls, not with held locks: a lock
//! gives its session back as soon as it is acquired. What it keeps is a
//! [`Ticket`]: which session its SET went out on, with which tag, to which
//! masters. Its release and extensions must not overtake that SET on a
//! master that has not answered it yet (Redis runs the commands of one
//! connection in order, but not across connections), so a call for the
//! lock takes the same session while the SET is unsettled on some master,
//! waiting (within its deadline) if another thread is using it. Once every
//! master has settled the SET, any session will do.
//!
//! Giving a session back never blocks: beyond `max_idle` idle sessions, a
//! session that owes nothing is closed at once, and one that still owes
//! replies is kept aside (draining) until it owes nothing or its servers
//! are past the lag limit (`round::lag_limit`: frozen or gone, not merely
//! slow), checked without waiting whenever sessions are given back. Not
//! sooner: a server that lags has read a connection's commands only in
//! part, and one closed under it may run a lock's `SET` and drop the
//! release queued behind it (a key until its TTL; tests/group_commit.rs,
//! the lagging master's test, left 2 to 25 keys so when draining sessions
//! closed once their replies were overdue). The
//! last handle's drop settles every session together, for at most one
//! node timeout in all.

use crate::os::fork_generation;
use crate::quorum::NodeSet;
use crate::round::{settle, Progress, Session};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// Where a lock's most recent SET went: the session (by its progress), the
/// SET's tag, and the masters it was sent to.
#[derive(Clone)]
pub(crate) struct Ticket {
    pub(crate) progress: Arc<Progress>,
    pub(crate) tag: u64,
    pub(crate) masters: NodeSet,
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("tag", &self.tag)
            .field("masters", &self.masters)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    /// The masters that have not yet settled the SET.
    pub(crate) fn unsettled(&self) -> NodeSet {
        let mut set = NodeSet::EMPTY;
        for i in self.masters.iter() {
            if !self.progress.has_settled(i, self.tag) {
                set.insert(i);
            }
        }
        set
    }

    /// Whether `session` is the one the SET went out on.
    pub(crate) fn is_on(&self, session: &Session) -> bool {
        Arc::ptr_eq(&self.progress, session.progress())
    }
}

/// A session taken for a call that must follow a ticket, and the masters
/// whose order behind the ticket's SET it could not guarantee (the SET's
/// session stayed busy in another thread past the call's deadline).
pub(crate) struct Taken {
    pub(crate) session: Box<Session>,
    pub(crate) unordered: NodeSet,
}

/// The session pool.
pub(crate) struct Pool {
    /// The process generation the pool belongs to (see
    /// `os::fork_generation`).
    generation: u64,
    state: Mutex<State>,
    /// Signalled when a session comes back while a call waits for it.
    returned: Condvar,
    max_idle: usize,
    nodes: usize,
    /// How long a draining session is kept for a server that lags (see
    /// `round::lag_limit`).
    lag_limit: Duration,
    /// A forked child's own pool, made by its first call (see
    /// [`Pool::here`]).
    forked: OnceLock<Box<Pool>>,
}

// Sessions are boxed on purpose (clippy's `vec_box` assumes the box is
// there for the vector's sake): each call moves its session out of the pool
// and back, and a box moves as one pointer.
#[allow(clippy::vec_box)]
#[derive(Default)]
struct State {
    /// Idle sessions, the most recently used last. Boxed: a session is
    /// several hundred bytes, and each call moves it out and back in.
    idle: Vec<Box<Session>>,
    /// Sessions beyond `max_idle` that still owed replies when given back.
    draining: Vec<Box<Session>>,
    /// Calls waiting in [`Pool::take_following`].
    waiters: usize,
    /// The sessions they wait for (by progress, one entry per waiting
    /// call): not lent to other calls while idle (see [`pop_unwanted`]).
    wanted: Vec<Arc<Progress>>,
}

/// An idle (else draining) session that no call waits for, the most
/// recently used first. A session waited for in [`Pool::take_following`]
/// is left to those calls: with group commit one session carries the
/// SETs of a whole batch, which the locks' releases and extensions must
/// follow on it while a master has not answered; lent to each new call
/// or batch instead, it can keep them waiting past their deadline, and a
/// release then leaves out the master that had not answered.
fn pop_unwanted(state: &mut State) -> Option<Box<Session>> {
    if state.wanted.is_empty() {
        return state.idle.pop().or_else(|| state.draining.pop());
    }
    let wanted = &state.wanted;
    let free = |s: &Session| !wanted.iter().any(|w| Arc::ptr_eq(w, s.progress()));
    if let Some(k) = state.idle.iter().rposition(|s| free(s)) {
        return Some(state.idle.remove(k));
    }
    let k = state.draining.iter().rposition(|s| free(s))?;
    Some(state.draining.remove(k))
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never waits: the counts only if the mutex is free (Debug must
        // not block, and in a forked child a parent thread may have held
        // it at the fork).
        let mut out = f.debug_struct("Pool");
        if let Ok(state) = self.state.try_lock() {
            out.field("idle", &state.idle.len())
                .field("draining", &state.draining.len());
        }
        out.field("max_idle", &self.max_idle)
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(nodes: usize, max_idle: usize, lag_limit: Duration) -> Pool {
        Pool {
            lag_limit,
            generation: fork_generation(),
            state: Mutex::new(State::default()),
            returned: Condvar::new(),
            max_idle,
            nodes,
            forked: OnceLock::new(),
        }
    }

    /// The pool of this process: this one, or in a forked child its own.
    /// A child never waits for the parent's mutex, which a thread of the
    /// parent (absent from the child) may have held at the fork: it takes
    /// it only if it is free, to close its copies of the parent's
    /// sessions' sockets (which leaves the parent's open) without reading
    /// or writing them.
    fn here(&self) -> &Pool {
        if fork_generation() == self.generation {
            return self;
        }
        self.forked
            .get_or_init(|| {
                let inherited = match self.state.try_lock() {
                    Ok(mut state) => Some(std::mem::take(&mut *state)),
                    Err(TryLockError::Poisoned(e)) => Some(std::mem::take(&mut *e.into_inner())),
                    Err(TryLockError::WouldBlock) => None,
                };
                drop(inherited);
                Box::new(Pool::new(self.nodes, self.max_idle, self.lag_limit))
            })
            .here()
    }

    /// An idle session, or a new one.
    pub(crate) fn take(&self) -> Box<Session> {
        let pool = self.here();
        let mut state = pool.state();
        let session = pop_unwanted(&mut state);
        drop(state);
        session.unwrap_or_else(|| Box::new(Session::new(pool.nodes)))
    }

    /// A session for a group commit's batch whose first release follows
    /// `ticket` (see `handle::group`): the ticket's own session if it is
    /// idle and no call waits for it in [`Pool::take_following`], else
    /// any session no call waits for, or a new one. Never waits. A batch
    /// that took a session calls wait for would keep them waiting (batches
    /// follow each other), and a release that cannot get its session by
    /// its deadline leaves out the masters that had not answered its `SET`.
    pub(crate) fn take_for_batch(&self, ticket: &Ticket) -> Box<Session> {
        let pool = self.here();
        let mut state = pool.state();
        let wanted = state
            .wanted
            .iter()
            .any(|w| Arc::ptr_eq(w, &ticket.progress));
        let own = |sessions: &[Box<Session>]| sessions.iter().position(|s| ticket.is_on(s));
        let session = match (wanted, own(&state.idle), own(&state.draining)) {
            (false, Some(k), _) => Some(state.idle.remove(k)),
            (false, None, Some(k)) => Some(state.draining.remove(k)),
            _ => pop_unwanted(&mut state),
        };
        drop(state);
        session.unwrap_or_else(|| Box::new(Session::new(pool.nodes)))
    }

    /// A session for a call that must follow `ticket`: its own session if
    /// some master has not settled the SET yet (waiting for it until
    /// `deadline` if another thread uses it), otherwise any.
    pub(crate) fn take_following(&self, ticket: &Ticket, deadline: Instant) -> Taken {
        let pool = self.here();
        if !std::ptr::eq(pool, self) {
            return pool.take_following(ticket, deadline);
        }
        let mut state = self.state();
        loop {
            let own = |sessions: &[Box<Session>]| sessions.iter().position(|s| ticket.is_on(s));
            if let Some(k) = own(&state.idle) {
                let session = state.idle.remove(k);
                return taken(session);
            }
            if let Some(k) = own(&state.draining) {
                let session = state.draining.remove(k);
                return taken(session);
            }
            let unsettled = ticket.unsettled();
            let now = Instant::now();
            if unsettled.is_empty() || now >= deadline {
                let session = pop_unwanted(&mut state);
                drop(state);
                return Taken {
                    session: session.unwrap_or_else(|| Box::new(Session::new(self.nodes))),
                    unordered: unsettled,
                };
            }
            // In use by another thread (for one round at most): wait for it
            // to come back, or for its progress to settle the SET.
            state.waiters += 1;
            state.wanted.push(Arc::clone(&ticket.progress));
            let (guard, _) = self
                .returned
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner);
            state = guard;
            state.waiters -= 1;
            let mine = state
                .wanted
                .iter()
                .position(|w| Arc::ptr_eq(w, &ticket.progress));
            if let Some(k) = mine {
                state.wanted.swap_remove(k);
            }
        }
    }

    /// Returns a session after a call. Never blocks: see the module docs.
    pub(crate) fn give_back(&self, session: Box<Session>) {
        if !session.belongs_to_this_process() {
            return; // closing our copies of the parent's sockets is all
        }
        let pool = self.here();
        if !std::ptr::eq(pool, self) {
            return pool.give_back(session);
        }
        let mut state = self.state();
        if state.idle.len() < self.max_idle {
            state.idle.push(session);
            self.wake_waiters(&state);
            return;
        }
        // Over the limit: close it if it owes nothing, else keep it aside.
        // Look at the ones kept aside before, too (outside the lock).
        let mut draining = std::mem::take(&mut state.draining);
        drop(state);
        let now = Instant::now();
        draining.push(session);
        draining.retain_mut(|s| !s.tidy() && s.owes_live_replies(now, self.lag_limit));
        let mut state = self.state();
        state.draining.append(&mut draining);
        self.wake_waiters(&state);
    }

    /// Settles every session together (at most `timeout` in all), then
    /// closes them: the last handle is gone.
    pub(crate) fn close_all(&self, timeout: Duration) {
        let pool = self.here();
        if !std::ptr::eq(pool, self) {
            return pool.close_all(timeout);
        }
        let mut state = self.state();
        let mut sessions = std::mem::take(&mut state.idle);
        sessions.append(&mut state.draining);
        drop(state);
        settle(&mut sessions, timeout);
    }

    fn wake_waiters(&self, state: &State) {
        // A notify is a system call: spare it when nobody waits.
        if state.waiters > 0 {
            self.returned.notify_all();
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The pool is a pair of stacks, consistent after every push and
        // pop, so a panic elsewhere while it was held cannot leave it broken.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn taken(session: Box<Session>) -> Taken {
    Taken {
        session,
        unordered: NodeSet::EMPTY,
    }
}
