//! The operator's repair of a fence domain (docs/fencing.md, section 8):
//! re-anchors the hashes that lost their state (or restarted, rolled back,
//! moved to another node of a cluster, since they were anchored) from a
//! quorum of hashes that kept it, behind a barrier.
//!
//! Hash by hash, it is the repair of section 8: on a handle without a
//! cluster voter, exactly that; with one, each slot's column (the cluster
//! voters' hashes of that slot and the one-hash voters' hashes, see
//! `hashes`) is repaired as the masters' hashes are, in one fresh epoch
//! for all: a column's targets are anchored with the largest counter its
//! sources read at the barrier, if a quorum of them passed it; a one-hash
//! voter's hash, which is in every column, only if every column has such a
//! quorum, with the largest of all.

use super::hashes::{self, Answer, Grid, Step};
use super::members;
use super::operator::{domain, fault_of, found, fresh, left_out, probe, End, Outcomes};
use crate::command::fence::Reading;
use crate::command::Command;
use crate::error::{ConfigError, Error, FenceFault, NodeReport};
use crate::handle::Shared;
use crate::quorum::{quorum, NodeSet};
use crate::round::Session;

/// Re-anchors every hash whose domain has no anchor or one that is not
/// valid (anchored before a restart or a change of its data set), from the
/// hashes still validly anchored (the sources): moves the sources to a
/// fresh epoch (the barrier), reading their counters in the same step,
/// then anchors the others with the largest of their column. With nothing
/// to re-anchor, it only moves the reachable hashes to a fresh epoch. An
/// anchor of the earlier format (anchored by the current run, but without
/// the data set recorded) is a source, upgraded by the barrier.
///
/// Fails with `Error::NoQuorum` if fewer than a quorum of sources pass the
/// barrier (in every column: nothing is anchored then; in some, their
/// targets stay left out), and with a configuration error if the anchors
/// show that the handle does not name the domain's members. The report
/// says where each master ended: agreed (in the fresh epoch: a source past
/// the barrier, or a master re-anchored), failed with the [`FenceFault`]
/// that leaves it out (no anchor, restarted, another data set, ...; a
/// cluster voter: in how many slots), or with the error of the step it
/// failed.
pub(crate) fn repair(shared: &Shared) -> Result<NodeReport, Error> {
    let domain = domain(shared)?;
    let mut session = shared.pool.take();
    let result = repair_on(shared, &mut session, domain);
    shared.pool.give_back(session);
    result
}

/// What a hash is to the repair, as the probe found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Validly anchored (or in the earlier format): passes the barrier.
    Source,
    /// To be anchored, being left out for this fault.
    Target(FenceFault),
    /// Neither: `INFO` refused, or no answer.
    Out,
}

fn repair_on(shared: &Shared, session: &mut Session, domain: &[u8]) -> Result<NodeReport, Error> {
    let grid = Grid::of(shared);
    let named = grid.voters();
    let probed = probe(shared, session, &grid, domain);
    let mut report = Outcomes::of(shared, &probed);
    let mut roles: Vec<Vec<Role>> = Vec::with_capacity(named);
    let mut ends: Vec<Vec<End>> = Vec::with_capacity(named);
    for i in 0..named {
        let (role, end): (Vec<Role>, Vec<End>) = probed
            .answers(i)
            .iter()
            .map(|answer| match answer {
                Answer::Yes(r) => match r.state {
                    1 | 5 => (Role::Source, End::Unknown),
                    0 | 2 | 4 => (
                        Role::Target(fault_of(r.state)),
                        End::LeftOut(fault_of(r.state)),
                    ),
                    // INFO refused: neither counts nor can be anchored.
                    _ => (Role::Out, End::LeftOut(FenceFault::InfoRefused)),
                },
                _ => (Role::Out, End::Unknown),
            })
            .unzip();
        if let (false, Some(End::LeftOut(fault))) = (grid.per_slot(i), end.first()) {
            report.set(i, left_out(*fault));
        }
        roles.push(role);
        ends.push(end);
    }
    let place = match place(shared, &grid, &probed)? {
        Some(place) => place,
        None => (fresh()?, named as u32), // the earlier format: upgraded now
    };
    let members = assign(&grid, &probed, &roles, place.1);
    let epoch = fresh()?;
    // The barrier: sources with a member in one round (a batch per chunk
    // of slots on a cluster voter); those of the earlier format each given
    // theirs, where it can be told.
    let recorded = |i: usize, hash: usize| match probed.answer(i, hash) {
        Answer::Yes(r) => r.domain_id != 0,
        _ => false,
    };
    let barrier = hashes::run(shared, session, &grid, |i, slot| {
        let hash = grid.hash(i, usize::from(slot));
        let member = match recorded(i, hash) {
            true => 0,
            false => members[i],
        };
        (roles[i][hash] == Role::Source && (member != 0 || recorded(i, hash))).then_some(
            Command::FenceBarrier {
                domain,
                slot,
                epoch,
                place,
                member,
            },
        )
    });
    // An anchor of the earlier format whose member cannot be told now (a
    // master did not answer) is left out.
    let mut dropped = false;
    for i in 0..named {
        report.take(i, &barrier);
        for (hash, answer) in barrier.answers(i).iter().enumerate() {
            ends[i][hash] = match (roles[i][hash], answer) {
                (_, Answer::Yes(_)) => End::Counts,
                (Role::Source, Answer::NotAsked) => {
                    dropped = true;
                    if !grid.per_slot(i) {
                        report.set(i, left_out(FenceFault::OldAnchor));
                    }
                    End::LeftOut(FenceFault::OldAnchor)
                }
                (Role::Source, Answer::Failed(Some(fault))) => End::LeftOut(*fault),
                (Role::Source, _) => End::Unknown,
                _ => ends[i][hash],
            };
        }
    }
    // Each column's counter, if a quorum of its sources passed.
    let needed = quorum(named);
    let counters: Vec<Option<u64>> = (0..grid.columns())
        .map(|column| {
            let read = (0..named).filter_map(|i| match barrier.answer(i, grid.hash(i, column)) {
                Answer::Yes(r) => Some(r.counter),
                _ => None,
            });
            let (count, max) = read.fold((0, 0), |(n, max), c| (n + 1, c.max(max)));
            (count >= needed).then_some(max)
        })
        .collect();
    if counters.iter().all(Option::is_none) {
        return Err(Error::NoQuorum(report.done()));
    }
    // A one-hash voter's hash is in every column: anchored from all.
    let everywhere = counters.iter().try_fold(0, |max, c| c.map(|c| c.max(max)));
    let anchors = hashes::run(shared, session, &grid, |i, slot| {
        let hash = grid.hash(i, usize::from(slot));
        let counter = match grid.per_slot(i) {
            true => counters[usize::from(slot)],
            false => everywhere,
        };
        let anchorable = matches!(roles[i][hash], Role::Target(_)) && members[i] != 0;
        counter
            .filter(|_| anchorable)
            .map(|counter| Command::FenceAnchor {
                domain,
                slot,
                counter,
                epoch,
                place,
                member: members[i],
            })
    });
    let mut all = !dropped;
    for i in 0..named {
        report.take(i, &anchors);
        for (hash, answer) in anchors.answers(i).iter().enumerate() {
            match answer {
                Answer::Yes(_) => ends[i][hash] = End::Counts,
                Answer::Failed(Some(fault)) => ends[i][hash] = End::LeftOut(*fault),
                Answer::Failed(None) => ends[i][hash] = End::Unknown,
                _ => {}
            }
            all &= !matches!(roles[i][hash], Role::Target(_)) || ends[i][hash] == End::Counts;
        }
        found(shared, &grid, i, &ends[i]);
        if grid.per_slot(i) {
            let failure = [&probed, &barrier, &anchors]
                .into_iter()
                .find_map(|step| step.failure(i));
            report.ended(i, &ends[i], failure);
        }
    }
    if !all {
        return Err(Error::NoQuorum(report.done()));
    }
    Ok(report.done())
}

/// The domain's id and how many members, as the anchors that answered the
/// probe record it (`None` if none does); a configuration error if, in
/// some column, they do not name one domain of as many masters as the
/// handle names, each master once (see `members::place`), or if two
/// columns name different domains.
fn place(shared: &Shared, grid: &Grid, probed: &Step) -> Result<Option<(u64, u32)>, Error> {
    let named = grid.voters();
    let mut readings = vec![Reading::default(); named];
    let mut first: Option<((u64, u32), usize)> = None;
    for column in 0..grid.columns() {
        let mut answered = NodeSet::EMPTY;
        for (i, reading) in readings.iter_mut().enumerate() {
            *reading = match probed.answer(i, grid.hash(i, column)) {
                Answer::Yes(r) => {
                    answered.insert(i);
                    r
                }
                _ => Reading::default(),
            };
        }
        let Some(place) = members::place(shared, &readings, answered)? else {
            continue;
        };
        let by = (0..named)
            .find(|&i| readings[i].domain_id == place.0)
            .unwrap_or(0);
        match first {
            None => first = Some((place, by)),
            Some((seen, _)) if seen == place => {}
            Some((_, before)) => {
                return Err(Error::Config(ConfigError::FenceMastersDiffer {
                    first: shared.voters[before].name().to_string(),
                    second: shared.voters[by].name().to_string(),
                }))
            }
        }
    }
    Ok(first.map(|(place, _)| place))
}

/// Each voter's member (0 where none can be told; see `members::assign`),
/// from what its hashes record: a cluster voter's hashes all hold its one.
fn assign(grid: &Grid, probed: &Step, roles: &[Vec<Role>], members: u32) -> Vec<u32> {
    let named = grid.voters();
    let mut readings = vec![Reading::default(); named];
    let (mut answered, mut placed) = (NodeSet::EMPTY, NodeSet::EMPTY);
    for i in 0..named {
        for (hash, answer) in probed.answers(i).iter().enumerate() {
            let Answer::Yes(r) = answer else { continue };
            if !answered.contains(i) || readings[i].domain_id == 0 && r.domain_id != 0 {
                readings[i] = *r;
            }
            answered.insert(i);
            if roles[i][hash] != Role::Out {
                placed.insert(i);
            }
        }
    }
    members::assign(&readings, answered, placed, members)
}
