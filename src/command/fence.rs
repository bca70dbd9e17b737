//! What fencing says to a master (docs/fencing.md): its scripts are in
//! `scripts` (compiled in from `src/fence/*.lua`); here, the keys of a
//! fence domain's hashes ([`domain_key`], [`slot_domain_key`]), how the
//! scripts' numeric answers are read ([`Reading`]), and what a
//! connection's probe of the fence domain found ([`FenceCheck`]), which
//! decides whether its acquisitions count.

pub(crate) use super::reply::Reading;
use super::reply::{describe, Vote};
use super::scripts::ScriptId;
use crate::cluster::{tag_for_slot, SLOTS};
use crate::error::{EvictingPolicy, FenceFault, NodeError, ProtocolError, ServerError};
use crate::resp::{Array, Reply, ServerErrorKind};

/// How every fence domain's key starts.
const DOMAIN_PREFIX: &[u8] = b"redlock-sync:fence:";

/// The key of fence domain `name`'s hash on a standalone master:
/// `redlock-sync:fence:<name>` (docs/fencing.md, "Key layout"). Commands
/// carry this key; a cluster voter's is made from it ([`slot_domain_key`]).
pub(crate) fn domain_key(name: &[u8]) -> Vec<u8> {
    [DOMAIN_PREFIX, name].concat()
}

/// Writes into `out` (cleared first) the key of the domain's hash for
/// `slot` of a cluster, `redlock-sync:fence:{TAG}:<name>`, from `domain`
/// (a [`domain_key`]): TAG is the slot's hash tag, so the hash lives in
/// `slot`, beside the lock keys whose counter it is (one script touches
/// both: no `CROSSSLOT`). A voter of the single-cluster mode has one, of
/// its own slot.
pub(crate) fn slot_domain_key(domain: &[u8], slot: u16, out: &mut Vec<u8>) {
    let name = domain.strip_prefix(DOMAIN_PREFIX).unwrap_or(domain);
    // Slots are below 16384 (`key_slot`, the operator's ranges): masked
    // all the same, so that no slot number can make this panic.
    let slot = slot & (SLOTS as u16 - 1);
    let tag = tag_for_slot(slot).expect("a slot below 16384");
    out.clear();
    out.extend_from_slice(DOMAIN_PREFIX);
    out.push(b'{');
    out.extend_from_slice(tag);
    out.extend_from_slice(b"}:");
    out.extend_from_slice(name);
}

/// The resource's half, for a resource kept in Redis (not run by the
/// library: published as [`crate::REFEREE_LUA`]).
pub(crate) const REFEREE: &str = include_str!("../fence/referee.lua");

/// The largest token, counter or epoch: Lua numbers are exact up to here.
pub(crate) const FENCE_LIMIT: u64 = 1 << 53;

/// How the answer of a script that [reads](ScriptId::reads) counts:
/// round 1 (`{2t+1, counter, epoch, domain id, members, member}` granted,
/// `{2t}` held), the
/// probe (`{state, counter, epoch, policy, member, members, domain id}`)
/// and the barrier (the counter).
/// `tag` is 0 for the plain form, whose tag comes back by `ECHO`.
pub(crate) fn judge_reading(id: ScriptId, reply: &Reply<'_>, tag: u64) -> Result<Vote, NodeError> {
    if let Reply::Error(line) = *reply {
        return Ok(Vote::Failed(NodeError::Server(ServerError::from_line(
            line,
        ))));
    }
    let read = match (id, reply) {
        (
            ScriptId::FenceAcquire
            | ScriptId::FenceAcquireTagged
            | ScriptId::FenceAcquireSet
            | ScriptId::FenceAcquireSetTagged,
            Reply::Array(items),
        ) => read_acquire(*items, tag),
        (ScriptId::FenceProbe, Reply::Array(items)) => {
            read_probe(*items).map(|(reading, _)| Vote::Read(reading))
        }
        (ScriptId::FenceBarrier, Reply::Integer(n)) => number(*n, 0).map(|counter| {
            Vote::Read(Reading {
                counter,
                ..Reading::default()
            })
        }),
        _ => None,
    };
    read.ok_or_else(|| NodeError::Protocol(ProtocolError::UnexpectedReply(describe(reply))))
}

/// Round 1's reply: granted with the counter, the epoch and the place the
/// anchor records, or held.
fn read_acquire(items: Array<'_>, tag: u64) -> Option<Vote> {
    let mut it = items.iter();
    let Some(Reply::Integer(status)) = it.next() else {
        return None;
    };
    if status < 0 || (status as u64) >> 1 != tag {
        return None;
    }
    if status & 1 == 0 {
        return (items.len() == 1).then_some(Vote::No);
    }
    if items.len() != 6 {
        return None;
    }
    let counter = integer(it.next()).and_then(|n| number(n, 1))?;
    let epoch = integer(it.next()).and_then(|n| number(n, 1))?;
    let domain_id = integer(it.next()).and_then(|n| number(n, 0))?;
    let members = small(it.next())?;
    let member = small(it.next())?;
    (epoch < FENCE_LIMIT).then_some(Vote::Read(Reading {
        counter,
        epoch,
        state: 1,
        member,
        members,
        domain_id,
    }))
}

/// The probe's reply, and the eviction policy it reported if that one
/// may evict the counter.
fn read_probe(items: Array<'_>) -> Option<(Reading, Option<EvictingPolicy>)> {
    if items.len() != 7 {
        return None;
    }
    let mut it = items.iter();
    let state = integer(it.next()).filter(|s| (0..=5).contains(s))? as u8;
    let counter = integer(it.next()).and_then(|n| number(n, 0))?;
    let epoch = integer(it.next()).and_then(|n| number(n, 0))?;
    let policy = match it.next()? {
        Reply::Bulk(name) => EvictingPolicy::from_name(name),
        _ => return None,
    };
    let member = small(it.next())?;
    let members = small(it.next())?;
    let domain_id = integer(it.next()).and_then(|n| number(n, 0))?;
    let reading = Reading {
        counter,
        epoch,
        state,
        member,
        members,
        domain_id,
    };
    Some((reading, policy))
}

/// A member's place or a number of members: `0..=u32::MAX`.
fn small(reply: Option<Reply<'_>>) -> Option<u32> {
    integer(reply).and_then(|n| u32::try_from(n).ok())
}

fn integer(reply: Option<Reply<'_>>) -> Option<i64> {
    match reply {
        Some(Reply::Integer(n)) => Some(n),
        _ => None,
    }
}

/// `n` if it is in `min..=2^53`.
fn number(n: i64, min: i64) -> Option<u64> {
    (n >= min && n as u64 <= FENCE_LIMIT).then_some(n as u64)
}

/// Which member of which fence domain a master is, as its anchor records
/// (docs/fencing.md, "Members"): the domain's id (drawn by `fence_init`;
/// 0 where not recorded), how many masters it was initialised on, and
/// this master's place among them. Neither changes after `fence_init`
/// (a repair gives a master that lost its anchor the place nobody holds),
/// so a connection's probe tells them for its life; every grant of round 1
/// tells them too, of the very hash it counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Membership {
    pub(crate) domain_id: u64,
    pub(crate) members: u32,
    pub(crate) member: u32,
}

impl Membership {
    /// What `reading` (a probe's, or a grant's) says, if its anchor
    /// records it.
    pub(crate) fn of(reading: &Reading) -> Option<Membership> {
        (reading.domain_id != 0).then_some(Membership {
            domain_id: reading.domain_id,
            members: reading.members,
            member: reading.member,
        })
    }
}

/// What a connection's probe of the fence domain found (docs/fencing.md,
/// "Counter loss"): its round-1 answers count only while it is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceCheck {
    /// Not probed: the handle does not fence.
    Unprobed,
    /// Anchored by the server's current run in its current data set, under
    /// a policy that never evicts the counter; its membership if the
    /// anchor records it, as the last grant told it. On a cluster node,
    /// whose probe names no hash (it serves many slots, each with its own),
    /// the node's part only (`INFO` allowed, no evicting policy): the
    /// scripts check each slot's hash on every call.
    Valid(Option<Membership>),
    /// No anchor when probed. Only `anchor.lua` creates one, recording the
    /// server's current run and data set, which round 1 checks itself: a
    /// grant heard later shows it anchored since, so valid.
    Unanchored,
    /// Anchored, in `epoch`, but not valid when probed (`fault` says why:
    /// restarted, another data set, the earlier format). A repair
    /// re-anchors (or upgrades) it in a fresh epoch: a grant reporting
    /// another epoch shows that, so valid.
    Stale {
        epoch: u64,
        fault: FenceFault,
        membership: Option<Membership>,
    },
    /// Left out of fencing until a new connection probes again.
    Fault(FenceFault),
}

impl FenceCheck {
    /// What the handshake's probe answered.
    pub(crate) fn from_probe(reply: &Reply<'_>) -> FenceCheck {
        let Reply::Array(items) = reply else {
            return FenceCheck::Fault(FenceFault::ProbeFailed);
        };
        match read_probe(*items) {
            None => FenceCheck::Fault(FenceFault::ProbeFailed),
            Some((_, Some(policy))) => FenceCheck::Fault(FenceFault::EvictingPolicy(policy)),
            Some((reading, None)) => {
                let membership = Membership::of(&reading);
                let stale = |fault| FenceCheck::Stale {
                    epoch: reading.epoch,
                    fault,
                    membership,
                };
                match reading.state {
                    1 => FenceCheck::Valid(membership),
                    0 => FenceCheck::Unanchored,
                    2 => stale(FenceFault::Restarted),
                    4 => stale(FenceFault::ReplicationChanged),
                    5 => stale(FenceFault::OldAnchor),
                    _ => FenceCheck::Fault(FenceFault::InfoRefused),
                }
            }
        }
    }

    /// Why the master is left out of fencing, as far as the probe (and
    /// the grants since) tell; `None` while it counts or before a probe.
    pub(crate) fn fault(self) -> Option<FenceFault> {
        match self {
            FenceCheck::Unprobed | FenceCheck::Valid(_) => None,
            FenceCheck::Unanchored => Some(FenceFault::Unanchored),
            FenceCheck::Stale { fault, .. } | FenceCheck::Fault(fault) => Some(fault),
        }
    }

    /// Round 1's `FENCESTALE` (another data set, a replica, or `INFO`
    /// refused: the script cannot tell which) on a connection whose probe
    /// found why the anchor is not valid: that reason, which says more
    /// (restarted, the earlier format, `INFO` refused).
    fn why_stale(self, vote: Vote) -> Vote {
        let stale = matches!(&vote, Vote::Failed(NodeError::Server(e))
            if e.kind() == ServerErrorKind::FenceStale);
        match self {
            FenceCheck::Stale { fault, .. } | FenceCheck::Fault(fault) if stale => {
                Vote::Failed(NodeError::Fence(fault))
            }
            _ => vote,
        }
    }

    /// A round-1 vote as it counts on this connection: a grant from a
    /// master left out of fencing fails (its key is released like any
    /// other the acquisition may have set); a grant that shows the master
    /// anchored since its probe makes the connection valid. A grant's
    /// membership is kept (see [`Membership`]).
    pub(crate) fn screen(&mut self, vote: Vote) -> Vote {
        let Vote::Read(reading) = vote else {
            return self.why_stale(vote);
        };
        let granted = Membership::of(&reading);
        let (fault, membership) = match *self {
            FenceCheck::Valid(known) => {
                if granted.is_some() && granted != known {
                    *self = FenceCheck::Valid(granted);
                }
                return vote;
            }
            FenceCheck::Unanchored => (None, granted),
            FenceCheck::Stale {
                epoch, membership, ..
            } if reading.epoch != epoch => (None, granted.or(membership)),
            FenceCheck::Stale { fault, .. } | FenceCheck::Fault(fault) => (Some(fault), None),
            FenceCheck::Unprobed => (Some(FenceFault::ProbeFailed), None),
        };
        match fault {
            None => {
                *self = FenceCheck::Valid(membership);
                vote
            }
            Some(fault) => Vote::Failed(NodeError::Fence(fault)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn judged(id: ScriptId, bytes: &[u8], tag: u64) -> Result<Vote, NodeError> {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("test reply does not decode")
        };
        judge_reading(id, &reply, tag)
    }

    fn probe(bytes: &[u8]) -> FenceCheck {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("test reply does not decode")
        };
        FenceCheck::from_probe(&reply)
    }

    #[test]
    fn round_one_reads_the_counter_epoch_and_place_of_a_grant_with_its_tag() {
        let granted = judged(
            ScriptId::FenceAcquireTagged,
            b"*6\r\n:15\r\n:42\r\n:9\r\n:77\r\n:3\r\n:2\r\n",
            7,
        );
        assert!(matches!(
            granted,
            Ok(Vote::Read(Reading {
                counter: 42,
                epoch: 9,
                state: 1,
                domain_id: 77,
                members: 3,
                member: 2,
            }))
        ));
        let held = judged(ScriptId::FenceAcquire, b"*1\r\n:0\r\n", 0);
        assert!(matches!(held, Ok(Vote::No)));
        let error = judged(ScriptId::FenceAcquire, b"-NOANCHOR no anchor\r\n", 0);
        assert!(matches!(error, Ok(Vote::Failed(NodeError::Server(_)))));
    }

    #[test]
    fn a_reply_that_cannot_answer_round_one_is_a_protocol_error() {
        let place = ":77\r\n:3\r\n:2\r\n";
        let granted = |head: &str| format!("*6\r\n{head}{place}").into_bytes();
        for (bytes, tag) in [
            (granted(":15\r\n:42\r\n:9\r\n"), 6), // another command's tag
            (b"*3\r\n:1\r\n:42\r\n:9\r\n".to_vec(), 0), // the earlier shape
            (
                b"*7\r\n:1\r\n:42\r\n:9\r\n:77\r\n:3\r\n:2\r\n:1\r\n".to_vec(),
                0,
            ), // too long
            (b"*2\r\n:0\r\n:42\r\n".to_vec(), 0), // held, too long
            (granted(":1\r\n:0\r\n:9\r\n"), 0),   // a counter of 0
            (granted(":1\r\n:9007199254740993\r\n:9\r\n"), 0), // past 2^53
            (granted(":1\r\n:5\r\n:9007199254740992\r\n"), 0), // epoch at 2^53
            (b"*6\r\n:1\r\n:5\r\n:9\r\n:-1\r\n:3\r\n:2\r\n".to_vec(), 0), // a domain id below 0
            (
                b"*6\r\n:1\r\n:5\r\n:9\r\n:77\r\n:4294967296\r\n:2\r\n".to_vec(),
                0,
            ), // members past u32
            (b":1\r\n".to_vec(), 0),              // not an array
        ] {
            let judged = judged(ScriptId::FenceAcquire, &bytes, tag);
            assert!(
                matches!(judged, Err(NodeError::Protocol(_))),
                "{:?}: {judged:?}",
                bytes.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn a_cluster_voters_domain_key_puts_the_hash_in_the_slot_asked_for() {
        use crate::cluster::key_slot;
        let domain = domain_key(b"payments");
        assert_eq!(domain, b"redlock-sync:fence:payments");
        let mut out = b"left over".to_vec();
        for slot in [0, 1, 5461, 12182, 16383] {
            slot_domain_key(&domain, slot, &mut out);
            assert_eq!(key_slot(&out), slot, "{}", out.escape_ascii());
            let tag = tag_for_slot(slot).unwrap();
            let expected = [&b"redlock-sync:fence:{"[..], tag, b"}:payments"].concat();
            assert_eq!(out, expected);
        }
        // A domain named with braces of its own stays in the tag's slot.
        slot_domain_key(&domain_key(b"{x}"), 7, &mut out);
        assert_eq!(key_slot(&out), 7);
    }

    /// A probe's reply with `state` and `policy`, counter 5, epoch 9, and
    /// member 2 of 3 in domain 77.
    fn probe_reply(state: u8, policy: &str) -> Vec<u8> {
        let head = format!(
            "*7\r\n:{state}\r\n:5\r\n:9\r\n${}\r\n{policy}\r\n",
            policy.len()
        );
        [head.as_bytes(), b":2\r\n:3\r\n:77\r\n"].concat()
    }

    #[test]
    fn the_probe_says_whether_grants_count_and_an_allkeys_policy_leaves_the_master_out() {
        let membership = Some(Membership {
            domain_id: 77,
            members: 3,
            member: 2,
        });
        assert_eq!(
            probe(&probe_reply(1, "noeviction")),
            FenceCheck::Valid(membership)
        );
        assert_eq!(
            probe(b"*7\r\n:0\r\n:0\r\n:0\r\n$10\r\nnoeviction\r\n:0\r\n:0\r\n:0\r\n"),
            FenceCheck::Unanchored
        );
        for (state, fault) in [
            (2, FenceFault::Restarted),
            (4, FenceFault::ReplicationChanged),
            (5, FenceFault::OldAnchor),
        ] {
            assert_eq!(
                probe(&probe_reply(state, "")),
                FenceCheck::Stale {
                    epoch: 9,
                    fault,
                    membership
                }
            );
        }
        assert_eq!(
            probe(&probe_reply(3, "")),
            FenceCheck::Fault(FenceFault::InfoRefused)
        );
        assert_eq!(
            probe(&probe_reply(1, "allkeys-lru")),
            FenceCheck::Fault(FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLru))
        );
        for bad in [
            &b"-NOPERM no\r\n"[..],
            &probe_reply(6, ""),                   // no such state
            b"*4\r\n:1\r\n:5\r\n:9\r\n$0\r\n\r\n", // the earlier shape
        ] {
            assert_eq!(probe(bad), FenceCheck::Fault(FenceFault::ProbeFailed));
        }
    }

    #[test]
    fn a_grant_counts_only_on_a_valid_connection_or_one_anchored_since_its_probe() {
        let grant = |epoch| {
            Vote::Read(Reading {
                counter: 3,
                epoch,
                state: 1,
                member: 1,
                ..Reading::default()
            })
        };
        let membership = Some(Membership {
            domain_id: 77,
            members: 3,
            member: 1,
        });
        let mut check = FenceCheck::Stale {
            epoch: 9,
            fault: FenceFault::ReplicationChanged,
            membership,
        };
        assert!(matches!(
            check.screen(grant(9)),
            Vote::Failed(NodeError::Fence(FenceFault::ReplicationChanged))
        ));
        assert!(matches!(check.screen(grant(4)), Vote::Read(_)), "repaired");
        assert_eq!(check, FenceCheck::Valid(membership));
        let mut check = FenceCheck::Unanchored;
        assert!(matches!(check.screen(grant(4)), Vote::Read(_)));
        assert_eq!(check, FenceCheck::Valid(None));
        let mut check = FenceCheck::Fault(FenceFault::InfoRefused);
        assert!(matches!(check.screen(grant(4)), Vote::Failed(_)));
        assert!(matches!(check.screen(Vote::No), Vote::No));
        // Round 1's FENCESTALE says less than the probe did.
        let stale = || {
            Vote::Failed(NodeError::Server(ServerError::from_line(
                b"FENCESTALE fence anchor is not of this data set",
            )))
        };
        let mut old = FenceCheck::Stale {
            epoch: 9,
            fault: FenceFault::OldAnchor,
            membership: None,
        };
        assert!(matches!(
            old.screen(stale()),
            Vote::Failed(NodeError::Fence(FenceFault::OldAnchor))
        ));
        let mut valid = FenceCheck::Valid(membership);
        assert!(matches!(
            valid.screen(stale()),
            Vote::Failed(NodeError::Server(_))
        ));
    }

    #[test]
    fn a_grant_tells_the_membership_of_the_hash_it_counted() {
        let grant = |domain_id, member| {
            Vote::Read(Reading {
                counter: 3,
                epoch: 4,
                state: 1,
                domain_id,
                members: 3,
                member,
            })
        };
        let place = |member| {
            Some(Membership {
                domain_id: 77,
                members: 3,
                member,
            })
        };
        // A cluster node's probe names no hash: its grants tell.
        let mut node = FenceCheck::Valid(None);
        assert!(matches!(node.screen(grant(77, 2)), Vote::Read(_)));
        assert_eq!(node, FenceCheck::Valid(place(2)));
        let mut check = FenceCheck::Unanchored;
        check.screen(grant(77, 1));
        assert_eq!(check, FenceCheck::Valid(place(1)));
        let mut check = FenceCheck::Stale {
            epoch: 9,
            fault: FenceFault::Restarted,
            membership: place(1),
        };
        check.screen(grant(0, 0));
        assert_eq!(check, FenceCheck::Valid(place(1)), "none told: kept");
    }

    #[test]
    fn a_cluster_nodes_probe_names_no_hash_and_tells_the_node_only() {
        // probe.lua without a key: state 1 (or 3: INFO refused), the policy.
        assert_eq!(
            probe(b"*7\r\n:1\r\n:0\r\n:0\r\n$10\r\nnoeviction\r\n:0\r\n:0\r\n:0\r\n"),
            FenceCheck::Valid(None)
        );
        assert_eq!(
            probe(b"*7\r\n:1\r\n:0\r\n:0\r\n$11\r\nallkeys-lfu\r\n:0\r\n:0\r\n:0\r\n"),
            FenceCheck::Fault(FenceFault::EvictingPolicy(EvictingPolicy::AllkeysLfu))
        );
        assert_eq!(
            probe(b"*7\r\n:3\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n"),
            FenceCheck::Fault(FenceFault::InfoRefused)
        );
    }
}
