//! What a `Redlock` handle knows about each master, shared by all its
//! threads: when to try connecting again after failures, and the recent
//! history users read through [`Redlock::health`](crate::Redlock::health).
//!
//! When connecting to a node, or a connection to it, fails, new connections
//! to it wait a while before being tried again, doubling with each failure
//! in a row. An answer from the node ends the backoff. So a node one thread
//! found dead is not dialled again by every other thread; established
//! connections are not affected. A node skipped for its backoff is reported
//! with the failure that put it there, and how long ago that was.
//!
//! A node that misses a deadline on a connection that is kept (a stalled or
//! slow server: see `round`) is failing too, but only in the health view.
//! It is kept apart from the backoff on purpose: its connection is not
//! broken, and it must keep being sent commands (a release queued behind
//! its SET, or its answer once it resumes), so nothing delays connecting
//! to it. Two counters and two remembered failures keep the two apart: the
//! backoff reads only its own, the health view reads both. An answer a round
//! awaited ends both; answers read after their round returned end the missed
//! deadlines.
//!
//! The hot path touches this state once per reply, with a relaxed load; it
//! writes only when something changes or at most once a millisecond (the
//! round-trip sample), so threads do not contend on it.

use super::standing::{FenceStanding, Told};
use crate::command::CommandForm;
use crate::error::{FenceFault, NodeError, Rounded, ServerError};
use crate::events::tell::Hook;
use crate::events::{MasterChange, MasterEvent};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The first failure allows an immediate reconnect (a single lost connection
/// is common and cheap to replace); later ones wait this long, doubled each
/// time up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The longest wait between attempts to reconnect to a failing node.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How often a node's round-trip time is sampled at most.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// Shared state of one node.
#[derive(Debug)]
pub(crate) struct NodeState {
    /// Failures in a row other than missed deadlines (a connection refused,
    /// broken or misbehaving, an error reply): they drive the reconnect
    /// backoff.
    failures: AtomicU32,
    /// Deadlines missed in a row on connections that were kept (at most
    /// one per node per round): the health view only, no backoff.
    missed: AtomicU32,
    /// When a new connection may next be tried, in nanoseconds after `epoch`.
    retry_at: AtomicU64,
    /// When the node last answered well, in nanoseconds after `epoch` (0:
    /// never), and how long that answer took.
    answered_at: AtomicU64,
    round_trip: AtomicU64,
    /// The failures remembered, and when they happened.
    last_failure: Mutex<LastFailures>,
    /// How the last connection whose handshake answered releases (low
    /// nibble) and extends (high nibble), as `CommandForm::code`s.
    forms: AtomicU8,
    epoch: Instant,
    /// Whether the node was ever sent a command (so that a node whose
    /// answers were not awaited yet is not shown as never used).
    sent: AtomicBool,
    /// Whether the hook was last told the node is down (a change of it is
    /// what is told: see `events`).
    down: AtomicBool,
    /// Fenced handles: whether the node counts for fencing, or why not.
    fence: FenceStanding,
    /// Who is told of the node's changes, and how the node is named then.
    hook: Hook,
    index: usize,
    name: String,
}

/// The failures a node remembers (kept after it recovers).
#[derive(Debug, Default)]
struct LastFailures {
    /// The last failure that counted toward the backoff: the one a node
    /// skipped for its backoff reports.
    backoff: Option<(NodeError, Instant)>,
    /// The last failure of any kind, missed deadlines included: the one the
    /// health view shows.
    any: Option<(NodeError, Instant)>,
}

impl NodeState {
    pub(crate) fn new(epoch: Instant) -> NodeState {
        NodeState {
            failures: AtomicU32::new(0),
            missed: AtomicU32::new(0),
            retry_at: AtomicU64::new(0),
            answered_at: AtomicU64::new(0),
            round_trip: AtomicU64::new(0),
            last_failure: Mutex::new(LastFailures::default()),
            forms: AtomicU8::new(0),
            epoch,
            sent: AtomicBool::new(false),
            down: AtomicBool::new(false),
            fence: FenceStanding::default(),
            hook: Hook::default(),
            index: 0,
            name: String::new(),
        }
    }

    /// The state of master `index`, named `name`, whose changes (down,
    /// back, missing a right) are told to `hook`.
    pub(crate) fn telling(mut self, index: usize, name: &str, hook: Hook) -> NodeState {
        self.index = index;
        self.name = name.to_string();
        self.hook = hook;
        self
    }

    /// Tells the hook of a change.
    fn tell(&self, change: MasterChange<'_>) {
        self.hook.master(MasterEvent {
            index: self.index,
            node: &self.name,
            change,
        });
    }

    /// After a failure: tells the hook if the node was up, or why it is
    /// down (see `MasterChange::why_down`) unless it failed so before.
    fn went_down(&self, error: &NodeError, same_before: bool) {
        let was_down = self.down.swap(true, Ordering::Relaxed);
        match MasterChange::why_down(error) {
            Some(why) if !was_down || !same_before => self.tell(why),
            _ if !was_down => self.tell(MasterChange::Down(error)),
            _ => {}
        }
    }

    /// After an answer: tells the hook if the node was down and nothing is
    /// failing any more.
    fn maybe_back(&self) {
        if self.failures.load(Ordering::Relaxed) == 0
            && self.missed.load(Ordering::Relaxed) == 0
            && self.down.swap(false, Ordering::Relaxed)
        {
            self.tell(MasterChange::Back);
        }
    }

    /// Fencing: changes the node's standing (see `standing`), telling the
    /// hook when that starts or ends an episode of being left out.
    pub(crate) fn fence(&self, change: impl FnOnce(&FenceStanding) -> Told) {
        match change(&self.fence) {
            Told::LeftOut(fault) => self.tell(MasterChange::FenceLeftOut(&fault)),
            Told::Back => self.tell(MasterChange::FenceBack),
            Told::Nothing => {}
        }
    }

    /// A connection to the node found that it releases and extends in
    /// these forms (see `Capabilities::forms`).
    pub(crate) fn uses(&self, (release, extend): (Option<CommandForm>, Option<CommandForm>)) {
        let code = CommandForm::code(release) | CommandForm::code(extend) << 4;
        if code != 0 && self.forms.load(Ordering::Relaxed) != code {
            self.forms.store(code, Ordering::Relaxed);
        }
    }

    /// A command went out to the node. One relaxed load once it has.
    #[inline]
    pub(crate) fn sent(&self) {
        if !self.sent.load(Ordering::Relaxed) {
            self.sent.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a new connection may be tried at `now`.
    pub(crate) fn may_connect(&self, now: Instant) -> bool {
        self.nanos(now) >= self.retry_at.load(Ordering::Relaxed)
    }

    /// `Ok` if a new connection may be tried at `now`; otherwise the
    /// backoff error, naming the failure that caused it.
    pub(crate) fn check(&self, now: Instant) -> Result<(), NodeError> {
        if self.may_connect(now) {
            return Ok(());
        }
        let (cause, ago) = match &self.failure().backoff {
            Some((error, at)) => (error.clone(), now.saturating_duration_since(*at)),
            None => (NodeError::Closed, Duration::ZERO),
        };
        Err(NodeError::Backoff {
            cause: Box::new(cause),
            ago,
        })
    }

    /// How long until a new connection may be tried, from `now` (zero
    /// outside the reconnect backoff).
    pub(crate) fn reconnect_in(&self, now: Instant) -> Duration {
        let retry_at = self.retry_at.load(Ordering::Relaxed);
        Duration::from_nanos(retry_at.saturating_sub(self.nanos(now)))
    }

    /// The node's last failure, if it will repeat until the configuration
    /// changes (a refused handshake, say) and nothing has answered since:
    /// dialling it again is pointless.
    pub(crate) fn failing_for_good(&self) -> Option<NodeError> {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let failure = self.failure();
        let (error, _) = failure.backoff.as_ref()?;
        error.is_permanent().then(|| error.clone())
    }

    /// The node answered well at `now`, `round_trip` after the round
    /// started: the backoff and any missed deadlines end.
    pub(crate) fn answered(&self, now: Instant, round_trip: Duration) {
        // Read first: the common case (no failures) then writes nothing, so
        // threads do not contend on the cache line.
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
            self.retry_at.store(0, Ordering::Relaxed);
        }
        self.caught_up();
        // One load that the common case (up) reads and never writes.
        if self.down.load(Ordering::Relaxed) {
            self.maybe_back();
        }
        let now = self.nanos(now).max(1);
        let last = self.answered_at.load(Ordering::Relaxed);
        if last == 0 || now.saturating_sub(last) >= SAMPLE_EVERY.as_nanos() as u64 {
            self.answered_at.store(now, Ordering::Relaxed);
            let nanos = u64::try_from(round_trip.as_nanos()).unwrap_or(u64::MAX);
            self.round_trip.store(nanos, Ordering::Relaxed);
        }
    }

    /// The node failed at `now` with `error`: push the next connect attempt
    /// back, and remember why.
    pub(crate) fn failed(&self, now: Instant, error: &NodeError) {
        let failures = self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let wait = match failures {
            0 | 1 => Duration::ZERO,
            n => FIRST_BACKOFF
                .saturating_mul(1 << (n - 2).min(16))
                .min(MAX_BACKOFF),
        };
        self.retry_at.store(
            self.nanos(now).saturating_add(wait.as_nanos() as u64),
            Ordering::Relaxed,
        );
        // A backoff is not a failure of its own: keep what caused it.
        if !matches!(error, NodeError::Backoff { .. }) {
            let mut last = self.failure();
            let kind = std::mem::discriminant;
            let same_before = matches!(&last.backoff, Some((e, _)) if kind(e) == kind(error));
            last.backoff = Some((error.clone(), now));
            last.any = Some((error.clone(), now));
            // Told with the lock let go: a hook may read the health view.
            drop(last);
            self.went_down(error, same_before);
        }
    }

    /// The node missed its deadline at `now` (`error` says in which phase)
    /// on a connection that is kept: it is stalled or slow, and its answers
    /// may still come. It shows as failing in the health view at once, but
    /// new connections are not delayed and the backoff's cause is kept:
    /// the connection is sound, and the node must keep being sent commands.
    pub(crate) fn missed_deadline(&self, now: Instant, error: &NodeError) {
        self.missed.fetch_add(1, Ordering::Relaxed);
        self.failure().any = Some((error.clone(), now));
        self.went_down(error, false);
    }

    /// Answers the node owed on a connection were read after their round
    /// had returned (late, or in time but not awaited): it answers, so it
    /// is not stalled, and its missed deadlines end. The backoff is left to
    /// an answer a round awaited (`answered`).
    pub(crate) fn caught_up(&self) {
        // Read first, as in `answered`: this runs on the hot path.
        if self.missed.load(Ordering::Relaxed) != 0 {
            self.missed.store(0, Ordering::Relaxed);
            self.maybe_back();
        }
    }

    /// A snapshot for users, at `now`.
    pub(crate) fn snapshot(&self, name: &str, now: Instant) -> NodeHealth {
        let answered_at = self.answered_at.load(Ordering::Relaxed);
        let since =
            |nanos: u64| now.saturating_duration_since(self.epoch + Duration::from_nanos(nanos));
        let failures = self.failures.load(Ordering::Relaxed);
        let missed = self.missed.load(Ordering::Relaxed);
        let forms = self.forms.load(Ordering::Relaxed);
        NodeHealth {
            release_form: CommandForm::from_code(forms & 0xf),
            extension_form: CommandForm::from_code(forms >> 4),
            node: name.to_string(),
            consecutive_failures: failures.saturating_add(missed),
            last_answer: (answered_at != 0).then(|| since(answered_at)),
            round_trip: (answered_at != 0)
                .then(|| Duration::from_nanos(self.round_trip.load(Ordering::Relaxed))),
            last_failure: self
                .failure()
                .any
                .as_ref()
                .map(|(error, at)| (error.clone(), now.saturating_duration_since(*at))),
            reconnect_in: self.reconnect_in(now),
            sent: self.sent.load(Ordering::Relaxed),
            notices_refused: None,
            fence: self.fence.fault(),
            fence_slots: self.fence.slots_left_out(),
        }
    }

    fn failure(&self) -> std::sync::MutexGuard<'_, LastFailures> {
        // A plain value, consistent after every store: poisoning is moot.
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn nanos(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// One master's recent history as seen by a [`Redlock`](crate::Redlock)
/// handle (all its clones and threads), from
/// [`Redlock::health`](crate::Redlock::health).
///
/// Cheap to take: it reads a few counters the rounds keep anyway. The
/// round trip is sampled at most once a millisecond, so under load it is a
/// recent sample, not an average.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeHealth {
    node: String,
    consecutive_failures: u32,
    last_answer: Option<Duration>,
    round_trip: Option<Duration>,
    last_failure: Option<(NodeError, Duration)>,
    reconnect_in: Duration,
    sent: bool,
    notices_refused: Option<ServerError>,
    release_form: Option<CommandForm>,
    extension_form: Option<CommandForm>,
    fence: Option<FenceFault>,
    fence_slots: Option<usize>,
}

impl NodeHealth {
    /// The node's address as configured (`host:port`, never credentials).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Failures since the node last answered well (0 for a healthy node):
    /// connections that failed, and rounds in which it missed its deadline.
    /// A round in which the node failed counts once.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// How long ago the node last answered a command well; `None` if it
    /// never has (no round has used it yet, it never answered, or its
    /// answers were not awaited: the rounds were decided without them, and
    /// they are read with the connection's next use).
    pub fn last_answer(&self) -> Option<Duration> {
        self.last_answer
    }

    /// How long the node took to answer, from the start of a recent round
    /// to its answer.
    pub fn round_trip(&self) -> Option<Duration> {
        self.round_trip
    }

    /// The last failure, and how long ago it happened (kept after the node
    /// recovers; compare with [`NodeHealth::last_answer`]).
    pub fn last_failure(&self) -> Option<(&NodeError, Duration)> {
        self.last_failure.as_ref().map(|(e, ago)| (e, *ago))
    }

    /// Whether the node is failing now: it failed since it last answered.
    ///
    /// That includes a node that missed its deadline in a round and has
    /// not answered since: a frozen or overloaded server that keeps its
    /// connections open (its failure is then a
    /// [`NodeError::TimedOut`]). Such a node is
    /// not put into the reconnect backoff and its connection is kept, so it
    /// keeps being sent commands, and its first answer ends the failure.
    pub fn is_failing(&self) -> bool {
        self.consecutive_failures > 0
    }

    /// How long until a new connection to the node is tried (zero when the
    /// node is not in its reconnect backoff).
    pub fn reconnect_in(&self) -> Duration {
        self.reconnect_in
    }

    /// The node's refusal to subscribe a waiting thread to release notices
    /// (an ACL user without rights on the channels
    /// `redlock-sync:released:*`), if it has confirmed no subscription
    /// since. Locking still works, but waiters do not hear the releases it
    /// runs: they try again only after each fallback pause, or when another
    /// master's notice comes. Not a failure ([`NodeHealth::is_failing`]).
    pub fn release_notices_refused(&self) -> Option<&ServerError> {
        self.notices_refused.as_ref()
    }

    /// How the node's connections release locks: by a native
    /// compare-and-delete ([`CommandForm::DelIfEq`] on Valkey 9.0+,
    /// [`CommandForm::DelExIfEq`] on Redis 8.4+) or by a
    /// [script](CommandForm::Script), as the last connection whose
    /// handshake answered found; `None` before any has, or if it cannot
    /// release at all.
    pub fn release_form(&self) -> Option<CommandForm> {
        self.release_form
    }

    /// How the node's connections extend locks: [`CommandForm::SetIfEq`]
    /// (Valkey 8.1+, Redis 8.4+) or by a [script](CommandForm::Script), as
    /// for [`NodeHealth::release_form`].
    pub fn extension_form(&self) -> Option<CommandForm> {
        self.extension_form
    }

    /// Fenced handles ([`Builder::fencing`](crate::Builder::fencing)): why
    /// the node is left out of fenced acquisitions, if it is (no anchor,
    /// restarted or rolled back, another epoch, ...: each [`FenceFault`]
    /// says what to run, mostly `Redlock::fence_repair`). Locks work on
    /// while a quorum counts: this shows a master that stopped counting
    /// before one more failure stops fenced locking. Not a failure. As a
    /// probe or an acquisition last found; `None` while it counts.
    pub fn fence_fault(&self) -> Option<FenceFault> {
        self.fence
    }

    /// Fenced handles, a cluster voter ([`Builder::cluster`](crate::Builder::cluster)),
    /// which keeps a fence counter per slot: in how many of its 16384
    /// slots it is left out of fenced locks, as acquisitions and the last
    /// repair found ([`NodeHealth::fence_fault`] says why: the last reason
    /// found). `None` for other voters, and before any slot was left out.
    pub fn fence_slots_left_out(&self) -> Option<usize> {
        self.fence_slots.filter(|_| self.fence.is_some())
    }

    /// The snapshot, with the node's last refusal of release notices.
    pub(crate) fn with_notices_refused(mut self, refusal: Option<ServerError>) -> NodeHealth {
        self.notices_refused = refusal;
        self
    }
}

impl fmt::Display for NodeHealth {
    /// One line: `host:port ok, answered 3ms ago in 210µs` or `host:port
    /// failing (4 in a row): connection refused, 1.2s ago`; then the forms
    /// it uses once known (`; releases by DELIFEQ, extends by SET … IFEQ`);
    /// followed by what to grant if the node refuses release notices, and
    /// why it is left out of fenced locks, with what to run, if it is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_state(f)?;
        if let (Some(release), Some(extend)) = (self.release_form, self.extension_form) {
            write!(f, "; releases by {release}, extends by {extend}")?;
        }
        if let Some(refusal) = &self.notices_refused {
            write!(
                f,
                "; release notices refused ({refusal}), so waiters poll; \
                 grant the ACL user &redlock-sync:released:*"
            )?;
        }
        match (&self.fence, self.fence_slots_left_out()) {
            (Some(fault), Some(n)) => {
                write!(f, "; left out of fenced locks in {n} slots: {fault}")?
            }
            (Some(fault), None) => write!(f, "; left out of fenced locks: {fault}")?,
            _ => {}
        }
        Ok(())
    }
}

impl NodeHealth {
    /// The line's first part: failing or answering.
    fn fmt_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.last_failure, self.is_failing()) {
            (Some((error, ago)), true) => write!(
                f,
                "{} failing ({} in a row): {error}, {} ago",
                self.node,
                self.consecutive_failures,
                Rounded(*ago)
            ),
            _ => match (self.last_answer, self.round_trip) {
                (Some(ago), Some(rtt)) => {
                    let (ago, rtt) = (Rounded(ago), Rounded(rtt));
                    write!(f, "{} ok, answered {ago} ago in {rtt}", self.node)
                }
                _ if self.sent => write!(
                    f,
                    "{} sent commands, no answer read yet (the rounds were decided without \
                     waiting for it)",
                    self.node
                ),
                _ => write!(f, "{} not used yet", self.node),
            },
        }
    }
}

#[cfg(test)]
mod tests;
