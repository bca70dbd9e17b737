//! One waiting call: its subscription to the resource's channel, its
//! place in the queue and what it announces there, its pauses, and its
//! sleep until its turn (see `turn` for whose turn it is).

use super::turn::{Place, Seen, Woke};
use crate::command::Command;
use crate::error::{Error, NodeOutcome};
use crate::events::WokenBy;
use crate::handle::notify::message::{new_waiter_id, Id, Message};
use crate::handle::notify::{can_subscribe, channel_of, Interest};
use crate::handle::Shared;
use crate::lock::inspect::look;
use crate::quorum::{drift, NodeSet, Rule};
use crate::round::{Dial, Plan};
use std::time::{Duration, Instant};

/// Quick retries after a try that won some masters but not a quorum.
const QUICK_RETRIES: u32 = 2;

/// The pause between release-started tries doubles from this after each
/// one that won no master at all (up to the fallback pause): a flood of
/// forged notices cannot make a waiter hammer the masters.
const FIRST_GAP: Duration = Duration::from_micros(100);

/// How a try failed, for [`Waiter::wait_for_turn`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Failed {
    /// The lock was held: `declined` are the masters that said so.
    Contended {
        won_nothing: bool,
        declined: NodeSet,
    },
    /// No quorum answered in time.
    Unreachable,
}

/// Whether a failed try won no master at all.
pub(super) fn won_nothing(error: &Error) -> bool {
    error.nodes().map_or(true, |report| {
        report.iter().all(|s| s.outcome() != &NodeOutcome::Agreed)
    })
}

/// The masters that refused a failed try (the key was held there).
pub(super) fn declined(error: &Error) -> NodeSet {
    let mut set = NodeSet::EMPTY;
    if let Some(report) = error.nodes() {
        for (i, status) in report.iter().enumerate() {
            if status.outcome() == &NodeOutcome::Declined {
                set.insert(i);
            }
        }
    }
    set
}

/// How far ahead a wait without a deadline sleeps at most on a pause too
/// long for the clock (none is: `build()` bounds the pauses; kept so that
/// `after` has no case that panics).
const HORIZON: Duration = Duration::from_secs(24 * 3600);

/// One waiting call.
pub(super) struct Waiter<'a> {
    shared: &'a Shared,
    resource: &'a [u8],
    /// `None`: no limit.
    deadline: Option<Instant>,
    /// How long after a try that found the lock held the waiter, if
    /// nothing woke it, asks when the key expires (see
    /// [`Waiter::wait_for_turn`]).
    look_after: Duration,
    /// Our place in the queue, and the rules for the next try.
    place: Place,
    /// The resource's channel, once needed.
    channel: Vec<u8>,
    interest: Option<Interest<'a>>,
    queue_master: usize,
    quick: u32,
    /// The last try was started by a release only a minority of the
    /// masters was heard to run (maybe forged), or by the short pauses
    /// after one.
    by_minority: bool,
    /// Such tries in a row that won no master.
    fruitless: u32,
    /// The release (by number) the short pauses were for, and how many
    /// were taken: each is twice the one before.
    short_pauses_for: u64,
    short_pauses: u32,
}

impl<'a> Waiter<'a> {
    /// A waiter for a lock of `ttl`.
    pub(super) fn new(
        shared: &'a Shared,
        resource: &'a [u8],
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> Waiter<'a> {
        Waiter {
            shared,
            resource,
            deadline,
            // At most the drift allowance, so that a waiter still sleeps
            // no longer than the key's time to live plus that allowance;
            // at most a node timeout, what the look-up itself may take.
            look_after: shared.node_timeout.min(drift(ttl)),
            place: Place::new(shared.node_timeout, shared.fair_waiting),
            channel: Vec::new(),
            interest: None,
            queue_master: 0,
            quick: 0,
            by_minority: false,
            fruitless: 0,
            short_pauses_for: 0,
            short_pauses: 0,
        }
    }

    /// `pause` after `from`, or the deadline if that is sooner. A pause
    /// too long for the clock ends at the deadline too, or, without one,
    /// after [`HORIZON`].
    fn after(&self, from: Instant, pause: Duration) -> Instant {
        match (from.checked_add(pause), self.deadline) {
            (Some(at), Some(deadline)) => at.min(deadline),
            (Some(at), None) => at,
            (None, Some(deadline)) => deadline,
            (None, None) => from.checked_add(HORIZON).unwrap_or(from),
        }
    }

    /// Sleeps until `until`, or until the handle is shut down.
    fn sleep_until(&self, until: Instant) {
        self.shared.stop.sleep_until(until);
    }

    pub(super) fn seen(&self) -> Seen {
        self.interest
            .as_ref()
            .map_or(Seen::NOTHING, |interest| interest.view(|c| Seen::of(c)))
    }

    /// Starts listening on the resource's channel (the first time: names
    /// the channel and this waiter).
    fn join(&mut self) {
        if self.channel.is_empty() {
            channel_of(self.resource, &mut self.channel);
            self.queue_master = self.shared.queue_master(self.resource);
            self.place.id = new_waiter_id();
        }
        let interest =
            self.shared
                .notices
                .join(&self.shared.voters, self.resource, self.queue_master);
        self.interest = Some(interest);
    }

    /// Before the first try: if this handle still hears the channel (one of
    /// its threads waited on it lately) and others are queued, takes a
    /// place in the queue and waits for its turn instead of barging in. If
    /// nothing happens (no release, nobody takes the lock) within the grace
    /// period, the queue is stale and the waiter tries anyway. Returns
    /// whether it waited.
    pub(super) fn queue_up_if_others_wait(&mut self) -> bool {
        let shared = self.shared;
        // Two looks that cost no allocation and no system call, for the
        // common case of a lock nobody waited for lately.
        if !self.place.fair
            || !shared.release_notices
            || !shared.notices.has_channels()
            || !shared.notices.is_subscribed(self.resource)
        {
            return false;
        }
        self.join();
        let Some(interest) = &self.interest else {
            return false;
        };
        interest.refresh();
        let id = self.place.id;
        if !interest.view(|c| c.queue_heard() && c.others_queued(&id)) {
            return false;
        }
        let seen = self.seen();
        self.announce(Message::Waiting(id));
        let now = Instant::now();
        let fallback = self.after(now, self.shared.retry_pause());
        self.turn_loop(seen, Some(self.after(now, self.place.grace)), fallback);
        true
    }

    /// After a try that found the lock held: asks every master the key's
    /// `PTTL` (one round, `Redlock::inspect`'s) and returns when a quorum of
    /// them will have let it expire, plus the allowance for clock drift, if
    /// nobody releases or extends it: the waiter tries then at the latest,
    /// so that a holder that crashed (whose key expires, which publishes
    /// nothing) is replaced without waiting for the fallback pause. `None`
    /// if expiry alone cannot free it (no quorum answered, a key without
    /// expiry). Asked only after a try found the key held: a lock taken on
    /// the first try costs nothing more.
    fn expiry(&self) -> Option<Instant> {
        // A quorum of answers is enough: the time a quorum of them frees
        // the key is a bound, whatever the others hold.
        // Only the times to live: a waiter has no use for the holder label.
        let seen = look(
            self.shared,
            self.resource,
            Dial::OutsideBackoff,
            Rule::Extend,
            false,
        )
        .ok()?;
        let left = seen.free_in()?;
        Instant::now().checked_add(left.saturating_add(drift(left)))
    }

    /// `fallback`, or when the key expires if that is sooner.
    fn no_later_than_expiry(&self, fallback: Instant) -> Instant {
        self.expiry()
            .map_or(fallback, |expiry| fallback.min(expiry))
    }

    /// After a failed try: subscribes if not yet done, and announces the
    /// waiter once the queue's master confirmed. Returns whether the
    /// subscription is new (so the caller tries again at once).
    pub(super) fn subscribe(&mut self) -> bool {
        if !self.shared.release_notices || !can_subscribe(self.resource) {
            return false;
        }
        let fresh = self.interest.is_none();
        if fresh {
            self.join();
        }
        let Some(interest) = &self.interest else {
            return false;
        };
        if fresh {
            let until = self.after(Instant::now(), self.shared.node_timeout);
            interest.subscribed(until);
        }
        if !self.place.announced && interest.view(|c| c.queue_heard()) {
            self.announce(Message::Waiting(self.place.id));
        }
        fresh
    }

    /// After a try that won some masters but not a quorum: pauses a random
    /// moment (up to twice the try's time) and says to try again, at most
    /// [`QUICK_RETRIES`] times in a row.
    pub(super) fn quick_retry(&mut self, error: &Error, elapsed: Duration) -> bool {
        if won_nothing(error) || self.quick >= QUICK_RETRIES {
            return false;
        }
        self.quick += 1;
        let span = elapsed.max(FIRST_GAP).saturating_mul(2);
        let span_ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX).max(1);
        let pause = Duration::from_nanos(getrandom::u64().unwrap_or(0) % span_ns);
        self.sleep_until(self.after(Instant::now(), pause));
        true
    }

    /// Sleeps until it is this waiter's turn to try after a release heard
    /// since `seen` (what the channel held when the failed try started),
    /// the fallback pause has passed, or the deadline.
    ///
    /// A try that a master refused before it was heard to run the latest
    /// release may have beaten that release there: its notice starts
    /// another try, and so does a short pause in case the notice never
    /// comes (the grace period, doubling for each such try after the same
    /// release, and for each fruitless try before it, up to the fallback
    /// pause).
    ///
    /// After tries that releases heard from a minority of the masters
    /// started and that won nothing (maybe forged notices), such releases
    /// start a try only after a gap that doubles with each (the rate
    /// limit); a release heard from a quorum ends the gap at once.
    ///
    /// After a try that found the lock held, a waiter that nothing woke
    /// within `look_after` (a release notice usually comes first) asks when
    /// the key expires, and sleeps no later than that (see
    /// [`Waiter::expiry`]): so a waiter asks nothing in a quick handoff,
    /// and sleeps at most the longer of `look_after` and the key's time to
    /// live plus the drift allowance. A waiter that hears no notices asks
    /// at once.
    ///
    /// `wake_by`, if given, ends the sleep by then at the latest: when
    /// masters out of reach end the wait. Returns what woke it.
    pub(super) fn wait_for_turn(
        &mut self,
        seen: Seen,
        failed: Failed,
        wake_by: Option<Instant>,
    ) -> WokenBy {
        let tried = Instant::now();
        self.quick = 0;
        self.place.recheck = false;
        let contended = matches!(failed, Failed::Contended { .. });
        if let Failed::Contended {
            won_nothing,
            declined,
        } = failed
        {
            if !won_nothing {
                self.fruitless = 0;
            } else if self.by_minority && !self.real_release_since(seen) {
                self.fruitless += 1;
            }
            self.place.recheck =
                seen.releases > 0 && !declined.difference(seen.heard.from).is_empty();
        }
        let now = Instant::now();
        let mut fallback = self.after(now, self.shared.retry_pause());
        if let Some(wake_by) = wake_by {
            fallback = fallback.min(wake_by);
        }
        if self.interest.is_none() {
            if contended {
                fallback = self.no_later_than_expiry(fallback);
            }
            self.sleep_until(fallback);
            self.by_minority = false;
            return WokenBy::Timer;
        }
        self.place.minority_not_before = (self.fruitless > 0).then(|| {
            let doublings = (self.fruitless - 1).min(20);
            let gap = FIRST_GAP
                .saturating_mul(1 << doublings)
                .min(self.shared.retry_pause());
            self.after(tried, gap)
        });
        if self.place.recheck {
            if self.short_pauses_for != seen.releases {
                self.short_pauses_for = seen.releases;
                self.short_pauses = 0;
            }
            // Fruitless tries in a row double it too: forged notices must
            // not buy a series of quick tries each around the rate limit.
            // (Not none at all: a try decided before the master that sent
            // the notice answered looks fruitless even when it was real.)
            let doublings = (self.short_pauses + self.fruitless).min(20);
            let pause = self.place.grace.saturating_mul(1 << doublings);
            self.short_pauses += 1;
            fallback = fallback.min(self.after(now, pause));
        }
        // Not after a short pause, which is a try of its own.
        let look_at =
            Some(self.after(tried, self.look_after)).filter(|at| contended && *at < fallback);
        let woke = match look_at {
            Some(look_at) => match self.turn_loop(seen, None, look_at) {
                Woke::Clock if !self.shared.stop.is_set() => {
                    let fallback = self.no_later_than_expiry(fallback);
                    self.turn_loop(seen, None, fallback)
                }
                woke => woke,
            },
            None => self.turn_loop(seen, None, fallback),
        };
        self.by_minority = match woke {
            Woke::Release { real } => !real,
            // A short pause after a try of the same release: it counts as
            // that release's.
            Woke::Clock if self.place.recheck => self.by_minority,
            Woke::Clock | Woke::Settled | Woke::Idle => false,
        };
        match woke {
            Woke::Release { .. } => WokenBy::Notice,
            Woke::Settled => WokenBy::Subscribed,
            Woke::Clock | Woke::Idle => WokenBy::Timer,
        }
    }

    /// Whether a release since `seen` is known to have run on a quorum of
    /// the masters (so a try it started that won nothing lost a real race,
    /// and was no forged notice). Takes in the copies that came meanwhile.
    fn real_release_since(&self, seen: Seen) -> bool {
        let Some(interest) = &self.interest else {
            return false;
        };
        interest.refresh();
        interest.view(|c| c.real_releases != seen.real_releases)
    }

    /// Waits for this waiter's turn (see [`Place::turn`]) or `fallback`.
    /// With `idle_until`: also ends then if nothing happened on the
    /// channel since `seen`. While a live set waiter heads the queue (it
    /// holds its turn), `fallback` waits too, up to the deadline: its
    /// repeated `s` says the messages get through, so there is nothing
    /// for the fallback to make up for.
    fn turn_loop(
        &mut self,
        mut seen: Seen,
        idle_until: Option<Instant>,
        fallback: Instant,
    ) -> Woke {
        loop {
            let now = Instant::now();
            let mut next = fallback;
            if now >= fallback {
                let held_until = match &self.interest {
                    Some(interest) => interest.view(|c| self.place.held_turn(c, now)),
                    None => None,
                };
                match held_until {
                    Some(until) if self.deadline.map_or(true, |d| now < d) => {
                        next = self.deadline.map_or(until, |d| d.min(until));
                    }
                    _ => {
                        self.place.trying();
                        return Woke::Clock;
                    }
                }
            }
            let Some(interest) = self.interest.take() else {
                self.sleep_until(fallback);
                return Woke::Clock;
            };
            let (turn, version, announce) = interest.view(|c| {
                let announce = self.place.keep(c);
                let turn = self.place.turn(c, &mut seen, idle_until, now, &mut next);
                (turn, c.version, announce)
            });
            self.interest = Some(interest);
            if announce {
                self.announce(Message::Waiting(self.place.id));
            }
            if let Some(woke) = turn {
                self.place.trying();
                return woke;
            }
            if let Some(interest) = &self.interest {
                interest.wait_for(next, |c| c.version != version);
            }
            if self.shared.stop.is_set() {
                // Shut down: the next try says so.
                return Woke::Clock;
            }
        }
    }

    /// Says `message` on the queue; a waiter that does not take turns
    /// (`Builder::fair_waiting(false)`) says nothing, so it is never
    /// listed (and `finish` has nothing to withdraw).
    fn announce(&mut self, message: Message) {
        if !self.place.fair {
            return;
        }
        if matches!(message, Message::Waiting(_)) {
            self.place.announced = true;
        }
        announce(self.shared, self.queue_master, &self.channel, message);
    }

    /// The error of a wait that ran out: `error`, saying also which masters
    /// refused to send this waiter release notices (it then polled).
    pub(super) fn explain(&self, error: Error) -> Error {
        match self.interest.as_ref().and_then(Interest::refused) {
            Some((masters, refusal)) => error.with_notices_refused(masters, refusal),
            None => error,
        }
    }

    /// The call ends: tells the queue whether we took the lock (the one
    /// with this notice) or left.
    pub(super) fn finish(&mut self, took: Option<Id>) {
        if self.place.announced {
            let message = match took {
                Some(lock) => Message::Took {
                    waiter: self.place.id,
                    lock,
                },
                None => Message::Left(self.place.id),
            };
            self.place.announced = false;
            announce(self.shared, self.queue_master, &self.channel, message);
        }
        self.interest = None;
    }
}

/// Publishes `message` on `channel` on master `master` without waiting
/// for the answer (see `handle::notify`): a waiter's word to the others, which
/// may be lost without harm.
pub(super) fn announce(shared: &Shared, master: usize, channel: &[u8], message: Message) {
    let (payload, len) = message.encode();
    let mut session = shared.pool.take();
    let mut to = NodeSet::EMPTY;
    to.insert(master);
    let deadline = Instant::now() + shared.node_timeout;
    let plan = Plan {
        command: Command::Publish {
            channel,
            message: &payload[..len],
        },
        to,
        others: None,
        rule: Rule::Everyone,
        deadline,
        dial: Dial::OutsideBackoff,
        skip: NodeSet::EMPTY,
        unawaited: true,
    };
    session.send_only(shared.masters(), plan, deadline);
    shared.pool.give_back(session);
}
