//! What a handle knows of one resource's channel: the releases seen, and
//! the advisory queue of waiters (see `notify`). Pure state: the messages
//! go in, the waiting loop (`lock::wait`) reads it; no I/O here.

use super::message::{Id, Message};
use crate::quorum::{quorum, NodeSet};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar};
use std::time::{Duration, Instant};

/// Most waiters a queue records; later announcements are ignored (a flood
/// cannot grow memory; an ignored waiter waits as if there were no queue).
pub(crate) const MAX_QUEUE: usize = 1024;

/// Notices remembered per master, to tell a copy (the same release, from
/// another master) from a new release. Per master, so that a flood of
/// forged notices from a few masters pushes out only their own: the
/// copies from the others still add up to a quorum.
const RECENT: usize = 8;

/// How long a set waiter that heads a queue holds its turn without a word
/// (it repeats `s` twice as often): after that it is taken for gone.
pub(crate) const SET_SILENCE: Duration = Duration::from_secs(1);

/// One waiter in a queue: its id, and for a set waiter (`s`), when it was
/// last heard of (or became the first in the queue).
#[derive(Clone, Copy, Debug)]
struct Queued {
    id: Id,
    set_heard: Option<Instant>,
}

/// The source of a message that came from this handle itself, not from a
/// master (never a master's index).
pub(crate) const HERE: usize = usize::MAX;

/// Who is known to have run one release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heard {
    /// The masters whose copy of the notice came in.
    pub(crate) from: NodeSet,
    /// This handle released the lock itself: its `unlock` saw a quorum of
    /// masters delete the key.
    pub(crate) here: bool,
}

impl Heard {
    pub(crate) const NOTHING: Heard = Heard {
        from: NodeSet::EMPTY,
        here: false,
    };

    /// Whether the release is known to have run on a quorum of the
    /// masters: real, not forged by a few of them.
    pub(crate) fn by_quorum(self, quorum: usize) -> bool {
        self.here || self.from.len() >= quorum
    }
}

/// One channel.
pub(crate) struct Channel {
    /// The master whose messages order the queue.
    pub(crate) queue_master: usize,
    /// Masters needed for a quorum.
    quorum: usize,
    /// Threads of this handle waiting on the channel.
    pub(crate) waiters: usize,
    /// Distinct releases seen, and when the last one was first heard of.
    pub(crate) releases: u64,
    pub(crate) released_at: Option<Instant>,
    /// Releases known to have run on a quorum of the masters (real, not
    /// forged by a few of them), and when the last one was known so.
    pub(crate) real_releases: u64,
    pub(crate) real_at: Option<Instant>,
    /// Waiters that took the lock (`t` messages), in all; and how many had
    /// when the last release was heard of.
    pub(crate) taken: u64,
    taken_at_release: u64,
    /// The latest release's notice.
    latest: Option<Id>,
    /// Per master (by index), and last for this handle itself ([`HERE`]),
    /// the notices it sent lately, newest last.
    sent: Vec<VecDeque<Id>>,
    /// The notices of the latest real releases (each counts once).
    real: VecDeque<Id>,
    /// Waiters in the order they announced themselves on the queue's master.
    queue: VecDeque<Queued>,
    /// Without a queue: one attempt by this handle per release. A new
    /// release sets it; the waiter that takes it tries.
    pub(crate) ticket: bool,
    /// The masters that confirmed or refused the subscription.
    pub(crate) confirmed: NodeSet,
    pub(crate) refused: NodeSet,
    /// The masters that ever confirmed it (a confirmation from one of them
    /// is a resubscription).
    pub(crate) ever_confirmed: NodeSet,
    /// When the last waiter left.
    pub(crate) idle_since: Option<Instant>,
    /// Counts the changes that may give a waiter its turn.
    pub(crate) version: u64,
    /// Wakes this channel's waiting threads; `sleepers` of them sleep on
    /// it now.
    pub(crate) wakeup: Arc<Condvar>,
    pub(crate) sleepers: usize,
    /// The wake-ups of the set waiters asleep on this channel among
    /// others (see `any`); each counts in `sleepers` too.
    pub(crate) also_wake: Vec<Arc<Condvar>>,
}

impl Channel {
    /// The channel of a resource whose queue `queue_master` orders, with
    /// `masters` masters.
    pub(crate) fn new(queue_master: usize, masters: usize) -> Channel {
        Channel {
            queue_master,
            quorum: quorum(masters),
            waiters: 0,
            releases: 0,
            released_at: None,
            real_releases: 0,
            real_at: None,
            taken: 0,
            taken_at_release: 0,
            latest: None,
            sent: vec![VecDeque::new(); masters + 1],
            real: VecDeque::new(),
            queue: VecDeque::new(),
            ticket: false,
            confirmed: NodeSet::EMPTY,
            refused: NodeSet::EMPTY,
            ever_confirmed: NodeSet::EMPTY,
            idle_since: None,
            version: 0,
            wakeup: Arc::new(Condvar::new()),
            sleepers: 0,
            also_wake: Vec::new(),
        }
    }

    /// Takes in `message` from master `from`, heard at `now`. Returns
    /// whether waiting threads should look again.
    pub(crate) fn apply(&mut self, from: usize, message: Message, now: Instant) -> bool {
        let changed = self.take(from, message, now);
        if changed {
            self.changed();
        }
        changed
    }

    /// Notes a change that may give a waiter its turn.
    pub(crate) fn changed(&mut self) {
        self.version += 1;
    }

    /// Wakes the threads asleep on the channel, if any (a condition
    /// variable's wake-up is a system call even when nobody sleeps: a lone
    /// waiter, which reads its messages itself, is spared it).
    pub(crate) fn wake(&self) {
        if self.sleepers > 0 {
            self.wakeup.notify_all();
            for wakeup in &self.also_wake {
                wakeup.notify_all();
            }
        }
    }

    fn take(&mut self, from: usize, message: Message, now: Instant) -> bool {
        let queue_master = from == self.queue_master;
        match message {
            Message::Released(notice) => self.take_release(from, notice, now),
            // Only the queue's master orders the queue: every subscriber
            // hears its messages in the same order.
            Message::Waiting(id) if queue_master => {
                self.enqueue(id, None);
                false
            }
            // A set waiter: queued as any waiter; its repeats while it
            // heads the queue say it is alive.
            Message::SetWaiting(id) if queue_master => {
                match self.queue.iter_mut().find(|w| w.id == id) {
                    Some(waiter) => waiter.set_heard = Some(now),
                    None => self.enqueue(id, Some(now)),
                }
                false
            }
            Message::Took { waiter, lock } if queue_master => {
                // Whoever was ahead of the taker had their turn: they are
                // gone (a crashed client never says so), or were too slow
                // and announce themselves again at the back.
                // But a set waiter tries on every release of each of its
                // resources, not only in its turn: those ahead of it keep
                // their places.
                if let Some(at) = self.position(&waiter) {
                    let head_changed = if self.queue[at].set_heard.is_some() {
                        self.queue.remove(at);
                        at == 0
                    } else {
                        self.queue.drain(..=at);
                        true
                    };
                    if head_changed {
                        self.new_head(now);
                    }
                }
                // Heard after the release of the lock it took (it went by
                // another connection, which lagged): the lock is not held
                // by that waiter any more.
                if !self.is_known(&lock) {
                    self.taken += 1;
                }
                true
            }
            Message::Left(id) if queue_master => {
                let was_first = self.position(&id) == Some(0);
                self.queue.retain(|w| w.id != id);
                if was_first {
                    self.new_head(now);
                }
                true
            }
            _ => false,
        }
    }

    /// Puts `id` at the back of the queue, unless it is there or full.
    fn enqueue(&mut self, id: Id, set_heard: Option<Instant>) {
        if self.queue.len() < MAX_QUEUE && self.position(&id).is_none() {
            self.queue.push_back(Queued { id, set_heard });
        }
    }

    /// The first in the queue changed: a set waiter that became first has
    /// its silence counted from now (it repeats `s` only once it heads).
    fn new_head(&mut self, now: Instant) {
        if let Some(first) = self.queue.front_mut() {
            if first.set_heard.is_some() {
                first.set_heard = Some(now);
            }
        }
    }

    /// If a set waiter other than `me` heads the queue and was heard from
    /// within [`SET_SILENCE`], until when it holds its turn: the others do
    /// not try on a release meanwhile (it waits for another resource of
    /// its set; see `lock::wait::set_turn`).
    pub(crate) fn held_turn(&self, me: &Id, now: Instant) -> Option<Instant> {
        let first = self.queue.front()?;
        let until = first.set_heard? + SET_SILENCE;
        (first.id != *me && now < until).then_some(until)
    }

    /// A release notice from `from` (a master, or [`HERE`]). A copy (the
    /// notice is known from another master) counts once as a release; a
    /// copy of the latest one from a master not heard before says that
    /// master has deleted the key now (a waiter whose try it refused may
    /// try again). Once a quorum of masters sent it, the release is real.
    fn take_release(&mut self, from: usize, notice: Id, now: Instant) -> bool {
        let known = self.is_known(&notice);
        let slot = if from == HERE {
            self.sent.len() - 1
        } else {
            from
        };
        let Some(sent) = self.sent.get_mut(slot) else {
            return false;
        };
        if sent.contains(&notice) {
            return false;
        }
        if sent.len() == RECENT {
            sent.pop_front();
        }
        sent.push_back(notice);
        let mut changed = false;
        if !known {
            self.latest = Some(notice);
            self.new_release(now);
            changed = true;
        } else if self.latest == Some(notice) && from != HERE {
            changed = true;
        }
        if !self.real.contains(&notice) && self.heard(&notice).by_quorum(self.quorum) {
            if self.real.len() == RECENT {
                self.real.pop_front();
            }
            self.real.push_back(notice);
            self.real_releases += 1;
            self.real_at = Some(now);
            changed = true;
        }
        changed
    }

    /// Whether some master (or this handle) sent `notice` lately.
    fn is_known(&self, notice: &Id) -> bool {
        self.sent.iter().any(|sent| sent.contains(notice))
    }

    /// Who sent `notice` lately.
    fn heard(&self, notice: &Id) -> Heard {
        let here = self.sent.len() - 1;
        let mut heard = Heard::NOTHING;
        for (i, sent) in self.sent.iter().enumerate() {
            if sent.contains(notice) {
                if i == here {
                    heard.here = true;
                } else {
                    heard.from.insert(i);
                }
            }
        }
        heard
    }

    /// A release may have happened unheard (a subscription was lost and
    /// made again): counts as a release.
    pub(crate) fn new_release(&mut self, now: Instant) {
        self.changed();
        self.releases += 1;
        self.released_at = Some(now);
        self.taken_at_release = self.taken;
        self.ticket = true;
    }

    /// Who is known to have run the latest release (nobody, before the
    /// first).
    pub(crate) fn latest_heard(&self) -> Heard {
        self.latest
            .map_or(Heard::NOTHING, |notice| self.heard(&notice))
    }

    /// Whether a waiter took the lock since the last release.
    pub(crate) fn taken_since_release(&self) -> bool {
        self.taken > self.taken_at_release
    }

    /// Where `id` stands in the queue (0: next).
    pub(crate) fn position(&self, id: &Id) -> Option<usize> {
        self.queue.iter().position(|w| w.id == *id)
    }

    /// Whether anyone but `id` is in the queue.
    pub(crate) fn others_queued(&self, id: &Id) -> bool {
        self.queue.iter().any(|w| w.id != *id)
    }

    /// Whether a quorum of masters confirmed the subscription: a release
    /// from then on is not missed.
    pub(crate) fn subscribed_by_quorum(&self) -> bool {
        self.confirmed.len() >= self.quorum
    }

    /// Whether the queue's master confirmed the subscription, so that the
    /// queue is heard.
    pub(crate) fn queue_heard(&self) -> bool {
        self.confirmed.contains(self.queue_master)
    }

    /// The queue's master was lost: what it said may be out of date.
    pub(crate) fn forget_queue(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> Id {
        [n; 16]
    }

    #[test]
    fn copies_of_a_release_count_once() {
        let mut channel = Channel::new(0, 3);
        let now = Instant::now();
        channel.apply(0, Message::Released(id(1)), now);
        channel.apply(1, Message::Released(id(1)), now);
        channel.apply(2, Message::Released(id(1)), now);
        assert_eq!(channel.releases, 1);
        channel.apply(1, Message::Released(id(2)), now);
        // A late copy of the first, between copies of the second.
        assert!(!channel.apply(2, Message::Released(id(1)), now));
        channel.apply(2, Message::Released(id(2)), now);
        assert_eq!(channel.releases, 2);
    }

    #[test]
    fn who_ran_the_latest_release_is_kept() {
        let mut channel = Channel::new(0, 3);
        let now = Instant::now();
        channel.apply(HERE, Message::Released(id(1)), now);
        assert!(channel.latest_heard().here);
        assert!(channel.latest_heard().by_quorum(2));
        channel.apply(2, Message::Released(id(2)), now);
        assert!(!channel.latest_heard().by_quorum(2));
        // A copy from a new master wakes (a try it refused may be retried);
        // one from a master heard before, or of an older release, does not.
        assert!(channel.apply(0, Message::Released(id(2)), now));
        assert!(!channel.apply(0, Message::Released(id(2)), now));
        assert!(!channel.apply(1, Message::Released(id(1)), now));
        assert_eq!(channel.releases, 2);
        let heard = channel.latest_heard();
        assert!(heard.by_quorum(2) && !heard.here);
        assert_eq!(heard.from.len(), 2);
    }

    #[test]
    fn a_release_becomes_real_once_a_quorum_sent_it() {
        let mut channel = Channel::new(0, 5);
        let now = Instant::now();
        channel.apply(2, Message::Released(id(1)), now);
        channel.apply(3, Message::Released(id(1)), now);
        assert_eq!(channel.real_releases, 0);
        // A flood of forged notices from two masters between the copies
        // pushes out only their own.
        for n in 0..100u8 {
            channel.apply(
                0,
                Message::Released([b'f', n, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
                now,
            );
            channel.apply(
                1,
                Message::Released([b'g', n, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
                now,
            );
        }
        assert!(channel.apply(4, Message::Released(id(1)), now), "real now");
        assert_eq!(channel.real_releases, 1);
        assert!(!channel.latest_heard().by_quorum(3), "the latest is forged");
        // Once only, whoever else sends it.
        channel.apply(0, Message::Released(id(1)), now);
        channel.apply(HERE, Message::Released(id(1)), now);
        assert_eq!(channel.real_releases, 1);
        // This handle's own release is real at once.
        channel.apply(HERE, Message::Released(id(2)), now);
        assert_eq!(channel.real_releases, 2);
    }

    #[test]
    fn the_queue_follows_its_master_only() {
        let mut channel = Channel::new(1, 3);
        let now = Instant::now();
        channel.apply(0, Message::Waiting(id(9)), now);
        for n in 1..=3 {
            channel.apply(1, Message::Waiting(id(n)), now);
        }
        channel.apply(1, Message::Waiting(id(2)), now); // once only
        assert_eq!(channel.position(&id(9)), None);
        assert_eq!(channel.position(&id(1)), Some(0));
        assert_eq!(channel.position(&id(3)), Some(2));
        // A taker removes itself and whoever was ahead of it.
        let took = |waiter, lock| Message::Took { waiter, lock };
        channel.apply(1, took(id(2), id(20)), now);
        assert_eq!(channel.position(&id(1)), None);
        assert_eq!(channel.position(&id(3)), Some(0));
        assert!(channel.taken_since_release());
        channel.apply(1, Message::Left(id(3)), now);
        assert!(!channel.others_queued(&id(7)));
        // A taker heard only after its lock's release: not holding it.
        channel.apply(0, Message::Released(id(21)), now);
        channel.apply(1, took(id(4), id(21)), now);
        assert!(!channel.taken_since_release());
    }

    #[test]
    fn a_set_waiter_that_heads_the_queue_holds_its_turn_while_it_speaks() {
        let mut channel = Channel::new(0, 3);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        channel.apply(0, Message::Waiting(id(1)), t0);
        channel.apply(0, Message::SetWaiting(id(2)), t0);
        channel.apply(0, Message::Waiting(id(3)), t0);
        channel.apply(1, Message::SetWaiting(id(4)), t0); // not the queue's master
        assert_eq!(channel.position(&id(4)), None);
        assert_eq!(channel.held_turn(&id(3), t0), None, "a single waiter heads");
        // The first takes the lock: the set waiter heads, its silence
        // counted from then (not from its announcement, 2 s before).
        let took = Message::Took {
            waiter: id(1),
            lock: id(20),
        };
        channel.apply(0, took, at(2000));
        assert_eq!(channel.held_turn(&id(3), at(2500)), Some(at(3000)));
        assert_eq!(channel.held_turn(&id(2), at(2500)), None, "not for itself");
        // Its repeat keeps the turn; a silence of 1 s ends it.
        channel.apply(0, Message::SetWaiting(id(2)), at(2900));
        assert_eq!(channel.held_turn(&id(3), at(3500)), Some(at(3900)));
        assert_eq!(channel.held_turn(&id(3), at(3900)), None);
        // A set waiter that takes its set behind others leaves them their
        // places (it tries on every release, not only in its turn).
        channel.apply(0, Message::SetWaiting(id(6)), at(2950));
        let took = Message::Took {
            waiter: id(6),
            lock: id(21),
        };
        channel.apply(0, took, at(3000));
        assert_eq!(channel.position(&id(6)), None);
        assert_eq!(channel.position(&id(3)), Some(1));
        // Once it leaves, the next goes.
        channel.apply(0, Message::Left(id(2)), at(4000));
        assert_eq!(channel.position(&id(3)), Some(0));
        assert_eq!(channel.held_turn(&id(5), at(4000)), None);
    }

    #[test]
    fn a_flood_of_waiters_is_bounded() {
        let mut channel = Channel::new(0, 3);
        let now = Instant::now();
        for n in 0..(MAX_QUEUE as u32 + 100) {
            let mut w = [0u8; 16];
            w[..4].copy_from_slice(&n.to_le_bytes());
            channel.apply(0, Message::Waiting(w), now);
        }
        assert_eq!(channel.queue.len(), MAX_QUEUE);
    }
}
