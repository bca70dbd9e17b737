//! The group's queue, without servers: who gets the lead, and what a
//! request whose deadline passed is told.

use super::{Entry, Group, Part, Request, Stage};
use crate::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The batch `own`'s leader takes.
fn take(group: &Group, own: &Arc<Request>) -> (Vec<Arc<Request>>, Vec<Part>) {
    let (mut taken, mut parts) = (Vec::new(), Vec::new());
    group.take(own, &mut taken, &mut parts);
    (taken, parts)
}

fn stage(request: &Arc<Request>) -> Stage {
    super::lock(&request.inner).stage
}

fn queued(group: &Group, name: &[u8], deadline: Instant) -> Arc<Request> {
    match group.enter(name, 10_000, deadline) {
        Entry::Queued(request) => request,
        Entry::Lead(_) => panic!("the group was idle"),
    }
}

/// Finding 1 of the review: `hand_off` gave the lead to the first queued
/// request without looking at its deadline, and its owner then ran a batch
/// of later requests past its own deadline.
#[test]
fn hand_off_times_out_an_expired_request_and_leads_with_the_next() {
    let group = Group::new();
    let Entry::Lead(lead) = group.enter(b"first", 10_000, later()) else {
        panic!("an idle group's first caller leads");
    };
    let expired = queued(&group, b"expired", Instant::now());
    let live = queued(&group, b"live", later());
    drop(lead); // the round in flight ended
    assert_eq!(
        stage(&expired),
        Stage::Done,
        "an expired request never leads"
    );
    let result = super::lock(&expired.inner).result.take();
    assert!(
        matches!(result, Some(Err(Error::QueueTimeout { .. }))),
        "{result:?}"
    );
    assert_eq!(stage(&live), Stage::Lead, "the next request leads");
    let state = group.state();
    assert!(state.busy);
    assert_eq!(state.queue.len(), 1, "only the leader's request is queued");
}

/// Finding 1, the leader's side: a caller handed the lead whose own
/// deadline passed before it woke runs no batch (the others stay queued for
/// the next leader).
#[test]
fn a_leader_whose_own_deadline_passed_takes_no_batch() {
    let group = Group::new();
    let Entry::Lead(lead) = group.enter(b"first", 10_000, later()) else {
        panic!("an idle group's first caller leads");
    };
    let own = queued(&group, b"own", Instant::now() + Duration::from_millis(20));
    let other = queued(&group, b"other", later());
    drop(lead);
    assert_eq!(stage(&own), Stage::Lead);
    std::thread::sleep(Duration::from_millis(30));
    let (taken, parts) = take(&group, &own);
    assert!(taken.is_empty() && parts.is_empty());
    assert_eq!(stage(&own), Stage::Done);
    let result = super::lock(&own.inner).result.take();
    assert!(
        matches!(result, Some(Err(Error::QueueTimeout { .. }))),
        "{result:?}"
    );
    assert_eq!(stage(&other), Stage::Queued);
    assert_eq!(
        group.state().queue.len(),
        1,
        "the other request stays queued"
    );
}

/// A leader's batch: its own request first, the expired ones told so and
/// left out, and the batch's deadline (the earliest of its parts') its own.
#[test]
fn a_batch_takes_the_live_requests_and_ends_by_the_leaders_deadline() {
    let group = Group::new();
    let Entry::Lead(lead) = group.enter(b"first", 10_000, later()) else {
        panic!("an idle group's first caller leads");
    };
    let own_deadline = Instant::now() + Duration::from_secs(30);
    let own = queued(&group, b"own", own_deadline);
    let gone = queued(&group, b"gone", Instant::now() + Duration::from_millis(20));
    let live = queued(&group, b"live", later());
    drop(lead);
    assert_eq!(stage(&own), Stage::Lead);
    std::thread::sleep(Duration::from_millis(30));
    let (taken, parts) = take(&group, &own);
    assert_eq!(taken.len(), 2);
    assert!(Arc::ptr_eq(&taken[0], &own) && Arc::ptr_eq(&taken[1], &live));
    assert_eq!(parts[0].resource, b"own");
    assert_eq!(parts.iter().map(|p| p.deadline).min(), Some(own_deadline));
    assert_eq!(stage(&gone), Stage::Done);
    assert_eq!((stage(&own), stage(&live)), (Stage::Taken, Stage::Taken));
    assert!(group.state().queue.is_empty());
}

/// Finding 6: a shutdown ends the queued requests' waits at once, nothing
/// sent; the one handed the lead is left to its owner (whose batch sends
/// nothing once the handle is shut down).
#[test]
fn shut_down_fails_every_queued_request_at_once() {
    let group = Group::new();
    let Entry::Lead(lead) = group.enter(b"first", 10_000, later()) else {
        panic!("an idle group's first caller leads");
    };
    let next = queued(&group, b"next", later());
    let queued_too = queued(&group, b"queued", later());
    drop(lead);
    let also = queued(&group, b"also", later());
    group.shut_down();
    assert_eq!(stage(&next), Stage::Lead, "left to its owner");
    for request in [&queued_too, &also] {
        assert_eq!(stage(request), Stage::Done);
        let result = super::lock(&request.inner).result.take();
        assert!(matches!(result, Some(Err(Error::ShutDown))), "{result:?}");
    }
    assert_eq!(group.state().queue.len(), 1);
}

/// A release taken into a batch whose leader then finds
/// the handle shut down (`Group::lead`), or fails (`Posting`'s drop), is
/// refused with `refuse`: it comes back `Done::Unbatched` (its owner
/// then sends it), as a queued release does.
#[test]
fn a_taken_release_refused_is_left_to_its_owner() {
    use super::{Done, Release};
    use crate::quorum::NodeSet;
    use crate::value::Value;
    let group = Group::new();
    let Entry::Lead(lead) = group.enter(b"first", 10_000, later()) else {
        panic!("an idle group's first caller leads");
    };
    let release = Release {
        value: Value::random().unwrap(),
        holders: NodeSet::all(3),
        ticket: None,
        notify: false,
    };
    let Entry::Queued(own) = group.enter_release(b"held", release, later()) else {
        panic!("the group was busy");
    };
    drop(lead);
    assert_eq!(stage(&own), Stage::Lead);
    let (taken, _parts) = take(&group, &own);
    assert_eq!(taken.len(), 1);
    // What `Group::lead` does to the taken requests once the handle is shut
    // down (and `Posting::drop` after a panic).
    let mut inner = super::lock(&own.inner);
    inner.refuse(Error::ShutDown);
    let result = inner.result.take();
    assert!(matches!(result, Some(Ok(Done::Unbatched))), "{result:?}");
}
