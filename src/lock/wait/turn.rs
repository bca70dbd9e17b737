//! Whose turn it is: after a release, which waiter tries (the first in
//! the queue, or everyone after a grace period, or one thread per handle
//! without a queue), decided from the channel's state alone. No I/O and no
//! sleep here: the waiter (see `waiter`) acts on the answer.

use crate::handle::notify::message::{Id, ID_LEN};
use crate::handle::notify::{Channel, Heard};
use std::time::{Duration, Instant};

/// How long a waiter of one resource lets a set waiter's held turn keep it
/// from trying, in a row: the set waiter holds nothing meanwhile, and the
/// one held back may hold what it waits for (a caller of `b` asking for
/// `a` inside its lock of `b`, while the set waiter of `{a, b}` heads
/// `a`'s queue), or the `s` may be forged. A set waiter gets to the head
/// of its other resources' queues well within this on a live line, so the
/// turn still keeps a steady stream from starving it.
const HELD_BACK_AT_MOST: Duration = Duration::from_secs(1);

/// What a waiter had seen of its channel when it last tried.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub(super) releases: u64,
    pub(super) real_releases: u64,
    taken: u64,
    /// Who had run the latest release.
    pub(super) heard: Heard,
    /// Whether a quorum of masters had confirmed the subscription.
    settled: bool,
}

impl Seen {
    pub(super) const NOTHING: Seen = Seen {
        releases: 0,
        real_releases: 0,
        taken: 0,
        heard: Heard::NOTHING,
        settled: false,
    };

    pub(super) fn of(c: &Channel) -> Seen {
        Seen {
            releases: c.releases,
            real_releases: c.real_releases,
            taken: c.taken,
            heard: c.latest_heard(),
            settled: c.subscribed_by_quorum(),
        }
    }
}

/// What ended a wait for a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Woke {
    /// A release was heard and it is our turn; `real`: it was heard from a
    /// quorum of the masters.
    Release { real: bool },
    /// A quorum of masters confirmed the subscription after the last try
    /// began: a release before may have gone unheard.
    Settled,
    /// Nothing happened for a while (see `queue_up_if_others_wait`).
    Idle,
    /// The pause ran out.
    Clock,
}

/// A waiter's place in the queue, and what the rules of its last failed
/// try say about the next one.
#[derive(Debug)]
pub(super) struct Place {
    /// Our id in the queue, made when first needed.
    pub(super) id: Id,
    /// Whether our `w` message was sent (and not withdrawn).
    pub(super) announced: bool,
    /// Whether we saw ourselves in the queue since announcing.
    pub(super) listed: bool,
    /// When a release heard from a minority may start a try again (the
    /// rate limit after fruitless tries).
    pub(super) minority_not_before: Option<Instant>,
    /// The last try found the lock held on a master not yet heard to run
    /// the latest release: it may have lagged, so that master's notice
    /// (or a short pause) starts another try.
    pub(super) recheck: bool,
    /// How long the waiters behind the first wait for it to take the lock
    /// after a release before they try themselves.
    pub(super) grace: Duration,
    /// Whether this waiter takes turns (`Builder::fair_waiting`): if not,
    /// it ignores the queue, as when nobody queues.
    pub(super) fair: bool,
    /// Since when a set waiter's held turn has kept this waiter from
    /// trying, without a try since (see [`HELD_BACK_AT_MOST`]).
    held_back_since: Option<Instant>,
}

impl Place {
    /// A place not yet in any queue, for a handle whose node timeout is
    /// `node_timeout`; `fair`: whether it takes turns at all.
    pub(super) fn new(node_timeout: Duration, fair: bool) -> Place {
        Place {
            id: [0; ID_LEN],
            announced: false,
            listed: false,
            minority_not_before: None,
            held_back_since: None,
            recheck: false,
            grace: (node_timeout / 10).max(Duration::from_millis(1)),
            fair,
        }
    }

    /// Keeps track of our place in the queue; returns whether to announce
    /// ourselves (again): the queue became audible, or we were passed over
    /// (a waiter behind us took the lock while we were slow).
    pub(super) fn keep(&mut self, c: &Channel) -> bool {
        if !self.fair || !c.queue_heard() {
            return false;
        }
        if !self.announced {
            return true;
        }
        match c.position(&self.id) {
            Some(_) => self.listed = true,
            None if self.listed => {
                self.listed = false;
                return true;
            }
            None => {}
        }
        false
    }

    /// If this waiter takes turns and a live set waiter heads the queue of
    /// `c`, until when it holds its turn (see `Channel::held_turn`); at
    /// most [`HELD_BACK_AT_MOST`] in a row without a try.
    pub(super) fn held_turn(&mut self, c: &Channel, now: Instant) -> Option<Instant> {
        let held = if self.fair && c.queue_heard() {
            c.held_turn(&self.id, now)
        } else {
            None
        };
        let Some(until) = held else {
            self.held_back_since = None;
            return None;
        };
        let limit = *self.held_back_since.get_or_insert(now) + HELD_BACK_AT_MOST;
        (now < limit).then_some(until.min(limit))
    }

    /// This waiter is about to try: a set waiter's held turn may hold it
    /// back again, for at most [`HELD_BACK_AT_MOST`] from now.
    pub(super) fn trying(&mut self) {
        self.held_back_since = None;
    }

    /// Whether it is this waiter's turn to try (and why), given the
    /// channel `c` and what it had `seen`; lowers `next` to when to look
    /// again without a change on the channel.
    pub(super) fn turn(
        &mut self,
        c: &mut Channel,
        seen: &mut Seen,
        idle_until: Option<Instant>,
        now: Instant,
        next: &mut Instant,
    ) -> Option<Woke> {
        if !seen.settled && c.subscribed_by_quorum() {
            return Some(Woke::Settled);
        }
        let real = c.real_releases != seen.real_releases;
        // A copy of the latest release from a master our last try found
        // still holding the lock: that master has deleted it now.
        let copy =
            self.recheck && c.releases == seen.releases && c.latest_heard().from != seen.heard.from;
        if c.releases == seen.releases && !copy && !real {
            if let Some(idle_until) = idle_until {
                if let Some(held_until) = self.held_turn(c, now) {
                    // A set waiter heads the queue: not idle, its turn.
                    *next = (*next).min(held_until);
                } else if c.taken == seen.taken {
                    if now >= idle_until {
                        return Some(Woke::Idle);
                    }
                    *next = (*next).min(idle_until);
                }
            }
            return None;
        }
        if let Some(not_before) = self.minority_not_before.filter(|_| !real) {
            if now < not_before {
                *next = (*next).min(not_before);
                return None;
            }
        }
        let released = Some(Woke::Release { real });
        let position = c.position(&self.id);
        let queued =
            self.fair && c.queue_heard() && (position.is_some() || c.others_queued(&self.id));
        if !queued {
            // No queue: one try by this handle per release (and the
            // recheck of the thread whose try it started).
            if copy {
                return released;
            }
            if c.ticket {
                c.ticket = false;
                return released;
            }
            seen.releases = c.releases;
            seen.real_releases = c.real_releases;
            seen.heard = c.latest_heard();
            return None;
        }
        if c.taken_since_release() {
            // A waiter took it since: wait for its release.
            *seen = Seen::of(c);
            return None;
        }
        if position == Some(0) {
            return released;
        }
        if let Some(held_until) = self.held_turn(c, now) {
            // A set waiter heads the queue and is alive: it tries on this
            // release, and keeps its turn while it waits for the other
            // resources of its set; no grace period for the others.
            *next = (*next).min(held_until);
            return None;
        }
        // The grace period runs from the release that woke us (forged
        // notices since must not push it back).
        let since = if real { c.real_at } else { c.released_at }?;
        let silent_until = since + self.grace;
        if now >= silent_until {
            return released;
        }
        *next = (*next).min(silent_until);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::notify::message::Message;

    fn id(n: u8) -> Id {
        [n; ID_LEN]
    }

    /// After a release heard from every master, with another waiter first
    /// in the queue: a waiter that takes turns waits for the grace period
    /// (the first may take the lock meanwhile); one that does not tries at
    /// once.
    #[test]
    fn only_a_waiter_that_takes_turns_lets_the_first_in_the_queue_go_first() {
        let now = Instant::now();
        for fair in [true, false] {
            let mut c = Channel::new(0, 3);
            for master in 0..3 {
                c.confirmed.insert(master);
            }
            c.apply(0, Message::Waiting(id(1)), now);
            let mut place = Place::new(Duration::from_millis(50), fair);
            place.id = id(2);
            if fair {
                c.apply(0, Message::Waiting(id(2)), now);
                place.announced = true;
            }
            let mut seen = Seen::of(&c);
            for master in 0..3 {
                c.apply(master, Message::Released(id(9)), now);
            }
            let mut next = now + Duration::from_secs(1);
            let turn = place.turn(&mut c, &mut seen, None, now, &mut next);
            if fair {
                assert_eq!(turn, None, "behind another waiter");
                assert_eq!(next, now + place.grace, "looks again after the grace");
            } else {
                assert_eq!(turn, Some(Woke::Release { real: true }));
            }
        }
    }
}
