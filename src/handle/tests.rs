use super::config::{Settings, VoterUrls};
use super::*;
use crate::quorum::validity;

/// A handle of one master (never contacted), a retry delay of 5 ms and the
/// given jitter.
fn client(jitter: Duration) -> Shared {
    let settings = Settings {
        voters: vec![VoterUrls::Node("redis://127.0.0.1:1".into())],
        retry_delay: Duration::from_millis(5),
        retry_jitter: jitter,
        ..Settings::default()
    };
    Shared::new(settings.check().expect("valid configuration")).expect("resources")
}

#[test]
fn retry_pause_is_the_delay_plus_bounded_jitter() {
    let redlock = client(Duration::from_millis(3));
    for _ in 0..200 {
        let pause = redlock.retry_pause();
        assert!(pause >= Duration::from_millis(5) && pause <= Duration::from_millis(8));
    }
    assert_eq!(
        client(Duration::ZERO).retry_pause(),
        Duration::from_millis(5)
    );
    // The longest jitter accepted.
    assert!(client(config::MAX_RETRY_DELAY).retry_pause() >= Duration::from_millis(5));
}

/// A fallback pause out of range is refused by the check, as a node
/// timeout is (it was accepted up to `Duration::MAX` before).
#[test]
fn retry_pauses_out_of_range_are_refused() {
    let with = |delay: Duration, jitter: Duration| {
        Settings {
            voters: vec![VoterUrls::Node("redis://127.0.0.1:1".into())],
            retry_delay: delay,
            retry_jitter: jitter,
            ..Settings::default()
        }
        .check()
        .err()
    };
    let max = config::MAX_RETRY_DELAY;
    let over = max + Duration::from_millis(1);
    for delay in [Duration::ZERO, over, Duration::MAX] {
        assert!(
            matches!(
                with(delay, Duration::ZERO),
                Some(Error::Config(ConfigError::InvalidRetryDelay(d))) if d == delay
            ),
            "{delay:?}"
        );
    }
    assert!(matches!(
        with(max, Duration::MAX),
        Some(Error::Config(ConfigError::InvalidRetryJitter(
            Duration::MAX
        )))
    ));
    assert!(with(Duration::from_millis(1), Duration::ZERO).is_none());
    assert!(with(max, max).is_none());
}

#[test]
fn ttl_is_checked_and_rounded_down_to_milliseconds() {
    let redlock = client(Duration::ZERO); // node timeout 50 ms
    let shared = &redlock;
    assert_eq!(shared.ttl_millis(Duration::from_micros(500_999)), Ok(500));
    assert_eq!(shared.ttl_millis(Duration::from_millis(3)), Ok(3));
    for short in [Duration::ZERO, Duration::from_micros(2_999)] {
        assert_eq!(
            shared.ttl_millis(short),
            Err(ConfigError::TtlTooShort(short))
        );
    }
    assert_eq!(shared.ttl_millis(MAX_TTL), Ok(MAX_TTL.as_millis() as u64));
    // The shortest TTL still leaves some validity.
    assert!(validity(MIN_TTL, Duration::ZERO).is_some());
    assert!(validity(Duration::from_millis(2), Duration::ZERO).is_none());
}

#[test]
fn a_round_never_outlasts_what_the_ttl_leaves() {
    let redlock = client(Duration::ZERO); // node timeout 50 ms
    let shared = &redlock;
    assert_eq!(
        shared.round_budget(Duration::from_secs(10)),
        Duration::from_millis(50)
    );
    // 30 ms - (0.3 ms + 2 ms) of drift
    assert_eq!(
        shared.round_budget(Duration::from_millis(30)),
        Duration::from_micros(27_700)
    );
}

/// The longest name accepted is the longest whose release channel waiters
/// can hear (with a voter's own key prefix, as the single-cluster mode
/// adds): every accepted name can be waited for by notice.
#[test]
fn the_longest_name_accepted_is_the_longest_waiters_can_hear() {
    use super::notify::can_subscribe;
    let longest = vec![b'x'; config::MAX_RESOURCE_LEN];
    assert!(Shared::check_resource(&longest).is_ok());
    assert!(can_subscribe(&longest));
    let over = vec![b'x'; config::MAX_RESOURCE_LEN + 1];
    assert!(matches!(
        Shared::check_resource(&over),
        Err(ConfigError::ResourceTooLong(n)) if n == over.len()
    ));
    assert!(!can_subscribe(&over));
}
