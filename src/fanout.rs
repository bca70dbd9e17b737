//! One round: write one command to every master at once from this thread,
//! then wait for all of them together with poll(2), each under its own
//! deadline, and stop as soon as the outcome is known.
//!
//! A [`Session`] is one thread's set of connections (one per master) plus
//! the buffers a round needs; sessions are pooled by the `Redlock` handle, so
//! a round never waits for another thread's. Replies a round did not wait for
//! stay owed on their connection and are read (and checked) by a later round
//! before that round's own reply, or the connection is discarded once they
//! are overdue.

use crate::backoff::Backoff;
use crate::conn::{Conn, Purpose};
use crate::error::{NodeError, NodeOutcome, NodeReport, NodeStatus};
use crate::node::Node;
use crate::poll::{PollSet, Ready};
use crate::quorum::{Decision, Tally};
use crate::script::{is_noscript, Command, Vote};
use std::time::{Duration, Instant};

/// What a round waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// A quorum of "yes" votes (acquire, extend, unlock).
    Agreement,
    /// A quorum of answers of any kind: for the release after a failed
    /// acquisition, where "not ours" is as good an answer as "deleted".
    Answers,
}

/// One node's state in the current round.
#[derive(Debug)]
enum Outcome {
    Waiting,
    /// Waiting for the EVAL sent after the node answered NOSCRIPT.
    WaitingFallback,
    Yes,
    No,
    Failed(NodeError),
}

/// The masters a round talks to, and their shared reconnect state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Masters<'a> {
    pub(crate) nodes: &'a [Node],
    pub(crate) backoff: &'a [Backoff],
}

/// One thread's connections to all masters, and a round's working memory.
#[derive(Debug)]
pub(crate) struct Session {
    conns: Vec<Conn>,
    outcomes: Vec<Outcome>,
    poll: PollSet,
    /// The node behind each poll slot.
    polled: Vec<usize>,
    /// The round's command, encoded once for all nodes.
    frame: Vec<u8>,
    /// Its EVAL form, encoded only if some node answers NOSCRIPT.
    fallback: Vec<u8>,
    round: u64,
}

impl Session {
    pub(crate) fn new(nodes: usize) -> Session {
        Session {
            conns: (0..nodes).map(|_| Conn::new()).collect(),
            outcomes: (0..nodes).map(|_| Outcome::Waiting).collect(),
            poll: PollSet::default(),
            polled: Vec::with_capacity(nodes),
            frame: Vec::with_capacity(256),
            fallback: Vec::new(),
            round: 0,
        }
    }

    /// Runs one round of `command` on every master, each with `timeout` to
    /// answer, and returns the tally at the moment the outcome was known.
    pub(crate) fn run(
        &mut self,
        masters: Masters<'_>,
        command: Command<'_>,
        timeout: Duration,
        want: Want,
    ) -> Tally {
        let start = Instant::now();
        // The builder caps the node timeout far below Instant's range, so
        // this cannot overflow; if it somehow did, the round times out.
        let deadline = start.checked_add(timeout).unwrap_or(start);
        self.round = self.round.wrapping_add(1);
        self.frame.clear();
        self.fallback.clear();
        command.encode(&mut self.frame);

        for i in 0..self.conns.len() {
            self.outcomes[i] = match self.start_node(masters, i, start, deadline) {
                Ok(()) => Outcome::Waiting,
                Err(e) => Outcome::Failed(e),
            };
        }
        loop {
            let tally = self.tally(want);
            if tally.decision() != Decision::Open {
                return tally;
            }
            self.wait_once(masters, command, deadline);
        }
    }

    /// Connects node `i` if needed and sends it the round's command.
    fn start_node(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        start: Instant,
        deadline: Instant,
    ) -> Result<(), NodeError> {
        let conn = &mut self.conns[i];
        let backoff = &masters.backoff[i];
        if conn.overdue(start).is_some() {
            // A reply from an earlier round never came: the connection is
            // out of step with us and is replaced, never resynchronised.
            conn.discard();
            backoff.failed(start);
        }
        if !conn.is_open() {
            if !backoff.may_connect(start) {
                return Err(NodeError::Backoff);
            }
            if let Err(e) = conn.connect(&masters.nodes[i], deadline) {
                conn.discard();
                backoff.failed(start);
                return Err(e);
            }
        }
        conn.send(&self.frame, Purpose::Round(self.round), deadline)
            .inspect_err(|e| {
                if e.breaks_connection() {
                    conn.discard();
                    backoff.failed(start);
                }
            })
    }

    /// Waits once for any node to become ready or overdue, and handles what
    /// happened. Nodes already decided this round but still owing replies
    /// from earlier rounds (a lagging server) are polled too, so that their
    /// backlog drains instead of growing.
    fn wait_once(&mut self, masters: Masters<'_>, command: Command<'_>, deadline: Instant) {
        let now = Instant::now();
        self.poll.clear();
        self.polled.clear();
        let mut wake: Option<Instant> = None;
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if let Some(phase) = conn.overdue(now) {
                self.fail(masters, i, NodeError::TimedOut(phase), now);
                continue;
            }
            let (Some(fd), (read, write)) = (conn.raw_fd(), conn.interest()) else {
                continue; // no connection: nothing to wait for
            };
            if !read && !write {
                continue;
            }
            self.poll.add(fd, read, write);
            self.polled.push(i);
            if let Some(at) = conn.next_deadline() {
                wake = Some(wake.map_or(at, |earliest| earliest.min(at)));
            }
        }
        if self.poll.is_empty() {
            return; // every waiting node just failed: the tally has changed
        }
        let wait = wake.map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        if let Err(e) = self.poll.wait(wait) {
            let error = NodeError::from_io(&e);
            for k in 0..self.polled.len() {
                self.fail(masters, self.polled[k], error.clone(), now);
            }
            return;
        }
        for slot in 0..self.polled.len() {
            let ready = self.poll.ready(slot);
            if ready != Ready::default() {
                let i = self.polled[slot];
                if let Err(e) = self.service(masters, i, ready, command, deadline) {
                    self.fail(masters, i, e, Instant::now());
                }
            }
        }
    }

    /// Handles readiness on node `i`: finishes a connect, writes what is
    /// pending, reads what arrived, and records the node's vote if complete.
    fn service(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        ready: Ready,
        command: Command<'_>,
        deadline: Instant,
    ) -> Result<(), NodeError> {
        let round = self.round;
        let conn = &mut self.conns[i];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let Some(vote) = conn.next_vote(round, |reply| command.judge(reply))? else {
            return Ok(());
        };
        // Only a node sent this round's command owes a reply to it.
        debug_assert!(matches!(self.outcomes[i], Outcome::Waiting | Outcome::WaitingFallback));
        masters.backoff[i].succeeded(); // any well-formed reply: the node is alive
        if is_noscript(&vote) && matches!(self.outcomes[i], Outcome::Waiting) {
            // The server lost its script cache: send the script itself.
            if self.fallback.is_empty() && !command.encode_fallback(&mut self.fallback) {
                self.outcomes[i] = outcome_of(vote);
                return Ok(());
            }
            conn.send(&self.fallback, Purpose::Round(round), deadline)?;
            self.outcomes[i] = Outcome::WaitingFallback;
            // The EVAL reply may already be buffered behind the NOSCRIPT.
            return self.service(masters, i, Ready::default(), command, deadline);
        }
        if matches!(&vote, Vote::Failed(e) if e.breaks_connection()) {
            // A reply of the wrong type: the server cannot be trusted.
            conn.discard();
            masters.backoff[i].failed(Instant::now());
        }
        self.outcomes[i] = outcome_of(vote);
        Ok(())
    }

    /// Records a failure of node `i` (if its outcome is still open), and
    /// discards its connection if the failure broke it.
    fn fail(&mut self, masters: Masters<'_>, i: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            self.conns[i].discard();
            masters.backoff[i].failed(now);
        }
        if self.is_waiting(i) {
            self.outcomes[i] = Outcome::Failed(error);
        }
    }

    fn is_waiting(&self, i: usize) -> bool {
        matches!(self.outcomes[i], Outcome::Waiting | Outcome::WaitingFallback)
    }

    fn tally(&self, want: Want) -> Tally {
        let mut tally = Tally::default();
        for outcome in &self.outcomes {
            match (outcome, want) {
                (Outcome::Waiting | Outcome::WaitingFallback, _) => tally.waiting += 1,
                (Outcome::Yes, _) | (Outcome::No, Want::Answers) => tally.yes += 1,
                (Outcome::No, Want::Agreement) => tally.no += 1,
                (Outcome::Failed(_), _) => tally.failed += 1,
            }
        }
        tally
    }

    /// What each node did in the last round, for an error.
    pub(crate) fn report(&self, nodes: &[Node]) -> NodeReport {
        NodeReport::new(
            nodes
                .iter()
                .zip(&self.outcomes)
                .map(|(node, outcome)| NodeStatus {
                    node: node.name.clone(),
                    outcome: match outcome {
                        Outcome::Waiting | Outcome::WaitingFallback => NodeOutcome::Pending,
                        Outcome::Yes => NodeOutcome::Agreed,
                        Outcome::No => NodeOutcome::Declined,
                        Outcome::Failed(e) => NodeOutcome::Failed(e.clone()),
                    },
                })
                .collect(),
        )
    }
}

fn outcome_of(vote: Vote) -> Outcome {
    match vote {
        Vote::Yes => Outcome::Yes,
        Vote::No => Outcome::No,
        Vote::Failed(e) => Outcome::Failed(e),
    }
}
