//! A set command's parts on cluster voters (docs/design.md, "Cluster
//! voters: the vote is the conjunction of its per-slot parts"). The keys
//! of a set may fall in several hash slots, and a cluster node runs a
//! script only over keys of one slot (else `CROSSSLOT`). So a round of a
//! set command whose keys span slots, with a cluster voter among the
//! voters, is run as a batch (see `batch`): one op per slot (*part*), its
//! keys only, for the cluster voters, each routed by its own slot and
//! redirected on its own; and one op with the whole command for every
//! other voter (a standalone or Sentinel master runs it over all keys).
//!
//! A cluster voter's vote is the conjunction of its parts: yes when every
//! part said yes, no as soon as one says no (else failed if one failed,
//! else still awaited). The round is decided on those votes, by its rule,
//! and leaves them as the session's outcomes, so that the lock layer reads
//! it as any round. The slots are computed here from the names
//! (`cluster::key_slot`), so a part never spans slots.
//!
//! A set whose keys share one slot is one part, and takes the ordinary
//! round (see [`needed`]).

use super::batch::{self, BatchOp, BatchResults, BatchScratch, Terms};
use super::connections::Connections;
use super::outcome::{self, Outcome};
use super::plan::{Masters, Plan};
use super::voter::Voter;
use crate::cluster::key_slot;
use crate::command::{Command, SetCommand};
use crate::error::NodeError;
use crate::names::{Keys, Names};
use crate::quorum::{Decision, NodeSet, Rule, Tally};
use std::time::Instant;

/// A set command's parts for the current round: per slot its keys (and,
/// for a release with notices, their channels), kept by the session so
/// that their room is reused.
#[derive(Debug, Default)]
pub(super) struct Parts {
    /// Each key's slot and index, sorted by slot (keys keep their order
    /// within a slot).
    order: Vec<(u16, u32)>,
    keys: Vec<Names>,
    channels: Vec<Names>,
    /// How many of `keys` (and `channels`) the current round uses.
    len: usize,
    /// The batch round's buffers.
    scratch: BatchScratch,
}

impl Parts {
    /// Splits `keys` (and their `channels`, one per key) by slot.
    fn split(&mut self, keys: Keys<'_>, channels: Option<Keys<'_>>) {
        self.order.clear();
        self.order.extend(
            keys.iter()
                .enumerate()
                .map(|(k, key)| (key_slot(key), k as u32)),
        );
        self.order.sort_by_key(|&(slot, _)| slot);
        self.len = 0;
        let mut last = None;
        for &(slot, k) in &self.order {
            if last != Some(slot) {
                last = Some(slot);
                if self.keys.len() == self.len {
                    self.keys.push(Names::default());
                    self.channels.push(Names::default());
                }
                self.keys[self.len].clear();
                self.channels[self.len].clear();
                self.len += 1;
            }
            let part = self.len - 1;
            // `k` indexes `keys` (taken from it above); a set's channels
            // are one per key.
            let key = keys.get(k as usize).unwrap_or_default();
            self.keys[part].push_with(|out| out.extend_from_slice(key));
            if let Some(channels) = channels {
                let channel = channels.get(k as usize).unwrap_or_default();
                self.channels[part].push_with(|out| out.extend_from_slice(channel));
            }
        }
    }

    /// `set` narrowed to part `p`'s keys (and channels). A fenced set
    /// whose keys span slots is refused on a cluster voter before any I/O
    /// (`lock::many::acquire`), so its forms are never split today; each
    /// part would name its slot's hash (`Voter::own_keys`).
    fn command<'a>(&'a self, p: usize, set: SetCommand<'a>) -> Command<'a> {
        Command::Set(set.over(self.keys[p].keys(), self.channels[p].keys()))
    }
}

/// The set command `command` is, if a round of it runs in parts (see
/// [`needed_for_keys`]).
pub(super) fn split_set<'a>(voters: &[Voter], command: &Command<'a>) -> Option<SetCommand<'a>> {
    let Command::Set(set) = *command else {
        return None;
    };
    needed_for_keys(voters, set.keys()).then_some(set)
}

/// Whether a round of a set command on `keys` runs in parts on `voters`:
/// its keys fall in two slots or more, with a cluster voter among the
/// voters. (A voter of the single-cluster mode is not split: its keys all
/// carry its own tag.)
pub(crate) fn needed_for_keys(voters: &[Voter], keys: Keys<'_>) -> bool {
    if !voters.iter().any(|v| matches!(v, Voter::Cluster(_))) {
        return false;
    }
    let mut slots = keys.iter().map(key_slot);
    let first = slots.next();
    slots.any(|slot| Some(slot) != first)
}

/// Voter `i`'s answer in `results`: op 0's for a voter that is sent the
/// whole command, else the conjunction of its parts (ops `1..`).
fn vote_of(results: &BatchResults, parts: usize, cluster: NodeSet, i: usize) -> &Outcome {
    if !cluster.contains(i) {
        return &results.votes(0)[i];
    }
    let mut vote = &results.votes(1)[i];
    for p in 1..=parts {
        let part = &results.votes(p)[i];
        match part {
            Outcome::No => return part,
            Outcome::Failed(_) if !matches!(vote, Outcome::Failed(_)) => vote = part,
            // A part held back (see `batch`) is still awaited.
            Outcome::Waiting | Outcome::HeldBack if !matches!(vote, Outcome::Failed(_)) => {
                vote = part
            }
            _ => {}
        }
    }
    vote
}

/// How the round stands on the voters' votes.
fn tally_of(results: &BatchResults, parts: usize, cluster: NodeSet, rule: Rule) -> Tally {
    let mut tally = Tally::default();
    for i in 0..results.votes(0).len() {
        outcome::count(&mut tally, vote_of(results, parts, cluster, i), rule);
    }
    tally
}

/// What a round run in parts did, beyond each voter's vote.
pub(super) struct Voted {
    /// The votes' tally.
    pub(super) tally: Tally,
    /// The voters sent some op.
    pub(super) sent: NodeSet,
    /// The cluster voters whose no came from some parts only: the others
    /// may have set their keys.
    pub(super) partly_declined: NodeSet,
    /// The largest tag the round's commands carried.
    pub(super) last_tag: u64,
}

impl Parts {
    /// Runs `plan`, whose command is a set command that [`needed`] parts,
    /// on `links` (a round numbered already) as a batch of its parts (see
    /// the module docs), until the voters' votes decide it by the plan's
    /// rule (a release waits for every answer) or its deadline; writes
    /// the votes into `outcomes`. Nothing is held back: every voter is
    /// sent its command at once.
    pub(super) fn run<'p>(
        &mut self,
        links: &mut Connections,
        masters: Masters<'_>,
        plan: Plan<'p>,
        set: SetCommand<'p>,
        outcomes: &mut [Outcome],
    ) -> Voted {
        // Installs a topology a lane brought (the parts route by the map).
        links.route_all(masters, &plan.command, Instant::now());
        let channels = match set {
            SetCommand::Release {
                notify: Some((_, channels)),
                ..
            } => Some(channels),
            _ => None,
        };
        self.split(set.keys(), channels);
        let mut cluster = NodeSet::EMPTY;
        for (i, voter) in masters.voters.iter().enumerate() {
            if matches!(voter, Voter::Cluster(_)) {
                cluster.insert(i);
            }
        }
        let parts = self.len;
        // The second command is split as the first if it is a set's (an
        // extension's repair); any other goes whole, with op 0 and the
        // first part (a cluster voter's vote reads the first part first).
        let other_set = match plan.others {
            Some((Command::Set(other), to)) => Some((other, to)),
            _ => None,
        };
        // Taken out while the ops borrow the parts' names.
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut ops = Vec::with_capacity(1 + parts);
        ops.push(BatchOp {
            command: plan.command,
            to: plan.to.difference(cluster),
            others: plan.others.map(|(c, to)| (c, to.difference(cluster))),
            skip: plan.skip,
        });
        for p in 0..parts {
            let others = match (other_set, plan.others) {
                (Some((other, to)), _) => Some((self.command(p, other), to.intersection(cluster))),
                (None, Some((whole, to))) if p == 0 => Some((whole, to.intersection(cluster))),
                _ => None,
            };
            ops.push(BatchOp {
                command: self.command(p, set),
                to: plan.to.intersection(cluster),
                others,
                skip: plan.skip,
            });
        }
        let rule = plan.rule;
        let open = |results: &BatchResults| {
            let tally = tally_of(results, parts, cluster, rule);
            match tally.decision(rule) {
                Decision::Open => true,
                Decision::Reached => false,
                _ => rule == Rule::Release && tally.waiting > 0,
            }
        };
        let terms = Terms {
            rule,
            each: None,
            deadline: plan.deadline,
            dial: plan.dial,
            unawaited: plan.unawaited,
            together: true,
        };
        let mut results = batch::run_until(links, &mut scratch, masters, &ops, terms, open);
        let undecided = tally_of(&results, parts, cluster, rule).decision(rule) == Decision::Open;
        let mut voted = Voted {
            tally: Tally::default(),
            sent: NodeSet::EMPTY,
            partly_declined: NodeSet::EMPTY,
            last_tag: results.last_tag(),
        };
        for k in 0..ops.len() {
            voted.sent = voted.sent.union(results.sent(k));
        }
        for (i, outcome) in outcomes.iter_mut().enumerate() {
            let vote = vote_of(&results, parts, cluster, i);
            let vote = match vote {
                // Left at the deadline with the round undecided: missed.
                Outcome::Waiting if undecided => {
                    Outcome::Failed(NodeError::TimedOut(links.conn(i).phase()))
                }
                Outcome::Waiting => Outcome::Waiting,
                Outcome::Yes => Outcome::Yes,
                Outcome::No => Outcome::No,
                _ => {
                    // Failed or not sent: taken from the op that says so.
                    let op = (0..=parts)
                        .find(|&k| std::ptr::eq(&results.votes(k)[i], vote))
                        .unwrap_or(0);
                    results.take(op, i)
                }
            };
            if matches!(vote, Outcome::No)
                && cluster.contains(i)
                && (1..=parts).any(|p| !matches!(results.votes(p)[i], Outcome::No))
            {
                voted.partly_declined.insert(i);
            }
            *outcome = vote;
        }
        voted.tally = outcome::tally(outcomes, rule);
        scratch.keep(results);
        self.scratch = scratch;
        voted
    }
}
