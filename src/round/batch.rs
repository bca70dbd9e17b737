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

use super::connections::Connections;
use super::outcome::{report, tally, Outcome};
use super::plan::{Dial, Masters};
use crate::command::{Command, Encoded, Vote};
use crate::conn::Node;
use crate::conn::{Purpose, MAX_OWED};
use crate::error::{NodeError, NodeReport};
use crate::os::Ready;
use crate::quorum::{Decision, NodeSet, Rule, Tally};
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

/// What a batch round did, op by op.
pub(crate) struct BatchResults {
    nodes: usize,
    rule: Rule,
    /// `outcomes[op * nodes + i]`: what node `i` did for `op`.
    outcomes: Vec<Outcome>,
    /// Per op: the masters sent one of its commands.
    sent: Vec<NodeSet>,
    /// Per op: the tag of its second command.
    second_tags: Vec<u64>,
}

impl BatchResults {
    fn of(&self, op: usize) -> &[Outcome] {
        &self.outcomes[op * self.nodes..(op + 1) * self.nodes]
    }

    /// How `op` stands.
    pub(crate) fn tally(&self, op: usize) -> Tally {
        tally(self.of(op), self.rule)
    }

    /// The masters sent `op`'s commands.
    pub(crate) fn sent(&self, op: usize) -> NodeSet {
        self.sent[op]
    }

    /// The masters that said yes to `op`.
    pub(crate) fn agreed(&self, op: usize) -> NodeSet {
        let mut set = NodeSet::EMPTY;
        for (i, outcome) in self.of(op).iter().enumerate() {
            if matches!(outcome, Outcome::Yes) {
                set.insert(i);
            }
        }
        set
    }

    /// The tag `op`'s second command carried.
    pub(crate) fn set_tag(&self, op: usize) -> u64 {
        self.second_tags[op]
    }

    /// The masters sent a command of any op.
    pub(crate) fn sent_to_any(&self) -> NodeSet {
        self.sent
            .iter()
            .fold(NodeSet::EMPTY, |all, sent| all.union(*sent))
    }

    /// What each master did for `op`, for an error.
    pub(crate) fn report(&self, op: usize, nodes: &[Node]) -> NodeReport {
        report(self.of(op), nodes)
    }
}

/// Runs `ops` in one round on `links` (see the module docs), deciding each
/// by `rule`, until all are decided or `deadline`. At most `u16::MAX` ops.
/// The round is numbered already (see `Session::run_batch`).
pub(super) fn run(
    links: &mut Connections,
    masters: Masters<'_>,
    ops: &[BatchOp<'_>],
    rule: Rule,
    deadline: Instant,
) -> BatchResults {
    let n = links.conns.len();
    let mut results = BatchResults {
        nodes: n,
        rule,
        outcomes: (0..ops.len() * n).map(|_| Outcome::NotSent).collect(),
        sent: vec![NodeSet::EMPTY; ops.len()],
        second_tags: vec![0; ops.len()],
    };
    assert!(
        ops.len() <= usize::from(u16::MAX),
        "too many ops in a batch"
    );
    let start = Instant::now();
    links.look_before_sending(masters, start);
    // Each op's commands, encoded once for all the masters, with tags
    // that increase in the order they are sent on every connection.
    let mut encoded: Vec<[Encoded; 2]> = Vec::with_capacity(ops.len());
    for (k, op) in ops.iter().enumerate() {
        let mut pair: [Encoded; 2] = Default::default();
        pair[0].reset(&op.command, links.take_tag());
        if let Some((other, _)) = op.others {
            let tag = links.take_tag();
            pair[1].reset(&other, tag);
            results.second_tags[k] = tag;
        }
        encoded.push(pair);
    }
    let mut batch = Batch {
        links,
        masters,
        ops,
        encoded,
        results,
        start,
        deadline,
    };
    for i in 0..n {
        batch.send_to(i);
    }
    loop {
        let open = (0..ops.len())
            .any(|k| tally(batch.results.of(k), rule).decision(rule) == Decision::Open);
        if !open || !batch.wait() {
            break;
        }
    }
    batch.time_out_the_undecided();
    batch.links.send_notices(masters, deadline);
    batch.links.publish_progress();
    batch.results
}

/// A batch round under way.
struct Batch<'b> {
    links: &'b mut Connections,
    masters: Masters<'b>,
    ops: &'b [BatchOp<'b>],
    /// Each op's command and second command, encoded.
    encoded: Vec<[Encoded; 2]>,
    results: BatchResults,
    start: Instant,
    deadline: Instant,
}

impl Batch<'_> {
    /// Queues on node `i` the commands of every op that goes to it, and
    /// writes them in one go.
    fn send_to(&mut self, i: usize) {
        let (ops, now, deadline) = (self.ops, self.start, self.deadline);
        let n = self.links.conns.len();
        let which = |op: &BatchOp<'_>| {
            if op.skip.contains(i) {
                None
            } else if op.to.contains(i) {
                Some(0)
            } else {
                match op.others {
                    Some((_, set)) if set.contains(i) => Some(1),
                    _ => None,
                }
            }
        };
        let results = &mut self.results;
        if !ops.iter().any(|op| which(op).is_some()) {
            for (k, op) in ops.iter().enumerate() {
                if op.skip.contains(i) {
                    results.outcomes[k * n + i] = Outcome::Failed(NodeError::Backlogged);
                }
            }
            return;
        }
        let opened = self
            .links
            .open(self.masters, i, now, deadline, Dial::OutsideBackoff);
        let mut queued = false;
        for (k, op) in ops.iter().enumerate() {
            let slot = k * n + i;
            if op.skip.contains(i) {
                results.outcomes[slot] = Outcome::Failed(NodeError::Backlogged);
                continue;
            }
            let Some(w) = which(op) else { continue };
            if let Err(e) = &opened {
                results.outcomes[slot] = Outcome::Failed(e.clone());
                continue;
            }
            let command = match (w, op.others) {
                (1, Some((other, _))) => other,
                _ => op.command,
            };
            let conn = &mut self.links.conns[i];
            self.encoded[k][w].prepare(&command, conn.capabilities());
            let purpose = Purpose {
                round: self.links.round,
                op: k as u16,
            };
            match conn.enqueue(&self.encoded[k][w], purpose, deadline, MAX_OWED, false) {
                Ok(()) => {
                    results.outcomes[slot] = Outcome::Waiting;
                    results.sent[k].insert(i);
                    queued = true;
                }
                Err(e) => results.outcomes[slot] = Outcome::Failed(e),
            }
        }
        if queued {
            self.links.last_sent[i] = now;
            if let Err(e) = self.links.conns[i].flush() {
                self.fail(i, e, now);
            }
        }
    }

    /// Waits once for answers (or the deadline); returns false once the
    /// deadline has passed or nothing is awaited any more.
    fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        let links = &mut *self.links;
        let n = links.conns.len();
        let ops = self.results.sent.len();
        links.poll.clear();
        links.polled.clear();
        for i in 0..n {
            let waiting =
                (0..ops).any(|k| matches!(self.results.outcomes[k * n + i], Outcome::Waiting));
            let conn = &links.conns[i];
            let (read, write) = conn.interest();
            let read = read && waiting;
            match conn.raw_fd() {
                Some(fd) if read || write => {
                    links.poll.add(fd, read, write);
                    links.polled.push(i);
                }
                _ => {}
            }
        }
        if links.polled.is_empty() {
            return false;
        }
        if let Err(e) = links.poll.wait(self.deadline - now) {
            let error = NodeError::from_io(&e);
            for k in 0..self.links.polled.len() {
                let i = self.links.polled[k];
                self.fail(i, error.clone(), now);
            }
            return false;
        }
        for slot in 0..self.links.polled.len() {
            let ready = self.links.poll.ready(slot);
            if ready == Ready::default() {
                continue;
            }
            let i = self.links.polled[slot];
            if let Err(e) = self.service(i, ready) {
                self.fail(i, e, Instant::now());
            }
        }
        true
    }

    /// Reads what node `i` answered, op by op.
    fn service(&mut self, i: usize, ready: Ready) -> Result<(), NodeError> {
        let n = self.links.conns.len();
        let (start, round) = (self.start, self.links.round);
        let conn = &mut self.links.conns[i];
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let state = &self.masters.states[i];
        let results = &mut self.results;
        let taken = conn.take_replies(Some(round), &mut |op, vote| {
            let now = Instant::now();
            match &vote {
                Vote::Failed(e) => state.failed(now, e),
                _ => state.answered(now, now.saturating_duration_since(start)),
            }
            let slot = usize::from(op) * n + i;
            if let Some(outcome @ Outcome::Waiting) = results.outcomes.get_mut(slot) {
                *outcome = Outcome::from(vote);
            }
        });
        if let Some(forms) = conn.take_new_forms() {
            state.uses(forms);
        }
        taken
    }

    /// Node `i` failed: every op still waiting on it fails with `error`, and
    /// a broken connection is discarded.
    fn fail(&mut self, i: usize, error: NodeError, now: Instant) {
        if error.breaks_connection() {
            self.links.conns[i].discard();
            self.masters.states[i].failed(now, &error);
        }
        let n = self.links.conns.len();
        for k in 0..self.results.sent.len() {
            let outcome = &mut self.results.outcomes[k * n + i];
            if matches!(outcome, Outcome::Waiting) {
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
    fn time_out_the_undecided(&mut self) {
        let now = Instant::now();
        let (n, ops) = (self.links.conns.len(), self.ops.len());
        let rule = self.results.rule;
        let open: Vec<bool> = (0..ops)
            .map(|k| tally(self.results.of(k), rule).decision(rule) == Decision::Open)
            .collect();
        for i in 0..n {
            let awaited = (0..ops)
                .any(|k| open[k] && matches!(self.results.outcomes[k * n + i], Outcome::Waiting));
            if !awaited {
                continue;
            }
            let error = NodeError::TimedOut(self.links.conns[i].phase());
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
