use super::*;
use crate::clock::tests::simulate_suspend;
use crate::handle::config::{Settings, VoterUrls};
use crate::round::Session;

#[test]
fn validity_counts_the_time_the_host_was_suspended() {
    // No server is contacted: the lock is made by hand.
    let settings = Settings {
        voters: vec![VoterUrls::Node("redis://127.0.0.1:1".into())],
        ..Settings::default()
    };
    let shared = Arc::new(Shared::new(settings.check().unwrap()).unwrap());
    let session = Session::new(1);
    let lock = Lock::new(
        &shared,
        Acquired {
            resource: b"r".to_vec(),
            value: Value::random().unwrap(),
            started: BootInstant::now(),
            ttl: Duration::from_secs(10),
            valid_until: BootInstant::now().saturating_add(Duration::from_secs(10)),
            holders: NodeSet::all(1),
            agreed: NodeSet::all(1),
            refused: NodeSet::EMPTY,
            ticket: Ticket {
                progress: Arc::clone(session.progress()),
                tag: 1,
                masters: NodeSet::all(1),
            },
            fence_token: None,
            set: Default::default(),
        },
    );
    let before = lock.validity();
    assert!(before > Duration::from_secs(9));
    // The masters' TTLs ran on while the host slept: so must validity.
    simulate_suspend(Duration::from_secs(4));
    let after = lock.validity();
    assert!(after <= before - Duration::from_secs(4), "{after:?}");
    assert!(lock.valid_until() <= Instant::now() + Duration::from_secs(6));
    simulate_suspend(Duration::from_secs(7));
    assert_eq!(lock.validity(), Duration::ZERO);
    lock.let_expire();
}
