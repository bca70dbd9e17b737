//! What a batch round did, op by op (see `batch`): each op's outcome on
//! each master, what the masters that said yes with numbers answered, and
//! the tags its commands carried.

use crate::command::fence::Reading;
use crate::error::{NodeOutcome, NodeReport};
use crate::holder::Label;
use crate::quorum::{Decision, NodeSet, Rule, Tally};
use crate::round::outcome::{node_outcome, report, tally, Outcome, RoundAnswers};
use crate::round::voter::Voter;

/// What a batch round did, op by op.
pub(crate) struct BatchResults {
    pub(super) nodes: usize,
    /// Per op: the rule that decides it.
    pub(super) rules: Vec<Rule>,
    /// `outcomes[op * nodes + i]`: what node `i` did for `op`.
    pub(super) outcomes: Vec<Outcome>,
    /// Laid out as `outcomes`: what a node that said yes with numbers (the
    /// fence operator's scripts) answered; empty until one does.
    pub(super) readings: Vec<Reading>,
    /// Per op: the masters sent one of its commands.
    pub(super) sent: Vec<NodeSet>,
    /// Per op: the tag of its second command.
    pub(super) second_tags: Vec<u64>,
    /// The largest tag taken for the round's commands.
    pub(super) last_tag: u64,
}

impl BatchResults {
    pub(super) fn of(&self, op: usize) -> &[Outcome] {
        &self.outcomes[op * self.nodes..(op + 1) * self.nodes]
    }

    /// How `op` stands.
    pub(crate) fn tally(&self, op: usize) -> Tally {
        tally(self.of(op), self.rules[op])
    }

    /// Whether `op` is still undecided by its rule.
    pub(crate) fn is_open(&self, op: usize) -> bool {
        let rule = self.rules[op];
        tally(self.of(op), rule).decision(rule) == Decision::Open
    }

    /// The masters sent `op`'s commands.
    pub(crate) fn sent(&self, op: usize) -> NodeSet {
        self.sent[op]
    }

    /// The masters that said yes to `op`.
    pub(crate) fn agreed(&self, op: usize) -> NodeSet {
        self.answered(op, |outcome| matches!(outcome, Outcome::Yes))
    }

    /// The masters that said no to `op`.
    pub(crate) fn declined(&self, op: usize) -> NodeSet {
        self.answered(op, |outcome| matches!(outcome, Outcome::No))
    }

    /// The masters that answered `op` that they did not do it: a no, or
    /// an error reply to the command (see `Session::refused`).
    pub(crate) fn refused(&self, op: usize) -> NodeSet {
        self.answered(op, |outcome| {
            matches!(
                outcome,
                Outcome::No | Outcome::Failed(crate::error::NodeError::Server(_))
            )
        })
    }

    /// What each master did for `op`, for a hook (borrowed).
    pub(crate) fn answers<'a>(&'a self, op: usize, voters: &'a [Voter]) -> RoundAnswers<'a> {
        RoundAnswers {
            outcomes: self.of(op),
            voters,
        }
    }

    /// The largest tag the round's commands carried (0 for none): a lock
    /// taken by one of its ops follows it (see `handle::pool::Ticket`).
    pub(crate) fn newest_tag(&self) -> u64 {
        self.last_tag
    }

    /// The masters whose answer to `op` is `which`.
    fn answered(&self, op: usize, which: impl Fn(&Outcome) -> bool) -> NodeSet {
        let mut set = NodeSet::EMPTY;
        for (i, outcome) in self.of(op).iter().enumerate() {
            if which(outcome) {
                set.insert(i);
            }
        }
        set
    }

    /// What master `i` answered `op` with, if it said yes with numbers
    /// (the default otherwise).
    pub(crate) fn reading(&self, op: usize, i: usize) -> Reading {
        self.readings
            .get(op * self.nodes + i)
            .copied()
            .unwrap_or_default()
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

    /// What master `i` answered `op`'s `PTTL` with (and the holder label
    /// read with it), if it did.
    pub(crate) fn pttl(&self, op: usize, i: usize) -> Option<(i64, Option<Label>)> {
        match self.of(op)[i] {
            Outcome::Pttl(ms, holder) => Some((ms, holder)),
            _ => None,
        }
    }

    /// What master `i` did for `op`.
    pub(crate) fn outcome(&self, op: usize, i: usize) -> NodeOutcome {
        node_outcome(&self.of(op)[i])
    }

    /// What each master did for `op`, for an error.
    pub(crate) fn report(&self, op: usize, voters: &[Voter]) -> NodeReport {
        report(self.of(op), voters)
    }
}
