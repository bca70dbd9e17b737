//! One server, or one cluster, votes once. Each new connection's handshake
//! tells its server's `run_id` and replication ids (see
//! `command::identity`, which also refuses, on its own, a node that is no
//! master of the kind it was given as: a replica, a KeyDB active replica, a
//! cluster node given as a standalone master), and each topology a cluster
//! voter learns lists its cluster's node ids. Here they are compared across
//! voters: two voters that met the same server (one server under two
//! addresses, a standalone master that is also a node of a cluster voter),
//! one history of writes (a replica promoted beside its master, which holds
//! the keys it copied from it), or whose clusters share a node (one cluster
//! given as two voters), are not independent, and the one configured later
//! is refused for the handle's life ([`NotAVoter::SameServer`],
//! [`NotAVoter::SameReplication`], [`NotAVoter::SameCluster`]), naming the
//! other.
//!
//! Never counted twice, in any round: a connection's handshake answers
//! before the command sent behind it, so a voter's server is known before
//! its first answer counts, and when a refusal comes in the middle of a
//! round, the refused voter's answers in it are struck out ([`strike`])
//! before the round is decided again (`Connections::check_independence`). A round decided before the earlier
//! voter's server was known counted the later voter only. Rounds read the
//! refusals with one atomic load; what is learnt is compared under a lock,
//! once per new connection and per topology.
//!
//! The voters of the single-cluster mode (`Builder::cluster_shards`) share
//! their cluster by design: they are one *group*, never compared with
//! each other (one master voting twice is `Connections::shares_master_with`'s
//! business).

use super::cluster::MAX_CLUSTER_NODES;
use super::health::NodeState;
use super::outcome::Outcome;
use super::voter::Voter;
use crate::cluster::Topology;
use crate::command::identity::Identity;
use crate::error::{NodeError, NotAVoter};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// What a handle's voters were found to share, and which are refused.
#[derive(Debug)]
pub(crate) struct Independence {
    /// The refused voters, a bit each (at most 64 voters).
    refused: AtomicU64,
    /// Each voter's group: the first voter of its cluster in the
    /// single-cluster mode, itself otherwise.
    group: Box<[usize]>,
    /// Whether each voter is (part of) a cluster: two cluster voters that
    /// met one server are one cluster.
    clustered: Box<[bool]>,
    seen: Mutex<Seen>,
}

/// What the voters' connections and topologies told, by group (indexed by
/// the group's first voter).
#[derive(Debug)]
struct Seen {
    /// What each node of the group met told of itself, by node index.
    runs: Vec<Vec<Identity>>,
    /// The cluster node ids the group's last topology listed.
    nodes: Vec<HashSet<Box<str>>>,
    /// Per voter: if refused, the earlier voter it is not independent of,
    /// and what they share.
    why: Vec<Option<(usize, Shares)>>,
}

/// What two voters were found to share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shares {
    Server,
    Replication,
    Cluster,
}

/// The refused voters, as read at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused(u64);

impl Refused {
    /// Whether voter `i` is refused.
    #[inline]
    pub(crate) fn contains(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }

    fn iter(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |&i| self.contains(i))
    }
}

impl Independence {
    /// Nothing known yet of `voters` (at most 64).
    pub(crate) fn new(voters: &[Voter]) -> Independence {
        let n = voters.len();
        assert!(n <= 64, "at most 64 voters");
        let cluster = |i: usize| voters[i].cluster().map(|c| c as *const _);
        let group = (0..n)
            .map(|i| match cluster(i) {
                Some(c) => (0..=i).find(|&j| cluster(j) == Some(c)).unwrap_or(i),
                None => i,
            })
            .collect();
        Independence {
            refused: AtomicU64::new(0),
            group,
            clustered: voters.iter().map(|v| v.cluster().is_some()).collect(),
            seen: Mutex::new(Seen {
                runs: vec![Vec::new(); n],
                nodes: vec![HashSet::new(); n],
                why: vec![None; n],
            }),
        }
    }

    /// The voters refused now (one atomic load).
    #[inline]
    pub(crate) fn refused(&self) -> Refused {
        Refused(self.refused.load(Ordering::Relaxed))
    }

    /// Why voter `i` is refused (see [`Independence::refused`]), naming
    /// the other voter from `voters`.
    pub(crate) fn error(&self, i: usize, voters: &[Voter]) -> NodeError {
        let why = self.seen().why.get(i).copied().flatten();
        let other = |j: usize| voters.get(j).map_or("?", Voter::name).to_string();
        NodeError::NotAVoter(match why {
            Some((j, Shares::Cluster)) => NotAVoter::SameCluster { other: other(j) },
            Some((j, Shares::Server)) => NotAVoter::SameServer { other: other(j) },
            Some((j, Shares::Replication)) => NotAVoter::SameReplication { other: other(j) },
            None => NotAVoter::SameServer {
                other: other(usize::MAX),
            },
        })
    }

    /// Node `node` of voter `i` told `identity` (its `run_id`, its
    /// replication ids, or both). Returns whether this refused a voter that
    /// was not refused before.
    pub(crate) fn learn_server(&self, i: usize, node: usize, identity: Identity) -> bool {
        if node >= MAX_CLUSTER_NODES {
            return false;
        }
        let g = self.group[i];
        let mut seen = self.seen();
        let runs = &mut seen.runs[g];
        if runs.len() <= node {
            runs.resize(node + 1, Identity::default());
        }
        runs[node] = runs[node].and(identity);
        let met = |h: usize, shares: &dyn Fn(&Identity) -> bool| seen.runs[h].iter().any(shares);
        let same_run = |known: &Identity| identity.run.is_some() && known.run == identity.run;
        let same_history = |known: &Identity| match (identity.history, known.history) {
            (Some(mine), Some(theirs)) => mine.shared_with(&theirs),
            _ => false,
        };
        let others = || (0..self.group.len()).filter(|&h| h != g);
        let found = match others().find(|&h| met(h, &same_run)) {
            // Two cluster voters that met one server are one cluster.
            Some(h) if self.clustered[g] && self.clustered[h] => Some((h, Shares::Cluster)),
            Some(h) => Some((h, Shares::Server)),
            None => others()
                .find(|&h| met(h, &same_history))
                .map(|h| (h, self.history_shared(h, g))),
        };
        match found {
            Some((h, what)) => self.refuse_later(&mut seen, g, h, what),
            None => false,
        }
    }

    /// What groups `g` and `h`, whose servers write one history, share:
    /// one cluster if both are clusters (a replica is a member), one
    /// replication set otherwise.
    fn history_shared(&self, g: usize, h: usize) -> Shares {
        match self.clustered[g] && self.clustered[h] {
            true => Shares::Cluster,
            false => Shares::Replication,
        }
    }

    /// Voter `i`'s cluster gave `topology`. Returns whether this refused a
    /// voter that was not refused before.
    pub(crate) fn learn_cluster(&self, i: usize, topology: &Topology) -> bool {
        let ids = topology.shards().iter().flat_map(|s| s.nodes());
        self.learn_nodes(i, ids.map(|node| node.id.as_str()))
    }

    /// Voter `i`'s cluster lists the nodes `ids` (see `learn_cluster`).
    fn learn_nodes<'a>(&self, i: usize, ids: impl Iterator<Item = &'a str>) -> bool {
        let g = self.group[i];
        let ids: HashSet<Box<str>> = ids.filter(|id| !id.is_empty()).map(Box::from).collect();
        let mut seen = self.seen();
        let other = (0..self.group.len())
            .filter(|&h| h != g)
            .find(|&h| !seen.nodes[h].is_disjoint(&ids));
        seen.nodes[g] = ids;
        match other {
            Some(h) => self.refuse_later(&mut seen, g, h, Shares::Cluster),
            None => false,
        }
    }

    /// Groups `g` and `h` share `what`: refuses every voter of the later
    /// one, naming the earlier. Returns whether a voter was newly refused.
    fn refuse_later(&self, seen: &mut Seen, g: usize, h: usize, what: Shares) -> bool {
        let (earlier, later) = (g.min(h), g.max(h));
        let mut newly = false;
        for (v, &group) in self.group.iter().enumerate() {
            if group == later && seen.why[v].is_none() {
                seen.why[v] = Some((earlier, what));
                self.refused.fetch_or(1 << v, Ordering::Relaxed);
                newly = true;
            }
        }
        newly
    }

    fn seen(&self) -> MutexGuard<'_, Seen> {
        // Plain data, consistent after every change: poisoning is moot.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Strikes out, in a round's `outcomes` (`outcomes[op * voters + i]`),
/// every answer of a voter refused by `independence` that counts or may
/// still come: it becomes the voter's refusal, recorded once in its state
/// (which tells the hook).
pub(super) fn strike(
    independence: &Independence,
    voters: &[Voter],
    states: &[NodeState],
    outcomes: &mut [Outcome],
    now: Instant,
) {
    let n = voters.len();
    for i in independence.refused().iter().filter(|&i| i < n) {
        let error = independence.error(i, voters);
        let mut struck = false;
        for outcome in outcomes.iter_mut().skip(i).step_by(n) {
            if matches!(
                outcome,
                Outcome::HeldBack
                    | Outcome::Waiting
                    | Outcome::Yes
                    | Outcome::No
                    | Outcome::Pttl(..)
            ) {
                *outcome = Outcome::Failed(error.clone());
                struck = true;
            }
        }
        if struck {
            states[i].failed(now, &error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cluster::ClusterVoter;
    use super::super::shards::ShardVoter;
    use super::*;
    use crate::command::identity::{History, ReplId, RunId};
    use crate::conn::Node;
    use std::sync::Arc;

    fn node(port: u16) -> Node {
        crate::conn::test_node(&format!("redis://127.0.0.1:{port}"), true, true, false).unwrap()
    }

    fn run(digit: char) -> Identity {
        let text = digit.to_string().repeat(40);
        Identity {
            run: Some(RunId::parse(text.as_bytes()).expect("a run id")),
            history: None,
        }
    }

    /// A server writing history `current`, after `previous` if any.
    fn history(current: char, previous: Option<char>) -> Identity {
        let id = |d: char| ReplId::parse(d.to_string().repeat(40).as_bytes()).unwrap();
        Identity {
            run: None,
            history: Some(History {
                current: id(current),
                previous: previous.map(id),
            }),
        }
    }

    #[test]
    fn a_server_met_by_two_voters_refuses_the_later_one_naming_the_earlier() {
        let voters: Vec<Voter> = (0..3).map(|p| Voter::Standalone(node(7000 + p))).collect();
        let seen = Independence::new(&voters);
        assert!(!seen.learn_server(2, 0, run('a')));
        assert!(!seen.learn_server(1, 0, run('b')));
        assert_eq!(seen.refused(), Refused(0));
        // Voter 0 turns out to be voter 2's server: voter 2 is refused.
        assert!(seen.learn_server(0, 0, run('a')));
        assert!(seen.refused().contains(2) && !seen.refused().contains(0));
        assert_eq!(
            seen.error(2, &voters),
            NodeError::NotAVoter(NotAVoter::SameServer {
                other: "127.0.0.1:7000".into()
            })
        );
        // Told once: learning it again refuses nobody new.
        assert!(!seen.learn_server(2, 0, run('a')));
        assert!(!seen.learn_server(1, 0, run('c')));
        assert_eq!(seen.refused(), Refused(1 << 2));
    }

    #[test]
    fn a_replica_promoted_beside_its_master_is_refused_naming_it() {
        let voters: Vec<Voter> = (0..3).map(|p| Voter::Standalone(node(7000 + p))).collect();
        let seen = Independence::new(&voters);
        // Each probe's answer is learnt on its own: run id, then history.
        assert!(!seen.learn_server(0, 0, run('a')));
        assert!(!seen.learn_server(0, 0, history('1', None)));
        assert!(!seen.learn_server(2, 0, history('3', Some('9'))));
        assert_eq!(seen.refused(), Refused(0));
        // Voter 1 was promoted from voter 0's history (another run).
        assert!(!seen.learn_server(1, 0, run('b')));
        assert!(seen.learn_server(1, 0, history('2', Some('1'))));
        assert_eq!(seen.refused(), Refused(1 << 1));
        assert_eq!(
            seen.error(1, &voters),
            NodeError::NotAVoter(NotAVoter::SameReplication {
                other: "127.0.0.1:7000".into()
            })
        );
        // Two that both continue one earlier history are not compared.
        assert!(!seen.learn_server(2, 0, history('4', Some('9'))));
        assert_eq!(seen.refused(), Refused(1 << 1));
    }

    #[test]
    fn one_cluster_given_twice_is_refused_and_its_own_voters_are_one_group() {
        let epoch = Instant::now();
        let shared = Arc::new(ClusterVoter::new(vec![node(7100)], epoch).unwrap());
        let voters = vec![
            Voter::Cluster(ClusterVoter::new(vec![node(7000), node(7001)], epoch).unwrap()),
            Voter::Shard(ShardVoter::new(Arc::clone(&shared), 0, 0)),
            Voter::Shard(ShardVoter::new(Arc::clone(&shared), 1, 6000)),
            Voter::Cluster(ClusterVoter::new(vec![node(7200)], epoch).unwrap()),
        ];
        let seen = Independence::new(&voters);
        assert_eq!(&*seen.group, &[0, 1, 1, 3]);
        // The shard voters share their cluster by design; two nodes of one
        // voter may be one server.
        assert!(!seen.learn_nodes(1, ["n1", "n2"].into_iter()));
        assert!(!seen.learn_nodes(2, ["n1", "n2", "n3"].into_iter()));
        assert!(!seen.learn_server(0, 0, run('a')));
        assert!(!seen.learn_server(0, 1, run('a')));
        assert!(!seen.learn_nodes(0, ["m1", ""].into_iter()));
        assert!(!seen.learn_nodes(3, ["", "x"].into_iter()), "no id shared");
        // Voter 3 is the shard voters' cluster: refused, naming voter 1.
        assert!(seen.learn_nodes(3, ["x", "n3"].into_iter()));
        assert_eq!(seen.refused(), Refused(1 << 3));
        assert!(matches!(
            seen.error(3, &voters),
            NodeError::NotAVoter(NotAVoter::SameCluster { other }) if other.contains("shard 0")
        ));
        // The first cluster voter's server is met by the shard voters:
        // both of them (the later group) are refused, as the same cluster.
        assert!(seen.learn_server(2, 4, run('a')));
        assert_eq!(seen.refused(), Refused(1 << 3 | 1 << 1 | 1 << 2));
        assert!(matches!(
            seen.error(1, &voters),
            NodeError::NotAVoter(NotAVoter::SameCluster { other }) if other.starts_with("cluster(")
        ));
    }

    #[test]
    fn a_struck_voter_no_longer_counts_in_the_round() {
        let voters: Vec<Voter> = (0..3).map(|p| Voter::Standalone(node(7300 + p))).collect();
        let states: Vec<_> = (0..3).map(|_| NodeState::new(Instant::now())).collect();
        let independence = Independence::new(&voters);
        let strike = |outcomes: &mut [Outcome]| {
            strike(&independence, &voters, &states, outcomes, Instant::now())
        };
        // Two ops: voter 1 said yes to one, is awaited for the other.
        let mut outcomes = vec![
            Outcome::Yes,
            Outcome::Yes,
            Outcome::No,
            Outcome::Yes,
            Outcome::Waiting,
            Outcome::NotSent,
        ];
        assert!(!independence.learn_server(1, 0, run('d')));
        strike(&mut outcomes);
        assert!(matches!(outcomes[1], Outcome::Yes), "nobody refused yet");
        assert!(independence.learn_server(0, 0, run('d')));
        strike(&mut outcomes);
        assert!(matches!(outcomes[0], Outcome::Yes));
        for k in [1, 4] {
            assert!(
                matches!(&outcomes[k], Outcome::Failed(NodeError::NotAVoter(_))),
                "{:?}",
                outcomes[k]
            );
        }
        assert!(matches!(outcomes[5], Outcome::NotSent));
        let health = states[1].snapshot("127.0.0.1:7301", Instant::now());
        assert!(health.is_failing(), "{health}");
        assert!(health
            .to_string()
            .contains("same server as voter 127.0.0.1:7300"));
    }
}
