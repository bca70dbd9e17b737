//! The send half of a batch round: each voter's ops queued on their
//! lanes and written in one go, under the sending rules of the single
//! round (see `round::send`): an acquisition held back from a connection
//! that awaits its handshake's answers, and held to the acquisition's owed
//! limit; a voter refused as not independent sent nothing, unless nobody
//! awaits the answers (the release after a failed acquisition).

use super::super::outcome::Outcome;
use super::super::voter::encoded_for;
use super::{Batch, BatchOp};
use crate::conn::{Purpose, IDENTITY_IDLE, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::NodeError;
use std::time::Instant;

impl Batch<'_> {
    /// Queues on voter `i` the commands of every op that goes to it, each on
    /// its lane, and writes each lane's in one go.
    pub(super) fn send_to(&mut self, i: usize) {
        let (ops, now, deadline) = (self.ops, self.start, self.deadline);
        let n = self.links.voters();
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
        for (k, op) in ops.iter().enumerate() {
            if op.skip.contains(i) {
                self.results.outcomes[k * n + i] = Outcome::Failed(NodeError::Backlogged);
            }
        }
        // Another voter's server or cluster (see `independence`); an
        // answer nobody awaits counts for nothing, so the release after a
        // failed acquisition still deletes what its parts set before the
        // voter was refused (sent below, then counted failed).
        let refused = self.masters.independence.refused().contains(i);
        if refused && !self.unawaited {
            let error = self.masters.independence.error(i, self.masters.voters);
            self.masters.states[i].failed(now, &error);
            for (k, op) in ops.iter().enumerate() {
                if which(op).is_some() {
                    self.results.outcomes[k * n + i] = Outcome::Failed(error.clone());
                }
            }
            return;
        }
        // A voter of the single-cluster mode whose slot landed on an
        // earlier voter's master: not asked (one master votes once).
        if self.masters.voters[i].key_prefix().is_some() {
            let voter = &self.masters.voters[i];
            self.links.route_to(i, voter.route(None, now));
            if let Some(j) = self.links.shares_master_with(self.masters, i) {
                let error = NodeError::SharesMaster(self.masters.voters[j].name().to_string());
                self.masters.states[i].failed(now, &error);
                for (k, op) in ops.iter().enumerate() {
                    if which(op).is_some() {
                        self.results.outcomes[k * n + i] = Outcome::Failed(error.clone());
                    }
                }
                return;
            }
        }
        // Lane by lane (one for a standalone master), in the order the
        // voter's ops first name them.
        let mut done = 0;
        while done < ops.len() {
            let Some(first) = (done..ops.len()).find(|&k| which(&ops[k]).is_some()) else {
                break;
            };
            let lane = self.lanes[first * n + i];
            let opened = self
                .links
                .open_lane(self.masters, lane, now, deadline, self.dial);
            if opened.is_ok()
                && now.saturating_duration_since(self.links.last_sent[lane]) >= IDENTITY_IDLE
            {
                // Ahead of the ops, on the same write (see `conn::identity`).
                self.links.conns[lane].enqueue_identity(deadline, MAX_OWED);
            }
            let mut queued = false;
            for (k, op) in ops.iter().enumerate().skip(first) {
                let slot = k * n + i;
                let Some(w) = which(op) else { continue };
                if self.lanes[slot] != lane
                    || !matches!(self.results.outcomes[slot], Outcome::NotSent)
                {
                    continue;
                }
                if let Err(e) = &opened {
                    self.results.outcomes[slot] = Outcome::Failed(e.clone());
                    continue;
                }
                queued |= self.queue(k, i, w, lane);
            }
            // Every op of this lane is handled; later ones may name others.
            done = first + 1;
            while done < ops.len()
                && (which(&ops[done]).is_none()
                    || !matches!(self.results.outcomes[done * n + i], Outcome::NotSent))
            {
                done += 1;
            }
            if queued {
                self.links.last_sent[lane] = now;
                if let Err(e) = self.links.conns[lane].flush() {
                    self.fail(lane, e, now);
                }
            }
        }
        if refused {
            // Sent, and not awaited (see `Terms::unawaited`).
            let error = self.masters.independence.error(i, self.masters.voters);
            for k in 0..ops.len() {
                let outcome = &mut self.results.outcomes[k * n + i];
                if matches!(outcome, Outcome::Waiting | Outcome::HeldBack) {
                    *outcome = Outcome::Failed(error.clone());
                }
            }
        }
    }

    /// Queues op `k`'s command `w` (0: its command, 1: its second) for
    /// voter `i` on `lane`, and returns whether it was queued. An
    /// acquisition follows the single round's sending rules (see
    /// `Session::send_to_node`): held back while the connection awaits
    /// the handshake's word that it may go out (a Sentinel voter's master
    /// has not answered `ROLE` yet; see `Capabilities::awaits_rights`),
    /// sent once it has (see `send_held_back`), and refused behind more
    /// owed replies than `MAX_OWED_ACQUIRE`.
    fn queue(&mut self, k: usize, i: usize, w: usize, lane: usize) -> bool {
        let slot = k * self.links.voters() + i;
        let op = &self.ops[k];
        let command = match (w, op.others) {
            (1, Some((other, _))) => other,
            _ => op.command,
        };
        let conn = &mut self.links.conns[lane];
        let limit = match command.is_acquisition() {
            true if conn.capabilities().awaits_rights() => {
                self.results.outcomes[slot] = Outcome::HeldBack;
                return false;
            }
            true => MAX_OWED_ACQUIRE,
            false => MAX_OWED,
        };
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
        match conn.enqueue(encoded, purpose, self.deadline, limit, false) {
            Ok(()) => {
                self.results.outcomes[slot] = Outcome::Waiting;
                self.results.sent[k].insert(i);
                true
            }
            Err(e) => {
                self.results.outcomes[slot] = Outcome::Failed(e);
                false
            }
        }
    }

    /// Sends the ops held back on `lane` (see [`Batch::queue`]) once its
    /// connection no longer awaits the handshake's answers.
    pub(super) fn send_held_back(&mut self, lane: usize) {
        let (n, now) = (self.links.voters(), Instant::now());
        let i = usize::from(self.links.lane(lane).voter);
        if self.links.conns[lane].capabilities().awaits_rights() || now >= self.deadline {
            return;
        }
        let mut queued = false;
        for k in 0..self.ops.len() {
            let slot = k * n + i;
            if self.lanes[slot] == lane && matches!(self.results.outcomes[slot], Outcome::HeldBack)
            {
                let w = usize::from(!self.ops[k].to.contains(i));
                queued |= self.queue(k, i, w, lane);
            }
        }
        if queued {
            self.links.last_sent[lane] = now;
            if let Err(e) = self.links.conns[lane].flush() {
                self.fail(lane, e, now);
            }
        }
    }

    /// The round is over: the ops still held back were never sent, and
    /// count as failed, as lagging (see `held_back::give_up`).
    pub(super) fn give_up_held_back(&mut self) {
        for outcome in &mut self.results.outcomes {
            if matches!(outcome, Outcome::HeldBack) {
                *outcome = Outcome::Failed(NodeError::Backlogged);
            }
        }
    }
}
