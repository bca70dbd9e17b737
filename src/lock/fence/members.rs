//! Whether a fenced handle names the masters its fence domain was
//! initialised on (docs/fencing.md, "Members"). Tokens are unique only if
//! any two quorums share a master (assumption A2): two clients of one
//! domain that name different sets of masters may each find a quorum, and
//! count the same token. So each anchor records the domain's id (drawn by
//! `fence_init`), how many masters it was initialised on, and which of
//! them it is; a handle refuses, with a configuration error, masters that
//! are not all members of one domain, or as many as it names, or one
//! member under two names.
//!
//! The repair reads the same from its probe of every master ([`place`]),
//! and gives a master without an anchor the member nobody holds
//! ([`assign`]).
//!
//! What the last round's grants told (each grant carries the membership
//! of the hash it counted: on a cluster voter, that of the resource's
//! slot) is checked: a master that is not a member never counts
//! unchecked, as only grants count. A master that did not grant in the
//! round is not judged by what an earlier probe of its connection found:
//! that may predate a `fence_init` or `fence_repair` (of this handle or
//! another process), and a configuration error is final, so it is judged
//! by its next grant.

use crate::command::fence::{Membership, Reading};
use crate::error::{ConfigError, Error};
use crate::handle::Shared;
use crate::quorum::NodeSet;
use crate::round::Session;

/// The configuration error if the masters this handle names are not the
/// members of one fence domain, as the last round's grants found them;
/// `None` when nothing they told says so.
pub(crate) fn misnamed(shared: &Shared, session: &Session) -> Option<Error> {
    let named = shared.voters.len();
    let name = |i: usize| shared.voters[i].name().to_string();
    let known = |i: usize| Membership::of(&session.reading(i));
    for i in 0..named {
        let Some(this) = known(i) else {
            continue;
        };
        if this.members as usize != named {
            return Some(Error::Config(ConfigError::FenceMasterCount {
                configured: named,
                initialised: this.members as usize,
            }));
        }
        for j in 0..i {
            let Some(that) = known(j) else {
                continue;
            };
            // Named only for an error: this runs on every fenced
            // acquisition, which allocates nothing.
            if that.domain_id != this.domain_id {
                return Some(Error::Config(ConfigError::FenceMastersDiffer {
                    first: name(j),
                    second: name(i),
                }));
            }
            if that.member == this.member {
                return Some(Error::Config(ConfigError::FenceMasterTwice {
                    first: name(j),
                    second: name(i),
                }));
            }
        }
    }
    None
}

/// The domain's id and how many members, as the anchors of the masters
/// that `answered` record it (`None` if none does: every anchor is of
/// the earlier format, or there is none); a configuration error if
/// they do not name one domain of as many masters as the handle names,
/// each master once.
pub(crate) fn place(
    shared: &Shared,
    readings: &[Reading],
    answered: NodeSet,
) -> Result<Option<(u64, u32)>, Error> {
    let named = shared.voters.len();
    let name = |i: usize| shared.voters[i].name().to_string();
    let mut first: Option<(usize, Membership)> = None;
    for i in answered.iter() {
        let Some(this) = Membership::of(&readings[i]) else {
            continue;
        };
        if this.members as usize != named {
            return Err(Error::Config(ConfigError::FenceMasterCount {
                configured: named,
                initialised: this.members as usize,
            }));
        }
        if let Some((j, that)) = first {
            if that.domain_id != this.domain_id {
                return Err(Error::Config(ConfigError::FenceMastersDiffer {
                    first: name(j),
                    second: name(i),
                }));
            }
        } else {
            first = Some((i, this));
        }
        let twin = answered.iter().find(|&j| {
            j < i && Membership::of(&readings[j]).is_some_and(|m| m.member == this.member)
        });
        if let Some(j) = twin {
            return Err(Error::Config(ConfigError::FenceMasterTwice {
                first: name(j),
                second: name(i),
            }));
        }
    }
    Ok(first.map(|(_, m)| (m.domain_id, m.members)))
}

/// Each master's member (0 where none can be told): its own if the
/// anchor of a master that `answered` records one; for the masters of
/// `placed` that have none, the members nobody holds, in the order the
/// handle names them, if there are exactly as many of those as masters
/// without one (a master that did not answer may hold one: which are
/// free cannot be told then).
pub(crate) fn assign(
    readings: &[Reading],
    answered: NodeSet,
    placed: NodeSet,
    members: u32,
) -> Vec<u32> {
    let recorded = |i: usize| answered.contains(i) && readings[i].domain_id != 0;
    let mut assigned: Vec<u32> = (0..readings.len())
        .map(|i| if recorded(i) { readings[i].member } else { 0 })
        .collect();
    let free: Vec<u32> = (1..=members).filter(|m| !assigned.contains(m)).collect();
    let unplaced: Vec<usize> = placed.iter().filter(|&i| assigned[i] == 0).collect();
    if free.len() == unplaced.len() {
        for (i, member) in unplaced.into_iter().zip(free) {
            assigned[i] = member;
        }
    }
    assigned
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe's reading: member `member` of 3 in domain 7 (0: none recorded).
    fn anchored(member: u32) -> Reading {
        Reading {
            state: 1,
            member,
            members: 3,
            domain_id: if member == 0 { 0 } else { 7 },
            ..Reading::default()
        }
    }

    fn set(is: &[usize]) -> NodeSet {
        let mut s = NodeSet::EMPTY;
        for &i in is {
            s.insert(i);
        }
        s
    }

    #[test]
    fn a_master_without_a_member_gets_the_one_nobody_holds() {
        let readings = [anchored(1), anchored(0), anchored(3)];
        let all = set(&[0, 1, 2]);
        assert_eq!(assign(&readings, all, all, 3), [1, 2, 3]);
        // An upgrade: none recorded, all answered: in the handle's order.
        let old = [anchored(0), anchored(0), anchored(0)];
        assert_eq!(assign(&old, all, all, 3), [1, 2, 3]);
    }

    #[test]
    fn which_member_is_free_cannot_be_told_while_a_master_does_not_answer() {
        // Master 2 did not answer: it may hold 2 or 3.
        let readings = [anchored(1), anchored(0), Reading::default()];
        let answered = set(&[0, 1]);
        assert_eq!(assign(&readings, answered, answered, 3), [1, 0, 0]);
    }
}
