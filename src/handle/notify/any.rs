//! Waiting on several channels at once, for a waiter of a set of
//! resources: it sleeps until any of its channels changes, woken through a
//! condition variable of its own that each of those channels wakes too
//! (`Channel::also_wake`), and reads the subscriber connections itself
//! whenever no other thread does.

use super::{Channel, Interest};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, PoisonError};
use std::time::Instant;

/// Waits until `any` holds for one of the channels of `interests` (asked
/// with the interest's index, after every change to any of them) or
/// `until`. Ends at once when the handle is shut down.
pub(crate) fn wait_any(
    interests: &[Interest<'_>],
    until: Instant,
    mut any: impl FnMut(usize, &mut Channel) -> bool,
) {
    let Some(first) = interests.first() else {
        return;
    };
    let (notices, voters) = (first.notices, first.voters);
    let mine = Arc::new(Condvar::new());
    let mut state = notices.state();
    loop {
        if notices.interrupted.load(Ordering::Acquire) {
            return;
        }
        let hit = interests.iter().enumerate().any(|(i, interest)| {
            state
                .channels
                .get_mut(&interest.resource)
                .is_some_and(|channel| any(i, channel))
        });
        let now = Instant::now();
        if hit || now >= until {
            return;
        }
        if let Some(subs) = state.subscribers.take() {
            let wanted = state.wanted(now);
            drop(state);
            state = notices.lead_once(voters, subs, &wanted, until);
            continue;
        }
        for interest in interests {
            if let Some(channel) = state.channels.get_mut(&interest.resource) {
                channel.sleepers += 1;
                channel.also_wake.push(Arc::clone(&mine));
            }
        }
        state = mine
            .wait_timeout(state, until - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        for interest in interests {
            if let Some(channel) = state.channels.get_mut(&interest.resource) {
                channel.sleepers -= 1;
                channel.also_wake.retain(|other| !Arc::ptr_eq(other, &mine));
            }
        }
    }
}
