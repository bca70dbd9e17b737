//! The leader's cycle: the one waiting thread that reads the subscriber
//! connections (see the parent module) brings them in line with the
//! channels wanted, waits for any of them, takes in what they said, and
//! tells the hook of the masters that newly refused release notices.

use super::sharded::VoterSubs;
use super::subscriber::Event;
use super::{Notices, State};
use crate::events::{MasterChange, MasterEvent};
use crate::os::PollSet;
use crate::round::Voter;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::MutexGuard;
use std::time::Instant;

impl Notices {
    /// One cycle as the leader, with `subs` taken out of the state and
    /// its lock let go: reads the subscriber connections (see [`lead`]),
    /// takes in what they said, and puts them back for the next leader.
    /// Then tells the hook which masters newly refused release notices,
    /// with the lock let go again (a hook may read `health`, which takes
    /// it). Returns the state, locked.
    pub(super) fn lead_once(
        &self,
        voters: &[Voter],
        mut subs: Vec<VoterSubs>,
        wanted: &[Vec<u8>],
        until: Instant,
    ) -> MutexGuard<'_, State> {
        let events = lead(self, voters, &mut subs, wanted, until);
        let mut state = self.state();
        let refused = state.apply(events, Instant::now());
        state.subscribers = Some(subs);
        state.hand_over();
        if refused.is_empty() {
            return state;
        }
        drop(state);
        for (master, error) in &refused {
            if let Some(voter) = voters.get(*master) {
                self.hook.master(MasterEvent {
                    index: *master,
                    node: voter.name(),
                    change: MasterChange::NoticesRefused(error),
                });
            }
        }
        self.state()
    }
}

/// One cycle of the leader: brings the connections in line with `wanted`,
/// waits (until `until`, or a retry is due) for any of them or the wake
/// pipe, and returns what they said.
fn lead(
    notices: &Notices,
    voters: &[Voter],
    subs: &mut [VoterSubs],
    wanted: &[Vec<u8>],
    until: Instant,
) -> Vec<(usize, Event)> {
    let now = Instant::now();
    let wanted: Vec<&[u8]> = wanted.iter().map(Vec::as_slice).collect();
    for (sub, voter) in subs.iter_mut().zip(voters) {
        sub.maintain(voter, &wanted, now);
    }
    let mut poll = PollSet::default();
    let wake_slot = poll.add(notices.wake_read.as_raw_fd(), true, false);
    // By poll slot (after the wake pipe's): the voter, and its connection.
    let mut polled = Vec::with_capacity(subs.len());
    for (i, sub) in subs.iter().enumerate() {
        sub.interests(&mut |j, fd, read, write| {
            poll.add(fd, read, write);
            polled.push((i, j));
        });
    }
    let wake_at = subs
        .iter()
        .filter_map(|sub| sub.wake_at(now))
        .fold(until, Instant::min);
    let mut events = Vec::new();
    if poll.wait(wake_at.saturating_duration_since(now)).is_err() {
        return events;
    }
    if poll.ready(wake_slot).readable {
        let mut drain = [0u8; 64];
        while matches!((&notices.wake_read).read(&mut drain), Ok(n) if n > 0) {}
    }
    let now = Instant::now();
    for (slot, &(i, j)) in polled.iter().enumerate() {
        let ready = poll.ready(slot + 1);
        if ready.readable || ready.writable {
            let ready = (ready.writable, ready.readable);
            subs[i].service(j, &voters[i], ready, now, &mut |event| {
                events.push((i, event))
            });
        }
    }
    events
}
