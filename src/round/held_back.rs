//! The acquisition's own rule: a master that *lags* behind our earlier
//! commands is held back from an acquisition while the others can make a
//! quorum, and joins the round once it no longer lags if the round comes
//! to need it.
//!
//! An acquisition goes to every master at once, queued behind whatever
//! replies the master still owes us (Redis answers in order, and each
//! connection knows which reply answers what): a round returns as soon as
//! a quorum has decided, so the slowest master often still owes the last
//! call's answer, by microseconds, when the next call starts, and leaving
//! it out would leave the lock on just a quorum, lost with one more master.
//! Only a master that genuinely lags (see [`LAGGING_OWED`]) is held back,
//! in reserve; other commands (releases, extensions) always go out at once,
//! since they must follow earlier SETs.

use super::connections::Connections;
use super::outcome::Outcome;
use super::plan::Masters;
use crate::error::NodeError;
use crate::quorum::{quorum, NodeSet, Tally};
use std::time::{Duration, Instant};

/// The fraction of the round's time after which an undecided acquisition
/// stops trusting the masters it was sent to and brings in the ones it held
/// back (see [`ready_to_join`]): a tenth, 5 ms at the default node
/// timeout. A healthy round is decided long before; a round still open by
/// then has a master that stalls, and a held-back master that has caught
/// up meanwhile can still answer within the deadline.
const JOIN_AFTER_FRACTION: u32 = 10;

/// Most replies a master may owe us and still be sent an acquisition at
/// once, queued behind them; beyond this, or once the oldest of them is
/// overdue (past its round's deadline), the master *lags*, and is held back
/// while the others can make a quorum (see `Connections::is_lagging`).
///
/// A master that is merely behind owes little: the answers to the last call
/// or two (an acquisition or a release owes two replies, the command and
/// its `ECHO`), plus, on a new connection, its handshake's (up to five).
/// Sixteen is four lock/unlock pairs: a SET queued behind that few is
/// answered moments after them, and the lock is held on that master too.
///
/// A server that stops answering (frozen, SIGSTOPped, starved of CPU) owes
/// more than this within a few calls, long before a deadline passes (the
/// node timeout may be seconds): the SETs queued on it are a handful, not
/// one per acquisition, and no round is slowed by it. The test is a count,
/// not how long a reply has been owed, so that no clock threshold decides
/// (a loaded machine crosses any short one now and then), and it bounds
/// directly what a stalled server is made to hold; the deadline catches a
/// server that stalled while owing little and is then called seldom.
const LAGGING_OWED: usize = 16;

/// When an undecided acquisition that started at `start`, with `budget` to
/// run, brings in every held-back master that no longer lags (see
/// [`JOIN_AFTER_FRACTION`]).
pub(super) fn join_at(start: Instant, budget: Duration) -> Instant {
    start
        .checked_add(budget / JOIN_AFTER_FRACTION)
        .unwrap_or(start)
}

/// Which held-back masters join an undecided acquisition now, if the round
/// needs them: when the masters it was sent to can no longer make a quorum
/// by themselves (one failed; after a refusal the held-back masters are
/// given up, see [`give_up`]), or once the round has run past `join_at`
/// (one of them stalls: a master frozen while idle looks free until it is
/// late). A held-back master joins as soon as it no longer lags (the same
/// test as at the start of the round, see `Connections::is_lagging`): its
/// SET is then queued behind a few replies at most, never behind a backlog.
///
/// Joining late is safe: the validity is counted from the start of the
/// round, and a key set later expires later.
///
/// `None` while the round does not need them; while it does, the ones
/// still lagging are watched for catching up.
pub(super) fn ready_to_join(
    links: &Connections,
    outcomes: &[Outcome],
    tally: Tally,
    join_at: Instant,
    now: Instant,
) -> Option<NodeSet> {
    let needed = tally.yes + tally.waiting < quorum(tally.total()) || now >= join_at;
    if !needed {
        return None;
    }
    let mut ready = NodeSet::EMPTY;
    for (i, outcome) in outcomes.iter().enumerate() {
        if matches!(outcome, Outcome::HeldBack) && !links.is_lagging(i, now) {
            ready.insert(i);
        }
    }
    Some(ready)
}

/// Once a round is decided, the masters still held back were never sent
/// its command: they count as failed, as lagging (they are not holders
/// of an acquired lock: only the masters in `sent` are).
pub(super) fn give_up(outcomes: &mut [Outcome]) {
    for outcome in outcomes {
        if matches!(outcome, Outcome::HeldBack) {
            *outcome = Outcome::Failed(NodeError::Backlogged);
        }
    }
}

impl Connections {
    /// Whether node `i` lags behind our earlier commands at `now`: its
    /// connection owes more than [`LAGGING_OWED`] replies, or the oldest of
    /// them is overdue. A master that owes fewer, none of them late, is
    /// merely behind (the last round returned before it answered), and an
    /// acquisition is queued behind them at once.
    /// A handle that never runs scripts also holds back a master whose new
    /// connection has not yet shown that it can release there (see
    /// `Session::start_node`).
    pub(super) fn is_lagging(&self, i: usize, now: Instant) -> bool {
        let conn = self.conn(i);
        conn.owed_len() > LAGGING_OWED
            || conn.is_overdue(now)
            || (conn.is_open() && conn.capabilities().awaits_rights())
    }

    /// The masters a batch of acquisitions (group commit) leaves out: those
    /// that lag (see `is_lagging`), less as many as a quorum needs (see
    /// `lagging_to_include`). The single round's test, unchanged: a
    /// larger allowance for a batch's owed replies (four per op) let keys
    /// stay on a master that lagged and caught up again (1-4 in 2 of 3
    /// runs of tests/group_commit.rs's lagging master's test).
    pub(super) fn lagging_for_batch(&self, masters: Masters<'_>, now: Instant) -> NodeSet {
        let all = NodeSet::all(self.voters());
        let included = self.lagging_to_include(masters, all, now);
        let mut left_out = NodeSet::EMPTY;
        for i in all.iter() {
            if self.is_lagging(i, now) && !included.contains(i) {
                left_out.insert(i);
            }
        }
        left_out
    }

    /// Which of the masters in `to` that lag (see `is_lagging`) are sent an
    /// acquisition at once: as few as a quorum needs, the least behind
    /// first. A lagging master can answer only after its backlog, mostly
    /// after the round was decided, if at all (it may be stalled): a SET
    /// queued there is work for a server that is already behind, and one
    /// more command a frozen one is made to hold. The others are held back,
    /// in reserve (see `join_held_back`).
    pub(super) fn lagging_to_include(
        &self,
        masters: Masters<'_>,
        to: NodeSet,
        now: Instant,
    ) -> NodeSet {
        let lagging = |i: usize| to.contains(i) && self.is_lagging(i, now);
        let n = self.voters();
        let free = (0..n)
            .filter(|&i| to.contains(i) && !lagging(i))
            .filter(|&i| {
                let node = self.lane(self.route[i]).node.into();
                self.conn(i).is_open() || masters.backoff(i, node).may_connect(now)
            })
            .count();
        let mut wanted = quorum(n).saturating_sub(free);
        let mut included = NodeSet::EMPTY;
        while wanted > 0 {
            let least_behind = (0..n)
                .filter(|&i| lagging(i) && !included.contains(i))
                .min_by_key(|&i| self.conn(i).owed_len());
            let Some(i) = least_behind else { break };
            included.insert(i);
            wanted -= 1;
        }
        included
    }
}
