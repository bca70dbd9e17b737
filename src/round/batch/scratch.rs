//! A batch round's buffers, kept between rounds (see `batch`).

use super::results::BatchResults;
use crate::command::Encoded;
use crate::error::ServerError;
use crate::quorum::{NodeSet, Rule};
use crate::round::outcome::Outcome;
use std::fmt;

/// A batch round's buffers, kept by their owner (a session, or a set's
/// parts) from round to round with their capacity, the encoded commands'
/// own buffers included, so that a batch round of no more ops than an
/// earlier one allocates nothing.
pub(crate) struct BatchScratch {
    /// The most ops whose encoded commands are kept (see `keeping`).
    pub(super) kept_ops: usize,
    pub(super) encoded: Vec<[Encoded; 2]>,
    pub(super) lanes: Vec<usize>,
    pub(super) redirects: Vec<u8>,
    pub(super) redirected: Vec<(usize, ServerError)>,
    /// Rounds' results given back (`keep`), at most two (a group's batch
    /// and the releases sent after it): the next rounds' are made in
    /// their vectors.
    pub(super) kept: Vec<BatchResults>,
    /// A buffer for the ops' own rules (see `Terms::each`).
    pub(super) rules: Vec<Rule>,
}

impl fmt::Debug for BatchScratch {
    // The encoded commands hold lock values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchScratch")
            .field("encoded", &self.encoded.len())
            .finish_non_exhaustive()
    }
}

/// The ops whose encoded commands a [`BatchScratch`] keeps by default (a
/// session's, for lease renewals and `inspect_many`; a set's parts): a
/// larger round encodes the rest afresh, as every round did before,
/// rather than have each session that ran a renewal of 256 leases hold
/// their buffers.
const KEPT_OPS: usize = 32;

impl Default for BatchScratch {
    fn default() -> BatchScratch {
        BatchScratch::keeping(KEPT_OPS)
    }
}

impl BatchScratch {
    /// Buffers that keep the encoded commands of at most `ops` ops from
    /// round to round: a larger round encodes the others afresh and drops
    /// them at its end.
    pub(crate) fn keeping(ops: usize) -> BatchScratch {
        BatchScratch {
            kept_ops: ops,
            encoded: Vec::new(),
            lanes: Vec::new(),
            redirects: Vec::new(),
            redirected: Vec::new(),
            kept: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// Gives a round's results back, for a later round to reuse their
    /// vectors.
    pub(crate) fn keep(&mut self, results: BatchResults) {
        if self.kept.len() < 2 {
            self.kept.push(results);
        }
    }

    /// An empty buffer for the ops' own rules, given back with
    /// `give_rules` once the round has run.
    pub(crate) fn take_rules(&mut self) -> Vec<Rule> {
        let mut rules = std::mem::take(&mut self.rules);
        rules.clear();
        rules
    }

    pub(crate) fn give_rules(&mut self, rules: Vec<Rule>) {
        self.rules = rules;
    }

    /// Empty results for `ops` ops on `nodes` nodes, each decided by
    /// `rule` or its own rule in `each`.
    pub(super) fn results(
        &mut self,
        nodes: usize,
        ops: usize,
        rule: Rule,
        each: Option<&[Rule]>,
    ) -> BatchResults {
        let mut results = self.kept.pop().unwrap_or(BatchResults {
            nodes,
            rules: Vec::new(),
            outcomes: Vec::new(),
            readings: Vec::new(),
            sent: Vec::new(),
            second_tags: Vec::new(),
            last_tag: 0,
        });
        results.nodes = nodes;
        results.rules.clear();
        match each {
            Some(rules) => results.rules.extend_from_slice(rules),
            None => results.rules.resize(ops, rule),
        }
        results.outcomes.clear();
        results
            .outcomes
            .resize_with(ops * nodes, || Outcome::NotSent);
        results.readings.clear();
        results.sent.clear();
        results.sent.resize(ops, NodeSet::EMPTY);
        results.second_tags.clear();
        results.second_tags.resize(ops, 0);
        results.last_tag = 0;
        results
    }
}
