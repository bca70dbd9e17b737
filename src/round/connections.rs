//! A session's connections, one per master, and what the rounds run on
//! them share: the command tags, when each was last sent to, what each has
//! settled (readable by other threads), connecting with the master's
//! reconnect backoff, and the poll set.

use super::plan::{Dial, Masters};
use crate::command::TAG_LIMIT;
use crate::conn::Conn;
use crate::error::NodeError;
use crate::os::{fork_generation, PollSet};
use crate::quorum::NodeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How far the session's connections have got, readable by other threads:
/// a lock whose SET is not yet answered on some master must send its
/// release on that master's connection (so it cannot overtake the SET),
/// unless that connection has settled the SET since. See `handle::pool`.
#[derive(Debug)]
pub(crate) struct Progress {
    /// Per master: every command up to this tag is settled (answered, or
    /// lost with a discarded connection). `u64::MAX` once the session is
    /// closed.
    settled: Box<[AtomicU64]>,
}

impl Progress {
    /// Whether master `i` has settled every command up to `tag`.
    pub(crate) fn has_settled(&self, i: usize, tag: u64) -> bool {
        self.settled[i].load(Ordering::Acquire) >= tag
    }
}

/// A connection to every master, and what the rounds run on them share.
#[derive(Debug)]
pub(super) struct Connections {
    pub(super) conns: Vec<Conn>,
    pub(super) poll: PollSet,
    /// The node behind each poll slot.
    pub(super) polled: Vec<usize>,
    /// The number of the current round: answers to other rounds are late.
    pub(super) round: u64,
    /// The next command tag: unique and increasing across the session, so
    /// on each of its connections.
    next_tag: u64,
    /// When each connection was last sent a command.
    pub(super) last_sent: Vec<Instant>,
    /// The nodes recorded in the current round as having missed a deadline
    /// (so that a round counts once per node).
    late: NodeSet,
    progress: Arc<Progress>,
    /// The process generation the connections were opened in (see
    /// `os::fork_generation`).
    fork_generation: u64,
}

impl Connections {
    pub(super) fn new(nodes: usize) -> Connections {
        Connections {
            conns: (0..nodes).map(|_| Conn::new()).collect(),
            poll: PollSet::default(),
            polled: Vec::with_capacity(nodes),
            round: 0,
            next_tag: 1,
            last_sent: vec![Instant::now(); nodes],
            late: NodeSet::EMPTY,
            progress: Arc::new(Progress {
                settled: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            }),
            fork_generation: fork_generation(),
        }
    }

    /// How far the connections have got, shared with the locks taken on
    /// them.
    pub(super) fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// Whether the connections were opened by this process (not inherited
    /// through `fork`).
    pub(super) fn belongs_to_this_process(&self) -> bool {
        self.fork_generation == fork_generation()
    }

    /// Numbers a new round and forgets the last one's late nodes (a node
    /// late in the last round may be late again in this one, and counts
    /// again).
    pub(super) fn next_round(&mut self) {
        self.round = self.round.wrapping_add(1);
        self.late = NodeSet::EMPTY;
    }

    /// Takes a fresh tag.
    pub(super) fn take_tag(&mut self) -> u64 {
        let tag = self.next_tag;
        // Wrapping would take 2^52 commands; if it ever did, tags restart
        // on connections that are reopened first (old ones are discarded).
        self.next_tag = if tag + 1 >= TAG_LIMIT { 1 } else { tag + 1 };
        if self.next_tag == 1 {
            for conn in &mut self.conns {
                conn.discard();
            }
        }
        tag
    }

    /// Makes sure node `i` has a connection to send on: replaces one whose
    /// server stopped answering, and connects (with its handshake due by
    /// `deadline`) if `dial` allows it.
    pub(super) fn open(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        now: Instant,
        deadline: Instant,
        dial: Dial,
    ) -> Result<(), NodeError> {
        let conn = &mut self.conns[i];
        let backoff = &masters.states[i];
        if conn.is_dead(now, masters.lag_limit) {
            // The answers may simply be sitting unread after an idle spell:
            // look before giving up on the connection.
            if conn.catch_up().is_err() || conn.is_dead(now, masters.lag_limit) {
                // The phase it stalled in: a connect or TLS handshake that
                // never finished, or replies.
                let phase = conn.phase();
                conn.discard();
                backoff.failed(now, &NodeError::TimedOut(phase));
            }
        }
        if !conn.is_open() {
            match dial {
                Dial::OutsideBackoff => backoff.check(now)?,
                Dial::UnlessFailingForGood => {
                    if let Some(permanent) = backoff.failing_for_good() {
                        // The command after a refused handshake was refused
                        // too: there is nothing to clean up.
                        return Err(permanent);
                    }
                }
                Dial::Every => {}
            }
            if let Err(e) = conn.connect(&masters.nodes[i], deadline) {
                conn.discard();
                backoff.failed(now, &e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Waits, until `until`, for the connections in `sent` (those sent to
    /// in this round) to finish connecting and take what is queued on them.
    pub(super) fn flush_sent(&mut self, sent: NodeSet, masters: Masters<'_>, until: Instant) {
        loop {
            self.poll.clear();
            self.polled.clear();
            for i in sent.iter() {
                let conn = &self.conns[i];
                // A TLS handshake also needs to read.
                let (read, write) = conn.interest();
                let read = read && conn.is_opening();
                if let (true, Some(fd)) = (read || write, conn.raw_fd()) {
                    self.poll.add(fd, read, write);
                    self.polled.push(i);
                }
            }
            let now = Instant::now();
            if self.polled.is_empty() || now >= until || self.poll.wait(until - now).is_err() {
                return;
            }
            for slot in 0..self.polled.len() {
                let ready = self.poll.ready(slot);
                let i = self.polled[slot];
                let conn = &mut self.conns[i];
                let mut step = Ok(());
                if ready.writable {
                    step = conn.on_writable();
                }
                if ready.readable && step.is_ok() {
                    step = conn.on_readable();
                }
                if let Err(e) = step {
                    conn.discard();
                    masters.states[i].failed(Instant::now(), &e);
                }
            }
        }
    }

    /// Records that node `i` missed a deadline, on a connection that is
    /// kept: failing in the health view, not in the reconnect backoff (see
    /// `health`). Once per round.
    pub(super) fn missed_deadline(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        error: NodeError,
        now: Instant,
    ) {
        if !self.late.contains(i) {
            self.late.insert(i);
            masters.states[i].missed_deadline(now, &error);
        }
    }

    /// Sends the notices of native releases that deleted, read while a
    /// round waited or by a look (see `conn::notice`): once a round whose
    /// deadline is `deadline` is decided, so that they do not delay it. A
    /// connection that breaks doing so is discarded.
    pub(super) fn send_notices(&mut self, masters: Masters<'_>, deadline: Instant) {
        for (i, conn) in self.conns.iter_mut().enumerate() {
            if let Err(e) = conn.send_notices(deadline) {
                conn.discard();
                masters.states[i].failed(Instant::now(), &e);
            }
        }
    }

    /// Makes what the connections have settled visible to other threads.
    pub(super) fn publish_progress(&self) {
        for (conn, settled) in self.conns.iter().zip(self.progress.settled.iter()) {
            settled.store(conn.settled_tag(), Ordering::Release);
        }
    }

    /// Reads, without waiting, what has arrived on the connections that owe
    /// replies, and returns whether they now owe nothing. Connections that
    /// fail are closed.
    pub(super) fn tidy(&mut self) -> bool {
        self.poll.clear();
        self.polled.clear();
        for (i, conn) in self.conns.iter().enumerate() {
            if let (true, Some(fd)) = (conn.owed_len() > 0, conn.raw_fd()) {
                self.poll.add(fd, true, conn.interest().1);
                self.polled.push(i);
            }
        }
        if !self.polled.is_empty() && self.poll.check().is_ok() {
            for slot in 0..self.polled.len() {
                let ready = self.poll.ready(slot);
                let conn = &mut self.conns[self.polled[slot]];
                let flushed = if ready.writable {
                    conn.on_writable()
                } else {
                    Ok(())
                };
                let read = flushed.and_then(|()| conn.catch_up());
                if read
                    .and_then(|()| conn.send_notices(Instant::now()))
                    .is_err()
                {
                    conn.discard();
                }
            }
        }
        self.publish_progress();
        self.conns.iter().all(|conn| conn.owed_len() == 0)
    }

    /// The latest deadline of any reply still owed.
    fn last_deadline(&self) -> Option<Instant> {
        self.conns.iter().filter_map(Conn::last_deadline).max()
    }

    /// Whether the session still owes replies whose deadline is in the
    /// future (worth keeping open a little longer).
    pub(super) fn owes_replies_due_after(&self, now: Instant) -> bool {
        self.last_deadline().is_some_and(|due| due > now)
    }
}

impl Drop for Connections {
    /// The connections close with the session: whatever they had not
    /// settled, the servers either ran or drop with them.
    fn drop(&mut self) {
        for settled in self.progress.settled.iter() {
            settled.store(u64::MAX, Ordering::Release);
        }
    }
}
