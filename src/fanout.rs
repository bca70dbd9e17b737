//! One round: write one command to every master at once from this thread,
//! then wait for all of them together with poll(2), under the round's
//! per-node deadline, and stop as soon as the outcome is known.
//!
//! A [`Session`] is one thread's set of connections (one per master) plus
//! the buffers a round needs; sessions are pooled by the `Redlock` handle, so
//! a round never waits for another thread's.
//!
//! An acquisition is not queued at once on a master still busy with our
//! earlier commands while the free ones can make a quorum: that master is
//! held back, and joins the round once it has caught up if the round comes
//! to need it (see `Session::join_held_back`).
//!
//! A node that misses the deadline counts as failed for that round, but its
//! connection is kept while the server merely lags: its late replies are
//! read, in order and checked against the commands they answer, before the
//! reply to any later command. Keeping it keeps each release behind its
//! acquisition on the same connection, so Redis runs them in that order.
//! A connection whose server lags more than [`lag_limit`] behind, or that
//! fails in any other way, is discarded and replaced.

use crate::backoff::Backoff;
use crate::conn::{Conn, Purpose, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::{NodeError, NodeOutcome, NodeReport, NodeStatus};
use crate::node::Node;
use crate::poll::{PollSet, Ready};
use crate::quorum::{quorum, Decision, Tally};
use crate::script::{is_noscript, Command, Vote};
use std::time::{Duration, Instant};

/// How far behind a server may fall (its oldest unanswered command overdue
/// by this much) before its connection is declared dead and closed: thirty
/// seconds, or twenty node timeouts if that is longer.
///
/// Generous on purpose. While the connection lives, a stalled server (busy,
/// starved of CPU, SIGSTOPped) runs everything it was sent, in order, when
/// it resumes, so every release follows its SET. Closing the connection
/// early would make the server drop what it had not yet read (its replies
/// to a closed socket reset the connection) and leave keys until their TTL.
/// Meanwhile the stalled server costs no round any time: no round waits for
/// it past its deadline, no acquisition is queued on it while a quorum is
/// free without it, and its queue is bounded by `MAX_OWED`.
pub(crate) fn lag_limit(node_timeout: Duration) -> Duration {
    node_timeout.saturating_mul(20).max(Duration::from_secs(30))
}

/// How long a connection must have been quiet (nothing sent on it) before a
/// round looks at it before sending (see `Session::look_before_sending`).
/// Back-to-back calls skip the look, saving a system call per round, since
/// what it guards against (a server that closed the connection, replies
/// that have arrived unread) takes a pause to arise; after any pause of a
/// millisecond or more, the system call is cheap by comparison.
const QUIET: Duration = Duration::from_millis(1);

/// The fraction of the node timeout after which an undecided acquisition
/// stops trusting the masters it was sent to and brings in the ones it held
/// back (see `Session::join_held_back`): a tenth, 5 ms at the default node
/// timeout. A healthy round is decided long before; a round still open by
/// then has a master that stalls, and the held-back masters, which lag by
/// microseconds as a rule, can still answer within the deadline.
const JOIN_AFTER_FRACTION: u32 = 10;

/// A set of nodes, by index: bit `i` is node `i` (at most
/// [`MAX_NODES`](crate::MAX_NODES)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeSet(u64);

impl NodeSet {
    /// The first `n` nodes.
    pub(crate) fn all(n: usize) -> NodeSet {
        NodeSet(if n >= 64 { u64::MAX } else { (1 << n) - 1 })
    }

    fn contains(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }
}

/// One node's state in the current round.
#[derive(Debug)]
enum Outcome {
    /// Not sent this round's command: the node was not sent the
    /// acquisition, so it cannot hold the key. Counts as a "no".
    NotSent,
    /// Busy with our earlier commands, so not sent the acquisition yet: it
    /// is sent it once it has caught up, if the round comes to need it (see
    /// `Session::join_held_back`). Counts as a vote that may still come
    /// until the round is decided without it or a master declines; then as
    /// failed (`Backlogged`).
    HeldBack,
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
    /// When each connection was last sent a command.
    last_sent: Vec<Instant>,
    /// The nodes that were sent the current round's command.
    sent: NodeSet,
    /// An empty buffer for the resource name of the next lock taken with
    /// this session (a held lock carries it, and gives it back on release).
    pub(crate) name: Vec<u8>,
}

/// What stays fixed during one round.
#[derive(Clone, Copy)]
struct Round<'a> {
    masters: Masters<'a>,
    command: Command<'a>,
    start: Instant,
    deadline: Instant,
    /// From when an undecided acquisition brings in every held-back master
    /// that has caught up, even if the masters it was sent to could still
    /// make a quorum on their own.
    join_at: Instant,
    lag_limit: Duration,
    /// The masters still busy with our earlier commands that are sent this
    /// command anyway; the other busy ones are held back from an
    /// acquisition (see `Session::busy_to_include`).
    busy_included: NodeSet,
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
            last_sent: vec![Instant::now(); nodes],
            sent: NodeSet(0),
            name: Vec::new(),
        }
    }

    /// Runs one round of `command` on the masters in `to`, each with
    /// `timeout` to answer, and returns the tally at the moment the outcome
    /// was known: a quorum said yes, or too many said no or failed for one
    /// to be possible. Masters outside `to` count as a "no".
    ///
    /// An acquisition goes at once to every master in `to` except those
    /// still busy with our earlier commands that a quorum does not need (see
    /// `busy_to_include`); those are held back, and join the round if it
    /// comes to need them (see `join_held_back`). A release or extension
    /// goes to the masters that were sent the acquisition (only they can
    /// hold the key).
    pub(crate) fn run(
        &mut self,
        masters: Masters<'_>,
        command: Command<'_>,
        timeout: Duration,
        to: NodeSet,
    ) -> Tally {
        let round = self.send_to(masters, command, timeout, to);
        loop {
            let mut tally = self.tally();
            if tally.held_back > 0 && self.outcomes.iter().any(|o| matches!(o, Outcome::No)) {
                // A master declined: the resource is held, by another
                // client or by a key left behind. Asking busy masters now
                // would slow down the failure of a contended attempt and
                // set keys that other contenders then find; a retry finds
                // them caught up.
                self.give_up_held_back();
                tally = self.tally();
            }
            if tally.decision() != Decision::Open {
                self.give_up_held_back();
                return self.tally();
            }
            let joining = self.join_held_back(&round, tally);
            self.wait_once(&round, joining);
        }
    }

    /// Sends `command` to the masters in `to` and returns without waiting:
    /// for the release after a failed acquisition, which must reach every
    /// master that was sent the SET (its answer may have been late, not
    /// awaited, or "held" while the key was in fact set) but has no outcome
    /// to wait for. On each connection it follows the SET, so Redis runs it
    /// after the SET; its answer is read by a later round.
    pub(crate) fn send_only(
        &mut self,
        masters: Masters<'_>,
        command: Command<'_>,
        timeout: Duration,
        to: NodeSet,
    ) {
        let _ = self.send_to(masters, command, timeout, to);
    }

    /// The masters that were sent the last round's command (whether or not
    /// it reached them: it may have, so they may have run it).
    pub(crate) fn sent(&self) -> NodeSet {
        self.sent
    }

    /// Starts a round and sends its command to the masters in `to`.
    fn send_to<'a>(
        &mut self,
        masters: Masters<'a>,
        command: Command<'a>,
        timeout: Duration,
        to: NodeSet,
    ) -> Round<'a> {
        let mut round = self.begin(masters, command, timeout);
        self.look_before_sending(masters, round.start);
        round.busy_included = match command {
            Command::Acquire { .. } => self.busy_to_include(masters, to, round.start),
            _ => to,
        };
        self.sent = NodeSet(0);
        for i in 0..self.conns.len() {
            // Releases and extensions always go out (they must follow
            // earlier SETs); an acquisition holds back the busy masters not
            // included.
            self.outcomes[i] = if !to.contains(i) {
                Outcome::NotSent
            } else if self.is_busy(i) && !round.busy_included.contains(i) {
                Outcome::HeldBack
            } else {
                self.start_node(&round, i, round.start)
            };
        }
        round
    }

    /// Brings held-back masters into an undecided acquisition once it needs
    /// them: when the masters it was sent to can no longer make a quorum by
    /// themselves (one failed; after a refusal the held-back masters are
    /// given up, see `run`), or once the round has run past
    /// `join_at` (one of them stalls: a master frozen while idle looks free
    /// until it is late). A held-back master joins as soon as it has caught
    /// up with our earlier commands, so its SET is never queued behind them.
    ///
    /// Joining late is safe: the validity is counted from the start of the
    /// round, and a key set later expires later.
    ///
    /// Returns whether the round is taking in held-back masters, so that
    /// the ones still busy are watched for catching up.
    fn join_held_back(&mut self, round: &Round<'_>, tally: Tally) -> bool {
        if tally.held_back == 0 {
            return false;
        }
        let needed =
            tally.yes + tally.waiting < quorum(tally.total()) || Instant::now() >= round.join_at;
        if needed {
            for i in 0..self.conns.len() {
                if matches!(self.outcomes[i], Outcome::HeldBack) && !self.is_busy(i) {
                    self.outcomes[i] = self.start_node(round, i, Instant::now());
                }
            }
        }
        needed
    }

    /// Once a round is decided, the masters still held back were never sent
    /// its command: they count as failed, as busy.
    fn give_up_held_back(&mut self) {
        for outcome in &mut self.outcomes {
            if matches!(outcome, Outcome::HeldBack) {
                *outcome = Outcome::Failed(NodeError::Backlogged);
            }
        }
    }

    /// Whether node `i`'s connection is still busy with our earlier
    /// commands (connecting, or owing replies).
    fn is_busy(&self, i: usize) -> bool {
        self.conns[i].is_open() && !self.conns[i].is_idle()
    }

    /// Starts a round: numbers it, encodes its command, fixes its deadline.
    fn begin<'a>(
        &mut self,
        masters: Masters<'a>,
        command: Command<'a>,
        timeout: Duration,
    ) -> Round<'a> {
        self.round = self.round.wrapping_add(1);
        self.frame.clear();
        self.fallback.clear();
        command.encode(&mut self.frame);
        let start = Instant::now();
        Round {
            masters,
            command,
            start,
            // The builder caps the node timeout far below Instant's range,
            // so this cannot overflow; if it somehow did, the round times out.
            deadline: start.checked_add(timeout).unwrap_or(start),
            join_at: start
                .checked_add(timeout / JOIN_AFTER_FRACTION)
                .unwrap_or(start),
            lag_limit: lag_limit(timeout),
            busy_included: NodeSet(0),
        }
    }

    /// Which of the masters in `to` that are busy (still owing replies to our
    /// earlier commands) are sent an acquisition at once: as few as a quorum
    /// needs, the least busy first. A busy master can answer only after its
    /// backlog, mostly after the round was decided: a SET queued there is
    /// work for a server that is already behind, and a key for a release to
    /// chase. The others are held back, in reserve (see `join_held_back`).
    fn busy_to_include(&self, masters: Masters<'_>, to: NodeSet, now: Instant) -> NodeSet {
        let busy = |i: usize| to.contains(i) && self.is_busy(i);
        let free = (0..self.conns.len())
            .filter(|&i| to.contains(i) && !busy(i))
            .filter(|&i| self.conns[i].is_open() || masters.backoff[i].may_connect(now))
            .count();
        let mut wanted = quorum(self.conns.len()).saturating_sub(free);
        let mut included = NodeSet(0);
        while wanted > 0 {
            let least_busy = (0..self.conns.len())
                .filter(|&i| busy(i) && !included.contains(i))
                .min_by_key(|&i| self.conns[i].owed_len());
            let Some(i) = least_busy else { break };
            included.0 |= 1 << i;
            wanted -= 1;
        }
        included
    }

    /// Before the round's command goes out, looks without waiting (one
    /// `poll(2)` for all of them) at every established connection that owes
    /// replies or has been [`QUIET`] for a while. On one that owes nothing,
    /// anything readable means the server closed it (an idle timeout or a
    /// restart: it is replaced in this very round) or sent an unsolicited
    /// reply. On one that owes replies, the replies that have arrived are
    /// read and checked now, so that the connection counts as free if it
    /// caught up, the new command is queued only behind replies still
    /// genuinely in flight, and a surplus reply is caught here instead of
    /// being read as the new command's answer.
    fn look_before_sending(&mut self, masters: Masters<'_>, now: Instant) {
        self.poll.clear();
        self.polled.clear();
        for (i, conn) in self.conns.iter().enumerate() {
            let look = !conn.is_idle() || now.saturating_duration_since(self.last_sent[i]) >= QUIET;
            if let (true, true, Some(fd)) = (look, conn.is_established(), conn.raw_fd()) {
                self.poll.add(fd, true, false);
                self.polled.push(i);
            }
        }
        if self.polled.is_empty() || self.poll.check().is_err() {
            return;
        }
        for slot in 0..self.polled.len() {
            if !self.poll.ready(slot).readable {
                continue;
            }
            let i = self.polled[slot];
            let conn = &mut self.conns[i];
            let problem = if conn.is_idle() {
                conn.probe_idle()
            } else {
                conn.catch_up().err()
            };
            if let Some(error) = problem {
                conn.discard();
                // A server that closed a connection is not necessarily
                // failing; one that talks out of turn is.
                if error != NodeError::Closed {
                    masters.backoff[i].failed(now);
                }
            }
        }
    }

    /// Connects node `i` if needed, sends it the round's command at `now`,
    /// and returns its outcome: waiting for the answer, or failed at once (a
    /// node that cannot be reached now, being down or in its reconnect
    /// backoff, fails the round; if it holds a key, the key expires with its
    /// TTL).
    fn start_node(&mut self, round: &Round<'_>, i: usize, now: Instant) -> Outcome {
        match self.send_to_node(round, i, now) {
            Ok(()) => Outcome::Waiting,
            Err(e) => Outcome::Failed(e),
        }
    }

    fn send_to_node(&mut self, round: &Round<'_>, i: usize, now: Instant) -> Result<(), NodeError> {
        let conn = &mut self.conns[i];
        let backoff = &round.masters.backoff[i];
        if conn.is_dead(now, round.lag_limit) {
            // The answers may simply be sitting unread after an idle spell:
            // look before giving up on the connection.
            if conn.catch_up().is_err() || conn.is_dead(now, round.lag_limit) {
                conn.discard();
                backoff.failed(now);
            }
        }
        if !conn.is_open() {
            if !backoff.may_connect(now) {
                return Err(NodeError::Backoff);
            }
            if let Err(e) = conn.connect(&round.masters.nodes[i], round.deadline) {
                conn.discard();
                backoff.failed(now);
                return Err(e);
            }
        }
        let limit = match round.command {
            Command::Acquire { .. } => MAX_OWED_ACQUIRE,
            _ => MAX_OWED,
        };
        let sent = conn.send(
            &self.frame,
            Purpose::Round(self.round, round.command.answer()),
            round.deadline,
            limit,
        );
        // Unless it was refused outright, the command may reach the server
        // (a write error can come after part of it went out).
        if !matches!(sent, Err(NodeError::Backlogged)) {
            self.sent.0 |= 1 << i;
            self.last_sent[i] = now;
        }
        sent.inspect_err(|e| {
            if e.breaks_connection() {
                conn.discard();
                backoff.failed(now);
            }
        })
    }

    /// Waits once, until some connection is ready or the round's deadline,
    /// and handles what happened. It watches the nodes whose answer the
    /// round awaits, and, while `joining`, the held-back ones still catching
    /// up. Other replies owed from earlier rounds (a lagging server) are
    /// not waited for: they would only wake the thread for nothing, and the
    /// look before the next round's send reads them. Unsent bytes are
    /// flushed on every connection.
    fn wait_once(&mut self, round: &Round<'_>, joining: bool) {
        let now = Instant::now();
        if now >= round.deadline {
            for i in 0..self.conns.len() {
                if self.is_waiting(i) {
                    let phase = self.conns[i].phase();
                    self.fail(round, i, NodeError::TimedOut(phase), now);
                }
            }
            self.give_up_held_back();
            return;
        }
        let held_back = self.outcomes.iter().any(|o| matches!(o, Outcome::HeldBack));
        if held_back && !joining && now >= round.join_at {
            // `join_at` passed since `join_held_back` looked: let it look
            // again rather than sleep past it.
            return;
        }
        self.poll.clear();
        self.polled.clear();
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if !self.is_waiting(i) && conn.is_dead(now, round.lag_limit) {
                self.conns[i].discard();
                round.masters.backoff[i].failed(now);
                continue;
            }
            let (read, write) = conn.interest();
            let watched =
                self.is_waiting(i) || (joining && matches!(self.outcomes[i], Outcome::HeldBack));
            let read = read && watched;
            match conn.raw_fd() {
                Some(fd) if read || write => {
                    self.poll.add(fd, read, write);
                    self.polled.push(i);
                }
                _ => {}
            }
        }
        // Until `join_at`, the held-back masters are not watched: wake at
        // `join_at` to bring them in.
        let wake = if held_back && now < round.join_at {
            round.join_at
        } else {
            round.deadline
        };
        if let Err(e) = self.poll.wait(wake - now) {
            let error = NodeError::from_io(&e);
            for k in 0..self.polled.len() {
                self.fail(round, self.polled[k], error.clone(), now);
            }
            return;
        }
        for slot in 0..self.polled.len() {
            let ready = self.poll.ready(slot);
            if ready != Ready::default() {
                let i = self.polled[slot];
                if let Err(e) = self.service(round, i, ready) {
                    self.fail(round, i, e, Instant::now());
                }
            }
        }
    }

    /// Handles readiness on node `i`: finishes a connect, writes what is
    /// pending, reads what arrived, and records the node's vote if complete.
    fn service(&mut self, round: &Round<'_>, i: usize, ready: Ready) -> Result<(), NodeError> {
        let number = self.round;
        let command = round.command;
        let conn = &mut self.conns[i];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let Some(vote) = conn.next_vote(number, |reply| command.judge(reply))? else {
            return Ok(());
        };
        round.masters.backoff[i].succeeded(); // a well-formed reply: the node is alive
        if is_noscript(&vote) && matches!(self.outcomes[i], Outcome::Waiting) {
            // The server lost its script cache: send the script itself.
            if self.fallback.is_empty() && !command.encode_fallback(&mut self.fallback) {
                self.outcomes[i] = outcome_of(vote);
                return Ok(());
            }
            conn.send(
                &self.fallback,
                Purpose::Round(number, command.answer()),
                round.deadline,
                MAX_OWED,
            )?;
            self.outcomes[i] = Outcome::WaitingFallback;
            // The EVAL reply may already be buffered behind the NOSCRIPT.
            return self.service(round, i, Ready::default());
        }
        if matches!(&vote, Vote::Failed(e) if e.breaks_connection()) {
            // A reply of the wrong type: the server cannot be trusted.
            conn.discard();
            round.masters.backoff[i].failed(Instant::now());
        }
        self.outcomes[i] = outcome_of(vote);
        Ok(())
    }

    /// Records a failure of node `i` (if its outcome is still open), and
    /// discards its connection if the failure broke it.
    fn fail(&mut self, round: &Round<'_>, i: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            self.conns[i].discard();
            round.masters.backoff[i].failed(now);
        }
        if self.is_waiting(i) {
            self.outcomes[i] = Outcome::Failed(error);
        }
    }

    /// Before the session is dropped: waits up to `timeout` for the replies
    /// its connections still owe (releases sent at quorum, say). Closing a
    /// socket with replies unread resets the connection, and a server may
    /// then drop commands it had received but not yet run.
    pub(crate) fn settle(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll.clear();
            self.polled.clear();
            for (i, conn) in self.conns.iter().enumerate() {
                let (read, write) = conn.interest();
                if let (true, Some(fd)) = (read, conn.raw_fd()) {
                    self.poll.add(fd, read, write);
                    self.polled.push(i);
                }
            }
            let now = Instant::now();
            if self.polled.is_empty() || now >= deadline || self.poll.wait(deadline - now).is_err()
            {
                return;
            }
            for slot in 0..self.polled.len() {
                let ready = self.poll.ready(slot);
                let conn = &mut self.conns[self.polled[slot]];
                let step = if ready.writable {
                    conn.on_writable()
                } else {
                    Ok(())
                };
                if step.and_then(|()| conn.catch_up()).is_err() {
                    conn.discard();
                }
            }
        }
    }

    fn is_waiting(&self, i: usize) -> bool {
        matches!(
            self.outcomes[i],
            Outcome::Waiting | Outcome::WaitingFallback
        )
    }

    fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        for outcome in &self.outcomes {
            match outcome {
                Outcome::Waiting | Outcome::WaitingFallback => tally.waiting += 1,
                Outcome::HeldBack => tally.held_back += 1,
                Outcome::Yes => tally.yes += 1,
                Outcome::No | Outcome::NotSent => tally.no += 1,
                Outcome::Failed(_) => tally.failed += 1,
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
                        Outcome::NotSent => NodeOutcome::NotSent,
                        Outcome::Failed(e) => NodeOutcome::Failed(e.clone()),
                        Outcome::HeldBack => NodeOutcome::Failed(NodeError::Backlogged),
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
