//! Watching the lock while the command runs, and stopping the command when
//! the lock can no longer be counted on.
//!
//! The library renews the lease on its own thread; this loop, on the main
//! thread, reads the lease's state (one atomic read), forwards the signals
//! the tool receives to the command's group, and reaps the command. It
//! sleeps in one read of the signal pipe until the next thing it must do:
//! a signal, a deadline, or the renewer's word that the lock is lost.
//!
//! The command is stopped (SIGTERM to its group, then SIGKILL) when:
//! - the renewer finds the lock lost (its key gone or taken on the
//!   masters): at the end of the renewal round that found it, which wakes
//!   this loop ([`LossAlarm`], the hook the client is built with);
//! - the renewals fail (no quorum) until the validity left falls to
//!   [`Plan::stop_lead`];
//! - the lease has been held for `--max-hold`;
//! - the validity has already run out when the loop looks (the tool was
//!   paused or the host suspended): SIGKILL at once.
//!
//! SIGKILL follows SIGTERM after the grace, and always [`Plan::kill_margin`]
//! before the validity last confirmed ends: under the Redlock model nobody
//! else can hold the lock before then, so the command is dead before anyone
//! else can start. (A key deleted behind our back is outside that model:
//! only fencing protects the resource then.)
//!
//! The command has ended when its process group is empty: what it leaves
//! running in the background (`job &`) holds the lock on, as under
//! flock(1), renewed and stopped as above; unless a signal asked the tool
//! to end (SIGINT, SIGTERM, SIGHUP or SIGQUIT: sent on to the group, whose
//! background jobs may ignore it), when what is left gets SIGTERM, then
//! SIGKILL after the grace.
//!
//! Job control: when the command is stopped from the terminal it was given
//! (Ctrl-Z), or after the tool sent on a SIGTSTP it got, the tool stops
//! itself too, and renews nothing meanwhile. When it is continued, it reads
//! the lease before anything else (its validity is measured on the boot
//! clock, which counts the stop): if the validity ended or is within
//! [`Plan::stop_lead`], the still stopped group gets SIGKILL and never runs
//! again; only otherwise does the command get the terminal back and
//! SIGCONT. A renewal that fell due during the stop wakes at the same time
//! on the renewal thread; if it lands first, the lock is valid again (its
//! validity counted from the renewal) and the command rightly goes on.

use crate::child::{Running, Watch};
use crate::duration::show;
use crate::held::Held;
use crate::output::say;
use crate::sys::{self, wake, SignalPipe, ASK_TO_END, FORWARDED, SIGKILL, SIGTERM, SIGTSTP};
use redlock_sync::{Error, HandleEvent, LeaseChange, LeaseEvent};
use std::io;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// The hook the tool's client is built with: when the renewer finds the
/// lock lost, it wakes the loop (through the signal pipe), which then
/// reads the lease. It runs on the renewal thread and only writes a byte.
#[derive(Debug)]
pub(crate) struct LossAlarm;

impl HandleEvent for LossAlarm {
    fn handle_lease(&self, event: LeaseEvent<'_>) {
        if matches!(event.change(), LeaseChange::Lost(_)) {
            wake();
        }
    }
}

/// Why the tool stopped the command (it said why on stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// The lock was lost, or was about to run out.
    Lost,
    /// It was held for `--max-hold`.
    HoldLimit,
}

/// How the command ended.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) status: ExitStatus,
    /// Set if the tool stopped it.
    pub(crate) stopped: Option<Stopped>,
}

/// The timing of the stop, from the lock's TTL and the user's grace.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) ttl: Duration,
    pub(crate) grace: Duration,
}

impl Plan {
    /// How long before the validity ends the command must be dead: SIGKILL
    /// goes out then at the latest. A tenth of the TTL, at most a second:
    /// room for the kernel to end the group and for this thread to be
    /// scheduled late on a busy host.
    pub(crate) fn kill_margin(self) -> Duration {
        (self.ttl / 10).min(Duration::from_secs(1))
    }

    /// While renewals fail, the validity left at which SIGTERM goes out:
    /// the grace plus the kill margin, with the grace cut to a sixth of the
    /// TTL, so that the stop never starts while a renewal is still due (the
    /// library renews with a third of the TTL left).
    pub(crate) fn stop_lead(self) -> Duration {
        self.grace.min(self.ttl / 6) + self.kill_margin()
    }

    /// When SIGKILL follows a SIGTERM sent `now`, for a lock whose validity
    /// was last known to end at `valid_until`.
    pub(crate) fn kill_at(self, now: Instant, valid_until: Instant) -> Instant {
        let before_the_end = valid_until
            .checked_sub(self.kill_margin())
            .unwrap_or(now)
            .max(now);
        (now + self.grace).min(before_the_end)
    }
}

/// How long the command's group may outlast a SIGKILL before the tool says
/// it does not die of it (a process killed is gone in far less).
const SIGKILL_PATIENCE: Duration = Duration::from_secs(2);

/// While processes the command left behind run, how often the tool looks
/// whether its group is empty (it hears its own children end, not others).
const LEFT_BEHIND_POLL: Duration = Duration::from_millis(100);

/// A stop under way.
struct Stopping {
    /// Why, for the exit; `None` when a signal asked the tool to end and it
    /// ends what the command left behind.
    why: Option<Stopped>,
    kill_at: Instant,
    /// When SIGKILL went out.
    killed_at: Option<Instant>,
    /// Whether the tool has said that the command outlived the validity.
    warned: bool,
}

/// Runs until the command's process group is empty, and says how the
/// command ended. `verbose`: say when the command leaves processes behind.
pub(crate) fn supervise(
    child: &mut Running,
    lease: &Held,
    plan: Plan,
    signals: &SignalPipe,
    verbose: bool,
) -> io::Result<Outcome> {
    let lead = plan.stop_lead();
    let mut valid_until = Instant::now() + lease.validity();
    let mut stopping: Option<Stopping> = None;
    // The tool sent a SIGTSTP on: it stops once the command has.
    let mut stop_asked = false;
    // A signal asked the tool to end: what the command leaves behind is
    // ended, not waited for.
    let mut end_asked = false;
    let mut said_left_behind = false;
    let mut received = Vec::new();
    loop {
        let watch = child.watch()?;
        match watch {
            Watch::Ended(status) => {
                return Ok(Outcome {
                    status,
                    stopped: stopping.and_then(|s| s.why),
                })
            }
            Watch::Stopped if child.has_terminal() || stop_asked => {
                stop_asked = false;
                child.suspend();
                sys::stop_self();
                // Continued (fg, bg, SIGCONT): the lock first.
                match after_a_stop(lease, lead) {
                    None => child.resume(),
                    Some(why) => {
                        // Still stopped: it never runs again.
                        child.signal(SIGKILL);
                        let now = Instant::now();
                        say(&format!(
                            "{why}: killed the stopped command (SIGKILL) instead of continuing it"
                        ));
                        stopping = Some(Stopping {
                            why: Some(Stopped::Lost),
                            kill_at: now,
                            killed_at: Some(now),
                            warned: false,
                        });
                    }
                }
                continue;
            }
            _ => {}
        }
        let now = Instant::now();
        if stopping.is_none() {
            if let Some(cause) = read_lease(lease, lead, now, &mut valid_until) {
                stopping = Some(stop(child, plan, cause, now, valid_until));
            } else if watch == Watch::LeftBehind && end_asked {
                child.signal(SIGTERM);
                if verbose {
                    say("ending what the command left running in its process group (SIGTERM)");
                }
                stopping = Some(Stopping {
                    why: None,
                    kill_at: plan.kill_at(now, valid_until),
                    killed_at: None,
                    warned: false,
                });
            } else if watch == Watch::LeftBehind && verbose && !said_left_behind {
                say(&format!(
                    "the command exited, leaving processes in its group ({}): the lock is held \
                     until they end",
                    child.pid()
                ));
                said_left_behind = true;
            }
        }
        let mut wake = match &mut stopping {
            // A loss wakes the loop (`LossAlarm`); the clock, the failed
            // renewals' deadline and the hold limit.
            None => {
                let renewals_fail = valid_until.checked_sub(lead).unwrap_or(now);
                // No hold limit (`Duration::MAX`) reaches past any instant.
                match now.checked_add(lease.hold_left()) {
                    Some(hold_limit) => hold_limit.min(renewals_fail),
                    None => renewals_fail,
                }
            }
            Some(stop) => stop.next(child, now, valid_until),
        };
        if !child.leader_runs() {
            wake = wake.min(now + LEFT_BEHIND_POLL);
        }
        signals.wait(
            wake.saturating_duration_since(Instant::now()),
            &mut received,
        );
        for signal in received.drain(..) {
            if FORWARDED.contains(&signal) {
                child.signal(signal);
                end_asked |= ASK_TO_END.contains(&signal);
            } else if signal == SIGTSTP && child.leader_runs() {
                child.signal(SIGTSTP);
                stop_asked = true;
            }
            // SIGCHLD, SIGCONT, a wake-up: the loop looks again.
        }
    }
}

/// Starts stopping the command for `cause`: SIGKILL at once when the
/// validity is over (before anything is printed), else SIGTERM now and
/// SIGKILL after the grace, before the validity ends.
fn stop(child: &Running, plan: Plan, cause: Cause, now: Instant, valid_until: Instant) -> Stopping {
    if cause.at_once {
        child.signal(SIGKILL);
        say(&format!("{}: killed the command (SIGKILL)", cause.message));
        return Stopping {
            why: Some(cause.why),
            kill_at: now,
            killed_at: Some(now),
            warned: false,
        };
    }
    child.signal(SIGTERM);
    let kill_at = plan.kill_at(now, valid_until);
    say(&format!(
        "{}: stopping the command (SIGTERM now, SIGKILL in {})",
        cause.message,
        show(kill_at.saturating_duration_since(now))
    ));
    Stopping {
        why: Some(cause.why),
        kill_at,
        killed_at: None,
        warned: false,
    }
}

impl Stopping {
    /// Does what is due `now` (SIGKILL; the warning that the command does
    /// not die of it), and says when to look next.
    fn next(&mut self, child: &Running, now: Instant, valid_until: Instant) -> Instant {
        let killed_at = match self.killed_at {
            Some(at) => at,
            None if now >= self.kill_at => {
                child.signal(SIGKILL);
                self.killed_at = Some(now);
                now
            }
            None => return self.kill_at,
        };
        // Killed: it is gone in an instant, unless it cannot die (in
        // uninterruptible sleep). Said only of a group still there well
        // after the SIGKILL, once the validity is over.
        let warn_at = (killed_at + SIGKILL_PATIENCE).max(valid_until);
        if self.warned {
            return now + Duration::from_secs(1);
        }
        if now < warn_at {
            return warn_at;
        }
        say(&format!(
            "the command (process group {}) is still there {} after SIGKILL, past the lock's \
             validity: it does not die of SIGKILL (uninterruptible I/O?); only a fencing token \
             can protect what it writes now",
            child.pid(),
            show(now.saturating_duration_since(killed_at))
        ));
        self.warned = true;
        now + Duration::from_secs(1)
    }
}

/// When the tool is continued after it stopped with the command: why the
/// command must not run again, if it must not. The lease's own view: its
/// validity on the boot clock, which counts the stop; not above the stop
/// lead, the command would run while the lock ends.
fn after_a_stop(lease: &Held, lead: Duration) -> Option<String> {
    let left = match lease.check() {
        Ok(left) => left,
        // The loop stops it for --max-hold, if the validity allows.
        Err(Error::HoldLimit { .. }) => lease.validity(),
        Err(error) => return Some(format!("the lock ended while redlock was stopped: {error}")),
    };
    (left <= lead).then(|| {
        format!(
            "the lock has {} of validity left after redlock was stopped",
            show(left)
        )
    })
}

/// Why the command must be stopped, as found by [`read_lease`].
struct Cause {
    why: Stopped,
    /// For the user.
    message: String,
    /// SIGKILL without SIGTERM: the validity is already over.
    at_once: bool,
}

/// Reads the lease `now`: records the end of its validity in `valid_until`
/// while it holds, and says why the command must be stopped if it must.
fn read_lease(
    lease: &Held,
    lead: Duration,
    now: Instant,
    valid_until: &mut Instant,
) -> Option<Cause> {
    let cause = |why, message, at_once| {
        Some(Cause {
            why,
            message,
            at_once,
        })
    };
    match lease.check() {
        Ok(left) => {
            *valid_until = now + left;
            if left > lead {
                return None;
            }
            let message = format!(
                "the lock could not be renewed and has {} of validity left",
                show(left)
            );
            cause(Stopped::Lost, message, false)
        }
        Err(Error::HoldLimit { max_hold }) => cause(
            Stopped::HoldLimit,
            format!("held for --max-hold {}", show(max_hold)),
            false,
        ),
        // Paused past the validity (a stopped tool, a suspended host):
        // someone else may hold the lock now.
        Err(error @ Error::Expired { .. }) => cause(Stopped::Lost, error.to_string(), true),
        // Found lost by the renewer.
        Err(error) => cause(Stopped::Lost, error.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn plan(ttl_ms: u64, grace_ms: u64) -> Plan {
        Plan {
            ttl: Duration::from_millis(ttl_ms),
            grace: Duration::from_millis(grace_ms),
        }
    }

    #[test]
    fn the_kill_margin_is_a_tenth_of_the_ttl_up_to_a_second() {
        assert_eq!(plan(2_000, 0).kill_margin(), Duration::from_millis(200));
        assert_eq!(plan(30_000, 0).kill_margin(), Duration::from_secs(1));
    }

    #[test]
    fn a_failing_renewal_stops_the_command_after_the_renewal_was_due() {
        // The library renews with a third of the TTL left.
        for (ttl, grace) in [(30_000, 5_000), (30_000, 60_000), (300, 5_000), (2_000, 0)] {
            let p = plan(ttl, grace);
            assert!(p.stop_lead() < p.ttl / 3, "{p:?}: {:?}", p.stop_lead());
            assert!(p.stop_lead() >= p.kill_margin());
        }
        assert_eq!(plan(30_000, 5_000).stop_lead(), Duration::from_secs(6));
    }

    #[test]
    fn sigkill_comes_after_the_grace_or_before_the_validity_ends() {
        let now = Instant::now();
        let p = plan(30_000, 5_000);
        // Plenty of validity: the grace decides.
        let kill = p.kill_at(now, now + Duration::from_secs(20));
        assert_eq!(kill - now, Duration::from_secs(5));
        // Little validity: a margin before its end.
        let kill = p.kill_at(now, now + Duration::from_secs(3));
        assert_eq!(kill - now, Duration::from_secs(2));
        // None left: at once.
        assert_eq!(p.kill_at(now, now), now);
    }
}
