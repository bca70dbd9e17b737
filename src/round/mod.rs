//! One round: write a command to every master at once from this thread,
//! then wait for all of them together with poll(2), under the round's
//! deadline, and stop as soon as the outcome is known.
//!
//! A [`Session`] is a set of connections (one per master) plus the buffers
//! a round needs; sessions are pooled by the `Redlock` handle (see `pool`),
//! and a thread uses one for the length of a call, so a round never waits
//! for another thread's.
//!
//! An acquisition goes to every master at once, queued behind whatever
//! replies the master still owes us (Redis answers in order, and each
//! connection knows which reply answers what): a round returns as soon as
//! a quorum has decided, so the slowest master often still owes the last
//! call's answer, by microseconds, when the next call starts, and leaving
//! it out would leave the lock on just a quorum, lost with one more master.
//! Only a master that genuinely *lags* is not queued on while the others
//! can make a quorum (see [`LAGGING_OWED`]): it is held back, and joins the
//! round once it no longer lags if the round comes to need it (see
//! `Session::join_held_back`).
//!
//! A node that misses the deadline counts as failed for that round, but its
//! connection is kept while the server merely lags: its late replies are
//! read, in order and checked against the commands they answer, before the
//! reply to any later command. Keeping it keeps each release behind its
//! acquisition on the same connection, so Redis runs them in that order.
//! A connection whose server lags more than [`lag_limit`] behind, or that
//! fails in any other way, is discarded and replaced.
//!
//! A missed deadline shows in the health view at once (see
//! `NodeState::missed_deadline`), whether the round waited for the node
//! and timed out, or was decided without it and a later round finds its
//! answer overdue; but it does not put the node into its reconnect backoff,
//! which is for connections that failed.

mod batch;
mod health;

use crate::command::{Command, Encoded, Vote, TAG_LIMIT};
use crate::conn::Node;
use crate::conn::{Conn, Purpose, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::{NodeError, NodeOutcome, NodeReport, NodeStatus};
use crate::os::{fork_generation, PollSet, Ready};
use crate::quorum::{quorum, Decision, NodeSet, Rule, Tally};
pub(crate) use batch::BatchOp;
pub use health::NodeHealth;
pub(crate) use health::NodeState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far behind a server may fall (its oldest unanswered command overdue
/// by this much) before its connection is declared dead and closed: thirty
/// seconds, or twenty node timeouts if that is longer.
///
/// Generous on purpose. While the connection lives, a stalled server (busy,
/// starved of CPU, SIGSTOPped) runs everything it was sent, in order, when
/// it resumes, so every release follows its SET. Closing the connection
/// early would make the server drop what it had not yet read and leave keys
/// until their TTL. Meanwhile the stalled server costs no round any time:
/// no round waits for it past its deadline, no acquisition is queued on it
/// once it lags (see [`LAGGING_OWED`]) while a quorum is free without it,
/// and its queue is bounded by `MAX_OWED`.
pub(crate) fn lag_limit(node_timeout: Duration) -> Duration {
    node_timeout.saturating_mul(20).max(Duration::from_secs(30))
}

/// How long a connection must have been quiet (nothing sent on it) before a
/// round looks at it before sending (see `Session::look_before_sending`).
/// Back-to-back calls skip the look, saving a system call per round, since
/// what it looks for (a server that closed the connection, replies that
/// have arrived unread) takes a pause to arise. Skipping it is safe: a
/// surplus reply that arrives in the meantime fails the next tag check.
const QUIET: Duration = Duration::from_millis(1);

/// The fraction of the round's time after which an undecided acquisition
/// stops trusting the masters it was sent to and brings in the ones it held
/// back (see `Session::join_held_back`): a tenth, 5 ms at the default node
/// timeout. A healthy round is decided long before; a round still open by
/// then has a master that stalls, and a held-back master that has caught
/// up meanwhile can still answer within the deadline.
const JOIN_AFTER_FRACTION: u32 = 10;

/// Most replies a master may owe us and still be sent an acquisition at
/// once, queued behind them; beyond this, or once the oldest of them is
/// overdue (past its round's deadline), the master *lags*, and is held back
/// while the others can make a quorum (see `Session::is_lagging`).
///
/// A master that is merely behind owes little: the answers to the last call
/// or two (an acquisition or a release owes two replies, the command and
/// its `ECHO`), plus, on a new connection, its handshake's (up to five).
/// Sixteen is four lock/unlock pairs: a SET queued behind that few is
/// answered moments after them, and the lock is held on that master too.
///
/// A server that stops answering (frozen, SIGSTOPped, starved of CPU) owes
/// more than this within a few calls, long before a deadline passes (the
/// node timeout may be seconds): the SETs queued on it are a handful, not
/// one per acquisition, and no round is slowed by it. The test is a count,
/// not how long a reply has been owed, so that no clock threshold decides
/// (a loaded machine crosses any short one now and then), and it bounds
/// directly what a stalled server is made to hold; the deadline catches a
/// server that stalled while owing little and is then called seldom.
const LAGGING_OWED: usize = 16;

/// One node's state in the current round.
#[derive(Debug)]
enum Outcome {
    /// Not sent this round's command, by the round's plan.
    NotSent,
    /// Lagging behind our earlier commands (see [`LAGGING_OWED`]), so not
    /// sent the acquisition yet: it is sent it once it no longer lags, if
    /// the round comes to need it (see `Session::join_held_back`). Counts as
    /// a vote that may still come until the round is decided without it or
    /// a master declines; then as failed (`Backlogged`).
    HeldBack,
    Waiting,
    Yes,
    No,
    Failed(NodeError),
}

/// The masters a round talks to, and what is shared about them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Masters<'a> {
    pub(crate) nodes: &'a [Node],
    pub(crate) states: &'a [NodeState],
    /// See [`lag_limit`].
    pub(crate) lag_limit: Duration,
}

/// What a round sends to whom, and by when it must be decided.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan<'a> {
    /// The command, for the masters in `to`.
    pub(crate) command: Command<'a>,
    pub(crate) to: NodeSet,
    /// A second command for other masters (an extension sets the key on
    /// the masters that its acquisition left out).
    pub(crate) others: Option<(Command<'a>, NodeSet)>,
    /// How the answers decide the round.
    pub(crate) rule: Rule,
    /// When every master's answer is due.
    pub(crate) deadline: Instant,
    /// Whether a master in its reconnect backoff is dialled anyway: a
    /// release after a failed acquisition must try to reach every master
    /// the SET went to.
    pub(crate) despite_backoff: bool,
    /// Masters not to send to after all, counted as failed: their
    /// connection could not be used in time (see `pool::Taken`).
    pub(crate) skip: NodeSet,
    /// Nobody will wait for the answers: scripts go by body (EVAL), so that
    /// they run even on a server whose script cache was flushed (a NOSCRIPT
    /// would be read, and answered, only when the connection is next used),
    /// and without an `ECHO` tag (the next tagged command on the connection
    /// catches any reply out of step before it counts).
    pub(crate) unawaited: bool,
}

/// How far the session's connections have got, readable by other threads:
/// a lock whose SET is not yet answered on some master must send its
/// release on that master's connection (so it cannot overtake the SET),
/// unless that connection has settled the SET since. See `pool`.
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

/// A set of connections to all masters, and a round's working memory.
#[derive(Debug)]
pub(crate) struct Session {
    conns: Vec<Conn>,
    outcomes: Vec<Outcome>,
    poll: PollSet,
    /// The node behind each poll slot.
    polled: Vec<usize>,
    round: u64,
    /// The next command tag: unique and increasing across the session, so
    /// on each of its connections.
    next_tag: u64,
    /// When each connection was last sent a command.
    last_sent: Vec<Instant>,
    /// The nodes that were sent the current round's commands.
    sent: NodeSet,
    /// The nodes recorded in the current round as having missed a deadline
    /// (so that a round counts once per node).
    late: NodeSet,
    /// The current round's command and second command, encoded.
    encoded: [Encoded; 2],
    progress: Arc<Progress>,
    /// The process generation the connections were opened in (see
    /// `os::fork_generation`).
    fork_generation: u64,
    /// An empty buffer for the resource name of the next lock taken with
    /// this session (a held lock carries it, and gives it back on release
    /// to whichever session releases it), so that locking does not
    /// allocate.
    pub(crate) name: Vec<u8>,
    /// A buffer for a release's notice channel (see `notify`).
    pub(crate) channel: Vec<u8>,
}

/// What stays fixed during one round.
#[derive(Clone, Copy)]
struct Round<'a> {
    masters: Masters<'a>,
    plan: Plan<'a>,
    start: Instant,
    /// From when an undecided acquisition brings in every held-back master
    /// that no longer lags, even if the masters it was sent to could still
    /// make a quorum on their own.
    join_at: Instant,
}

impl Round<'_> {
    /// Which of the round's commands node `i` gets (an index into
    /// `Session::encoded`), if any.
    fn command_for(&self, i: usize) -> Option<usize> {
        if self.plan.to.contains(i) {
            return Some(0);
        }
        match self.plan.others {
            Some((_, set)) if set.contains(i) => Some(1),
            _ => None,
        }
    }

    /// Whether node `i` is sent an acquisition (the lagging-master rules).
    fn is_acquisition_for(&self, i: usize) -> bool {
        match self.command_for(i) {
            Some(0) => matches!(self.plan.command, Command::Acquire { .. }),
            Some(_) => matches!(self.plan.others, Some((Command::Acquire { .. }, _))),
            None => false,
        }
    }
}

impl Session {
    pub(crate) fn new(nodes: usize) -> Session {
        Session {
            conns: (0..nodes).map(|_| Conn::new()).collect(),
            outcomes: (0..nodes).map(|_| Outcome::NotSent).collect(),
            poll: PollSet::default(),
            polled: Vec::with_capacity(nodes),
            round: 0,
            next_tag: 1,
            last_sent: vec![Instant::now(); nodes],
            sent: NodeSet::EMPTY,
            late: NodeSet::EMPTY,
            encoded: Default::default(),
            progress: Arc::new(Progress {
                settled: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            }),
            fork_generation: fork_generation(),
            name: Vec::new(),
            channel: Vec::new(),
        }
    }

    /// The session's progress, shared with the locks taken on it.
    pub(crate) fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// Whether the connections were opened by this process (not inherited
    /// through `fork`).
    pub(crate) fn belongs_to_this_process(&self) -> bool {
        self.fork_generation == fork_generation()
    }

    /// Runs one round of `plan`, and returns the tally at the moment the
    /// outcome was known (see `quorum::Rule`).
    ///
    /// An acquisition goes at once to every master in `plan.to` except
    /// those lagging behind our earlier commands that a quorum does not
    /// need (see `lagging_to_include`); those are held back, and join the
    /// round if it comes to need them (see `join_held_back`).
    pub(crate) fn run(&mut self, masters: Masters<'_>, plan: Plan<'_>) -> Tally {
        let round = self.send_to(masters, plan);
        loop {
            let mut tally = self.tally(plan.rule);
            if tally.held_back > 0 && self.outcomes.iter().any(|o| matches!(o, Outcome::No)) {
                // A master declined: the resource is held, by another
                // client or by a key left behind. Asking lagging masters
                // now would slow down the failure of a contended attempt
                // and set keys that other contenders then find; a retry
                // finds them caught up.
                self.give_up_held_back();
                tally = self.tally(plan.rule);
            }
            if tally.decision(plan.rule) != Decision::Open {
                self.give_up_held_back();
                self.publish_progress();
                return self.tally(plan.rule);
            }
            let joining = self.join_held_back(&round, tally);
            self.wait_once(&round, joining);
        }
    }

    /// Sends `plan` and returns without waiting: for the release after a
    /// failed acquisition, which must reach every master that was sent the
    /// SET (its answer may have been late, not awaited, or "held" while the
    /// key was in fact set) but has no outcome to wait for. On each
    /// connection it follows the SET, so Redis runs it after the SET; its
    /// answer is read (and a NOSCRIPT answered with EVAL) by a later round.
    ///
    /// A connection it had to open (a master whose connection broke during
    /// the acquisition) may still be connecting: until `flush_until` (the
    /// acquisition's own deadline, so the call waits no longer than it
    /// could anyway), it waits for such connections to take their bytes;
    /// what is left then goes out with the session's next round.
    pub(crate) fn send_only(&mut self, masters: Masters<'_>, plan: Plan<'_>, flush_until: Instant) {
        let _ = self.send_to(masters, plan);
        self.flush_sent(masters, flush_until);
        self.publish_progress();
    }

    /// Waits, until `until`, for the connections sent to in this round to
    /// finish connecting and take what is queued on them.
    fn flush_sent(&mut self, masters: Masters<'_>, until: Instant) {
        loop {
            self.poll.clear();
            self.polled.clear();
            for i in self.sent.iter() {
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

    /// The masters that were sent the last round's commands (whether or not
    /// they reached them: they may have, so the masters may have run them).
    pub(crate) fn sent(&self) -> NodeSet {
        self.sent
    }

    /// The tags of the last round's command and of its second command.
    pub(crate) fn last_tags(&self) -> (u64, u64) {
        (self.encoded[0].tag(), self.encoded[1].tag())
    }

    /// Which masters answered the last round with a yes.
    pub(crate) fn agreed(&self) -> NodeSet {
        self.answered(|o| matches!(o, Outcome::Yes))
    }

    /// Which masters answered the last round with a no.
    pub(crate) fn declined(&self) -> NodeSet {
        self.answered(|o| matches!(o, Outcome::No))
    }

    fn answered(&self, f: impl Fn(&Outcome) -> bool) -> NodeSet {
        let mut set = NodeSet::EMPTY;
        for (i, outcome) in self.outcomes.iter().enumerate() {
            if f(outcome) {
                set.insert(i);
            }
        }
        set
    }

    /// Starts a round and sends its commands.
    fn send_to<'a>(&mut self, masters: Masters<'a>, plan: Plan<'a>) -> Round<'a> {
        let round = self.begin(masters, plan);
        self.look_before_sending(masters, round.start);
        let lagging_included = match plan.rule {
            Rule::Acquire => self.lagging_to_include(masters, plan.to, round.start),
            _ => NodeSet::all(self.conns.len()),
        };
        self.sent = NodeSet::EMPTY;
        for i in 0..self.conns.len() {
            // Everything but an acquisition goes out at once (a release
            // must follow earlier SETs); an acquisition holds back the
            // lagging masters not included, and is queued on the others
            // behind whatever they still owe.
            self.outcomes[i] = if round.command_for(i).is_none() {
                Outcome::NotSent
            } else if plan.skip.contains(i) {
                Outcome::Failed(NodeError::Backlogged)
            } else if self.is_lagging(i, round.start) && !lagging_included.contains(i) {
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
    /// given up, see `run`), or once the round has run past `join_at` (one
    /// of them stalls: a master frozen while idle looks free until it is
    /// late). A held-back master joins as soon as it no longer lags (the
    /// same test as at the start of the round, see `is_lagging`): its SET
    /// is then queued behind a few replies at most, never behind a backlog.
    ///
    /// Joining late is safe: the validity is counted from the start of the
    /// round, and a key set later expires later.
    ///
    /// Returns whether the round is taking in held-back masters, so that
    /// the ones still lagging are watched for catching up.
    fn join_held_back(&mut self, round: &Round<'_>, tally: Tally) -> bool {
        if tally.held_back == 0 {
            return false;
        }
        let now = Instant::now();
        let needed = tally.yes + tally.waiting < quorum(tally.total()) || now >= round.join_at;
        if needed {
            for i in 0..self.conns.len() {
                if matches!(self.outcomes[i], Outcome::HeldBack) && !self.is_lagging(i, now) {
                    self.outcomes[i] = self.start_node(round, i, now);
                }
            }
        }
        needed
    }

    /// Once a round is decided, the masters still held back were never sent
    /// its command: they count as failed, as lagging (they are not holders
    /// of an acquired lock: only the masters in `sent` are).
    fn give_up_held_back(&mut self) {
        for outcome in &mut self.outcomes {
            if matches!(outcome, Outcome::HeldBack) {
                *outcome = Outcome::Failed(NodeError::Backlogged);
            }
        }
    }

    /// Whether node `i` lags behind our earlier commands at `now`: its
    /// connection owes more than [`LAGGING_OWED`] replies, or the oldest of
    /// them is overdue. A master that owes fewer, none of them late, is
    /// merely behind (the last round returned before it answered), and an
    /// acquisition is queued behind them at once.
    fn is_lagging(&self, i: usize, now: Instant) -> bool {
        let conn = &self.conns[i];
        conn.owed_len() > LAGGING_OWED || conn.is_overdue(now)
    }

    /// Takes a fresh tag.
    fn take_tag(&mut self) -> u64 {
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

    /// Numbers a new round and forgets the last one's per-round state (a
    /// node late in the last round may be late again in this one, and
    /// counts again).
    fn next_round(&mut self) {
        self.round = self.round.wrapping_add(1);
        self.late = NodeSet::EMPTY;
        self.sent = NodeSet::EMPTY;
    }

    /// Starts a round: numbers it and tags its commands.
    fn begin<'a>(&mut self, masters: Masters<'a>, plan: Plan<'a>) -> Round<'a> {
        self.next_round();
        let start = Instant::now();
        let budget = plan.deadline.saturating_duration_since(start);
        // Encoded once for all connections, in the forms they need.
        let tag = self.take_tag();
        self.encoded[0].reset(&plan.command, tag);
        if let Some((other, _)) = plan.others {
            let tag = self.take_tag();
            self.encoded[1].reset(&other, tag);
        }
        Round {
            masters,
            plan,
            start,
            join_at: start
                .checked_add(budget / JOIN_AFTER_FRACTION)
                .unwrap_or(start),
        }
    }

    /// Which of the masters in `to` that lag (see `is_lagging`) are sent an
    /// acquisition at once: as few as a quorum needs, the least behind
    /// first. A lagging master can answer only after its backlog, mostly
    /// after the round was decided, if at all (it may be stalled): a SET
    /// queued there is work for a server that is already behind, and one
    /// more command a frozen one is made to hold. The others are held back,
    /// in reserve (see `join_held_back`).
    fn lagging_to_include(&self, masters: Masters<'_>, to: NodeSet, now: Instant) -> NodeSet {
        let lagging = |i: usize| to.contains(i) && self.is_lagging(i, now);
        let free = (0..self.conns.len())
            .filter(|&i| to.contains(i) && !lagging(i))
            .filter(|&i| self.conns[i].is_open() || masters.states[i].may_connect(now))
            .count();
        let mut wanted = quorum(self.conns.len()).saturating_sub(free);
        let mut included = NodeSet::EMPTY;
        while wanted > 0 {
            let least_behind = (0..self.conns.len())
                .filter(|&i| lagging(i) && !included.contains(i))
                .min_by_key(|&i| self.conns[i].owed_len());
            let Some(i) = least_behind else { break };
            included.insert(i);
            wanted -= 1;
        }
        included
    }

    /// Before the round's commands go out, looks without waiting (one
    /// `poll(2)` for all of them) at every established connection that owes
    /// replies or has been [`QUIET`] for a while. On one that owes nothing,
    /// anything readable means the server closed it (an idle timeout or a
    /// restart: it is replaced in this very round) or sent an unsolicited
    /// reply. On one that owes replies, the replies that have arrived are
    /// read and checked now, so that the connection counts as free if it
    /// caught up and the new command is queued only behind replies still
    /// genuinely in flight.
    ///
    /// A connection that read answers it owed shows its node answers (see
    /// `NodeState::caught_up`); one still owing an answer past its deadline
    /// shows that its node missed it, although the round that sent the
    /// command was decided without it.
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
            let i = self.polled[slot];
            if self.poll.ready(slot).readable {
                self.read_before_sending(masters, i, now);
            }
            // What had arrived is read: an answer still owed past its
            // deadline was missed.
            if self.conns[i].is_overdue(now) {
                let phase = self.conns[i].phase();
                self.missed_deadline(masters, i, NodeError::TimedOut(phase), now);
            }
        }
    }

    /// Reads what arrived on node `i`'s connection before a round's send
    /// (see `look_before_sending`).
    fn read_before_sending(&mut self, masters: Masters<'_>, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        let problem = if conn.is_idle() {
            conn.probe_idle()
        } else {
            let owed = conn.owed_len();
            match conn.catch_up() {
                Ok(()) => {
                    if conn.owed_len() < owed {
                        masters.states[i].caught_up();
                    }
                    // The owed answers were all there; the server may have
                    // closed the connection after them.
                    if conn.is_idle() {
                        conn.probe_idle()
                    } else {
                        None
                    }
                }
                Err(e) => Some(e),
            }
        };
        if let Some(error) = problem {
            conn.discard();
            // A server that closed an idle connection is not
            // necessarily failing; one that talks out of turn is.
            if error != NodeError::Closed {
                masters.states[i].failed(now, &error);
            }
        }
    }

    /// Records that node `i` missed a deadline, on a connection that is
    /// kept: failing in the health view, not in the reconnect backoff (see
    /// `health`). Once per round.
    fn missed_deadline(&mut self, masters: Masters<'_>, i: usize, error: NodeError, now: Instant) {
        if !self.late.contains(i) {
            self.late.insert(i);
            masters.states[i].missed_deadline(now, &error);
        }
    }

    /// Connects node `i` if needed, sends it the round's command at `now`,
    /// and returns its outcome: waiting for the answer, or failed at once (a
    /// node that cannot be reached now, being down or in its reconnect
    /// backoff, fails the round).
    fn start_node(&mut self, round: &Round<'_>, i: usize, now: Instant) -> Outcome {
        match self.send_to_node(round, i, now) {
            Ok(()) => Outcome::Waiting,
            Err(e) => Outcome::Failed(e),
        }
    }

    fn send_to_node(&mut self, round: &Round<'_>, i: usize, now: Instant) -> Result<(), NodeError> {
        let Some(which) = round.command_for(i) else {
            return Ok(());
        };
        let (deadline, despite_backoff) = (round.plan.deadline, round.plan.despite_backoff);
        self.open(round.masters, i, now, deadline, despite_backoff)?;
        let conn = &mut self.conns[i];
        let backoff = &round.masters.states[i];
        let limit = if round.is_acquisition_for(i) {
            MAX_OWED_ACQUIRE
        } else {
            MAX_OWED
        };
        let purpose = Purpose {
            round: self.round,
            op: 0,
        };
        let command = match (which, round.plan.others) {
            (1, Some((other, _))) => other,
            _ => round.plan.command,
        };
        self.encoded[which].prepare(&command, conn.capabilities());
        let sent = conn.send(
            &self.encoded[which],
            purpose,
            round.plan.deadline,
            limit,
            round.plan.unawaited,
        );
        // Unless it was refused outright, the command may reach the server
        // (a write error can come after part of it went out).
        if !matches!(
            sent,
            Err(NodeError::Backlogged | NodeError::CannotRelease(_))
        ) {
            self.sent.insert(i);
            self.last_sent[i] = now;
        }
        sent.inspect_err(|e| {
            if e.breaks_connection() {
                conn.discard();
                backoff.failed(now, e);
            }
        })
    }

    /// Makes sure node `i` has a connection to send on: replaces one whose
    /// server stopped answering, and connects (with its handshake due by
    /// `deadline`) unless the node is in its reconnect backoff (or, with
    /// `despite_backoff`, failing for good).
    fn open(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        now: Instant,
        deadline: Instant,
        despite_backoff: bool,
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
            if !despite_backoff {
                backoff.check(now)?;
            } else if let Some(permanent) = backoff.failing_for_good() {
                // The command after a refused handshake was refused too:
                // there is nothing to clean up, and dialling is pointless.
                return Err(permanent);
            }
            if let Err(e) = conn.connect(&masters.nodes[i], deadline) {
                conn.discard();
                backoff.failed(now, &e);
                return Err(e);
            }
        }
        Ok(())
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
        let deadline = round.plan.deadline;
        if now >= deadline {
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
            if !self.is_waiting(i) && conn.is_dead(now, round.masters.lag_limit) {
                let phase = conn.phase();
                self.conns[i].discard();
                round.masters.states[i].failed(now, &NodeError::TimedOut(phase));
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
            deadline
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
        let conn = &mut self.conns[i];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let mut vote = None;
        conn.take_replies(Some(self.round), &mut |_, v| vote = Some(v))?;
        let Some(vote) = vote else {
            return Ok(());
        };
        let state = &round.masters.states[i];
        let now = Instant::now();
        match &vote {
            Vote::Failed(e) => state.failed(now, e),
            _ => state.answered(now, now.saturating_duration_since(round.start)),
        }
        if matches!(self.outcomes[i], Outcome::Waiting) {
            self.outcomes[i] = match vote {
                Vote::Yes => Outcome::Yes,
                Vote::No => Outcome::No,
                Vote::Failed(e) => Outcome::Failed(e),
            };
        }
        Ok(())
    }

    /// Records a failure of node `i` (if its outcome is still open), and
    /// discards its connection if the failure broke it. A deadline that
    /// passed on a connection that is kept shows in the health view only.
    fn fail(&mut self, round: &Round<'_>, i: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            if self.conns[i].is_opening() {
                // Nothing left the connection before its opening (connect,
                // TLS handshake) ended: the server never got the command,
                // so it holds no key of it and needs no release.
                self.sent.remove(i);
            }
            self.conns[i].discard();
            round.masters.states[i].failed(now, &error);
        } else if matches!(error, NodeError::TimedOut(_)) {
            self.missed_deadline(round.masters, i, error.clone(), now);
        }
        if self.is_waiting(i) {
            self.outcomes[i] = Outcome::Failed(error);
        }
    }

    /// Makes what the connections have settled visible to other threads.
    fn publish_progress(&self) {
        for (conn, settled) in self.conns.iter().zip(self.progress.settled.iter()) {
            settled.store(conn.settled_tag(), Ordering::Release);
        }
    }

    /// Reads, without waiting, what has arrived on the connections that owe
    /// replies, and returns whether they now owe nothing. Connections that
    /// fail are closed.
    pub(crate) fn tidy(&mut self) -> bool {
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
                if flushed.and_then(|()| conn.catch_up()).is_err() {
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

    fn is_waiting(&self, i: usize) -> bool {
        matches!(self.outcomes[i], Outcome::Waiting)
    }

    fn tally(&self, rule: Rule) -> Tally {
        tally(&self.outcomes, rule)
    }

    /// What each node did in the last round, for an error.
    pub(crate) fn report(&self, nodes: &[Node]) -> NodeReport {
        report(&self.outcomes, nodes)
    }
}

/// How a round stands, given each node's outcome.
fn tally(outcomes: &[Outcome], rule: Rule) -> Tally {
    let mut tally = Tally::default();
    for outcome in outcomes {
        match outcome {
            Outcome::Waiting => tally.waiting += 1,
            Outcome::HeldBack => tally.held_back += 1,
            Outcome::Yes => tally.yes += 1,
            Outcome::No => tally.no += 1,
            Outcome::NotSent if rule == Rule::Release => tally.not_sent += 1,
            Outcome::NotSent => tally.no += 1,
            Outcome::Failed(_) => tally.failed += 1,
        }
    }
    tally
}

/// What each node did, for an error.
fn report(outcomes: &[Outcome], nodes: &[Node]) -> NodeReport {
    NodeReport::new(
        nodes
            .iter()
            .zip(outcomes)
            .map(|(node, outcome)| NodeStatus {
                node: node.name.clone(),
                outcome: match outcome {
                    Outcome::Waiting => NodeOutcome::Pending,
                    Outcome::Yes => NodeOutcome::Agreed,
                    Outcome::No => NodeOutcome::Declined,
                    Outcome::NotSent | Outcome::HeldBack => NodeOutcome::NotSent,
                    Outcome::Failed(e) => NodeOutcome::Failed(e.clone()),
                },
            })
            .collect(),
    )
}

impl Drop for Session {
    /// The connections close with the session: whatever they had not
    /// settled, the servers either ran or drop with them.
    fn drop(&mut self) {
        for settled in self.progress.settled.iter() {
            settled.store(u64::MAX, Ordering::Release);
        }
    }
}

/// Waits up to `timeout` in all, for every session at once, for the replies
/// their connections still owe (releases sent at quorum, say), so that the
/// servers run what they were sent before the connections close. Closing a
/// socket with replies unread resets the connection, and a server may then
/// drop commands it had received but not yet read.
pub(crate) fn settle(sessions: &mut [Session], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut poll = PollSet::default();
    let mut polled = Vec::new();
    loop {
        poll.clear();
        polled.clear();
        for (s, session) in sessions.iter().enumerate() {
            for (i, conn) in session.conns.iter().enumerate() {
                let (read, write) = conn.interest();
                if let (true, Some(fd)) = (read, conn.raw_fd()) {
                    poll.add(fd, read, write);
                    polled.push((s, i));
                }
            }
        }
        let now = Instant::now();
        if polled.is_empty() || now >= deadline || poll.wait(deadline - now).is_err() {
            return;
        }
        for (slot, &(s, i)) in polled.iter().enumerate() {
            let ready = poll.ready(slot);
            let conn = &mut sessions[s].conns[i];
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

impl Session {
    /// Whether the session still owes replies whose deadline is in the
    /// future (worth keeping open a little longer).
    pub(crate) fn owes_replies_due_after(&self, now: Instant) -> bool {
        self.last_deadline().is_some_and(|due| due > now)
    }
}
