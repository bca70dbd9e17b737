//! Waiting for a held lock: try; between tries, sleep until it is this
//! waiter's turn after a release, or until a fallback timer runs out; until
//! the lock is ours or the wait is over.
//!
//! After a first try fails (the lock held, or no quorum), the waiter
//! subscribes to the resource's channel (see `notify`), tries once more (a
//! release before the subscription would otherwise go unheard), and
//! announces itself on the queue's master. Should a quorum of masters
//! confirm the subscription only after that try began, it tries again
//! then, for the same reason. From then on:
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
//! tried at once, also while such tries are spaced out. Messages never
//! grant anything: every try is a full acquisition round.
//!
//! Waiters are served in the order they announced themselves as long as
//! everyone hears the queue; nothing more is promised (see the README's
//! known limits).

use super::acquire::{acquire, Acquired};
use crate::command::Command;
use crate::error::{Error, NodeOutcome};
use crate::handle::notify::message::{new_waiter_id, notice_of, Id, Message, ID_LEN};
use crate::handle::notify::{can_subscribe, channel_of, Channel, Heard, Interest};
use crate::handle::Shared;
use crate::quorum::{NodeSet, Rule};
use crate::round::Plan;
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
/// pause; any other error ends the wait at once. When `wait` runs out,
/// returns the last attempt's error (`Error::Contended` if the lock was
/// still held).
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
        let error = match acquire(shared, resource, ttl) {
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
            let error = waiter.explain(error);
            waiter.finish(None);
            return Err(error);
        }
        // Whatever the failure, a release heard from now on is worth a try.
        if waiter.subscribe() {
            continue;
        }
        let failed = if error.is_contention() {
            let elapsed = now.saturating_duration_since(attempt_start);
            if waiter.quick_retry(&error, elapsed) {
                continue;
            }
            Failed::Contended {
                won_nothing: won_nothing(&error),
                declined: declined(&error),
            }
        } else {
            // No quorum, or too slow: no message tells when that passes.
            Failed::Unreachable
        };
        waiter.wait_for_turn(seen, failed);
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
    real_releases: u64,
    taken: u64,
    /// Who had run the latest release.
    heard: Heard,
    /// Whether a quorum of masters had confirmed the subscription.
    settled: bool,
}

impl Seen {
    const NOTHING: Seen = Seen {
        releases: 0,
        real_releases: 0,
        taken: 0,
        heard: Heard::NOTHING,
        settled: false,
    };

    fn of(c: &Channel) -> Seen {
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
enum Woke {
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
    /// The last try was started by a release only a minority of the
    /// masters was heard to run (maybe forged), or by the short pauses
    /// after one.
    by_minority: bool,
    /// Such tries in a row that won no master.
    fruitless: u32,
    /// When a release heard from a minority may start a try again (the
    /// rate limit after fruitless tries).
    minority_not_before: Option<Instant>,
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
            by_minority: false,
            fruitless: 0,
            minority_not_before: None,
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

    /// After a failed try: subscribes if not yet done, and announces the
    /// waiter once the queue's master confirmed. Returns whether the
    /// subscription is new (so the caller tries again at once).
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
    ///
    /// After tries that releases heard from a minority of the masters
    /// started and that won nothing (maybe forged notices), such releases
    /// start a try only after a gap that doubles with each (the rate
    /// limit); a release heard from a quorum ends the gap at once.
    fn wait_for_turn(&mut self, seen: Seen, failed: Failed) {
        let tried = Instant::now();
        self.quick = 0;
        self.recheck = false;
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
            self.recheck = seen.releases > 0 && !declined.difference(seen.heard.from).is_empty();
        }
        let now = Instant::now();
        let mut fallback = self.after(now, self.shared.retry_pause());
        if self.interest.is_none() {
            sleep_until(fallback);
            self.by_minority = false;
            return;
        }
        self.minority_not_before = (self.fruitless > 0).then(|| {
            let doublings = (self.fruitless - 1).min(20);
            let gap = FIRST_GAP
                .saturating_mul(1 << doublings)
                .min(self.shared.retry_pause());
            self.after(tried, gap)
        });
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
        self.by_minority = match self.turn_loop(seen, None, fallback) {
            Woke::Release { real } => !real,
            // A short pause after a try of the same release: it counts as
            // that release's.
            Woke::Clock if self.recheck => self.by_minority,
            Woke::Clock | Woke::Settled | Woke::Idle => false,
        };
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

    /// Waits for this waiter's turn (see [`Waiter::turn`]) or `fallback`.
    /// With `idle_until`: also ends then if nothing happened on the
    /// channel since `seen`.
    fn turn_loop(
        &mut self,
        mut seen: Seen,
        idle_until: Option<Instant>,
        fallback: Instant,
    ) -> Woke {
        loop {
            let now = Instant::now();
            if now >= fallback {
                return Woke::Clock;
            }
            let mut next = fallback;
            let Some(interest) = self.interest.take() else {
                sleep_until(fallback);
                return Woke::Clock;
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
            if let Some(woke) = turn {
                return woke;
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

    /// Whether it is this waiter's turn to try (and why), given the
    /// channel `c` and what it had `seen`; lowers `next` to when to look
    /// again without a change on the channel.
    fn turn(
        &self,
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
                if c.taken == seen.taken {
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
        let queued = c.queue_heard() && (position.is_some() || c.others_queued(&self.id));
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
        // The grace period runs from the release that woke us (forged
        // notices since must not push it back).
        let since = if real { c.real_at } else { c.released_at }?;
        let silent_until = since + self.grace();
        if now >= silent_until {
            return released;
        }
        *next = (*next).min(silent_until);
        None
    }

    fn announce(&mut self, message: Message) {
        if matches!(message, Message::Waiting(_)) {
            self.announced = true;
        }
        announce(self.shared, self.queue_master, &self.channel, message);
    }

    /// The error of a wait that ran out: `error`, saying also which masters
    /// refused to send this waiter release notices (it then polled).
    fn explain(&self, error: Error) -> Error {
        match self.interest.as_ref().and_then(Interest::refused) {
            Some((masters, refusal)) => error.with_notices_refused(masters, refusal),
            None => error,
        }
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
            announce(self.shared, self.queue_master, &self.channel, message);
        }
        self.interest = None;
    }
}

/// Publishes `message` on `channel` on master `master` without waiting
/// for the answer (see `notify`): a waiter's word to the others, which
/// may be lost without harm.
fn announce(shared: &Shared, master: usize, channel: &[u8], message: Message) {
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
        despite_backoff: false,
        skip: NodeSet::EMPTY,
        unawaited: true,
    };
    session.send_only(shared.masters(), plan, deadline);
    shared.pool.give_back(session);
}
