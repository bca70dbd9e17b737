//! What a round is given: the masters and what is shared about them, the
//! plan (which command goes to whom, decided by which rule, by when), and
//! what stays fixed while it runs.

use super::health::NodeState;
use super::independence::Independence;
use super::voter::Voter;
use crate::command::Command;
use crate::conn::{Node, Why, MAX_OWED, MAX_OWED_ACQUIRE};
use crate::error::NodeError;
use crate::quorum::{NodeSet, Rule};
use std::time::{Duration, Instant};

/// How far behind a server may fall (its oldest unanswered command overdue
/// by this much) before its connection is declared dead and closed: thirty
/// seconds, or twenty node timeouts if that is longer.
///
/// Generous on purpose. While the connection lives, a stalled server (busy,
/// starved of CPU, SIGSTOPped) runs everything it was sent, in order, when
/// it resumes, so every release follows its SET. Closing the connection
/// early would make the server drop what it had not yet read and leave keys
/// until their TTL. Meanwhile the stalled server costs no round any time:
/// no round waits for it past its deadline, no acquisition is queued on it
/// once it lags (see `held_back`) while a quorum is free without it,
/// and its queue is bounded by `MAX_OWED`.
pub(crate) fn lag_limit(node_timeout: Duration) -> Duration {
    node_timeout.saturating_mul(20).max(Duration::from_secs(30))
}

/// The masters a round talks to, and what is shared about them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Masters<'a> {
    pub(crate) voters: &'a [Voter],
    pub(crate) states: &'a [NodeState],
    /// See [`lag_limit`].
    pub(crate) lag_limit: Duration,
    /// Which voters are refused for sharing a server or a cluster with
    /// another (see `independence`).
    pub(crate) independence: &'a Independence,
}

impl<'a> Masters<'a> {
    /// Node `k` of voter `i`, if known.
    #[inline]
    pub(crate) fn node(&self, i: usize, k: usize) -> Option<&'a Node> {
        self.voters[i].node(k)
    }

    /// The reconnect backoff of node `k` of voter `i` (see `health`).
    #[inline]
    pub(crate) fn backoff(&self, i: usize, k: usize) -> &'a NodeState {
        self.voters[i].backoff(k, &self.states[i])
    }

    /// Node `k` of voter `i` failed at `now`: its backoff, and the voter's
    /// health (the same state for a standalone master) record it.
    pub(crate) fn failed(&self, i: usize, k: usize, now: Instant, error: &NodeError) {
        let node = self.backoff(i, k);
        node.failed(now, error);
        if error.means_unreachable() {
            // It may have moved: a node named by host is looked up again,
            // away from the round (at most once a second; see
            // `conn::address`).
            if let Some(target) = self.node(i, k) {
                target.address.readdress(Why::Unreachable, now);
            }
        }
        if let Some(cluster) = self.voters[i].cluster() {
            // A cluster node that fails may have been failed over.
            cluster.suspect();
            self.states[i].failed(now, error);
        } else if let Voter::Sentinel(sentinel) = &self.voters[i] {
            // So may a Sentinel voter's master (or, no master known, the
            // sentinels may know one now).
            sentinel.suspect();
            self.states[i].failed(now, error);
        }
    }
}

/// What a round sends to whom, and by when it must be decided.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan<'a> {
    /// The command, for the masters in `to`.
    pub(crate) command: Command<'a>,
    pub(crate) to: NodeSet,
    /// A second command for other masters (an extension sets the key on
    /// the masters that its acquisition left out).
    pub(crate) others: Option<(Command<'a>, NodeSet)>,
    /// How the answers decide the round.
    pub(crate) rule: Rule,
    /// When every master's answer is due.
    pub(crate) deadline: Instant,
    /// Which masters without a connection are dialled.
    pub(crate) dial: Dial,
    /// Masters not to send to after all, counted as failed: their
    /// connection could not be used in time (see `handle::pool::Taken`).
    pub(crate) skip: NodeSet,
    /// Nobody will wait for the answers: scripts go by body (EVAL), so that
    /// they run even on a server whose script cache was flushed (a NOSCRIPT
    /// would be read, and answered, only when the connection is next used),
    /// and without an `ECHO` tag (the next tagged command on the connection
    /// catches any reply out of step before it counts).
    pub(crate) unawaited: bool,
}

/// Which masters a round dials when it has no connection to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dial {
    /// Those outside their reconnect backoff (see `health`): most rounds.
    OutsideBackoff,
    /// Every master but one whose last failure will repeat until the
    /// configuration changes (a refused handshake): the release after a
    /// failed acquisition must try to reach every master the SET went to,
    /// and a master that refused the handshake holds nothing of it (one
    /// refused as a voter may: it ran the SET, and is dialled).
    UnlessFailingForGood,
    /// Every master: a health check (`ping`), which must see at once that
    /// the operator fixed a master (granted a right, changed a password).
    Every,
}

impl<'a> Plan<'a> {
    /// A round that asks every master in `to` and waits for all their
    /// answers until `deadline` (a health check, the operator's fence
    /// calls), dialling every master (see [`Dial::Every`]).
    pub(crate) fn everyone(command: Command<'a>, to: NodeSet, deadline: Instant) -> Plan<'a> {
        Plan {
            command,
            to,
            others: None,
            rule: Rule::Everyone,
            deadline,
            dial: Dial::Every,
            skip: NodeSet::EMPTY,
            unawaited: false,
        }
    }
}

/// What stays fixed during one round.
#[derive(Clone, Copy)]
pub(super) struct Round<'a> {
    pub(super) masters: Masters<'a>,
    pub(super) plan: Plan<'a>,
    pub(super) start: Instant,
    /// From when an undecided acquisition brings in every held-back master
    /// that no longer lags, even if the masters it was sent to could still
    /// make a quorum on their own.
    pub(super) join_at: Instant,
}

impl<'a> Round<'a> {
    /// Which of the round's commands node `i` gets (an index into
    /// `Session::encoded`), if any.
    pub(super) fn command_for(&self, i: usize) -> Option<usize> {
        if self.plan.to.contains(i) {
            return Some(0);
        }
        match self.plan.others {
            Some((_, set)) if set.contains(i) => Some(1),
            _ => None,
        }
    }

    /// The slot of the fence domain's hash that voter `i`'s command names,
    /// if the voter keeps one per slot (a cluster voter): the slot its
    /// fenced answer tells of.
    pub(super) fn fence_slot(&self, i: usize) -> Option<u16> {
        let command = self.command(self.command_for(i)?);
        self.masters.voters[i].fence_slot(&command)
    }

    /// Command `which` of the round (see [`Round::command_for`]).
    pub(super) fn command(&self, which: usize) -> Command<'a> {
        match (which, self.plan.others) {
            (1, Some((other, _))) => other,
            _ => self.plan.command,
        }
    }

    /// How many replies voter `i`'s connection may owe before the round's
    /// command is refused there (see `conn::MAX_OWED_ACQUIRE`).
    pub(super) fn owed_limit(&self, i: usize) -> usize {
        if self.is_acquisition_for(i) {
            MAX_OWED_ACQUIRE
        } else {
            MAX_OWED
        }
    }

    /// Whether node `i` is sent an acquisition (the lagging-master rules).
    pub(super) fn is_acquisition_for(&self, i: usize) -> bool {
        match self.command_for(i) {
            Some(0) => self.plan.command.is_acquisition(),
            Some(_) => matches!(self.plan.others, Some((ref other, _)) if other.is_acquisition()),
            None => false,
        }
    }
}
