//! Extending a held lock: [`Lock::extend`] and [`Lock::renew_if_below`],
//! and the protocol they share with the renewer of leases (see
//! `lease::renew`): checks before any I/O (`begin_extension`), where the
//! commands go (`extension_targets`), and what the round's result does to
//! the lock (`end_extension`), which decides when an extension counts.

use super::Lock;
use crate::clock::BootInstant;
use crate::command::{Command, SetCommand};
use crate::error::{Error, NodeReport};
use crate::events::call::{Call, CallName};
use crate::events::{Operation, RoundEvent, RoundOutcome};
use crate::handle::pool::{Taken, Ticket};
use crate::quorum::{drift, validity, Decision, NodeSet, Rule, Tally};
use crate::round::{Dial, Plan, Progress, Session};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Lock {
    /// Sets the lock's TTL to `ttl` from now on every master where it is
    /// still ours, and sets it, if the resource is free there, on the
    /// masters its acquisition left out (down or lagging then) and on those
    /// that said no to an earlier extension (the key gone there: a restart
    /// without persistence), so that an extended lock survives the loss of
    /// any minority of masters. A round decides at a quorum, so a master's
    /// no may be read only by a later extension: the repair follows it.
    ///
    /// Succeeds only if a quorum holds the key afterwards, confirmed within
    /// the new validity, computed from the instant the call started, as for
    /// acquisition, and before the old validity ran out: a lock whose
    /// validity ended is never valid again (another client may have held
    /// it in between), so an extension confirmed too late fails with
    /// [`Error::Expired`], and one called too late fails without contacting
    /// the masters. The round lasts at most the validity left. On failure
    /// the key is never deleted, and the validity may only shrink: it
    /// becomes the earlier of the old one and the new one (a master that
    /// did apply the new TTL may now expire sooner), and zero on
    /// [`Error::LockLost`] (another client may hold the lock now).
    ///
    /// Fails with [`Error::Expired`] if the validity ran out before the
    /// call (without contacting the masters) or before the extension was
    /// confirmed (carrying what the masters answered), [`Error::LockLost`] if the lock is gone on
    /// enough masters (and, without contacting them, once an earlier
    /// extension found it so: the same error again), [`Error::NoQuorum`],
    /// [`Error::TooSlow`],
    /// [`Error::ExtensionLimit`], [`Error::Forked`] in a forked child, or
    /// [`Error::Config`] for an invalid TTL.
    pub fn extend(&mut self, ttl: Duration) -> Result<(), Error> {
        let call = Call::start_on(CallName::Extend, self.resources());
        let extension = match self.begin_extension(ttl, true) {
            Ok(extension) => extension,
            Err(e) => return call.end(Err(e)),
        };
        let shared = Arc::clone(&self.shared);
        let budget = shared.round_budget(extension.ttl);
        let deadline = Instant::now() + budget;
        let Taken {
            mut session,
            unordered,
        } = self.take_session(deadline);
        let (to, others) = self.extension_targets(&extension, unordered, budget);
        let plan = Plan {
            command: extension.command(self),
            to,
            others: others.map(|masters| (extension.set_command(self), masters)),
            rule: Rule::Extend,
            deadline,
            dial: Dial::OutsideBackoff,
            skip: unordered,
            unawaited: false,
        };
        let started = Instant::now();
        let tally = session.run(shared.masters(), plan);
        let elapsed = started.elapsed();
        let round = ExtensionRound {
            tally,
            sent: session.sent(),
            agreed: session.agreed(),
            declined: session.declined(),
            set_tag: session.last_tags().1,
            progress: Arc::clone(session.progress()),
        };
        let result = self.end_extension(extension, round, || session.report(&shared.voters));
        if shared.events.wants_rounds() {
            let answers = session.answers(&shared.voters);
            shared.events.round(RoundEvent {
                operation: Operation::Extend,
                resources: self.resources(),
                outcome: RoundOutcome::of_result(&result),
                elapsed,
                validity: result.is_ok().then(|| self.validity()),
                fence_token: None,
                answers: &answers,
            });
        }
        shared.pool.give_back(session);
        call.end(result)
    }

    /// Extends the lock to `ttl` (as [`Lock::extend`]) only if less than
    /// `min_left` of its validity remains; returns whether it extended. The
    /// cooperative form of renewal, for loops over work items: no thread,
    /// and no round while enough validity is left.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let redlock = redlock_sync::Redlock::builder().nodes(["redis://127.0.0.1"]).build()?;
    /// # let items: Vec<u32> = Vec::new();
    /// let ttl = Duration::from_secs(10);
    /// let mut lock = redlock.lock("batch:7", ttl)?;
    /// for item in items {
    ///     lock.renew_if_below(ttl / 3, ttl)?; // Err(LockLost): stop
    ///     println!("{item}");
    /// }
    /// lock.unlock()?;
    /// # Ok::<(), redlock_sync::Error>(())
    /// ```
    pub fn renew_if_below(&mut self, min_left: Duration, ttl: Duration) -> Result<bool, Error> {
        if let Some(error) = self.unusable() {
            return Err(error);
        }
        if self.validity() >= min_left {
            return Ok(false);
        }
        self.extend(ttl).map(|()| true)
    }

    /// Checks what an extension needs before any I/O, and notes when it
    /// starts. `limited`: counts against `max_extensions` (the renewal of a
    /// [`Lease`](crate::Lease) is bounded by its own `max_hold` instead).
    pub(super) fn begin_extension(
        &mut self,
        ttl: Duration,
        limited: bool,
    ) -> Result<Extension, Error> {
        if self.is_inherited() {
            return Err(Error::Forked);
        }
        let ttl_ms = self.shared.ttl_millis(ttl)?;
        let ttl = Duration::from_millis(ttl_ms);
        if let Some(report) = &self.lost {
            return Err(Error::LockLost(report.clone()));
        }
        if limited && self.extensions >= self.shared.max_extensions {
            return Err(Error::ExtensionLimit(self.shared.max_extensions));
        }
        let start = BootInstant::now();
        if let Some(overrun) = start.checked_since(self.valid_until) {
            return Err(Error::Expired {
                overrun,
                last_extension: None,
            });
        }
        Ok(Extension {
            ttl,
            ttl_ms,
            start,
            left: self.valid_until.saturating_since(start),
            left_out: self.left_out(),
        })
    }

    /// Where an extension whose round may last `round` goes:
    /// compare-and-pexpire to the masters that may hold the key, and `SET
    /// NX` to those the acquisition left out and to holders that said no
    /// to an extension (instead of the compare-and-pexpire), unless some master's order
    /// behind the last SET cannot be kept (`unordered`: a lock follows one
    /// SET session at a time), or the round could outlast the validity.
    ///
    /// That is, the `SET NX` (the repair) goes out only in a round that
    /// ends while the validity lasts, so that this client never writes one
    /// for a lock whose validity has ended (a round may write a command
    /// late in the round, on a connection it had to open). A repair written
    /// in time may still run later on a stalled master: it then counts for
    /// nothing (see `end_extension`), and the release, which follows it on
    /// the same connection, deletes the key it made.
    pub(super) fn extension_targets(
        &self,
        extension: &Extension,
        unordered: NodeSet,
        round: Duration,
    ) -> (NodeSet, Option<NodeSet>) {
        let left_out = extension.left_out;
        let repair = !left_out.is_empty() && unordered.is_empty() && extension.left > round;
        match repair {
            // A holder that said no gets the repair instead of the refresh.
            true => (self.holders.difference(left_out), Some(left_out)),
            false => (self.holders, None),
        }
    }

    /// The masters whose order behind this lock's last SET a round on
    /// `session` cannot keep (they have not settled it, and it went out on
    /// another session).
    pub(super) fn unordered_on(&self, session: &Session) -> NodeSet {
        match &self.ticket {
            Some(ticket) if !ticket.is_on(session) => ticket.unsettled(),
            _ => NodeSet::EMPTY,
        }
    }

    /// Takes in the result of an extension's round: the new validity (from
    /// the round's start) on success; zero, for good, once the lock is
    /// found lost; otherwise the earlier of the old and the new end. A
    /// result that comes in after the old validity ended is
    /// [`Error::Expired`], whatever the masters said (unless they said the
    /// lock is lost).
    pub(super) fn end_extension(
        &mut self,
        extension: Extension,
        round: ExtensionRound,
        report: impl FnOnce() -> NodeReport,
    ) -> Result<(), Error> {
        let Extension {
            ttl,
            start,
            left_out,
            ..
        } = extension;
        let now = BootInstant::now();
        let elapsed = now.saturating_since(start);
        // An extension keeps the lock only if its quorum is confirmed
        // before the old validity ends; `late` is by how much it was not.
        //
        // Why. Until that end, the masters that last agreed hold the key
        // (their TTLs outlast the validity), so no other client can hold
        // the lock, and every yes read before the end continues ours: a
        // compare-and-pexpire that found our value, or a `SET NX` that
        // found the key free on a master the acquisition left out. Each of
        // those masters ran its command after the round started, so its key
        // lasts at least `ttl` from that start: the new validity counts
        // from there. A yes read after the end proves no such thing: the
        // key may have expired on a majority in between, been taken and
        // released by another client, and our `SET NX` then re-creates it
        // (and a compare-and-pexpire's yes speaks for its own master only).
        // So a round that started in time but whose answers land after the
        // end must not count: its holder would claim to have held the lock
        // throughout when nobody can know it did. We read a yes only after
        // the master ran it, so a result in before the end had all its
        // yeses before it; a result in later is refused even if some yeses
        // came in time (when each came is not kept: this costs at most an
        // extension tried at its last moment). The round itself keeps its
        // usual deadline (a master that answers in its usual time is not
        // to be reported late for a deadline cut short); only a round that
        // ends before the validity does sends the `SET NX` repair (see
        // `extension_targets`). A repair written in time may still run
        // after the end on a stalled master: it counts for nothing then,
        // the lock is over, and its release, which follows that SET on the
        // same connection (see `follow`), deletes the key.
        let late = now.checked_since(self.valid_until);
        let expired = |overrun, report: NodeReport| Error::Expired {
            overrun,
            last_extension: Some(report),
        };
        let result = match round.tally.decision(Rule::Extend) {
            Decision::Reached => match late {
                Some(overrun) => Err(expired(overrun, report())),
                None if validity(ttl, elapsed).is_some() => Ok(()),
                None => Err(Error::TooSlow { elapsed, ttl }),
            },
            _ if round.tally.refusals_prevent_quorum() => Err(Error::LockLost(report())),
            _ => match late {
                Some(overrun) => Err(expired(overrun, report())),
                None => Err(Error::NoQuorum(report())),
            },
        };
        // The masters sent the SET now may hold the key from now on.
        let newly_set = round.sent.intersection(left_out);
        if !newly_set.is_empty() {
            self.follow(&round.progress, round.set_tag, newly_set);
        }
        // A master that said no holds no key of ours: the refresh, which
        // runs behind the lock's SET, found the key absent or another's
        // (the SET went out but did not set it: a cluster voter answered it
        // with a redirect the round ended before following, or the master
        // restarted since), or the repair found it taken. It stays a holder
        // (a set's other keys may be ours there; a release costs nothing
        // where none is) and gets the repair next time, until it says yes:
        // it used to get the refresh for good, and a lock rested on the
        // other masters until its end.
        self.declined = self.declined.difference(round.agreed).union(round.declined);
        self.agreed = round.agreed;
        let new_end = start.saturating_add(ttl.saturating_sub(drift(ttl)));
        match &result {
            Ok(()) => {
                self.valid_until = new_end;
                self.ttl = ttl;
                self.extensions += 1;
            }
            Err(Error::LockLost(report)) => {
                self.valid_until = BootInstant::ZERO;
                self.lost = Some(report.clone());
            }
            Err(_) => self.valid_until = self.valid_until.min(new_end),
        }
        result
    }

    /// Records that `masters` were just sent this lock's SET with `tag` on
    /// the session whose progress is `progress`.
    fn follow(&mut self, progress: &Arc<Progress>, tag: u64, masters: NodeSet) {
        self.holders = self.holders.union(masters);
        self.refused = self.refused.difference(masters);
        self.ticket = Some(match self.ticket.take() {
            // Same session: the new tag comes after the old SET on every
            // connection, so settling it settles both.
            Some(old) if Arc::ptr_eq(&old.progress, progress) => Ticket {
                tag,
                masters: old.masters.union(masters),
                progress: old.progress,
            },
            // Another session: the old SET had settled everywhere (that is
            // when another session is used), so only the new one counts.
            _ => Ticket {
                progress: Arc::clone(progress),
                tag,
                masters,
            },
        });
    }
}

/// An extension under way: what [`Lock::begin_extension`] checked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Extension {
    pub(super) ttl: Duration,
    ttl_ms: u64,
    /// When the extension started (its validity counts from here).
    start: BootInstant,
    /// The validity left then.
    left: Duration,
    /// The masters the lock's key was never sent to.
    left_out: NodeSet,
}

impl Extension {
    /// The compare-and-pexpire for the masters that may hold the key (a
    /// set's: every key's TTL, or none, and an absent key refuses).
    pub(super) fn command<'a>(&self, lock: &'a Lock) -> Command<'a> {
        let value = lock.value.as_bytes();
        if lock.is_set() {
            return self.set_extend(lock, false);
        }
        Command::Extend {
            resource: &lock.resource,
            value,
            ttl_ms: self.ttl_ms,
        }
    }

    /// A set's extension: every key's TTL or none; with `repair`, absent
    /// keys are set too (the masters the acquisition left out).
    fn set_extend<'a>(&self, lock: &'a Lock, repair: bool) -> Command<'a> {
        Command::Set(SetCommand::Extend {
            keys: lock.set.keys(),
            value: lock.value.as_bytes(),
            ttl_ms: self.ttl_ms,
            repair,
        })
    }

    /// The `SET NX` for the masters the acquisition left out (a set's: the
    /// extension that sets absent keys, all of them or none).
    pub(super) fn set_command<'a>(&self, lock: &'a Lock) -> Command<'a> {
        let value = lock.value.as_bytes();
        if lock.is_set() {
            return self.set_extend(lock, true);
        }
        Command::Acquire {
            resource: &lock.resource,
            value,
            ttl_ms: self.ttl_ms,
        }
    }
}

/// What an extension's round did.
pub(super) struct ExtensionRound {
    pub(super) tally: Tally,
    /// The masters sent the round's commands.
    pub(super) sent: NodeSet,
    /// The masters that said yes.
    pub(super) agreed: NodeSet,
    /// The masters that said no.
    pub(super) declined: NodeSet,
    /// The tag of the `SET NX` to the left-out masters.
    pub(super) set_tag: u64,
    /// The progress of the session the round ran on.
    pub(super) progress: Arc<Progress>,
}
