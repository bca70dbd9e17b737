//! The send half of a round: the round's command encoded once, then queued
//! to every master at once from this thread, behind whatever replies each
//! master still owes us.
//!
//! Sending is where a round decides *who* it asks: the look before sending
//! (see `look`), the masters an acquisition holds back while they lag (see
//! `held_back`), and those that join it later. Kept apart from waiting for
//! the answers (see `collect`), so that each half reads on its own; this
//! half knows nothing of how answers are read or judged.

use super::held_back;
use super::outcome::Outcome;
use super::plan::{Masters, Plan, Round};
use super::voter::encoded_for;
use super::Session;
use crate::command::fence::Reading;
use crate::conn::{Purpose, IDENTITY_IDLE};
use crate::error::NodeError;
use crate::quorum::{NodeSet, Rule, Tally};
use std::time::Instant;

impl Session {
    /// Starts a round and sends its commands.
    pub(super) fn send_to<'a>(&mut self, masters: Masters<'a>, plan: Plan<'a>) -> Round<'a> {
        let round = self.begin(masters, plan);
        self.links.route_all(masters, &plan.command, round.start);
        self.links.look_before_sending(masters, round.start);
        let lagging_included = match plan.rule {
            Rule::Acquire => self.links.lagging_to_include(masters, plan.to, round.start),
            _ => NodeSet::all(self.links.voters()),
        };
        self.sent = NodeSet::EMPTY;
        self.readings.fill(Reading::default());
        let refused = masters.independence.refused();
        for i in 0..self.links.voters() {
            // Everything but an acquisition goes out at once (a release
            // must follow earlier SETs); an acquisition holds back the
            // lagging masters not included, and is queued on the others
            // behind whatever they still owe.
            self.outcomes[i] = if round.command_for(i).is_none() {
                Outcome::NotSent
            } else if plan.skip.contains(i) {
                Outcome::Failed(NodeError::Backlogged)
            } else if refused.contains(i) && !plan.unawaited {
                // Another voter's server or cluster (see `independence`);
                // an answer nobody awaits counts for nothing, so the
                // release after a failed acquisition still deletes what
                // its SET set before it was refused.
                let error = masters.independence.error(i, masters.voters);
                masters.states[i].failed(round.start, &error);
                Outcome::Failed(error)
            } else if let Some(j) = self.links.shares_master_with(masters, i) {
                let error = NodeError::SharesMaster(masters.voters[j].name().to_string());
                masters.states[i].failed(round.start, &error);
                Outcome::Failed(error)
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
    pub(super) fn join_held_back(&mut self, round: &Round<'_>, tally: Tally) -> bool {
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
        let lane = self.links.route[i];
        let conn = &mut self.links.conns[lane];
        if round.is_acquisition_for(i) && conn.capabilities().awaits_rights() {
            return Ok(false);
        }
        let limit = round.owed_limit(i);
        let purpose = Purpose {
            round: self.links.round,
            op: 0,
        };
        if let Some(cluster) = round.masters.voters[i].cluster() {
            if let Some(slots) = cluster.wants_topology(now) {
                // Ahead of the command, on the same write; its answer is
                // taken when the lane is next read (see `cluster`).
                let _ = conn.enqueue_topology(slots, deadline, limit);
            }
        }
        if now.saturating_duration_since(self.links.last_sent[lane]) >= IDENTITY_IDLE {
            // Ahead of the command, on the same write (see `conn::identity`).
            conn.enqueue_identity(deadline, limit);
        }
        let command = round.command(which);
        let encoded = encoded_for(
            &round.masters.voters[i],
            &mut self.encoded[which],
            &mut self.own_keys[i],
            which,
            &command,
            conn.capabilities(),
        );
        let sent = conn.send(
            encoded,
            purpose,
            round.plan.deadline,
            limit,
            round.plan.unawaited,
        );
        // Unless it was refused outright, the command may reach the server
        // (a write error can come after part of it went out).
        if !matches!(
            sent,
            Err(NodeError::Backlogged
                | NodeError::CannotRelease(_)
                | NodeError::CannotLockSets(_)
                | NodeError::ReplicaAckRefused { .. })
        ) {
            self.sent.insert(i);
            round.masters.states[i].sent();
            self.links.last_sent[lane] = now;
        }
        if let Err(e) = &sent {
            if e.breaks_connection() {
                conn.discard();
                self.links.lane_failed(round.masters, lane, now, e);
            }
        }
        sent.map(|()| true)
    }
}
