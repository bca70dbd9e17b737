//! Looking at a resource's lock without taking it (`Redlock::inspect`):
//! one round of `PTTL` on every master, each followed by a `GETRANGE` of
//! the holder label (the part of the value after its secret: see
//! `holder`), and what the answers say. The value's secret is never read:
//! an inspection can tell that a key is there, for how long, and the
//! label its holder chose to show, never what would let it release the
//! lock.

use crate::command::Command;
use crate::error::{Error, NodeError, NodeOutcome, NodeReport, Phase};
use crate::handle::Shared;
use crate::holder::Label;
use crate::quorum::{quorum, Decision, NodeSet, Rule};
use crate::round::{Dial, Plan};
use std::fmt;
use std::time::{Duration, Instant};

/// What one master said of a resource's key, in an [`Inspection`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyOnMaster {
    /// The key is there, and expires in this long (as the master said;
    /// less by now).
    Held {
        /// The key's time to live when the master answered.
        expires_in: Duration,
    },
    /// The key is there with no expiry: not a lock this crate set (its
    /// keys always have a TTL), so it stays until someone deletes it, and
    /// no lock on the resource can be taken on this master meanwhile.
    HeldWithoutExpiry,
    /// No key: the lock is not held on this master.
    Absent,
    /// The master did not answer (down, too slow, refused `PTTL`...).
    Unknown(NodeError),
}

/// What the masters said of a resource's lock ([`Redlock::inspect`]): per
/// master, whether the key is there and for how long; and whether that
/// makes the lock held (the key on a quorum of masters) or free (absent on
/// a quorum). It can be neither for a moment (a lock being taken, released
/// or expiring) or for longer (masters down, keys left on a minority).
///
/// With [`Builder::holder_label`], it also says who holds the lock
/// ([`Inspection::holder_label`]).
///
/// Its `Display` is a one-line summary, such as `held on 3 of 3 masters
/// (quorum 2) for at least 9.41s`, followed by `, holder "web-3"` when a
/// quorum's keys carry that label.
///
/// [`Builder::holder_label`]: crate::Builder::holder_label
///
/// [`Redlock::inspect`]: crate::Redlock::inspect
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    masters: Vec<(String, KeyOnMaster)>,
    /// Per master, in the same order: the holder label its key carries.
    holders: Vec<Option<String>>,
    /// How long the round took: the answers are at most this old.
    elapsed: Duration,
}

impl Inspection {
    /// Per master, in the configured order: its address (`host:port`) and
    /// what it said.
    pub fn masters(&self) -> impl Iterator<Item = (&str, &KeyOnMaster)> + '_ {
        self.masters.iter().map(|(name, key)| (name.as_str(), key))
    }

    /// Who holds the lock, by the label its holder's handle stores with it
    /// ([`Builder::holder_label`](crate::Builder::holder_label)): the
    /// label found on a quorum of masters, where the key is there. `None`
    /// when no label is on a quorum: the lock is free or held without a
    /// label (a handle that sets none, another client), masters disagree
    /// (keys of several holders), or too few of them let the label be
    /// read (an ACL that refuses `GETRANGE`). Per master:
    /// [`Inspection::holder_labels`].
    ///
    /// ```no_run
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// let seen = redlock.inspect("orders:42")?;
    /// if let (true, Some(holder)) = (seen.is_held(), seen.holder_label()) {
    ///     println!("orders:42 is held by {holder}");
    /// }
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn holder_label(&self) -> Option<&str> {
        let labels = || {
            self.masters
                .iter()
                .zip(&self.holders)
                .filter(|((_, key), _)| is_there(key))
                .filter_map(|(_, label)| label.as_deref())
        };
        labels().find(|&label| labels().filter(|&l| l == label).count() >= self.quorum())
    }

    /// Per master, in the configured order: its address and the holder
    /// label its key carries (`None`: no key, a key without a label, or no
    /// answer).
    pub fn holder_labels(&self) -> impl Iterator<Item = (&str, Option<&str>)> + '_ {
        self.masters
            .iter()
            .zip(&self.holders)
            .map(|((name, _), label)| (name.as_str(), label.as_deref()))
    }

    /// Votes that make a lock: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        quorum(self.masters.len())
    }

    /// On how many masters the key is there.
    pub fn held_on(&self) -> usize {
        self.count(is_there)
    }

    /// On how many masters the key is absent.
    pub fn absent_on(&self) -> usize {
        self.count(|k| matches!(k, KeyOnMaster::Absent))
    }

    /// Whether the key is on a quorum of masters: someone holds the lock
    /// (whoever set it), and nobody else can take it until it is released
    /// or expires.
    pub fn is_held(&self) -> bool {
        self.held_on() >= self.quorum()
    }

    /// Whether the key is absent from a quorum of masters: nobody holds
    /// the lock, and an acquisition now could take it.
    pub fn is_free(&self) -> bool {
        self.absent_on() >= self.quorum()
    }

    /// If the lock is held: how long a quorum of masters will still hold
    /// the key at least, if nobody releases or extends it (the quorum-th
    /// longest time to live, less the round's time); `Duration::MAX` if a
    /// quorum holds it without expiry. `None` if it is not held.
    pub fn held_for(&self) -> Option<Duration> {
        let mut left: Vec<Duration> = self
            .masters
            .iter()
            .filter_map(|(_, key)| match key {
                KeyOnMaster::Held { expires_in } => Some(expires_in.saturating_sub(self.elapsed)),
                KeyOnMaster::HeldWithoutExpiry => Some(Duration::MAX),
                _ => None,
            })
            .collect();
        left.sort_unstable_by(|a, b| b.cmp(a));
        left.get(self.quorum().checked_sub(1)?).copied()
    }

    /// How long until the key is absent from a quorum of masters, at most,
    /// if nobody releases, extends or takes it meanwhile: zero if it is
    /// already; `None` if that cannot come by expiry alone (a key without
    /// expiry, or too many masters that did not answer). Measured from the
    /// round's end, the times to live not lessened by its time: no later
    /// than the keys can expire, by the masters' clocks.
    pub(crate) fn free_in(&self) -> Option<Duration> {
        let needed = self.quorum().saturating_sub(self.absent_on());
        if needed == 0 {
            return Some(Duration::ZERO);
        }
        let mut left: Vec<Duration> = self
            .masters
            .iter()
            .filter_map(|(_, key)| match key {
                KeyOnMaster::Held { expires_in } => Some(*expires_in),
                _ => None,
            })
            .collect();
        left.sort_unstable();
        left.get(needed - 1).copied()
    }

    fn count(&self, f: impl Fn(&KeyOnMaster) -> bool) -> usize {
        self.masters.iter().filter(|(_, key)| f(key)).count()
    }
}

/// Whether the key is there (with or without expiry).
fn is_there(key: &KeyOnMaster) -> bool {
    matches!(
        key,
        KeyOnMaster::Held { .. } | KeyOnMaster::HeldWithoutExpiry
    )
}

impl fmt::Display for Inspection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, q) = (self.masters.len(), self.quorum());
        let (held, absent) = (self.held_on(), self.absent_on());
        if let Some(left) = self.held_for() {
            write!(f, "held on {held} of {n} masters (quorum {q}) ")?;
            if left == Duration::MAX {
                f.write_str("without expiry")?;
            } else {
                write!(f, "for at least {:.2}s", left.as_secs_f64())?;
            }
            // Quoted and escaped: a label is the holder's text.
            if let Some(holder) = self.holder_label() {
                write!(f, ", holder {holder:?}")?;
            }
            return Ok(());
        }
        if self.is_free() {
            return write!(f, "free on {absent} of {n} masters (quorum {q})");
        }
        let unknown = n - held - absent;
        write!(
            f,
            "neither held nor free on a quorum ({q} of {n}): held on {held}, absent on \
             {absent}, no answer from {unknown}"
        )
    }
}

/// Looks at `resource`'s key on every master: one round of `PTTL` and the
/// holder label, each master awaited up to the node timeout.
/// `Error::NoQuorum` when fewer than a quorum answered.
pub(crate) fn inspect(shared: &Shared, resource: &[u8]) -> Result<Inspection, Error> {
    Shared::check_resource(resource)?;
    // As `ping`: a fresh look, also at every master that failed lately,
    // each awaited.
    look(shared, resource, Dial::Every, Rule::Everyone, true)
}

/// The round of [`inspect`], for a name already checked, dialling the
/// masters as `dial` says and deciding as `rule` does: `Rule::Everyone`
/// waits for every master (up to the node timeout), `Rule::Extend` only
/// for a quorum of answers (the others are read later and shown as
/// unknown); with `holder`, reading each key's holder label too.
/// `Error::NoQuorum` when fewer than a quorum answered.
pub(crate) fn look(
    shared: &Shared,
    resource: &[u8],
    dial: Dial,
    rule: Rule,
    holder: bool,
) -> Result<Inspection, Error> {
    let mut session = shared.pool.take();
    let start = Instant::now();
    let plan = Plan {
        command: Command::Inspect { resource, holder },
        to: NodeSet::all(shared.voters.len()),
        others: None,
        rule,
        deadline: start + shared.node_timeout,
        dial,
        skip: NodeSet::EMPTY,
        unawaited: false,
    };
    let tally = session.run(shared.masters(), plan);
    let elapsed = start.elapsed();
    let report = session.report(&shared.voters);
    let pttls: Vec<Option<(i64, Option<Label>)>> = session.pttls().collect();
    shared.pool.give_back(session);
    if tally.decision(rule) != Decision::Reached {
        return Err(Error::NoQuorum(report));
    }
    Ok(inspection(&report, &pttls, elapsed))
}

/// What a round of `PTTL` (and `GETRANGE` of the holder label) says of one
/// key: each master's answer (`pttls`, in the voters' order; `None` for a
/// master that did not answer it, as `report` says why) and the labels.
pub(crate) fn inspection(
    report: &NodeReport,
    pttls: &[Option<(i64, Option<Label>)>],
    elapsed: Duration,
) -> Inspection {
    let holders = pttls
        .iter()
        .map(|pttl| {
            pttl.and_then(|(_, label)| label)
                .map(|l| l.as_str().to_string())
        })
        .collect();
    let masters = report
        .iter()
        .zip(pttls.iter().map(|pttl| pttl.map(|(ms, _)| ms)))
        .map(|(status, pttl)| {
            let key = match (pttl, status.outcome()) {
                (Some(-2), _) => KeyOnMaster::Absent,
                (Some(ms), _) if ms < 0 => KeyOnMaster::HeldWithoutExpiry,
                (Some(ms), _) => KeyOnMaster::Held {
                    expires_in: Duration::from_millis(ms.unsigned_abs()),
                },
                (None, NodeOutcome::Failed(e)) => KeyOnMaster::Unknown(e.clone()),
                // Not answered by the deadline (or, deciding at a quorum,
                // not awaited).
                (None, _) => KeyOnMaster::Unknown(NodeError::TimedOut(Phase::Reply)),
            };
            (status.node().to_string(), key)
        })
        .collect();
    Inspection {
        masters,
        holders,
        elapsed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(keys: &[KeyOnMaster]) -> Inspection {
        Inspection {
            masters: keys
                .iter()
                .enumerate()
                .map(|(i, k)| (format!("m{i}:6379"), k.clone()))
                .collect(),
            holders: vec![None; keys.len()],
            elapsed: Duration::from_millis(1),
        }
    }

    /// `seen`, each key with its label.
    fn labelled(keys: &[(KeyOnMaster, Option<&str>)]) -> Inspection {
        let mut s = seen(&keys.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
        s.holders = keys.iter().map(|(_, l)| l.map(String::from)).collect();
        s
    }

    fn held(ms: u64) -> KeyOnMaster {
        KeyOnMaster::Held {
            expires_in: Duration::from_millis(ms),
        }
    }

    #[test]
    fn held_for_is_the_quorum_th_longest_ttl_less_the_round() {
        let s = seen(&[held(9000), held(5000), held(7000)]);
        assert!(s.is_held() && !s.is_free());
        assert_eq!(s.held_for(), Some(Duration::from_millis(6999)));
        assert_eq!(
            s.to_string(),
            "held on 3 of 3 masters (quorum 2) for at least 7.00s"
        );
        let s = seen(&[
            held(9000),
            KeyOnMaster::Absent,
            KeyOnMaster::HeldWithoutExpiry,
        ]);
        assert_eq!(s.held_for(), Some(Duration::from_millis(8999)));
    }

    #[test]
    fn free_in_is_when_a_quorum_has_no_key() {
        assert_eq!(
            seen(&[held(9000), held(5000), held(7000)]).free_in(),
            Some(Duration::from_millis(7000))
        );
        let down = KeyOnMaster::Unknown(NodeError::Refused);
        let s = seen(&[held(9000), KeyOnMaster::Absent, down.clone()]);
        assert_eq!(s.free_in(), Some(Duration::from_millis(9000)));
        let s = seen(&[KeyOnMaster::Absent, KeyOnMaster::Absent, held(1)]);
        assert_eq!(s.free_in(), Some(Duration::ZERO));
        let s = seen(&[held(9000), KeyOnMaster::HeldWithoutExpiry, down]);
        assert_eq!(s.free_in(), None, "no quorum can be free by expiry");
    }

    #[test]
    fn a_minority_neither_holds_nor_frees_the_lock() {
        let down = KeyOnMaster::Unknown(NodeError::Refused);
        let s = seen(&[held(9000), KeyOnMaster::Absent, down]);
        assert!(!s.is_held() && !s.is_free());
        assert_eq!(s.held_for(), None);
        assert_eq!(
            s.to_string(),
            "neither held nor free on a quorum (2 of 3): held on 1, absent on 1, no answer from 1"
        );
        let s = seen(&[KeyOnMaster::Absent, KeyOnMaster::Absent, held(1)]);
        assert!(s.is_free());
        assert_eq!(s.to_string(), "free on 2 of 3 masters (quorum 2)");
    }

    #[test]
    fn the_holder_label_is_the_one_on_a_quorum_of_keys() {
        let s = labelled(&[
            (held(9000), Some("web-3")),
            (held(9000), Some("web-3")),
            (KeyOnMaster::Absent, None),
        ]);
        assert_eq!(s.holder_label(), Some("web-3"));
        assert_eq!(
            s.to_string(),
            "held on 2 of 3 masters (quorum 2) for at least 9.00s, holder \"web-3\""
        );
        let per_master: Vec<_> = s.holder_labels().collect();
        assert_eq!(
            per_master,
            [
                ("m0:6379", Some("web-3")),
                ("m1:6379", Some("web-3")),
                ("m2:6379", None)
            ]
        );
        // Keys of two holders: no label has a quorum.
        let s = labelled(&[
            (held(9000), Some("web-3")),
            (held(9000), Some("web-4")),
            (held(9000), None),
        ]);
        assert!(s.is_held());
        assert_eq!(s.holder_label(), None);
        assert_eq!(
            s.to_string(),
            "held on 3 of 3 masters (quorum 2) for at least 9.00s"
        );
        // A label is shown as text, escaped.
        let s = labelled(&[
            (KeyOnMaster::HeldWithoutExpiry, Some("a \"b\"")),
            (KeyOnMaster::HeldWithoutExpiry, Some("a \"b\"")),
            (KeyOnMaster::Unknown(NodeError::Refused), None),
        ]);
        assert_eq!(
            s.to_string(),
            "held on 2 of 3 masters (quorum 2) without expiry, holder \"a \\\"b\\\"\""
        );
    }
}
