//! A set waiter's held turn (`Builder::fair_waiting`, docs/design.md,
//! "Waiting: woken by any of its resources, fair to sets").
//!
//! A set waiter announces itself with `s<id>` on the queue of each of its
//! resources. While it heads a queue, the others in that queue do not try
//! on a release (`Channel::held_turn`): the resource may stay free while
//! the set waiter waits for another of its set, until it gets to the head
//! of that one's queue too, and then its whole set is free for it. It says
//! `s<id>` again every [`REPEAT`] on the queues it heads (and on those that
//! lost it, at the back), so that a set waiter that died is taken for gone
//! after `SET_SILENCE`. It says `t` (took) or `g` (gave up) on every queue
//! when its call ends.
//!
//! Two set waiters may each head a queue the other needs: one held back
//! only by other set waiters' turns tries anyway after [`HELD_BACK_AT_MOST`]
//! (safety never depends on turns; this breaks the stall).

use super::waiter::announce;
use crate::handle::notify::message::{new_waiter_id, Id, Message, ID_LEN};
use crate::handle::notify::{channel_of, Interest};
use crate::handle::Shared;
use std::time::{Duration, Instant};

/// How often a set waiter says `s` again on the queues it heads.
const REPEAT: Duration = Duration::from_millis(500);

/// How long a set waiter lets other set waiters' turns hold back its try.
const HELD_BACK_AT_MOST: Duration = Duration::from_secs(1);

/// One resource's queue, as a set waiter sees it.
struct Line {
    channel: Vec<u8>,
    queue_master: usize,
    /// Whether `s` was said on it (so `t` or `g` is owed).
    announced: bool,
}

/// A set waiter's place in the queues of its resources.
pub(super) struct SetTurn<'a> {
    shared: &'a Shared,
    id: Id,
    /// Per interest of the waiting call, in the same order.
    lines: Vec<Line>,
    /// When `s` was last said.
    said: Option<Instant>,
    /// Since when other set waiters' turns held back a try.
    held_back_since: Option<Instant>,
}

impl<'a> SetTurn<'a> {
    /// A set waiter in no queue yet.
    pub(super) fn new(shared: &'a Shared) -> SetTurn<'a> {
        SetTurn {
            shared,
            id: [0; ID_LEN],
            lines: Vec::new(),
            said: None,
            held_back_since: None,
        }
    }

    /// Whether it takes turns at all (a `fair_waiting(false)` handle's set
    /// waiter says nothing and heeds no turn).
    fn fair(&self) -> bool {
        self.shared.fair_waiting
    }

    /// The waiting call listens on `resource`'s channel (the next of its
    /// interests), whose queue `queue_master` orders.
    pub(super) fn join(&mut self, resource: &[u8], queue_master: usize) {
        if self.lines.is_empty() {
            self.id = new_waiter_id();
        }
        let mut channel = Vec::new();
        channel_of(resource, &mut channel);
        self.lines.push(Line {
            channel,
            queue_master,
            announced: false,
        });
    }

    /// Says `s` where it is due: on every queue that is heard and does not
    /// list this waiter (the first time, or after it was passed over), and
    /// on those it heads, every [`REPEAT`].
    pub(super) fn speak(&mut self, interests: &[Interest<'_>], now: Instant) {
        let due = self.said.map_or(true, |said| now >= said + REPEAT);
        if !self.fair() || self.lines.is_empty() || !due {
            return;
        }
        let id = self.id;
        for (line, interest) in self.lines.iter_mut().zip(interests) {
            let (heard, position) = interest.view(|c| (c.queue_heard(), c.position(&id)));
            if heard && matches!(position, None | Some(0)) {
                line.announced = true;
                announce(
                    self.shared,
                    line.queue_master,
                    &line.channel,
                    Message::SetWaiting(id),
                );
            }
        }
        self.said = Some(now);
    }

    /// When `s` is next due, if this waiter speaks at all.
    pub(super) fn next_word(&self) -> Option<Instant> {
        self.said.map(|said| said + REPEAT)
    }

    /// If another set waiter heads one of its queues and holds its turn,
    /// and that held back this waiter's try for less than
    /// [`HELD_BACK_AT_MOST`]: until when to hold back.
    pub(super) fn held_back(
        &mut self,
        interests: &[Interest<'_>],
        now: Instant,
    ) -> Option<Instant> {
        if !self.fair() {
            return None;
        }
        let id = self.id;
        let held = interests
            .iter()
            .any(|i| i.view(|c| c.queue_heard() && c.held_turn(&id, now).is_some()));
        if !held {
            self.held_back_since = None;
            return None;
        }
        let until = *self.held_back_since.get_or_insert(now) + HELD_BACK_AT_MOST;
        (now < until).then_some(until)
    }

    /// A try is made: the next hold-back counts afresh.
    pub(super) fn tried(&mut self) {
        self.held_back_since = None;
    }

    /// The call took the set (whose release notice is `lock`): says so on
    /// every queue it announced itself on.
    pub(super) fn took(&mut self, lock: Id) {
        self.finish(Message::Took {
            waiter: self.id,
            lock,
        });
    }

    fn finish(&mut self, message: Message) {
        for line in &mut self.lines {
            if std::mem::take(&mut line.announced) {
                announce(self.shared, line.queue_master, &line.channel, message);
            }
        }
    }
}

impl Drop for SetTurn<'_> {
    /// A call that ends without the set gives up its place everywhere.
    fn drop(&mut self) {
        let id = self.id;
        self.finish(Message::Left(id));
    }
}
