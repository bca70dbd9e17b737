//! Waiting for a held lock: try, and between tries sleep until a release
//! notice arrives (see `notify`) or a fallback timer runs out, until the
//! lock is ours or the wait is over.
//!
//! The fallback timer (`retry_delay` plus a random `retry_jitter`) keeps
//! waiting correct when notices do not come: a message lost, a master down
//! or frozen, an ACL that refuses `SUBSCRIBE` or `PUBLISH`, a lock that
//! expired instead of being released (expiry publishes nothing). With
//! notices, a waiter tries again within a round trip of the release.

use crate::error::Error;
use crate::notify::{channel_of, Interest, Seen, Wake};
use crate::redlock::{Acquired, Shared};
use std::time::{Duration, Instant};

/// After a try that a release notice started fails (a master had not yet
/// run the release when our SET reached it, say), the waiter waits this
/// fraction of the node timeout for another copy of the notice before it
/// goes back to waiting for the next release or the fallback timer.
const QUICK_RETRY_FRACTION: u32 = 10;

/// Tries to acquire `resource` for `ttl` until it succeeds or `wait` has
/// passed. Contention is waited out; a failure that may pass (no quorum,
/// too slow) is retried after the fallback pause; any other error ends the
/// wait at once. When `wait` runs out, returns the last attempt's error
/// (`Error::Contended` if the lock was still held).
pub(crate) fn acquire_within(
    shared: &Shared,
    resource: &[u8],
    ttl: Duration,
    wait: Duration,
) -> Result<Acquired, Error> {
    let deadline = Instant::now()
        .checked_add(wait)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
    let mut interest: Option<Interest<'_>> = None;
    // After a try that a notice started failed: one quick chance.
    let mut quick_retry = false;
    loop {
        let seen = interest.as_ref().map_or(Seen::default(), Interest::seen);
        let error = match shared.acquire(resource, ttl) {
            Ok(acquired) => return Ok(acquired),
            Err(e) if e.is_retryable() => e,
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(error);
        }
        let contended = error.is_contention();
        if contended && shared.release_notices && interest.is_none() {
            // Subscribe, then try again at once: a release between the
            // first try and the subscription would otherwise be missed.
            let mut channel = Vec::with_capacity(resource.len() + 32);
            channel_of(resource, &mut channel);
            let joined = shared.notices.join(&shared.nodes, &channel);
            joined.subscribed(deadline.min(now + shared.node_timeout));
            interest = Some(joined);
            continue;
        }
        let until = deadline.min(now + shared.retry_pause());
        match &interest {
            Some(interest) if contended && !interest.refused() => {
                if quick_retry {
                    quick_retry = false;
                    let quick = until.min(now + shared.node_timeout / QUICK_RETRY_FRACTION);
                    if interest.wait(seen, true, quick) != Wake::Timeout {
                        continue;
                    }
                }
                quick_retry = interest.wait(seen, false, until) == Wake::Release;
            }
            // No notice will come (no quorum, or an ACL refuses them): the
            // fallback timer alone.
            _ => {
                quick_retry = false;
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
        }
    }
}
