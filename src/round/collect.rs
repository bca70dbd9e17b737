//! The collect half of a round: once the commands are out (see `send`),
//! wait for every master's answer together with one `poll(2)` under the
//! round's deadline, judge each answer as it arrives, and stop as soon as
//! the outcome is known (a quorum agreed, or can no longer agree).
//!
//! A node that misses the deadline counts as failed for that round, but its
//! connection is kept while the server merely lags: its late replies are
//! read, in order and checked against the commands they answer, before the
//! reply to any later command. Keeping it keeps each release behind its
//! acquisition on the same connection, so Redis runs them in that order.
//! A connection whose server lags more than `lag_limit` behind, or that
//! fails in any other way, is discarded and replaced.
//!
//! A missed deadline shows in the health view at once (see
//! `NodeState::missed_deadline`), whether the round waited for the node
//! and timed out, or was decided without it and a later round finds its
//! answer overdue; but it does not put the node into its reconnect backoff,
//! which is for connections that failed.
//!
//! Collecting uses the send half for one thing only: an undecided
//! acquisition that comes to need its held-back masters sends to them
//! (`Session::join_held_back`) and goes on waiting.

use super::held_back;
use super::outcome::{tally, Outcome};
use super::plan::Round;
use super::redirect;
use super::voter::encoded_for;
use super::Session;
use crate::command::Vote;
use crate::conn::Purpose;
use crate::error::{NodeError, ServerError};
use crate::os::Ready;
use crate::quorum::{Decision, Rule, Tally};
use std::time::Instant;

impl Session {
    /// Waits for the answers to `round`, sent, until its outcome is known,
    /// and returns the tally at that moment (see `quorum::Rule`).
    pub(super) fn collect(&mut self, round: &Round<'_>) -> Tally {
        let rule = round.plan.rule;
        loop {
            let mut tally = self.tally(rule);
            if tally.held_back > 0 && self.outcomes.iter().any(|o| matches!(o, Outcome::No)) {
                // A master declined: the resource is held, by another
                // client or by a key left behind. Asking lagging masters
                // now would slow down the failure of a contended attempt
                // and set keys that other contenders then find; a retry
                // finds them caught up.
                held_back::give_up(&mut self.outcomes);
                tally = self.tally(rule);
            }
            if decided(rule, tally) {
                held_back::give_up(&mut self.outcomes);
                self.links.send_notices(round.masters, round.plan.deadline);
                self.links.publish_progress();
                return self.tally(rule);
            }
            let joining = self.join_held_back(round, tally);
            self.wait_once(round, joining);
        }
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
            for i in 0..self.links.voters() {
                if self.is_waiting(i) {
                    let phase = self.links.conn(i).phase();
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
        for i in 0..self.links.voters() {
            let lane = self.links.route[i];
            let conn = &self.links.conns[lane];
            if !self.is_waiting(i) && conn.is_dead(now, round.masters.lag_limit) {
                let phase = conn.phase();
                self.links.conns[lane].discard();
                self.links
                    .lane_failed(round.masters, lane, now, &NodeError::TimedOut(phase));
                continue;
            }
            let (read, write) = conn.interest();
            let watched =
                self.is_waiting(i) || (joining && matches!(self.outcomes[i], Outcome::HeldBack));
            let read = read && watched;
            match conn.raw_fd() {
                Some(fd) if read || write => {
                    self.links.poll.add(fd, read, write);
                    self.links.polled.push(lane);
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
                let i = self.links.lane(self.links.polled[k]).voter.into();
                self.fail(round, i, error.clone(), now);
            }
            return;
        }
        for slot in 0..self.links.polled.len() {
            let ready = self.links.poll.ready(slot);
            if ready != Ready::default() {
                let i = self.links.lane(self.links.polled[slot]).voter.into();
                if let Err(e) = self.service(round, i, ready) {
                    self.fail(round, i, e, Instant::now());
                }
            }
        }
    }

    /// Handles readiness on node `i`: finishes a connect, writes what is
    /// pending, reads what arrived, and records the node's vote if complete.
    fn service(&mut self, round: &Round<'_>, i: usize, ready: Ready) -> Result<(), NodeError> {
        let current = self.links.round;
        let conn = self.links.conn_mut(i);
        if ready.writable {
            conn.on_writable()?;
        }
        if ready.readable {
            conn.on_readable()?;
        }
        let mut vote = None;
        conn.take_replies(Some(current), &mut |_, v| vote = Some(v))?;
        let state = &round.masters.states[i];
        if let Some(forms) = conn.take_new_forms() {
            state.uses(forms);
        }
        if let Some(check) = conn.take_fence_probe() {
            // A cluster node's probe names no hash: its grants tell.
            if round.masters.voters[i].cluster().is_none() {
                state.fence(|s| s.probed(check));
            }
        }
        let lane = self.links.route[i];
        self.links
            .check_independence(round.masters, lane, &mut self.outcomes);
        if round.masters.independence.refused().contains(i) && !self.is_waiting(i) {
            // Refused as another voter's server or cluster, by this answer
            // or earlier in the round (another voter's, read in the same
            // wake-up): its answer neither counts nor shows it healthy
            // (see `independence`).
            return Ok(());
        }
        let Some(vote) = vote else {
            return Ok(());
        };
        let now = Instant::now();
        if let Vote::Failed(NodeError::Server(error)) = &vote {
            if self.follow(round, i, error, now) {
                return Ok(());
            }
        }
        match &vote {
            // Left out of fencing (no anchor, stale) is no failure: the
            // master answered, and the health view says why it does not
            // count, once.
            Vote::Failed(e) => match e.fence_fault() {
                Some(fault) => {
                    let slot = round.fence_slot(i);
                    state.fence(|s| s.left_out(slot, fault));
                    state.answered(now, now.saturating_duration_since(round.start));
                }
                None => state.failed(now, e),
            },
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
            if self.links.conn(i).is_opening() {
                // Nothing left the connection before its opening (connect,
                // TLS handshake) ended: the server never got the command,
                // so it holds no key of it and needs no release.
                self.sent.remove(i);
            }
            self.links.conn_mut(i).discard();
            let lane = self.links.route[i];
            self.links.lane_failed(round.masters, lane, now, &error);
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

    /// Voter `i`'s node answered `error`: if it is a cluster redirect
    /// that the round may still follow (see `redirect`), sends the command
    /// where it points, and returns true (the voter's answer is still
    /// awaited). A refusal that suggests a new topology has the cluster
    /// ask for it.
    fn follow(&mut self, round: &Round<'_>, i: usize, error: &ServerError, now: Instant) -> bool {
        let voter = &round.masters.voters[i];
        if redirect::suggests_new_topology(error) {
            voter.suspect();
            return false;
        }
        if voter.cluster().is_none() {
            return false;
        }
        if self.redirects[i] >= redirect::MAX_REDIRECTS
            || now >= round.plan.deadline
            || !matches!(self.outcomes[i], Outcome::Waiting)
        {
            return false;
        }
        let from = self.links.lane(self.links.route[i]).node.into();
        let Some((node, asking)) = redirect::target(voter, from, error) else {
            return false;
        };
        self.redirects[i] += 1;
        self.links.route_to(i, node);
        let n = self.links.voters();
        if let Some(j) = self.links.shares_master_among(round.masters, i, 0..n) {
            // Redirected onto another voter's master (the single-cluster
            // mode, resharded): that master votes once.
            let error = NodeError::SharesMaster(round.masters.voters[j].name().to_string());
            round.masters.states[i].failed(now, &error);
            self.outcomes[i] = Outcome::Failed(error);
            return true;
        }
        let (deadline, dial) = (round.plan.deadline, round.plan.dial);
        if self
            .links
            .open(round.masters, i, now, deadline, dial)
            .is_err()
        {
            return false;
        }
        let Some(which) = round.command_for(i) else {
            return false;
        };
        let command = round.command(which);
        let limit = round.owed_limit(i);
        let purpose = Purpose {
            round: self.links.round,
            op: 0,
        };
        let lane = self.links.route[i];
        let conn = &mut self.links.conns[lane];
        if asking && conn.enqueue_asking(deadline, limit).is_err() {
            return false;
        }
        let encoded = encoded_for(
            voter,
            &mut self.encoded[which],
            &mut self.own_keys[i],
            which,
            &command,
            conn.capabilities(),
        );
        let sent = conn.send(encoded, purpose, deadline, limit, round.plan.unawaited);
        self.sent.insert(i);
        round.masters.states[i].sent();
        self.links.last_sent[lane] = now;
        match sent {
            Ok(()) => true,
            Err(e) => {
                if e.breaks_connection() {
                    self.links.conns[lane].discard();
                    self.links.lane_failed(round.masters, lane, now, &e);
                }
                self.outcomes[i] = Outcome::Failed(e);
                true
            }
        }
    }

    fn is_waiting(&self, i: usize) -> bool {
        matches!(self.outcomes[i], Outcome::Waiting)
    }

    fn tally(&self, rule: Rule) -> Tally {
        tally(&self.outcomes, rule)
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
