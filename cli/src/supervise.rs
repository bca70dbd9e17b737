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

use crate::child::Running;
use crate::duration::show;
use crate::output::say;
use crate::sys::{wake, SignalPipe, SIGCHLD, SIGKILL, SIGTERM, WAKE};
use redlock_sync::{Error, HandleEvent, Lease, LeaseChange, LeaseEvent};
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

/// A stop under way.
struct Stopping {
    why: Stopped,
    kill_at: Instant,
    killed: bool,
    /// Whether the tool has said that the command outlived the validity.
    warned: bool,
}

/// Runs until the command ends, and says how it ended.
pub(crate) fn supervise(
    child: &mut Running,
    lease: &Lease,
    plan: Plan,
    signals: &SignalPipe,
) -> io::Result<Outcome> {
    let lead = plan.stop_lead();
    let mut valid_until = Instant::now() + lease.validity();
    let mut stopping: Option<Stopping> = None;
    let mut received = Vec::new();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Outcome {
                status,
                stopped: stopping.map(|s| s.why),
            });
        }
        let now = Instant::now();
        if stopping.is_none() {
            if let Some(cause) = read_lease(lease, lead, now, &mut valid_until) {
                let kill_at = if cause.at_once {
                    say(&format!("{}: killing the command (SIGKILL)", cause.message));
                    now
                } else {
                    child.signal(SIGTERM);
                    let kill_at = plan.kill_at(now, valid_until);
                    say(&format!(
                        "{}: stopping the command (SIGTERM now, SIGKILL in {})",
                        cause.message,
                        show(kill_at.saturating_duration_since(now))
                    ));
                    kill_at
                };
                stopping = Some(Stopping {
                    why: cause.why,
                    kill_at,
                    killed: false,
                    warned: false,
                });
            }
        }
        let wake = match &mut stopping {
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
            Some(stop) => {
                if !stop.killed && now >= stop.kill_at {
                    child.signal(SIGKILL);
                    stop.killed = true;
                }
                if !stop.killed {
                    stop.kill_at
                } else if !stop.warned && now >= valid_until {
                    say(&format!(
                        "the command (pid {}) outlived the lock's validity: it does not die of \
                         SIGKILL (uninterruptible I/O?); only a fencing token can protect what \
                         it writes now",
                        child.pid()
                    ));
                    stop.warned = true;
                    now + Duration::from_secs(1)
                } else if stop.warned {
                    now + Duration::from_secs(1)
                } else {
                    valid_until
                }
            }
        };
        signals.wait(
            wake.saturating_duration_since(Instant::now()),
            &mut received,
        );
        for signal in received.drain(..) {
            if signal != SIGCHLD && signal != WAKE {
                child.signal(signal);
            }
        }
    }
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
    lease: &Lease,
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
