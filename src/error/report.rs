//! What each master answered in one round: the per-node report every error
//! that involves the masters carries, and its one-line summary, which says
//! what to do where something can be done.

use super::node::{NodeError, ServerError};
use super::rounded::Rounded;
use std::fmt;
use std::time::Duration;

/// What every master answered in one round, in the order the nodes were
/// configured. Its `Display` is a one-line summary naming each failed node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    nodes: Vec<NodeStatus>,
    /// For a wait that ran out: how many masters refused to subscribe it
    /// to release notices, and the last refusal.
    /// (Boxed, as `waited`: only the error of a wait has it.)
    notices_refused: Option<Box<(usize, ServerError)>>,
    /// For a wait that ended without the lock: how it went (boxed: the
    /// error stays small on every other path).
    waited: Option<Box<Waited>>,
}

/// How a wait that ended without the lock went, for its error's report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waited {
    /// From the call to its end.
    pub(crate) waited: Duration,
    /// Acquisition attempts made.
    pub(crate) tries: u32,
    /// If the wait ended because no quorum could be reached: for how long
    /// in a row.
    pub(crate) unreachable_for: Option<Duration>,
}

impl NodeReport {
    pub(crate) fn new(nodes: Vec<NodeStatus>) -> NodeReport {
        NodeReport {
            nodes,
            notices_refused: None,
            waited: None,
        }
    }

    /// For the error of a wait that ended without the lock (it ran out, or
    /// masters were out of reach for too long): how long the call waited,
    /// first attempt included. `None` for a call that made one attempt
    /// only.
    pub fn waited(&self) -> Option<Duration> {
        self.waited.as_ref().map(|w| w.waited)
    }

    /// For the error of a wait that masters out of reach ended (see
    /// [`Builder::unreachable_limit`](crate::Builder::unreachable_limit)):
    /// how long no quorum could be reached, in a row.
    pub fn unreachable_for(&self) -> Option<Duration> {
        self.waited.as_ref().and_then(|w| w.unreachable_for)
    }

    /// Notes how the wait whose error this is went.
    pub(super) fn set_waited(&mut self, waited: Waited) {
        self.waited = Some(Box::new(waited));
    }

    /// For the error of a wait that ran out ([`Redlock::lock`]): a master's
    /// refusal to subscribe the waiter to the lock's release notices, if
    /// some refused (an ACL user without rights on the channels
    /// `redlock-sync:released:*`; Redis 7 gives new users none). The waiter
    /// then heard no release from them and tried again only after each
    /// fallback pause.
    ///
    /// [`Redlock::lock`]: crate::Redlock::lock
    pub fn release_notices_refused(&self) -> Option<&ServerError> {
        self.notices_refused.as_deref().map(|(_, error)| error)
    }

    /// Notes, for the error of a wait that ran out, that `masters` refused
    /// the waiter's subscription to release notices, the last with
    /// `refusal`.
    pub(super) fn set_notices_refused(&mut self, masters: usize, refusal: ServerError) {
        self.notices_refused = Some(Box::new((masters, refusal)));
    }

    /// The status of each node.
    pub fn iter(&self) -> std::slice::Iter<'_, NodeStatus> {
        self.nodes.iter()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the report is empty (it never is for a configured client).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes had this outcome (compared without the error detail).
    fn count(&self, f: impl Fn(&NodeOutcome) -> bool) -> usize {
        self.nodes.iter().filter(|s| f(&s.outcome)).count()
    }
}

impl<'a> IntoIterator for &'a NodeReport {
    type Item = &'a NodeStatus;
    type IntoIter = std::slice::Iter<'a, NodeStatus>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(w) = &self.waited {
            let tries = match w.tries {
                1 => "1 try".to_string(),
                n => format!("{n} tries"),
            };
            match w.unreachable_for {
                Some(none_for) => write!(
                    f,
                    "no quorum reachable for {} in a row, after waiting {} ({tries}); ",
                    Rounded(none_for),
                    Rounded(w.waited)
                )?,
                None => write!(f, "after waiting {} ({tries}): ", Rounded(w.waited))?,
            }
        }
        let agreed = self.count(|o| matches!(o, NodeOutcome::Agreed));
        write!(f, "{agreed} of {} masters agreed", self.nodes.len())?;
        let others = [
            (
                "declined",
                self.count(|o| matches!(o, NodeOutcome::Declined)),
            ),
            (
                "failed",
                self.count(|o| matches!(o, NodeOutcome::Failed(_))),
            ),
            (
                "not waited for (the outcome was already known)",
                self.count(|o| matches!(o, NodeOutcome::Pending)),
            ),
            (
                "left out (still busy with earlier commands, or never sent the key)",
                self.count(|o| matches!(o, NodeOutcome::NotSent)),
            ),
        ];
        for (what, n) in others {
            if n > 0 {
                write!(f, ", {n} {what}")?;
            }
        }
        for status in &self.nodes {
            if let NodeOutcome::Failed(e) = &status.outcome {
                write!(f, "; {}: {}", status.node, e)?;
            }
        }
        for advice in Advice::ALL {
            if self.iter().any(|s| advice.applies(&s.outcome)) {
                write!(f, "; {}", advice.text())?;
            }
        }
        if let Some((masters, error)) = self.notices_refused.as_deref() {
            write!(
                f,
                "; release notices refused by {masters} of {} masters ({error}), so the wait \
                 polled; grant the ACL user &redlock-sync:released:*",
                self.nodes.len()
            )?;
        }
        Ok(())
    }
}

/// What to do about the failures that a report shows, said once each at
/// its end (the per-master messages say what happened).
#[derive(Clone, Copy)]
enum Advice {
    Refused,
    TimedOut,
    Busy,
}

impl Advice {
    const ALL: [Advice; 3] = [Advice::Refused, Advice::TimedOut, Advice::Busy];

    fn applies(self, outcome: &NodeOutcome) -> bool {
        let NodeOutcome::Failed(e) = outcome else {
            return false;
        };
        let e = e.cause().unwrap_or(e);
        match self {
            Advice::Refused => matches!(e, NodeError::Refused),
            Advice::TimedOut => matches!(e, NodeError::TimedOut(_)),
            Advice::Busy => matches!(e, NodeError::Backlogged),
        }
    }

    fn text(self) -> &'static str {
        match self {
            Advice::Refused => {
                "where the connection is refused, no server listens: start it, or fix the \
                 URL's host or port"
            }
            Advice::TimedOut => {
                "a master that times out is down, unreachable or overloaded; if this client's \
                 host is busy (many threads on few cores), raise Builder::node_timeout"
            }
            Advice::Busy => {
                "a master skipped as busy is slow or stalled: check its load and latency"
            }
        }
    }
}

/// One node's part in a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStatus {
    pub(crate) node: String,
    pub(crate) outcome: NodeOutcome,
}

impl NodeStatus {
    /// The node's address as configured (`host:port`, never credentials).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// What the node answered.
    pub fn outcome(&self) -> &NodeOutcome {
        &self.outcome
    }
}

/// What one node answered in one round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOutcome {
    /// The node did what was asked (set, extended or deleted our key).
    Agreed,
    /// The node refused: on acquire, the key is held by someone else; on
    /// extend or unlock, the key is not ours (expired or taken).
    Declined,
    /// The outcome was decided before this node answered, so its answer
    /// was not awaited (it is still read and checked later, before its
    /// connection carries another command).
    Pending,
    /// Not asked in this round: on acquire, the node was still answering
    /// our earlier commands and the others decided without it; on unlock,
    /// the acquisition never sent it the key, so it cannot hold it.
    NotSent,
    /// The node failed.
    Failed(NodeError),
}
