//! One round over all masters: write a command to every master at once
//! from this thread, then wait for all of them together with poll(2), under
//! the round's deadline, and stop as soon as the outcome is known.
//!
//! A [`Session`] is a set of connections (one per master) plus the buffers
//! a round needs; sessions are pooled by the `Redlock` handle (see `handle::pool`),
//! and a thread uses one for the length of a call, so a round never waits
//! for another thread's.
//!
//! A command goes to every master at once, queued behind whatever replies
//! the master still owes us (Redis answers in order, and each connection
//! knows which reply answers what). An acquisition makes one exception: a
//! master that genuinely *lags* is held back while the others can make a
//! quorum (see `held_back`, the acquisition's own rule).
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
//!
//! Here is the round itself, [`Session::run`]: send, then wait with one
//! `poll(2)` for everything awaited until the outcome is known. What it is
//! given is in `plan`, what each master did in `outcome`, the connections
//! and what the rounds share about them in `connections`, the look before
//! sending in `look`, batched rounds (many commands in one) in `batch`, and
//! what the rounds learn about each master (its reconnect backoff, the
//! health view) in `health`.

mod batch;
mod connections;
mod health;
mod held_back;
mod look;
mod outcome;
mod plan;

pub(crate) use batch::{BatchOp, BatchResults};
pub(crate) use connections::Progress;
pub use health::NodeHealth;
pub(crate) use health::NodeState;
pub(crate) use plan::{lag_limit, Dial, Masters, Plan};

use crate::command::fence::Reading;
use crate::command::{Encoded, Vote};
use crate::conn::{Node, Purpose, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::{NodeError, NodeReport};
use crate::os::{PollSet, Ready};
use crate::quorum::{Decision, NodeSet, Rule, Tally};
use crate::value::Values;
use connections::Connections;
pub(crate) use outcome::RoundAnswers;
use outcome::{report, tally, Outcome};
use plan::Round;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A set of connections to all masters, and a round's working memory.
#[derive(Debug)]
pub(crate) struct Session {
    /// A connection to every master, and what the rounds share about them.
    links: Connections,
    /// What each master did in the current round.
    outcomes: Vec<Outcome>,
    /// What each master that said yes with numbers (fencing) answered in
    /// the current round; the default elsewhere.
    readings: Vec<Reading>,
    /// The nodes that were sent the current round's commands.
    sent: NodeSet,
    /// The current round's command and second command, encoded.
    encoded: [Encoded; 2],
    /// An empty buffer for the resource name of the next lock taken with
    /// this session (a held lock carries it, and gives it back on release
    /// to whichever session releases it), so that locking does not
    /// allocate.
    pub(crate) name: Vec<u8>,
    /// A buffer for a release's notice channel (see `handle::notify`).
    pub(crate) channel: Vec<u8>,
    /// Random bytes for the values of the next locks taken with this
    /// session, fetched a few at a time.
    pub(crate) values: Values,
}

impl Session {
    pub(crate) fn new(nodes: usize) -> Session {
        Session {
            links: Connections::new(nodes),
            outcomes: (0..nodes).map(|_| Outcome::NotSent).collect(),
            readings: vec![Reading::default(); nodes],
            sent: NodeSet::EMPTY,
            encoded: Default::default(),
            name: Vec::new(),
            channel: Vec::new(),
            values: Values::default(),
        }
    }

    /// The session's progress, shared with the locks taken on it.
    pub(crate) fn progress(&self) -> &Arc<Progress> {
        self.links.progress()
    }

    /// Whether the connections were opened by this process (not inherited
    /// through `fork`).
    pub(crate) fn belongs_to_this_process(&self) -> bool {
        self.links.belongs_to_this_process()
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
                held_back::give_up(&mut self.outcomes);
                tally = self.tally(plan.rule);
            }
            if decided(plan.rule, tally) {
                held_back::give_up(&mut self.outcomes);
                self.links.publish_progress();
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
        self.links.flush_sent(self.sent, masters, flush_until);
        self.links.publish_progress();
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

    /// What master `i` answered the last round with, if it said yes with
    /// numbers (a fenced acquisition's counter and epoch, say).
    pub(crate) fn reading(&self, i: usize) -> Reading {
        self.readings[i]
    }

    /// What each master answered the last round's `PTTL`, in the order of
    /// the masters (`None`: no answer).
    pub(crate) fn pttls(&self) -> impl Iterator<Item = Option<i64>> + '_ {
        self.outcomes.iter().map(|o| match o {
            Outcome::Pttl(ms) => Some(*ms),
            _ => None,
        })
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
        self.links.look_before_sending(masters, round.start);
        let lagging_included = match plan.rule {
            Rule::Acquire => self.links.lagging_to_include(masters, plan.to, round.start),
            _ => NodeSet::all(self.links.conns.len()),
        };
        self.sent = NodeSet::EMPTY;
        self.readings.fill(Reading::default());
        for i in 0..self.links.conns.len() {
            // Everything but an acquisition goes out at once (a release
            // must follow earlier SETs); an acquisition holds back the
            // lagging masters not included, and is queued on the others
            // behind whatever they still owe.
            self.outcomes[i] = if round.command_for(i).is_none() {
                Outcome::NotSent
            } else if plan.skip.contains(i) {
                Outcome::Failed(NodeError::Backlogged)
            } else if self.links.is_lagging(i, round.start) && !lagging_included.contains(i) {
                Outcome::HeldBack
            } else {
                self.start_node(&round, i, round.start)
            };
        }
        round
    }

    /// Brings the held-back masters that no longer lag into an undecided
    /// acquisition once it needs them (see [`held_back::ready_to_join`]).
    /// Returns whether the round is taking them in, so that the ones still
    /// lagging are watched for catching up.
    fn join_held_back(&mut self, round: &Round<'_>, tally: Tally) -> bool {
        if tally.held_back == 0 {
            return false;
        }
        let now = Instant::now();
        let ready =
            held_back::ready_to_join(&self.links, &self.outcomes, tally, round.join_at, now);
        let Some(ready) = ready else {
            return false;
        };
        for i in ready.iter() {
            self.outcomes[i] = self.start_node(round, i, now);
        }
        true
    }

    /// Numbers a new round and forgets the last one's per-round state.
    fn next_round(&mut self) {
        self.links.next_round();
        self.sent = NodeSet::EMPTY;
    }

    /// Starts a round: numbers it and tags its commands.
    fn begin<'a>(&mut self, masters: Masters<'a>, plan: Plan<'a>) -> Round<'a> {
        self.next_round();
        let start = Instant::now();
        let budget = plan.deadline.saturating_duration_since(start);
        // Encoded once for all connections, in the forms they need.
        let tag = self.links.take_tag();
        self.encoded[0].reset(&plan.command, tag);
        if let Some((other, _)) = plan.others {
            let tag = self.links.take_tag();
            self.encoded[1].reset(&other, tag);
        }
        Round {
            masters,
            plan,
            start,
            join_at: held_back::join_at(start, budget),
        }
    }

    /// Connects node `i` if needed, sends it the round's command at `now`,
    /// and returns its outcome: waiting for the answer, or failed at once (a
    /// node that cannot be reached now, being down or in its reconnect
    /// backoff, fails the round).
    ///
    /// A handle that never runs scripts holds an acquisition back from a
    /// new connection until its handshake has shown that it can release
    /// there (see `Capabilities::awaits_rights`): it joins the round then,
    /// as a lagging master does (see `held_back`).
    fn start_node(&mut self, round: &Round<'_>, i: usize, now: Instant) -> Outcome {
        match self.send_to_node(round, i, now) {
            Ok(true) => Outcome::Waiting,
            Ok(false) => Outcome::HeldBack,
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Sends node `i` its command; `Ok(false)` if it was held back instead.
    fn send_to_node(
        &mut self,
        round: &Round<'_>,
        i: usize,
        now: Instant,
    ) -> Result<bool, NodeError> {
        let Some(which) = round.command_for(i) else {
            return Ok(true);
        };
        let (deadline, dial) = (round.plan.deadline, round.plan.dial);
        self.links.open(round.masters, i, now, deadline, dial)?;
        let conn = &mut self.links.conns[i];
        if round.is_acquisition_for(i) && conn.capabilities().awaits_rights() {
            return Ok(false);
        }
        let backoff = &round.masters.states[i];
        let limit = if round.is_acquisition_for(i) {
            MAX_OWED_ACQUIRE
        } else {
            MAX_OWED
        };
        let purpose = Purpose {
            round: self.links.round,
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
            self.links.last_sent[i] = now;
        }
        sent.inspect_err(|e| {
            if e.breaks_connection() {
                conn.discard();
                backoff.failed(now, e);
            }
        })
        .map(|()| true)
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
            for i in 0..self.links.conns.len() {
                if self.is_waiting(i) {
                    let phase = self.links.conns[i].phase();
                    self.fail(round, i, NodeError::TimedOut(phase), now);
                }
            }
            held_back::give_up(&mut self.outcomes);
            return;
        }
        let held_back = self.outcomes.iter().any(|o| matches!(o, Outcome::HeldBack));
        if held_back && !joining && now >= round.join_at {
            // `join_at` passed since `join_held_back` looked: let it look
            // again rather than sleep past it.
            return;
        }
        self.links.poll.clear();
        self.links.polled.clear();
        for i in 0..self.links.conns.len() {
            let conn = &self.links.conns[i];
            if !self.is_waiting(i) && conn.is_dead(now, round.masters.lag_limit) {
                let phase = conn.phase();
                self.links.conns[i].discard();
                round.masters.states[i].failed(now, &NodeError::TimedOut(phase));
                continue;
            }
            let (read, write) = conn.interest();
            let watched =
                self.is_waiting(i) || (joining && matches!(self.outcomes[i], Outcome::HeldBack));
            let read = read && watched;
            match conn.raw_fd() {
                Some(fd) if read || write => {
                    self.links.poll.add(fd, read, write);
                    self.links.polled.push(i);
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
        if let Err(e) = self.links.poll.wait(wake - now) {
            let error = NodeError::from_io(&e);
            for k in 0..self.links.polled.len() {
                self.fail(round, self.links.polled[k], error.clone(), now);
            }
            return;
        }
        for slot in 0..self.links.polled.len() {
            let ready = self.links.poll.ready(slot);
            if ready != Ready::default() {
                let i = self.links.polled[slot];
                if let Err(e) = self.service(round, i, ready) {
                    self.fail(round, i, e, Instant::now());
                }
            }
        }
    }

    /// Handles readiness on node `i`: finishes a connect, writes what is
    /// pending, reads what arrived, and records the node's vote if complete.
    fn service(&mut self, round: &Round<'_>, i: usize, ready: Ready) -> Result<(), NodeError> {
        let conn = &mut self.links.conns[i];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let mut vote = None;
        conn.take_replies(Some(self.links.round), &mut |_, v| vote = Some(v))?;
        let state = &round.masters.states[i];
        if let Some(forms) = conn.take_new_forms() {
            state.uses(forms);
        }
        let Some(vote) = vote else {
            return Ok(());
        };
        let now = Instant::now();
        match &vote {
            Vote::Failed(e) => state.failed(now, e),
            _ => state.answered(now, now.saturating_duration_since(round.start)),
        }
        if matches!(self.outcomes[i], Outcome::Waiting) {
            if let Vote::Read(reading) = &vote {
                self.readings[i] = *reading;
            }
            self.outcomes[i] = Outcome::from(vote);
        }
        Ok(())
    }

    /// Records a failure of node `i` (if its outcome is still open), and
    /// discards its connection if the failure broke it. A deadline that
    /// passed on a connection that is kept shows in the health view only.
    fn fail(&mut self, round: &Round<'_>, i: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            if self.links.conns[i].is_opening() {
                // Nothing left the connection before its opening (connect,
                // TLS handshake) ended: the server never got the command,
                // so it holds no key of it and needs no release.
                self.sent.remove(i);
            }
            self.links.conns[i].discard();
            round.masters.states[i].failed(now, &error);
            if matches!(self.outcomes[i], Outcome::HeldBack) {
                // Held back until its handshake answered, which failed.
                self.outcomes[i] = Outcome::Failed(error);
                return;
            }
        } else if matches!(error, NodeError::TimedOut(_)) {
            self.links
                .missed_deadline(round.masters, i, error.clone(), now);
        }
        if self.is_waiting(i) {
            self.outcomes[i] = Outcome::Failed(error);
        }
    }

    /// Reads, without waiting, what has arrived on the connections that owe
    /// replies, and returns whether they now owe nothing. Connections that
    /// fail are closed.
    pub(crate) fn tidy(&mut self) -> bool {
        self.links.tidy()
    }

    /// Whether the session still owes replies whose deadline is in the
    /// future (worth keeping open a little longer).
    pub(crate) fn owes_replies_due_after(&self, now: Instant) -> bool {
        self.links.owes_replies_due_after(now)
    }

    /// Runs `ops` in one round (see `batch`), deciding each by `rule`,
    /// until all are decided or `deadline`. At most `u16::MAX` ops.
    pub(crate) fn run_batch(
        &mut self,
        masters: Masters<'_>,
        ops: &[BatchOp<'_>],
        rule: Rule,
        deadline: Instant,
    ) -> BatchResults {
        self.next_round();
        let results = batch::run(&mut self.links, masters, ops, rule, deadline);
        self.sent = results.sent_to_any();
        results
    }

    fn is_waiting(&self, i: usize) -> bool {
        matches!(self.outcomes[i], Outcome::Waiting)
    }

    fn tally(&self, rule: Rule) -> Tally {
        tally(&self.outcomes, rule)
    }

    /// What each node did in the last round, for a hook (borrowed).
    pub(crate) fn answers<'a>(&'a self, nodes: &'a [Node]) -> RoundAnswers<'a> {
        RoundAnswers {
            outcomes: &self.outcomes,
            nodes,
        }
    }

    /// What each node did in the last round, for an error.
    pub(crate) fn report(&self, nodes: &[Node]) -> NodeReport {
        report(&self.outcomes, nodes)
    }
}

/// Whether a round run by `rule` is over with `tally`: once its outcome is
/// known, but for a release that cannot succeed any more. That one still
/// waits for the masters it awaits (until its deadline), so that it deletes
/// the key wherever a master can answer: a connection still opening has not
/// even sent it yet, and a caller that gives up on the lock (a process about
/// to exit) would leave the key until its TTL.
fn decided(rule: Rule, tally: Tally) -> bool {
    match tally.decision(rule) {
        Decision::Open => false,
        Decision::Reached => true,
        _ => rule != Rule::Release || tally.waiting == 0,
    }
}

/// Waits up to `timeout` in all, for every session at once, for the replies
/// their connections still owe (releases sent at quorum, say), so that the
/// servers run what they were sent before the connections close. Closing a
/// socket with replies unread resets the connection, and a server may then
/// drop commands it had received but not yet read.
pub(crate) fn settle(sessions: &mut [Box<Session>], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut poll = PollSet::default();
    let mut polled = Vec::new();
    loop {
        poll.clear();
        polled.clear();
        for (s, session) in sessions.iter().enumerate() {
            for (i, conn) in session.links.conns.iter().enumerate() {
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
            let conn = &mut sessions[s].links.conns[i];
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
