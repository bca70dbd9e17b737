//! A master that changes under a live connection, on real servers (a
//! master with one replica, `support::Replicated`): a demotion answered
//! `READONLY` sends the connection through its set-up again, whose identity
//! probe (`INFO replication`) then names the new master; a failback that keeps the process (and its
//! run id) but changes the replication id is noticed by the identity read
//! ahead of the next command on an idle connection, and that command's
//! grant does not count until the connection was set up again.
//!
//! Servers: whichever `REDLOCK_TEST_SERVER` names.

mod support;

use redlock_sync::{Error, NodeError, NodeOutcome, NotAVoter, Redlock};
use std::time::Duration;
use support::{OwnedReply, Replicated};

const TTL: Duration = Duration::from_secs(30);
const NODE_TIMEOUT: Duration = Duration::from_secs(5);

/// A handle whose one voter is node 0 of `set`.
fn handle(set: &Replicated) -> Redlock {
    Redlock::builder()
        .nodes([set.url(0)])
        .node_timeout(NODE_TIMEOUT)
        .lock_wait(Duration::ZERO)
        .release_notices(false)
        .build()
        .expect("a valid configuration")
}

/// The failure a report gives for its only node.
fn only_failure(error: &Error) -> NodeError {
    let report = error.nodes().expect("a report");
    match report.iter().next().map(|s| s.outcome()) {
        Some(NodeOutcome::Failed(failure)) => failure.clone(),
        other => panic!("{error}: {other:?}"),
    }
}

#[test]
fn a_master_demoted_under_a_live_connection_is_set_up_again_and_refused() {
    let set = Replicated::start(1);
    let redlock = handle(&set);
    let lock = redlock
        .try_lock("live", TTL)
        .expect("a round")
        .expect("free");
    lock.unlock().expect("released");
    // Node 1 is promoted, node 0 made its replica at once (no wait: the
    // connection is not idle when the next lock comes).
    set.promote(1);
    let port = set.node(1).port().to_string();
    let demoted = set.node(0).cmd(&["REPLICAOF", "127.0.0.1", &port]);
    assert_eq!(demoted, OwnedReply::Simple(b"OK".to_vec()));
    // The live connection's write is refused: READONLY.
    let first = redlock.try_lock("demoted", TTL).expect_err("a replica");
    let failure = only_failure(&first);
    assert!(
        matches!(&failure, NodeError::Server(e) if e.code() == "READONLY"),
        "{first}"
    );
    // Set up again, its identity probe (INFO replication) names the new
    // master: refused. The report gives that refusal itself, or (when the
    // set-up failed before the round's send looked at the node, as a
    // loaded machine's timing makes it) the reconnect backoff it started,
    // naming it as its cause.
    let second = redlock.try_lock("demoted", TTL).expect_err("a replica");
    let replica = NodeError::NotAVoter(NotAVoter::Replica {
        master: format!("127.0.0.1:{port}"),
    });
    let failure = only_failure(&second);
    let cause = match &failure {
        NodeError::Backoff { cause, .. } => cause.as_ref(),
        other => other,
    };
    assert_eq!(cause, &replica, "{second}");
}

#[test]
fn a_failback_under_an_idle_connection_counts_no_grant_until_checked_again() {
    let set = Replicated::start(1);
    let redlock = handle(&set);
    let lock = redlock
        .try_lock("before", TTL)
        .expect("a round")
        .expect("free");
    lock.unlock().expect("released");
    let run_id = set.run_id(0);
    let replid = set.replication_id(0);
    // A failback: node 1 promoted, node 0 its replica (synced), then node
    // 0 promoted again: the same process, a new replication history.
    set.promote(1);
    set.replicate(0, 1);
    set.promote(0);
    assert_eq!(set.run_id(0), run_id, "the same process");
    assert_ne!(set.replication_id(0), replid, "a new replication id");
    // The connection sat idle for more than a second: its identity is
    // read ahead of the next command, which does not count.
    std::thread::sleep(Duration::from_millis(1200));
    let error = redlock
        .try_lock("after", TTL)
        .expect_err("a grant from a master that changed under the connection");
    assert_eq!(only_failure(&error), NodeError::IdentityChanged, "{error}");
    // Set up again (its identity probes: a master), its next grant counts; the refused
    // one's key was released.
    let lock = redlock
        .try_lock("after", TTL)
        .expect("a round")
        .expect("free: the refused grant was released");
    lock.unlock().expect("released");
}

#[test]
fn an_extension_after_a_failback_under_an_idle_connection_does_not_count() {
    let set = Replicated::start(1);
    let redlock = handle(&set);
    let mut lock = redlock
        .try_lock("extended", TTL)
        .expect("a round")
        .expect("free");
    // The replica has the key before the failback, which then keeps it:
    // without the identity read, the extension would be granted.
    set.wait_synced();
    set.promote(1);
    set.replicate(0, 1);
    set.promote(0);
    std::thread::sleep(Duration::from_millis(1200));
    let error = lock
        .extend(TTL)
        .expect_err("an extension from a changed master");
    assert_eq!(only_failure(&error), NodeError::IdentityChanged, "{error}");
}
