//! Waiting for a held lock: try; between tries, sleep until it is this
//! waiter's turn after a release, or until a fallback timer runs out; until
//! the lock is ours or the wait is over.
//!
//! After a first try finds the lock held, the waiter subscribes to the
//! resource's channel (see `notify`), tries once more (a release before the
//! subscription would otherwise go unheard), and announces itself on the
//! queue's master. From then on:
//!
//! - When a release is heard, the first waiter in the queue tries at once.
//!   The others hold back: the one ahead of them will take the lock and say
//!   so, and they wait for the next release. Should it stay silent for a
//!   grace period (it crashed, or its attempt failed), they try too. So a
//!   handoff costs one acquisition round, not one per waiter.
//! - Without a queue (the queue's master is down, refused the subscription,
//!   or the other clients do not announce themselves), each release lets
//!   one thread per handle try.
//! - A try that won some masters but not a quorum (votes split between
//!   waiters, or a SET that reached a master before the release did) is
//!   retried after a short random pause, twice at most.
//! - A try refused by a master that had not yet been heard to run the
//!   release may have beaten the release there: that master's copy of the
//!   notice (it counts as no new release) starts another try, and so does
//!   a short pause (doubling each time) in case the copy never comes.
//! - A try that found no quorum (masters down, frozen or slow) waits for
//!   the next release or the fallback timer, like one that found the lock
//!   held.
//! - The fallback timer (`retry_delay` plus random `retry_jitter`) keeps
//!   waiting correct when no message comes: one lost, a master down or
//!   frozen, an ACL that refuses `SUBSCRIBE`, a lock that expired instead
//!   of being released (expiry publishes nothing).
//!
//! A thread that comes back for a lock its handle waited on lately, while
//! others are queued for it, takes its place in the queue instead of
//! barging in: handoffs go to those who waited. Tries started by releases
//! that only a minority of the masters was heard to run, and that won no
//! master, are spaced out more and more (a flood of forged notices costs
//! bounded work); a release heard from a quorum is real and is always
//! tried at once. Messages never grant anything: every try is a full
//! acquisition round.
//!
//! Waiters are served in the order they announced themselves as long as
//! everyone hears the queue; nothing more is promised (see the README's
//! known limits).

use crate::error::{Error, NodeOutcome};
use crate::fanout::NodeSet;
use crate::notify::message::{new_waiter_id, notice_of, Id, Message, ID_LEN};
use crate::notify::{can_subscribe, channel_of, Channel, Heard, Interest};
use crate::quorum::quorum;
use crate::redlock::{Acquired, Shared};
use std::time::{Duration, Instant};

/// Quick retries after a try that won some masters but not a quorum.
const QUICK_RETRIES: u32 = 2;

/// The pause between release-started tries doubles from this after each
/// one that won no master at all (up to the fallback pause): a flood of
/// forged notices cannot make a waiter hammer the masters.
const FIRST_GAP: Duration = Duration::from_micros(100);

/// Tries to acquire `resource` for `ttl` until it succeeds or `wait` has
/// passed. Contention is waited out; a failure that may pass (no quorum,
/// too slow) is retried on the next release heard or after the fallback
/// pause; any other error ends the wait at once. When `wait` runs out, returns the last attempt's error
/// (`Error::Contended` if the lock was still held).
pub(crate) fn acquire_within(
    shared: &Shared,
    resource: &[u8],
    ttl: Duration,
    wait: Duration,
) -> Result<Acquired, Error> {
    let start = Instant::now();
    let deadline = start
        .checked_add(wait)
        .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600));
    let mut waiter = Waiter::new(shared, resource, deadline);
    waiter.queue_up_if_others_wait();
    loop {
        let seen = waiter.seen();
        let attempt_start = Instant::now();
        let error = match shared.acquire(resource, ttl) {
            Ok(acquired) => {
                waiter.finish(Some(notice_of(acquired.value.as_bytes())));
                return Ok(acquired);
            }
            Err(e) if e.is_retryable() => e,
            Err(e) => {
                waiter.finish(None);
                return Err(e);
            }
        };
        let now = Instant::now();
        if now >= deadline {
            waiter.finish(None);
            return Err(error);
        }
        if !error.is_contention() {
            // No quorum, or too slow: no message tells when that passes,
            // but a release heard meanwhile is still worth a try.
            waiter.wait_for_turn(seen, Failed::Unreachable);
            continue;
        }
        if waiter.subscribe() {
            continue;
        }
        let elapsed = now.saturating_duration_since(attempt_start);
        if waiter.quick_retry(&error, elapsed) {
            continue;
        }
        waiter.wait_for_turn(
            seen,
            Failed::Contended {
                won_nothing: won_nothing(&error),
                declined: declined(&error),
            },
        );
    }
}

/// How a try failed, for [`Waiter::wait_for_turn`].
#[derive(Clone, Copy, Debug)]
enum Failed {
    /// The lock was held: `declined` are the masters that said so.
    Contended {
        won_nothing: bool,
        declined: NodeSet,
    },
    /// No quorum answered in time.
    Unreachable,
}

/// Whether a failed try won no master at all.
fn won_nothing(error: &Error) -> bool {
    error.nodes().map_or(true, |report| {
        report.iter().all(|s| s.outcome() != &NodeOutcome::Agreed)
    })
}

/// The masters that refused a failed try (the key was held there).
fn declined(error: &Error) -> NodeSet {
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

fn sleep_until(until: Instant) {
    std::thread::sleep(until.saturating_duration_since(Instant::now()));
}

/// What a waiter had seen of its channel when it last tried.
#[derive(Clone, Copy, Debug)]
struct Seen {
    releases: u64,
    taken: u64,
    /// Who had run the latest release.
    heard: Heard,
}

impl Seen {
    const NOTHING: Seen = Seen {
        releases: 0,
        taken: 0,
        heard: Heard::NOTHING,
    };

    fn of(c: &Channel) -> Seen {
        Seen {
            releases: c.releases,
            taken: c.taken,
            heard: c.latest_heard(),
        }
    }
}

/// One waiting call.
struct Waiter<'a> {
    shared: &'a Shared,
    resource: &'a [u8],
    deadline: Instant,
    /// Our id in the queue, made when first needed.
    id: Id,
    /// The resource's channel, once needed.
    channel: Vec<u8>,
    interest: Option<Interest<'a>>,
    queue_master: usize,
    /// Whether our `w` message was sent (and not withdrawn).
    announced: bool,
    /// Whether we saw ourselves in the queue since announcing.
    listed: bool,
    quick: u32,
    /// Tries in a row that won no master after a release only a minority
    /// of the masters was heard to run (maybe forged).
    fruitless: u32,
    /// The last try found the lock held on a master not yet heard to run
    /// the latest release: it may have lagged, so that master's notice
    /// (or a short pause) starts another try.
    recheck: bool,
    /// The release (by number) the short pauses were for, and how many
    /// were taken: each is twice the one before.
    short_pauses_for: u64,
    short_pauses: u32,
}

impl<'a> Waiter<'a> {
    fn new(shared: &'a Shared, resource: &'a [u8], deadline: Instant) -> Waiter<'a> {
        Waiter {
            shared,
            resource,
            deadline,
            id: [0; ID_LEN],
            channel: Vec::new(),
            interest: None,
            queue_master: 0,
            announced: false,
            listed: false,
            quick: 0,
            fruitless: 0,
            recheck: false,
            short_pauses_for: 0,
            short_pauses: 0,
        }
    }

    /// `pause` after `from`, or the deadline if that is sooner. A pause
    /// too long for the clock (`retry_delay(Duration::MAX)`) ends at the
    /// deadline too.
    fn after(&self, from: Instant, pause: Duration) -> Instant {
        from.checked_add(pause)
            .map_or(self.deadline, |at| at.min(self.deadline))
    }

    /// How long the waiters behind the first wait for it to take the lock
    /// after a release before they try themselves.
    fn grace(&self) -> Duration {
        (self.shared.node_timeout / 10).max(Duration::from_millis(1))
    }

    fn seen(&self) -> Seen {
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
            self.id = new_waiter_id();
        }
        let interest =
            self.shared
                .notices
                .join(&self.shared.nodes, self.resource, self.queue_master);
        self.interest = Some(interest);
    }

    /// Before the first try: if this handle still hears the channel (one of
    /// its threads waited on it lately) and others are queued, takes a
    /// place in the queue and waits for its turn instead of barging in. If
    /// nothing happens (no release, nobody takes the lock) within the grace
    /// period, the queue is stale and the waiter tries anyway.
    fn queue_up_if_others_wait(&mut self) {
        let shared = self.shared;
        // Two looks that cost no allocation and no system call, for the
        // common case of a lock nobody waited for lately.
        if !shared.release_notices
            || !shared.notices.has_channels()
            || !shared.notices.is_subscribed(self.resource)
        {
            return;
        }
        self.join();
        let Some(interest) = &self.interest else {
            return;
        };
        interest.refresh();
        let id = self.id;
        if !interest.view(|c| c.queue_heard() && c.others_queued(&id)) {
            return;
        }
        let seen = self.seen();
        self.announce(Message::Waiting(id));
        let now = Instant::now();
        let fallback = self.after(now, self.shared.retry_pause());
        self.turn_loop(seen, Some(self.after(now, self.grace())), fallback);
    }

    /// After a try found the lock held: subscribes if not yet done, and
    /// announces the waiter once the queue's master confirmed. Returns
    /// whether the subscription is new (so the caller tries again at once).
    fn subscribe(&mut self) -> bool {
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
        if !self.announced && interest.view(|c| c.queue_heard()) {
            self.announce(Message::Waiting(self.id));
        }
        fresh
    }

    /// After a try that won some masters but not a quorum: pauses a random
    /// moment (up to twice the try's time) and says to try again, at most
    /// [`QUICK_RETRIES`] times in a row.
    fn quick_retry(&mut self, error: &Error, elapsed: Duration) -> bool {
        if won_nothing(error) || self.quick >= QUICK_RETRIES {
            return false;
        }
        self.quick += 1;
        let span = elapsed.max(FIRST_GAP).saturating_mul(2);
        let span_ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX).max(1);
        let pause = Duration::from_nanos(getrandom::u64().unwrap_or(0) % span_ns);
        sleep_until(self.after(Instant::now(), pause));
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
    fn wait_for_turn(&mut self, seen: Seen, failed: Failed) {
        let tried = Instant::now();
        self.quick = 0;
        self.recheck = false;
        if let Failed::Contended {
            won_nothing,
            declined,
        } = failed
        {
            let real = self.latest_release_was_real();
            self.fruitless = if won_nothing && !real {
                self.fruitless + 1
            } else {
                0
            };
            self.recheck = seen.releases > 0 && !declined.difference(seen.heard.from).is_empty();
        }
        let now = Instant::now();
        let mut fallback = self.after(now, self.shared.retry_pause());
        if self.interest.is_none() {
            sleep_until(fallback);
            return;
        }
        if self.recheck {
            if self.short_pauses_for != seen.releases {
                self.short_pauses_for = seen.releases;
                self.short_pauses = 0;
            }
            // Fruitless tries in a row double it too: forged notices must
            // not buy a series of quick tries each around the rate limit.
            // (Not none at all: a try decided before the master that sent
            // the notice answered looks fruitless even when it was real.)
            let doublings = (self.short_pauses + self.fruitless).min(20);
            let pause = self.grace().saturating_mul(1 << doublings);
            self.short_pauses += 1;
            fallback = fallback.min(self.after(now, pause));
        }
        let released = self.turn_loop(seen, None, fallback);
        if released && self.fruitless > 0 {
            // Rate limit: after fruitless tries, space them out.
            let doublings = self.fruitless.saturating_sub(1).min(20);
            let gap = FIRST_GAP
                .saturating_mul(1 << doublings)
                .min(self.shared.retry_pause());
            sleep_until(self.after(tried, gap));
        }
    }

    /// Whether the latest release is known to have run on a quorum of the
    /// masters (so a try it started that won nothing lost a real race, and
    /// was no forged notice). Takes in the copies that came meanwhile.
    fn latest_release_was_real(&self) -> bool {
        let Some(interest) = &self.interest else {
            return false;
        };
        interest.refresh();
        let quorum = quorum(self.shared.nodes.len());
        interest.view(|c| c.latest_heard().by_quorum(quorum))
    }

    /// Waits for this waiter's turn (see [`Waiter::turn`]) or `fallback`.
    /// With `idle_until`: also ends then if nothing happened on the
    /// channel since `seen`. Returns whether a release (rather than the
    /// clock) ended it.
    fn turn_loop(
        &mut self,
        mut seen: Seen,
        idle_until: Option<Instant>,
        fallback: Instant,
    ) -> bool {
        loop {
            let now = Instant::now();
            if now >= fallback {
                return false;
            }
            let mut next = fallback;
            let Some(interest) = self.interest.take() else {
                sleep_until(fallback);
                return false;
            };
            let (turn, version, announce) = interest.view(|c| {
                let announce = self.keep_place(c);
                let turn = self.turn(c, &mut seen, idle_until, now, &mut next);
                (turn, c.version, announce)
            });
            self.interest = Some(interest);
            if announce {
                self.announce(Message::Waiting(self.id));
            }
            match turn {
                Turn::Released => return true,
                Turn::Idle => return false,
                Turn::Wait => {}
            }
            if let Some(interest) = &self.interest {
                interest.wait_for(next, |c| c.version != version);
            }
        }
    }

    /// Keeps track of our place in the queue; returns whether to announce
    /// ourselves (again): the queue became audible, or we were passed over
    /// (a waiter behind us took the lock while we were slow).
    fn keep_place(&mut self, c: &Channel) -> bool {
        if !c.queue_heard() {
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

    /// Whether it is this waiter's turn to try, given the channel `c` and
    /// what it had `seen`; lowers `next` to when to look again without a
    /// change on the channel.
    fn turn(
        &self,
        c: &mut Channel,
        seen: &mut Seen,
        idle_until: Option<Instant>,
        now: Instant,
        next: &mut Instant,
    ) -> Turn {
        // A copy of the latest release from a master our last try found
        // still holding the lock: that master has deleted it now.
        let copy =
            self.recheck && c.releases == seen.releases && c.latest_heard().from != seen.heard.from;
        if c.releases == seen.releases && !copy {
            if let Some(idle_until) = idle_until {
                if c.taken == seen.taken {
                    if now >= idle_until {
                        return Turn::Idle;
                    }
                    *next = (*next).min(idle_until);
                }
            }
            return Turn::Wait;
        }
        let position = c.position(&self.id);
        let queued = c.queue_heard() && (position.is_some() || c.others_queued(&self.id));
        if !queued {
            // No queue: one try by this handle per release (and the
            // recheck of the thread whose try it started).
            if copy {
                return Turn::Released;
            }
            if c.ticket {
                c.ticket = false;
                return Turn::Released;
            }
            seen.releases = c.releases;
            seen.heard = c.latest_heard();
            return Turn::Wait;
        }
        if c.taken_since_release() {
            // A waiter took it since: wait for its release.
            *seen = Seen::of(c);
            return Turn::Wait;
        }
        if position == Some(0) {
            return Turn::Released;
        }
        let Some(released_at) = c.released_at else {
            return Turn::Wait;
        };
        let silent_until = released_at + self.grace();
        if now >= silent_until {
            return Turn::Released;
        }
        *next = (*next).min(silent_until);
        Turn::Wait
    }

    fn announce(&mut self, message: Message) {
        if matches!(message, Message::Waiting(_)) {
            self.announced = true;
        }
        self.shared
            .announce(self.queue_master, &self.channel, message);
    }

    /// The call ends: tells the queue whether we took the lock (the one
    /// with this notice) or left.
    fn finish(&mut self, took: Option<Id>) {
        if self.announced {
            let message = match took {
                Some(lock) => Message::Took {
                    waiter: self.id,
                    lock,
                },
                None => Message::Left(self.id),
            };
            self.announced = false;
            self.shared
                .announce(self.queue_master, &self.channel, message);
        }
        self.interest = None;
    }
}

/// What a waiter is to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// Try now: a release was heard and it is our turn.
    Released,
    /// Try now: nothing happened for a while (see `queue_up_if_others_wait`).
    Idle,
    Wait,
}
