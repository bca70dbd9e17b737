//! Batched rounds: many commands (*ops*), each to its own masters, in one
//! round. Every master gets the commands of all the ops that go to it in
//! one write, pipelined on its connection, each followed by its tag as
//! usual; one `poll(2)` loop collects the answers of all of them, and each
//! op is decided by the round's rule on its own. The round ends once every
//! op is decided, or at its deadline.
//!
//! The renewal of many leases (see `lock::lease::renew`) is the one user: a thousand
//! extensions cost each master one write and one read burst, not a
//! thousand rounds.

mod results;
mod scratch;
mod send;

pub(crate) use results::BatchResults;
pub(crate) use scratch::BatchScratch;

use super::connections::Connections;
use super::outcome::Outcome;
use super::plan::{Dial, Masters};
use super::redirect;
use super::voter::{encoded_for, OwnKeys};
use crate::command::fence::Reading;
use crate::command::{Command, Encoded, Vote};
use crate::conn::{Purpose, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::{NodeError, ServerError};
use crate::os::Ready;
use crate::quorum::{NodeSet, Rule};
use crate::resp::ServerErrorKind;
use std::time::Instant;

/// One op of a batch: a command for the masters in `to`, and optionally a
/// second command for other masters (an extension's `SET NX` where its
/// acquisition left the key out). The masters in `skip` are not sent
/// anything and count as failed (see `handle::pool::Taken`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchOp<'a> {
    pub(crate) command: Command<'a>,
    pub(crate) to: NodeSet,
    pub(crate) others: Option<(Command<'a>, NodeSet)>,
    pub(crate) skip: NodeSet,
}

// What a round in parts (see `parts`) reads of a batch's results.
impl BatchResults {
    /// What each node did for `op`.
    pub(super) fn votes(&self, op: usize) -> &[Outcome] {
        self.of(op)
    }

    /// Takes what node `i` did for `op` out of the results (leaving
    /// `NotSent`).
    pub(super) fn take(&mut self, op: usize, i: usize) -> Outcome {
        std::mem::replace(&mut self.outcomes[op * self.nodes + i], Outcome::NotSent)
    }

    /// The largest tag the round's commands carried (0 for none).
    pub(super) fn last_tag(&self) -> u64 {
        self.last_tag
    }
}

/// Runs `ops` in one round on `links` (see the module docs), deciding each
/// by `rule`, until all are decided or `deadline`. At most `u16::MAX` ops.
/// The round is numbered already (see `Session::run_batch`).
pub(super) fn run(
    links: &mut Connections,
    scratch: &mut BatchScratch,
    masters: Masters<'_>,
    ops: &[BatchOp<'_>],
    rule: Rule,
    deadline: Instant,
) -> BatchResults {
    let open = |results: &BatchResults| (0..ops.len()).any(|k| results.is_open(k));
    let terms = Terms {
        rule,
        each: None,
        deadline,
        dial: Dial::OutsideBackoff,
        unawaited: false,
        together: false,
    };
    run_until(links, scratch, masters, ops, terms, open)
}

/// How a batch round runs: the rule that decides each op (or, in `each`,
/// one rule per op: a group's batch of acquisitions and releases), its deadline,
/// which nodes without a connection it dials, and whether the answers go
/// unawaited by the caller (see `Plan::unawaited`: a voter refused as not
/// independent is still sent its commands, for the release after a
/// failed acquisition must reach a voter refused mid-round, which may
/// have set keys; its answers are not waited for), and whether the ops
/// are decided together by the caller's stop rule (a set's parts: see
/// `parts`) rather than each by `rule`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Terms<'r> {
    pub(super) rule: Rule,
    pub(super) each: Option<&'r [Rule]>,
    pub(super) deadline: Instant,
    pub(super) dial: Dial,
    pub(super) unawaited: bool,
    pub(super) together: bool,
}

/// [`run`], dialling as `dial` says, until `open` says nothing is left
/// to wait for (or `deadline`): for ops that are decided together, not
/// each on its own (a set command's parts on cluster voters: see
/// `parts`). Each op's answers that its own rule leaves open at the
/// deadline still count as missed.
pub(super) fn run_until(
    links: &mut Connections,
    scratch: &mut BatchScratch,
    masters: Masters<'_>,
    ops: &[BatchOp<'_>],
    terms: Terms<'_>,
    open: impl Fn(&BatchResults) -> bool,
) -> BatchResults {
    let Terms {
        rule,
        each,
        deadline,
        dial,
        unawaited,
        together,
    } = terms;
    let n = links.voters();
    let mut results = scratch.results(n, ops.len(), rule, each);
    assert!(
        ops.len() <= usize::from(u16::MAX),
        "too many ops in a batch"
    );
    let start = Instant::now();
    // Each op's lane on each voter: a cluster voter's node for the op's key.
    let mut lanes = std::mem::take(&mut scratch.lanes);
    lanes.clear();
    for op in ops {
        let slot = op.command.slot();
        for (i, voter) in masters.voters.iter().enumerate() {
            lanes.push(links.lane_for(i, voter.route(slot, start)));
        }
    }
    links.look_before_sending(masters, start);
    // Each op's commands, encoded once for all the masters, with tags
    // that increase in the order they are sent on every connection.
    let mut encoded = std::mem::take(&mut scratch.encoded);
    if encoded.len() < ops.len() {
        encoded.resize_with(ops.len(), Default::default);
    }
    for (k, op) in ops.iter().enumerate() {
        let pair = &mut encoded[k];
        let tag = links.take_tag();
        pair[0].reset(&op.command, tag);
        results.last_tag = results.last_tag.max(tag);
        if let Some((other, _)) = op.others {
            let tag = links.take_tag();
            pair[1].reset(&other, tag);
            results.second_tags[k] = tag;
            results.last_tag = results.last_tag.max(tag);
        }
    }
    let mut redirects = std::mem::take(&mut scratch.redirects);
    redirects.clear();
    redirects.resize(lanes.len(), 0);
    let mut redirected = std::mem::take(&mut scratch.redirected);
    redirected.clear();
    let mut batch = Batch {
        links,
        masters,
        ops,
        redirects,
        lanes,
        encoded,
        results,
        redirected,
        own_keys: OwnKeys::default(),
        start,
        deadline,
        dial,
        unawaited,
    };
    for i in 0..n {
        batch.send_to(i);
    }
    while open(&batch.results) && batch.wait() {}
    batch.give_up_held_back();
    // A round decided (by `open`) before an answer came did not wait for
    // it: no miss, as after a single round (see `time_out_the_undecided`).
    if open(&batch.results) {
        batch.time_out_the_undecided(together);
    }
    batch.links.send_notices(masters, deadline);
    batch.links.publish_progress();
    let Batch {
        mut encoded,
        lanes,
        redirects,
        redirected,
        results,
        ..
    } = batch;
    // Only this round's slots can have grown.
    for pair in encoded.iter_mut().take(ops.len()) {
        pair[0].trim();
        pair[1].trim();
    }
    encoded.truncate(scratch.kept_ops);
    scratch.encoded = encoded;
    scratch.lanes = lanes;
    scratch.redirects = redirects;
    scratch.redirected = redirected;
    results
}

/// A batch round under way.
struct Batch<'b> {
    links: &'b mut Connections,
    masters: Masters<'b>,
    ops: &'b [BatchOp<'b>],
    /// `lanes[op * voters + i]`: the lane `op` goes on for voter `i`.
    lanes: Vec<usize>,
    /// Each op's command and second command, encoded.
    encoded: Vec<[Encoded; 2]>,
    results: BatchResults,
    /// `redirects[op * voters + i]`: the redirects `op` followed on voter `i`.
    redirects: Vec<u8>,
    /// Redirects read in the current service, to follow once it is done.
    redirected: Vec<(usize, ServerError)>,
    /// An op's commands encoded again for a voter whose keys carry a
    /// prefix of their own (one op at a time: each is queued at once).
    own_keys: OwnKeys,
    start: Instant,
    deadline: Instant,
    /// Which nodes without a connection are dialled.
    dial: Dial,
    /// See [`Terms::unawaited`].
    unawaited: bool,
}

impl Batch<'_> {
    /// Whether some op waits for an answer on `lane`.
    fn awaited_on(&self, lane: usize) -> bool {
        let n = self.links.voters();
        let i = usize::from(self.links.lane(lane).voter);
        (0..self.ops.len()).any(|k| {
            self.lanes[k * n + i] == lane
                && matches!(
                    self.results.outcomes[k * n + i],
                    Outcome::Waiting | Outcome::HeldBack
                )
        })
    }

    /// Waits once for answers (or the deadline); returns false once the
    /// deadline has passed or nothing is awaited any more.
    fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        self.links.poll.clear();
        self.links.polled.clear();
        for lane in 0..self.links.conns.len() {
            let waiting = self.awaited_on(lane);
            let conn = &self.links.conns[lane];
            let (read, write) = conn.interest();
            let read = read && waiting;
            match conn.raw_fd() {
                Some(fd) if read || write => {
                    self.links.poll.add(fd, read, write);
                    self.links.polled.push(lane);
                }
                _ => {}
            }
        }
        if self.links.polled.is_empty() {
            return false;
        }
        if let Err(e) = self.links.poll.wait(self.deadline - now) {
            let error = NodeError::from_io(&e);
            for k in 0..self.links.polled.len() {
                let lane = self.links.polled[k];
                self.fail(lane, error.clone(), now);
            }
            return false;
        }
        for slot in 0..self.links.polled.len() {
            let ready = self.links.poll.ready(slot);
            if ready == Ready::default() {
                continue;
            }
            let lane = self.links.polled[slot];
            match self.service(lane, ready) {
                Ok(()) => self.send_held_back(lane),
                Err(e) => self.fail(lane, e, Instant::now()),
            }
        }
        true
    }

    /// Reads what `lane` answered, op by op.
    fn service(&mut self, lane: usize, ready: Ready) -> Result<(), NodeError> {
        let n = self.links.voters();
        let i = usize::from(self.links.lane(lane).voter);
        let (start, round) = (self.start, self.links.round);
        let conn = &mut self.links.conns[lane];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let state = &self.masters.states[i];
        let voter = &self.masters.voters[i];
        let cluster = voter.cluster();
        let results = &mut self.results;
        let redirected = &mut self.redirected;
        // Refused earlier (see `independence`): its answers were struck out,
        // and they must not show it healthy either.
        let refused = self.masters.independence.refused().contains(i);
        let taken = conn.take_replies(Some(round), &mut |op, vote| {
            if refused {
                return;
            }
            let now = Instant::now();
            let slot = usize::from(op) * n + i;
            if let Vote::Failed(NodeError::Server(e)) = &vote {
                if redirect::suggests_new_topology(e) {
                    voter.suspect();
                }
            }
            if let (Some(_), Vote::Failed(NodeError::Server(e))) = (cluster, &vote) {
                // Followed after the replies are read (see `follow`).
                if matches!(results.outcomes.get(slot), Some(Outcome::Waiting))
                    && matches!(e.kind(), ServerErrorKind::Moved | ServerErrorKind::Ask)
                {
                    redirected.push((usize::from(op), e.clone()));
                    return;
                }
            }
            match &vote {
                // Left out of fencing (the operator's fence scripts): the
                // node answered, it did not fail.
                Vote::Failed(e) if e.fence_fault().is_none() => state.failed(now, e),
                _ => state.answered(now, now.saturating_duration_since(start)),
            }
            if matches!(results.outcomes.get(slot), Some(Outcome::Waiting)) {
                if let Vote::Read(reading) = &vote {
                    let len = results.outcomes.len();
                    if results.readings.len() < len {
                        results.readings.resize(len, Reading::default());
                    }
                    results.readings[slot] = *reading;
                }
                results.outcomes[slot] = Outcome::from(vote);
            }
        });
        if let Some(forms) = conn.take_new_forms() {
            state.uses(forms);
        }
        self.links
            .check_independence(self.masters, lane, &mut self.results.outcomes);
        let redirected = std::mem::take(&mut self.redirected);
        for (k, error) in &redirected {
            self.follow(*k, i, error);
        }
        self.redirected = redirected;
        self.redirected.clear();
        taken
    }

    /// Op `k`'s command to voter `i` was redirected (see
    /// `round::redirect`): sends it where the redirect points, or records
    /// the redirect as the voter's failure.
    fn follow(&mut self, k: usize, i: usize, error: &ServerError) {
        let n = self.links.voters();
        let slot = k * n + i;
        let now = Instant::now();
        let voter = &self.masters.voters[i];
        let from = usize::from(self.links.lane(self.lanes[slot]).node);
        let target = (self.redirects[slot] < redirect::MAX_REDIRECTS && now < self.deadline)
            .then(|| redirect::target(voter, from, error))
            .flatten();
        let Some((node, asking)) = target else {
            self.results.outcomes[slot] = Outcome::Failed(NodeError::Server(error.clone()));
            return;
        };
        self.redirects[slot] += 1;
        let lane = self.links.lane_for(i, node);
        self.lanes[slot] = lane;
        if self.masters.voters[i].key_prefix().is_some() {
            self.links.route_to(i, node);
            if let Some(j) = self.links.shares_master_among(self.masters, i, 0..n) {
                let error = NodeError::SharesMaster(self.masters.voters[j].name().to_string());
                self.masters.states[i].failed(now, &error);
                self.results.outcomes[slot] = Outcome::Failed(error);
                return;
            }
        }
        let sent = self
            .links
            .open_lane(self.masters, lane, now, self.deadline, self.dial)
            .and_then(|()| {
                let op = &self.ops[k];
                let w = usize::from(!op.to.contains(i));
                let command = match (w, op.others) {
                    (1, Some((other, _))) => other,
                    _ => op.command,
                };
                let conn = &mut self.links.conns[lane];
                let limit = match command.is_acquisition() {
                    true => MAX_OWED_ACQUIRE,
                    false => MAX_OWED,
                };
                if asking {
                    conn.enqueue_asking(self.deadline, limit)?;
                }
                let encoded = encoded_for(
                    &self.masters.voters[i],
                    &mut self.encoded[k][w],
                    &mut self.own_keys,
                    w,
                    &command,
                    conn.capabilities(),
                );
                let purpose = Purpose {
                    round: self.links.round,
                    op: k as u16,
                };
                conn.send(encoded, purpose, self.deadline, limit, false)
            });
        self.links.last_sent[lane] = now;
        if let Err(e) = sent {
            if e.breaks_connection() {
                self.links.conns[lane].discard();
                self.links.lane_failed(self.masters, lane, now, &e);
            }
            self.results.outcomes[slot] = Outcome::Failed(e);
        }
    }

    /// `lane` failed: every op still waiting on it fails with `error`, and
    /// a broken connection is discarded.
    fn fail(&mut self, lane: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            self.links.conns[lane].discard();
            self.links.lane_failed(self.masters, lane, now, &error);
        }
        let n = self.links.voters();
        let i = usize::from(self.links.lane(lane).voter);
        for k in 0..self.results.sent.len() {
            let slot = k * n + i;
            let outcome = &mut self.results.outcomes[slot];
            if self.lanes[slot] == lane && matches!(outcome, Outcome::Waiting | Outcome::HeldBack) {
                *outcome = Outcome::Failed(error.clone());
            }
        }
    }

    /// The round is over. A master that still owes an answer to an op the
    /// round could not decide missed the deadline (the round waited for
    /// it): those answers failed. An answer that was not needed (its op
    /// was decided by the others') is no failure: it stays pending and is
    /// read later (the look before the session's next round), as after a
    /// single lock's round, which records the master late only if that
    /// look finds the answer overdue (see `look`).
    ///
    /// Ops decided `together` (see [`Terms`]) are undecided together:
    /// every answer still owed then missed the deadline.
    fn time_out_the_undecided(&mut self, together: bool) {
        let now = Instant::now();
        let (n, ops) = (self.links.voters(), self.ops.len());
        let open: Vec<bool> = (0..ops)
            .map(|k| together || self.results.is_open(k))
            .collect();
        for i in 0..n {
            let Some(awaited) = (0..ops)
                .find(|&k| open[k] && matches!(self.results.outcomes[k * n + i], Outcome::Waiting))
            else {
                continue;
            };
            let lane = self.lanes[awaited * n + i];
            let error = NodeError::TimedOut(self.links.conns[lane].phase());
            self.links
                .missed_deadline(self.masters, i, error.clone(), now);
            for k in (0..ops).filter(|&k| open[k]) {
                let outcome = &mut self.results.outcomes[k * n + i];
                if matches!(outcome, Outcome::Waiting) {
                    *outcome = Outcome::Failed(error.clone());
                }
            }
        }
    }
}
