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
//! connection is kept while the server merely lags (up to [`lag_limit`]),
//! so that each release stays behind its acquisition on the same
//! connection; `collect` says how.
//!
//! Here is the session and what the lock layer asks of it; the round
//! itself, [`Session::run`], is its two halves: `send` (the command
//! encoded once and queued to every master, the held-back masters, the
//! look before sending, in `look`) and `collect` (one `poll(2)` for
//! everything awaited, each answer judged, until the outcome is known).
//! What a round is given is in `plan`, what each master did in `outcome`,
//! the connections and what the rounds share about them in `connections`,
//! batched rounds (many commands in one) in `batch`, and what the rounds
//! learn about each master (its reconnect backoff, the health view) in
//! `health`.

mod batch;
mod cluster;
mod collect;
mod connections;
pub(crate) mod discover;
mod health;
mod held_back;
mod independence;
mod look;
mod outcome;
mod parts;
mod plan;
mod redirect;
mod send;
mod sentinel;
mod shards;
mod standing;
mod voter;

pub(crate) use batch::{BatchOp, BatchResults, BatchScratch};
pub(crate) use cluster::ClusterVoter;
pub(crate) use connections::Progress;
pub use health::NodeHealth;
pub(crate) use health::NodeState;
pub(crate) use independence::Independence;
pub(crate) use plan::{lag_limit, Dial, Masters, Plan};
pub(crate) use redirect::target as redirect_target;
pub(crate) use sentinel::SentinelVoter;
use voter::OwnKeys;
pub(crate) use voter::Voter;

use crate::command::fence::Reading;
use crate::command::{Encoded, SetCommand};
use crate::error::{NodeError, NodeReport};
use crate::holder::Label;
use crate::names::Names;
use crate::os::PollSet;
use crate::quorum::{NodeSet, Rule, Tally};
use crate::value::Values;
use connections::Connections;
pub(crate) use outcome::RoundAnswers;
use outcome::{report, Outcome};
pub(crate) use parts::needed_for_keys as set_runs_in_parts;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A released lock gives its resource-name buffer to the session that
/// released it (or, through a group commit, to its group), for the next
/// lock, so that steady-state locking does not allocate; a buffer larger
/// than this is shrunk first.
pub(crate) const KEPT_NAME_CAPACITY: usize = 1024;

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
    /// Per voter: the cluster redirects its command followed this round
    /// (see `redirect`).
    redirects: Vec<u8>,
    /// A set command's parts on cluster voters (see `parts`), and the
    /// voters whose no came from some of their parts only (they may hold
    /// the others' keys).
    parts: parts::Parts,
    partly_declined: NodeSet,
    /// Per voter: the buffers of a voter whose keys carry a prefix of
    /// their own (the single-cluster mode; empty for other voters).
    own_keys: Vec<OwnKeys>,
    /// An empty buffer for the resource name of the next lock taken with
    /// this session (a held lock carries it, and gives it back on release
    /// to whichever session releases it), so that locking does not
    /// allocate.
    pub(crate) name: Vec<u8>,
    /// A buffer for a release's notice channel (see `handle::notify`).
    pub(crate) channel: Vec<u8>,
    /// The same two for a lock on several resources: its names (lent to
    /// the held set as `name` is to a lock), and its release's channels.
    pub(crate) names: Names,
    pub(crate) channels: Names,
    /// Random bytes for the values of the next locks taken with this
    /// session, fetched a few at a time.
    pub(crate) values: Values,
    /// The batch rounds' buffers (see `batch::BatchScratch`), for the
    /// batches of a lock's calls (a group commit keeps its own).
    batch: batch::BatchScratch,
}

impl Session {
    pub(crate) fn new(nodes: usize) -> Session {
        Session {
            links: Connections::new(nodes),
            outcomes: (0..nodes).map(|_| Outcome::NotSent).collect(),
            readings: vec![Reading::default(); nodes],
            sent: NodeSet::EMPTY,
            encoded: [Encoded::with_room(), Encoded::with_room()],
            redirects: vec![0; nodes],
            own_keys: (0..nodes).map(|_| OwnKeys::default()).collect(),
            parts: parts::Parts::default(),
            partly_declined: NodeSet::EMPTY,
            name: Vec::new(),
            channel: Vec::new(),
            names: Names::default(),
            channels: Names::default(),
            values: Values::default(),
            batch: batch::BatchScratch::default(),
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
    /// outcome was known (see `quorum::Rule`): sends (see `send`), then
    /// waits for the answers until the outcome is known (see `collect`).
    ///
    /// An acquisition goes at once to every master in `plan.to` except
    /// those lagging behind our earlier commands that a quorum does not
    /// need (see `lagging_to_include`); those are held back, and join the
    /// round if it comes to need them (see `join_held_back`).
    ///
    /// A set command whose keys span slots goes to a cluster voter in
    /// parts, one per slot (see `parts`).
    pub(crate) fn run(&mut self, masters: Masters<'_>, plan: Plan<'_>) -> Tally {
        if let Some(set) = parts::split_set(masters.voters, &plan.command) {
            return self.run_in_parts(masters, plan, set);
        }
        let round = self.send_to(masters, plan);
        self.collect(&round)
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
    ///
    /// A set command that goes to a cluster voter in parts (see `parts`)
    /// is run instead, its answers awaited until `plan.deadline`.
    pub(crate) fn send_only(&mut self, masters: Masters<'_>, plan: Plan<'_>, flush_until: Instant) {
        if let Some(set) = parts::split_set(masters.voters, &plan.command) {
            let _ = self.run_in_parts(masters, plan, set);
            // The round ends once the release is decided: parts still in a
            // connection's buffer go out now, not with the next round.
            self.links.flush_sent(self.sent, masters, flush_until);
            return;
        }
        let deadline = plan.deadline;
        let _ = self.send_to(masters, plan);
        self.links.send_notices(masters, deadline);
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
    /// the masters (`None`: no answer), with the holder label read after
    /// it (if the round asked for it and found one).
    pub(crate) fn pttls(&self) -> impl Iterator<Item = Option<(i64, Option<Label>)>> + '_ {
        self.outcomes.iter().map(|o| match o {
            Outcome::Pttl(ms, holder) => Some((*ms, *holder)),
            _ => None,
        })
    }

    /// Which masters answered the last round with a no.
    pub(crate) fn declined(&self) -> NodeSet {
        self.answered(|o| matches!(o, Outcome::No))
    }

    /// Runs `plan`, a set command that goes to a cluster voter in parts
    /// (see `parts`), and returns the tally of the voters' votes.
    fn run_in_parts<'p>(
        &mut self,
        masters: Masters<'_>,
        plan: Plan<'p>,
        set: SetCommand<'p>,
    ) -> Tally {
        self.next_round();
        self.readings.fill(Reading::default());
        let voted = self
            .parts
            .run(&mut self.links, masters, plan, set, &mut self.outcomes);
        self.sent = voted.sent;
        self.partly_declined = voted.partly_declined;
        // The tags a lock checks against (see `Progress::has_settled`): the
        // last of the round's, so that every part is settled.
        self.encoded[0].reset(&plan.command, voted.last_tag);
        if let Some((other, _)) = plan.others {
            self.encoded[1].reset(&other, voted.last_tag);
        }
        voted.tally
    }

    /// Which masters answered the last round with a no and cannot have
    /// run any of its command: [`Session::declined`] less the cluster
    /// voters whose no came from some parts of a set command only (see
    /// `parts`): the others may have set their keys.
    pub(crate) fn declined_in_full(&self) -> NodeSet {
        self.declined().difference(self.partly_declined)
    }

    /// Which masters answered the last round that they did not do it: a
    /// no, or an error reply to the command (it did not run: `NOANCHOR`,
    /// `OOM`, ...).
    pub(crate) fn refused(&self) -> NodeSet {
        self.answered(|o| matches!(o, Outcome::No | Outcome::Failed(NodeError::Server(_))))
    }

    /// [`Session::refused`] less the cluster voters whose no came from
    /// some parts of a set command only (see `parts`): they may hold the
    /// keys of the parts that said yes.
    pub(crate) fn refused_in_full(&self) -> NodeSet {
        self.refused().difference(self.partly_declined)
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

    /// Numbers a new round and forgets the last one's per-round state.
    fn next_round(&mut self) {
        self.links.next_round();
        self.sent = NodeSet::EMPTY;
        self.redirects.fill(0);
        self.partly_declined = NodeSet::EMPTY;
    }

    /// Reads, without waiting, what has arrived on the connections that owe
    /// replies, and returns whether they now owe nothing. Connections that
    /// fail are closed.
    pub(crate) fn tidy(&mut self) -> bool {
        self.links.tidy()
    }

    /// Whether the session still owes replies on a connection whose
    /// server is not past `lag_limit` (see [`lag_limit`]): worth keeping
    /// open, for closing it could make the server drop commands it has
    /// not read yet, behind others it ran.
    pub(crate) fn owes_live_replies(&self, now: Instant, lag_limit: Duration) -> bool {
        self.links.owes_live_replies(now, lag_limit)
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
        let results = batch::run(
            &mut self.links,
            &mut self.batch,
            masters,
            ops,
            rule,
            deadline,
        );
        self.sent = results.sent_to_any();
        results
    }

    /// Sends `ops` in one batch round and returns without waiting for
    /// their answers: [`Session::send_only`] for many commands (the
    /// releases after failed acquisitions of a group commit, see
    /// `handle::group`). Each follows, on every connection, what the
    /// session sent before; the answers are read by a later round.
    pub(crate) fn send_only_batch(
        &mut self,
        masters: Masters<'_>,
        ops: &[BatchOp<'_>],
        deadline: Instant,
        flush_until: Instant,
        scratch: &mut BatchScratch,
    ) {
        self.next_round();
        let terms = batch::Terms {
            rule: Rule::Release,
            each: None,
            deadline,
            dial: Dial::UnlessFailingForGood,
            unawaited: true,
            together: false,
        };
        let results = batch::run_until(&mut self.links, scratch, masters, ops, terms, |_| false);
        self.sent = results.sent_to_any();
        scratch.keep(results);
        self.links.flush_sent(self.sent, masters, flush_until);
        self.links.publish_progress();
    }

    /// Runs a group commit's batch (see `handle::group`): acquisitions,
    /// each decided as an acquisition, and releases, each decided as a
    /// release, in one round, as [`Session::run_batch`] does. The
    /// acquisitions leave out the masters that lag (see
    /// `Connections::lagging_for_batch`) while the others can make a
    /// quorum: each counts them failed (`Backlogged`, as the single round
    /// counts a held-back master it gives up). A batch has no way to
    /// bring them in later, and sending a batch's `SET`s to a frozen
    /// master queues hundreds of them there behind its backlog (keys then
    /// stayed on it after it caught up: tests/group_commit.rs, the lagging
    /// master's test). A release goes to every master it is given, lagging
    /// or not, behind its lock's `SET`, as a single release does. The look
    /// before sending comes after the round is numbered, so a master found
    /// late is charged once for this round.
    pub(crate) fn run_group_batch(
        &mut self,
        masters: Masters<'_>,
        ops: &mut [BatchOp<'_>],
        deadline: Instant,
        scratch: &mut BatchScratch,
    ) -> BatchResults {
        self.next_round();
        let now = Instant::now();
        self.links.look_before_sending(masters, now);
        let left_out = self.links.lagging_for_batch(masters, now);
        let mut rules = scratch.take_rules();
        for op in ops.iter_mut() {
            if op.command.is_acquisition() {
                op.skip = op.skip.union(left_out);
                rules.push(Rule::Acquire);
            } else {
                rules.push(Rule::Release);
            }
        }
        let terms = batch::Terms {
            rule: Rule::Acquire,
            each: Some(&rules),
            deadline,
            dial: Dial::OutsideBackoff,
            unawaited: false,
            together: false,
        };
        let results = batch::run_until(&mut self.links, scratch, masters, ops, terms, |results| {
            (0..ops.len()).any(|k| results.is_open(k))
        });
        scratch.give_rules(rules);
        self.sent = results.sent_to_any();
        results
    }

    /// What each node did in the last round, for a hook (borrowed).
    pub(crate) fn answers<'a>(&'a self, voters: &'a [Voter]) -> RoundAnswers<'a> {
        RoundAnswers {
            outcomes: &self.outcomes,
            voters,
        }
    }

    /// What each voter did in the last round, for an error.
    pub(crate) fn report(&self, voters: &[Voter]) -> NodeReport {
        report(&self.outcomes, voters)
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
            for (lane, conn) in session.links.conns.iter().enumerate() {
                let (read, write) = conn.interest();
                if let (true, Some(fd)) = (read, conn.raw_fd()) {
                    poll.add(fd, read, write);
                    polled.push((s, lane));
                }
            }
        }
        let now = Instant::now();
        if polled.is_empty() || now >= deadline || poll.wait(deadline - now).is_err() {
            return;
        }
        for (slot, &(s, lane)) in polled.iter().enumerate() {
            let ready = poll.ready(slot);
            let conn = &mut sessions[s].links.conns[lane];
            let step = if ready.writable {
                conn.on_writable()
            } else {
                Ok(())
            };
            let read = step.and_then(|()| conn.catch_up());
            if read.and_then(|()| conn.send_notices(deadline)).is_err() {
                conn.discard();
            }
        }
    }
}
