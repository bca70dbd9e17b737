//! What each master did in a round, how the round stands (its tally), and
//! the report an error carries.

use super::voter::Voter;
use crate::command::Vote;
use crate::error::NodeError;
use crate::error::{NodeOutcome, NodeReport, NodeStatus};
use crate::events::{Answers, MasterAnswer};
use crate::holder::Label;
use crate::quorum::{Rule, Tally};

/// One node's state in the current round.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Not sent this round's command, by the round's plan.
    NotSent,
    /// Lagging behind our earlier commands (see `held_back`), so not
    /// sent the acquisition yet: it is sent it once it no longer lags, if
    /// the round comes to need it (see `held_back`). Counts as
    /// a vote that may still come until the round is decided without it or
    /// a master declines; then as failed (`Backlogged`).
    HeldBack,
    Waiting,
    Yes,
    No,
    /// Answered an inspection: the key's `PTTL` (counts as a yes: the
    /// master answered), and its holder label if one was read.
    Pttl(i64, Option<Label>),
    Failed(NodeError),
}

impl From<Vote> for Outcome {
    fn from(vote: Vote) -> Outcome {
        match vote {
            Vote::Yes | Vote::Read(_) => Outcome::Yes,
            Vote::No => Outcome::No,
            Vote::Pttl { ms, holder } => Outcome::Pttl(ms, holder),
            Vote::Failed(e) => Outcome::Failed(e),
        }
    }
}

/// How a round stands, given each node's outcome.
pub(super) fn tally(outcomes: &[Outcome], rule: Rule) -> Tally {
    let mut tally = Tally::default();
    for outcome in outcomes {
        count(&mut tally, outcome, rule);
    }
    tally
}

/// Counts one node's (or voter's) `outcome` into `tally` under `rule`.
pub(super) fn count(tally: &mut Tally, outcome: &Outcome, rule: Rule) {
    match outcome {
        Outcome::Waiting => tally.waiting += 1,
        Outcome::HeldBack => tally.held_back += 1,
        Outcome::Yes | Outcome::Pttl(..) => tally.yes += 1,
        Outcome::No => tally.no += 1,
        Outcome::NotSent if rule == Rule::Release => tally.not_sent += 1,
        Outcome::NotSent => tally.no += 1,
        Outcome::Failed(_) => tally.failed += 1,
    }
}

/// What each node did, for an error.
pub(super) fn report(outcomes: &[Outcome], voters: &[Voter]) -> NodeReport {
    NodeReport::new(
        voters
            .iter()
            .zip(outcomes)
            .map(|(voter, outcome)| NodeStatus {
                node: voter.name().to_string(),
                outcome: node_outcome(outcome),
            })
            .collect(),
    )
}

/// What a node did, as a report says it.
pub(super) fn node_outcome(outcome: &Outcome) -> NodeOutcome {
    match outcome {
        Outcome::Waiting => NodeOutcome::Pending,
        Outcome::Yes | Outcome::Pttl(..) => NodeOutcome::Agreed,
        Outcome::No => NodeOutcome::Declined,
        Outcome::NotSent | Outcome::HeldBack => NodeOutcome::NotSent,
        Outcome::Failed(e) => NodeOutcome::Failed(e.clone()),
    }
}

/// What each node did, as a hook reads it: borrowed, not copied.
pub(crate) struct RoundAnswers<'a> {
    pub(super) outcomes: &'a [Outcome],
    pub(super) voters: &'a [Voter],
}

impl Answers for RoundAnswers<'_> {
    fn count(&self) -> usize {
        self.voters.len().min(self.outcomes.len())
    }

    fn answer(&self, i: usize) -> (&str, MasterAnswer<'_>) {
        let answer = match &self.outcomes[i] {
            Outcome::Waiting => MasterAnswer::Pending,
            Outcome::Yes | Outcome::Pttl(..) => MasterAnswer::Agreed,
            Outcome::No => MasterAnswer::Declined,
            Outcome::NotSent | Outcome::HeldBack => MasterAnswer::NotSent,
            Outcome::Failed(e) => MasterAnswer::Failed(e),
        };
        (self.voters[i].name(), answer)
    }
}
