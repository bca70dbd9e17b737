//! Waiting for a set of resources: try the whole set; between tries, sleep
//! until a release of any of its resources is heard (on each resource's
//! channel: see `handle::notify::any`), or another master's copy of the
//! latest release's notice (a try that the release beat on some masters
//! is worth again once they ran it), or until the fallback pause
//! (`retry_delay` plus jitter) runs out; until the set is ours or the wait
//! is over.
//!
//! A set waiter holds nothing while it waits (each try is a full
//! acquisition of the set, all or none per master, released on failure),
//! so waiters of overlapping sets cannot deadlock. It tries on every
//! release it hears of any of its resources; with `fair_waiting` (the
//! default) it also queues on each of them and holds its turn where it is
//! first, so that callers of its single resources do not starve it (see
//! `set_turn`). A set of one waits as a lock on its resource does, queue
//! and turns included.

use super::set_turn::SetTurn;
use super::{acquire_within, Wait};
use crate::error::{Error, Waited};
use crate::events::{Resources, WaitChange, WaitEvent, WokenBy};
use crate::handle::notify::any::wait_any;
use crate::handle::notify::message::notice_of;
use crate::handle::notify::{can_subscribe, Channel, Interest};
use crate::handle::Shared;
use crate::lock::acquire::Acquired;
use crate::lock::many::acquire::{acquire_names, check_handle, check_names};
use crate::names::Names;
use std::time::{Duration, Instant};

/// Tries to acquire the set `resources` for `ttl` until it succeeds or
/// `wait` is over, as `acquire_within` does for one resource: contention
/// and no quorum are waited out, any other error ends the wait, and so
/// does the handle's shutdown; without a time limit, tries that found no
/// quorum for `unreachable_limit` in a row end it. Checks the handle and
/// the names before any I/O.
///
/// Tells the hook of its progress as a single waiter does, each event
/// naming the whole set; a call that takes the set (or fails for good) on
/// its first try tells nothing.
pub(crate) fn acquire_set_within<I, R>(
    shared: &Shared,
    resources: I,
    ttl: Duration,
    wait: Wait,
) -> Result<Acquired, Error>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let ttl_ms = check_handle(shared, ttl)?;
    let mut names = Names::default();
    names.fill(resources, Shared::check_resource)?;
    check_names(shared, &names)?;
    crate::events::call::name_resources(Resources::set(names.keys()));
    if names.len() == 1 {
        let name = names.first().expect("one name").to_vec();
        let mut acquired = acquire_within(shared, &name, ttl, wait)?;
        acquired.set = names;
        return Ok(acquired);
    }
    let start = Instant::now();
    let deadline = wait.deadline(start);
    let patience = match deadline {
        None => Some(shared.unreachable_limit),
        Some(_) => None,
    };
    let mut interests: Vec<Interest<'_>> = Vec::new();
    // Its place in the queues (declared after the interests, so dropped
    // first: a `g` still finds its channels subscribed).
    let mut turn = SetTurn::new(shared);
    let mut joined = false;
    // Per channel, before each try: the releases heard, and how many
    // masters were heard running the latest (see below).
    let mut seen: Vec<(u64, usize)> = Vec::new();
    let mut tries = 0u32;
    let mut unreachable_since: Option<Instant> = None;
    // Whether the call has waited (a try failed and another follows):
    // only then is its progress told.
    let mut waited = false;
    let tell = |change| {
        shared.events.wait(|| WaitEvent {
            resources: Resources::set(names.keys()),
            change,
            waited: start.elapsed(),
        });
    };
    loop {
        seen.clear();
        seen.extend(interests.iter().map(|i| i.view(heard)));
        let attempt_start = Instant::now();
        tries = tries.saturating_add(1);
        turn.tried();
        let error = match acquire_names(shared, &names, ttl_ms) {
            Ok(acquired) => {
                turn.took(notice_of(acquired.value.as_bytes()));
                if waited {
                    tell(WaitChange::Acquired);
                }
                return Ok(acquired);
            }
            Err(e) if e.is_retryable() => e,
            Err(e) => {
                if waited {
                    tell(WaitChange::GaveUp);
                }
                return Err(e);
            }
        };
        let now = Instant::now();
        let unreachable = matches!(error, Error::NoQuorum(_) | Error::TooSlow { .. });
        let since = match unreachable {
            true => *unreachable_since.get_or_insert(attempt_start),
            false => {
                unreachable_since = None;
                now
            }
        };
        let out_of_reach = patience
            .filter(|limit| unreachable && now.saturating_duration_since(since) >= *limit)
            .map(|_| now.saturating_duration_since(since));
        if out_of_reach.is_some() || deadline.is_some_and(|deadline| now >= deadline) {
            if waited {
                tell(WaitChange::GaveUp);
            }
            if tries == 1 && out_of_reach.is_none() {
                return Err(error); // one attempt: no wait
            }
            return Err(error.with_waited(Waited {
                waited: now.saturating_duration_since(start),
                tries,
                unreachable_for: out_of_reach,
            }));
        }
        waited = true;
        if error.is_contention() {
            tell(WaitChange::Contended);
        }
        if !joined {
            joined = true;
            if shared.release_notices {
                for name in names.keys().iter().filter(|name| can_subscribe(name)) {
                    let queue_master = shared.queue_master(name);
                    interests.push(shared.notices.join(&shared.voters, name, queue_master));
                    turn.join(name, queue_master);
                }
                let until = earlier(now + shared.node_timeout, deadline);
                for interest in &interests {
                    interest.subscribed(until);
                }
                turn.speak(&interests, Instant::now());
                // A release before the subscriptions would go unheard.
                continue;
            }
        }
        let mut until = earlier(now + shared.retry_pause(), deadline);
        if let (true, Some(limit)) = (unreachable, patience) {
            until = until.min(since + limit);
        }
        let mut heard_one = false;
        let mut woken = false;
        loop {
            let now = Instant::now();
            turn.speak(&interests, now);
            if woken || now >= until {
                // Another set waiter heads one of our queues: its turn,
                // for a while (see `set_turn`).
                match turn.held_back(&interests, now) {
                    Some(held) if !shared.stop.is_set() && until > now => {
                        until = until.min(held);
                        woken = false;
                        seen.clear();
                        seen.extend(interests.iter().map(|i| i.view(heard)));
                    }
                    Some(held) if !shared.stop.is_set() && deadline.map_or(true, |d| now < d) => {
                        until = earlier(held, deadline);
                    }
                    _ => break,
                }
            }
            let wake = turn.next_word().map_or(until, |word| word.min(until));
            if interests.is_empty() {
                shared.stop.sleep_until(wake);
            } else {
                // A new release, or another master's copy of the latest: a
                // try that the release beat on some masters (they still
                // held the key when it reached them) is worth making again
                // once more of them have run it; their copies count as no
                // new release.
                wait_any(&interests, wake, |i, channel| {
                    let (releases, masters) = heard(channel);
                    let new = releases > seen[i].0 || masters > seen[i].1;
                    woken |= new;
                    new
                });
            }
            heard_one |= woken;
            if shared.stop.is_set() {
                break;
            }
        }
        tell(WaitChange::Woken(match heard_one {
            true => WokenBy::Notice,
            false => WokenBy::Timer,
        }));
    }
}

/// What a waiter has heard on `channel`: its releases, and how many
/// masters were heard running the latest.
fn heard(channel: &mut Channel) -> (u64, usize) {
    (channel.releases, channel.latest_heard().from.len())
}

/// The earlier of `at` and the deadline, if any.
fn earlier(at: Instant, deadline: Option<Instant>) -> Instant {
    deadline.map_or(at, |deadline| deadline.min(at))
}
