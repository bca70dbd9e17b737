//! A session's connections and what the rounds run on them share: the
//! command tags, when each was last sent to, what each voter has settled
//! (readable by other threads), connecting with the node's reconnect
//! backoff, and the poll set.
//!
//! Connections are kept by *lane*: one per node a voter's commands have
//! gone to. Lanes `0..voters` are each voter's first node (a standalone
//! master's only one); a cluster voter's other nodes get lanes as rounds
//! first route a command to them. A round sends each voter's command on
//! the lane it routed the voter to (`route`).

use super::independence::strike;
use super::outcome::Outcome;
use super::plan::{Dial, Masters};
use super::voter::Voter;
use crate::command::{Command, TAG_LIMIT};
use crate::conn::{Conn, Why};
use crate::error::NodeError;
use crate::os::{fork_generation, PollSet};
use crate::quorum::NodeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far the session's connections have got, readable by other threads:
/// a lock whose SET is not yet answered on some master must send its
/// release on that master's connection (so it cannot overtake the SET),
/// unless that connection has settled the SET since. See `handle::pool`.
#[derive(Debug)]
pub(crate) struct Progress {
    /// Per voter: every command up to this tag is settled on all the
    /// voter's lanes (answered, or lost with a discarded connection).
    /// `u64::MAX` once the session is closed.
    settled: Box<[AtomicU64]>,
}

impl Progress {
    /// Whether voter `i` has settled every command up to `tag`.
    pub(crate) fn has_settled(&self, i: usize, tag: u64) -> bool {
        self.settled[i].load(Ordering::Acquire) >= tag
    }
}

/// Which voter a lane belongs to, and which of the voter's nodes it
/// connects to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Lane {
    pub(super) voter: u16,
    pub(super) node: u16,
}

/// No lane yet for this node of a voter.
const NO_LANE: u32 = u32::MAX;

/// A connection to every node the session has sent to, and what the rounds
/// run on them share.
#[derive(Debug)]
pub(super) struct Connections {
    /// By lane (see the module docs).
    pub(super) conns: Vec<Conn>,
    /// The voter and node of each lane.
    lanes: Vec<Lane>,
    /// Per voter, the lane of each of its nodes, by node (`NO_LANE` until
    /// a command is routed there).
    voter_lanes: Vec<Vec<u32>>,
    /// Per voter, the lane its command of the current round goes on.
    pub(super) route: Vec<usize>,
    pub(super) poll: PollSet,
    /// The lane behind each poll slot.
    pub(super) polled: Vec<usize>,
    /// The number of the current round: answers to other rounds are late.
    pub(super) round: u64,
    /// The next command tag: unique and increasing across the session, so
    /// on each of its connections.
    next_tag: u64,
    /// When each lane was last sent a command.
    pub(super) last_sent: Vec<Instant>,
    /// The voters recorded in the current round as having missed a deadline
    /// (so that a round counts once per voter).
    late: NodeSet,
    progress: Arc<Progress>,
    /// The process generation the connections were opened in (see
    /// `os::fork_generation`).
    fork_generation: u64,
}

impl Connections {
    pub(super) fn new(voters: usize) -> Connections {
        Connections {
            conns: (0..voters).map(|_| Conn::new()).collect(),
            lanes: (0..voters)
                .map(|i| Lane {
                    voter: i as u16,
                    node: 0,
                })
                .collect(),
            voter_lanes: (0..voters).map(|i| vec![i as u32]).collect(),
            route: (0..voters).collect(),
            poll: PollSet::default(),
            polled: Vec::with_capacity(voters),
            round: 0,
            next_tag: 1,
            last_sent: vec![Instant::now(); voters],
            late: NodeSet::EMPTY,
            progress: Arc::new(Progress {
                settled: (0..voters).map(|_| AtomicU64::new(0)).collect(),
            }),
            fork_generation: fork_generation(),
        }
    }

    /// How many voters the session talks to.
    #[inline]
    pub(super) fn voters(&self) -> usize {
        self.route.len()
    }

    /// The connection voter `i`'s command of the current round goes on.
    #[inline]
    pub(super) fn conn(&self, i: usize) -> &Conn {
        &self.conns[self.route[i]]
    }

    /// See [`Connections::conn`].
    #[inline]
    pub(super) fn conn_mut(&mut self, i: usize) -> &mut Conn {
        &mut self.conns[self.route[i]]
    }

    /// The voter and node of `lane`.
    #[inline]
    pub(super) fn lane(&self, lane: usize) -> Lane {
        self.lanes[lane]
    }

    /// The lane of node `node` of voter `i`, made if the session has none
    /// yet (a cluster voter's node that no command went to before: an
    /// allocation, once per node per session).
    pub(super) fn lane_for(&mut self, i: usize, node: usize) -> usize {
        let known = &mut self.voter_lanes[i];
        if node >= known.len() {
            known.resize(node + 1, NO_LANE);
        }
        if known[node] == NO_LANE {
            known[node] = self.conns.len() as u32;
            self.conns.push(Conn::new());
            self.lanes.push(Lane {
                voter: i as u16,
                node: node as u16,
            });
            self.last_sent.push(Instant::now());
        }
        known[node] as usize
    }

    /// Routes voter `i`'s commands of the current round to its node `node`.
    #[inline]
    pub(super) fn route_to(&mut self, i: usize, node: usize) {
        if self.lanes[self.route[i]].node as usize != node {
            self.route[i] = self.lane_for(i, node);
        }
    }

    /// Routes every voter's `command` at `now` (see `Voter::route`), a
    /// cluster voter's by the freshest map its lanes brought. The
    /// command's slot (`Command::slot`: a fence operator's command names
    /// one) is computed once, for the first cluster voter.
    #[inline]
    pub(super) fn route_all(&mut self, masters: Masters<'_>, command: &Command<'_>, now: Instant) {
        let mut slot = None;
        for (i, voter) in masters.voters.iter().enumerate() {
            if let Some(cluster) = voter.cluster() {
                if cluster.is_stale() {
                    for k in 0..self.voter_lanes[i].len() {
                        let lane = self.voter_lanes[i][k];
                        if lane != NO_LANE {
                            self.adopt_topology(masters, lane as usize);
                        }
                    }
                }
            }
            let node = match voter {
                Voter::Cluster(cluster) => {
                    cluster.route_slot(*slot.get_or_insert_with(|| command.slot()), now)
                }
                // A standalone master, or a shard voter's own slot.
                _ => voter.route(None, now),
            };
            self.route_to(i, node);
        }
    }

    /// The earlier voter whose command of the current round goes to the
    /// same master as voter `i`'s (one master of a cluster never votes
    /// twice: two voters of the single-cluster mode may land on one master
    /// after a resharding), if any.
    pub(super) fn shares_master_with(&self, masters: Masters<'_>, i: usize) -> Option<usize> {
        self.shares_master_among(masters, i, 0..i)
    }

    /// The voter among `others` (not `i`) whose command of the current
    /// round goes to the same master as voter `i`'s, if any.
    pub(super) fn shares_master_among(
        &self,
        masters: Masters<'_>,
        i: usize,
        mut others: impl Iterator<Item = usize>,
    ) -> Option<usize> {
        let cluster = masters.voters[i].cluster()?;
        let node = self.lanes[self.route[i]].node;
        others.find(|&j| {
            j != i
                && masters.voters[j]
                    .cluster()
                    .is_some_and(|other| std::ptr::eq(other, cluster))
                && self.lanes[self.route[j]].node == node
        })
    }

    /// Hands the topology `lane`'s connection brought (if any) to its
    /// cluster voter, and to the comparison of voters (see
    /// `independence`). Returns whether that refused a voter.
    pub(super) fn adopt_topology(&mut self, masters: Masters<'_>, lane: usize) -> bool {
        let Some(learnt) = self.conns[lane].take_topology() else {
            return false;
        };
        let i = usize::from(self.lanes[lane].voter);
        let Some(cluster) = masters.voters[i].cluster() else {
            return false;
        };
        match learnt {
            Ok(topology) => {
                cluster.adopt(&topology, usize::from(self.lanes[lane].node));
                masters.independence.learn_cluster(i, &topology)
            }
            // A server without `CLUSTER SHARDS` (before Redis 7.0).
            Err(_) => {
                cluster.use_slots();
                false
            }
        }
    }

    /// Takes in what `lane`'s connection learnt of its server (its
    /// `run_id`) and of its cluster (a topology, which its cluster voter
    /// routes by from now on), and strikes the voters this refuses out of
    /// the round's `outcomes` (see `independence::strike`). Returns whether
    /// it refused a voter.
    pub(super) fn check_independence(
        &mut self,
        masters: Masters<'_>,
        lane: usize,
        outcomes: &mut [Outcome],
    ) -> bool {
        let Lane { voter, node } = self.lane(lane);
        let (i, k) = (usize::from(voter), usize::from(node));
        let mut refused = match self.conns[lane].take_identity() {
            Some(run) => masters.independence.learn_server(i, k, run),
            None => false,
        };
        if masters.voters[i].cluster().is_some() {
            refused |= self.adopt_topology(masters, lane);
        }
        if refused {
            let now = Instant::now();
            let Masters { voters, states, .. } = masters;
            strike(masters.independence, voters, states, outcomes, now);
        }
        refused
    }

    /// How far the connections have got, shared with the locks taken on
    /// them.
    pub(super) fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// Whether the connections were opened by this process (not inherited
    /// through `fork`).
    pub(super) fn belongs_to_this_process(&self) -> bool {
        self.fork_generation == fork_generation()
    }

    /// Numbers a new round and forgets the last one's late nodes (a node
    /// late in the last round may be late again in this one, and counts
    /// again).
    pub(super) fn next_round(&mut self) {
        self.round = self.round.wrapping_add(1);
        self.late = NodeSet::EMPTY;
    }

    /// Takes a fresh tag.
    pub(super) fn take_tag(&mut self) -> u64 {
        let tag = self.next_tag;
        // Wrapping would take 2^52 commands; if it ever did, tags restart
        // on connections that are reopened first (old ones are discarded).
        self.next_tag = if tag + 1 >= TAG_LIMIT { 1 } else { tag + 1 };
        if self.next_tag == 1 {
            for conn in &mut self.conns {
                conn.discard();
            }
        }
        tag
    }

    /// Makes sure node `i` has a connection to send on: replaces one whose
    /// server stopped answering, and connects (with its handshake due by
    /// `deadline`) if `dial` allows it.
    pub(super) fn open(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        now: Instant,
        deadline: Instant,
        dial: Dial,
    ) -> Result<(), NodeError> {
        let lane = self.route[i];
        self.open_lane(masters, lane, now, deadline, dial)
    }

    /// Makes sure `lane` has a connection to send on (see `open`).
    pub(super) fn open_lane(
        &mut self,
        masters: Masters<'_>,
        lane: usize,
        now: Instant,
        deadline: Instant,
        dial: Dial,
    ) -> Result<(), NodeError> {
        let Lane { voter, node } = self.lanes[lane];
        let (i, k) = (usize::from(voter), usize::from(node));
        let conn = &mut self.conns[lane];
        let backoff = masters.backoff(i, k);
        if conn.is_dead(now, masters.lag_limit) {
            // The answers may simply be sitting unread after an idle spell:
            // look before giving up on the connection.
            if conn.catch_up().is_err() || conn.is_dead(now, masters.lag_limit) {
                // The phase it stalled in: a connect or TLS handshake that
                // never finished, or replies.
                let phase = conn.phase();
                conn.discard();
                masters.failed(i, k, now, &NodeError::TimedOut(phase));
            }
        }
        if conn.needs_recheck() {
            // Its server said it is a master no more: a new connection,
            // whose set-up checks again, before anything is sent.
            conn.discard();
        }
        if !conn.is_open() {
            let Some(target) = masters.node(i, k) else {
                // A node that the voter no longer knows (its list was
                // replaced), or a Sentinel voter's master not known yet:
                // the round treats it as unreachable.
                return Err(masters.voters[i].unknown_node());
            };
            match dial {
                Dial::OutsideBackoff => {
                    // A node whose name now resolves elsewhere is dialled
                    // at once: its failures were at the old address.
                    if let Err(backoff) = backoff.check(now) {
                        if target.address.take_fresh() {
                            // Dialled below.
                        } else {
                            if backoff.cause().is_some_and(NodeError::means_unreachable) {
                                // Still unreachable: look its name up
                                // again once the rate limit allows.
                                target.address.readdress(Why::Unreachable, now);
                            }
                            return Err(backoff);
                        }
                    }
                }
                Dial::UnlessFailingForGood => match backoff.failing_for_good() {
                    // A server refused as a voter ran the command sent
                    // behind the handshake (its answer never counted): the
                    // release deletes what it may have set.
                    Some(NodeError::NotAVoter(_)) | None => {}
                    // The command after a refused handshake was refused
                    // too: there is nothing to clean up.
                    Some(permanent) => return Err(permanent),
                },
                Dial::Every => {}
            }
            if let Err(e) = conn.connect(target, deadline) {
                conn.discard();
                masters.failed(i, k, now, &e);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Waits, until `until`, for the connections in `sent` (those sent to
    /// in this round) to finish connecting and take what is queued on them.
    pub(super) fn flush_sent(&mut self, sent: NodeSet, masters: Masters<'_>, until: Instant) {
        loop {
            self.poll.clear();
            self.polled.clear();
            for i in sent.iter() {
                let lane = self.route[i];
                let conn = &self.conns[lane];
                // A TLS handshake also needs to read.
                let (read, write) = conn.interest();
                let read = read && conn.is_opening();
                if let (true, Some(fd)) = (read || write, conn.raw_fd()) {
                    self.poll.add(fd, read, write);
                    self.polled.push(lane);
                }
            }
            let now = Instant::now();
            if self.polled.is_empty() || now >= until || self.poll.wait(until - now).is_err() {
                return;
            }
            for slot in 0..self.polled.len() {
                let ready = self.poll.ready(slot);
                let lane = self.polled[slot];
                let conn = &mut self.conns[lane];
                let mut step = Ok(());
                if ready.writable {
                    step = conn.on_writable();
                }
                if ready.readable && step.is_ok() {
                    step = conn.on_readable();
                }
                if let Err(e) = step {
                    conn.discard();
                    self.lane_failed(masters, lane, Instant::now(), &e);
                }
            }
        }
    }

    /// Records that node `i` missed a deadline, on a connection that is
    /// kept: failing in the health view, not in the reconnect backoff (see
    /// `health`). Once per round.
    pub(super) fn missed_deadline(
        &mut self,
        masters: Masters<'_>,
        i: usize,
        error: NodeError,
        now: Instant,
    ) {
        if !self.late.contains(i) {
            self.late.insert(i);
            masters.states[i].missed_deadline(now, &error);
        }
    }

    /// Sends the notices of native releases that deleted, read while a
    /// round waited or by a look (see `conn::notice`): once a round whose
    /// deadline is `deadline` is decided, so that they do not delay it. A
    /// connection that breaks doing so is discarded.
    pub(super) fn send_notices(&mut self, masters: Masters<'_>, deadline: Instant) {
        for lane in 0..self.conns.len() {
            if let Err(e) = self.conns[lane].send_notices(deadline) {
                self.conns[lane].discard();
                self.lane_failed(masters, lane, Instant::now(), &e);
            }
        }
    }

    /// Records that `lane`'s connection failed (see `Masters::failed`).
    pub(super) fn lane_failed(
        &self,
        masters: Masters<'_>,
        lane: usize,
        now: Instant,
        error: &NodeError,
    ) {
        let Lane { voter, node } = self.lanes[lane];
        masters.failed(usize::from(voter), usize::from(node), now, error);
    }

    /// Makes what the connections have settled visible to other threads:
    /// per voter, the tag up to which every one of its lanes has settled
    /// (a lane that owes nothing has settled everything sent so far).
    pub(super) fn publish_progress(&self) {
        let issued = self.next_tag.saturating_sub(1);
        for (lanes, settled) in self.voter_lanes.iter().zip(self.progress.settled.iter()) {
            let mut upto = issued;
            for &lane in lanes {
                if lane != NO_LANE {
                    let conn = &self.conns[lane as usize];
                    if conn.owed_len() > 0 {
                        upto = upto.min(conn.settled_tag());
                    }
                }
            }
            settled.store(upto, Ordering::Release);
        }
    }

    /// Reads, without waiting, what has arrived on the connections that owe
    /// replies, and returns whether they now owe nothing. Connections that
    /// fail are closed.
    pub(super) fn tidy(&mut self) -> bool {
        self.poll.clear();
        self.polled.clear();
        for (i, conn) in self.conns.iter().enumerate() {
            if let (true, Some(fd)) = (conn.owed_len() > 0, conn.raw_fd()) {
                self.poll.add(fd, true, conn.interest().1);
                self.polled.push(i);
            }
        }
        if !self.polled.is_empty() && self.poll.check().is_ok() {
            for slot in 0..self.polled.len() {
                let ready = self.poll.ready(slot);
                let conn = &mut self.conns[self.polled[slot]];
                let flushed = if ready.writable {
                    conn.on_writable()
                } else {
                    Ok(())
                };
                let read = flushed.and_then(|()| conn.catch_up());
                if read
                    .and_then(|()| conn.send_notices(Instant::now()))
                    .is_err()
                {
                    conn.discard();
                }
            }
        }
        self.publish_progress();
        self.conns.iter().all(|conn| conn.owed_len() == 0)
    }

    /// Whether a connection owes replies and is not dead (see
    /// `Conn::is_dead`).
    pub(super) fn owes_live_replies(&self, now: Instant, lag_limit: Duration) -> bool {
        self.conns
            .iter()
            .any(|conn| conn.owed_len() > 0 && !conn.is_dead(now, lag_limit))
    }
}

impl Drop for Connections {
    /// The connections close with the session: whatever they had not
    /// settled, the servers either ran or drop with them.
    fn drop(&mut self) {
        for settled in self.progress.settled.iter() {
            settled.store(u64::MAX, Ordering::Release);
        }
    }
}
