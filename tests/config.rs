//! Configuration and argument errors: typed, immediate, and never showing a
//! password. No server is needed (nothing here connects).

use redlock_sync::{ConfigError, Error, Redlock, Wait, MAX_RETRY_DELAY, MAX_TTL};
use std::time::Duration;

fn config_error(result: Result<Redlock, Error>) -> ConfigError {
    match result {
        Err(Error::Config(e)) => e,
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(redlock) => panic!("accepted: {redlock:?}"),
    }
}

#[test]
fn build_rejects_no_nodes() {
    let empty: [&str; 0] = [];
    assert_eq!(
        config_error(Redlock::builder().nodes(empty).build()),
        ConfigError::NoNodes
    );
    assert_eq!(
        config_error(Redlock::builder().build()),
        ConfigError::NoNodes
    );
}

#[test]
fn build_rejects_duplicate_nodes_even_when_spelled_differently() {
    for pair in [
        ["redis://127.0.0.1:7001", "redis://127.0.0.1:7001"],
        ["redis://127.0.0.1:7001", "redis://127.0.0.1:7001/2"],
        ["redis://127.0.0.1:7001", "redis://:pw@127.0.0.1:7001"],
        ["redis://localhost:7001", "redis://127.0.0.1:7001"],
        ["redis://127.0.0.1", "redis://127.0.0.1:6379"],
    ] {
        let err = config_error(Redlock::builder().nodes(pair).build());
        assert!(
            matches!(err, ConfigError::DuplicateNode(_)),
            "{pair:?}: {err}"
        );
        assert!(!err.to_string().contains("pw"), "{err}");
    }
}

#[test]
fn build_rejects_bad_urls_without_showing_the_password() {
    for url in [
        "127.0.0.1:6379",
        "http://127.0.0.1",
        "rediss://:hunter2@127.0.0.1:0",
        "redis://:hunter2@127.0.0.1:99999",
        "redis://alice:hunter2@[::1",
        "redis://alice:hunter2@host/notadb",
        "redis://alice:hunter2@",
    ] {
        let err = config_error(Redlock::builder().nodes([url]).build());
        assert!(
            matches!(err, ConfigError::InvalidUrl { .. }),
            "{url}: {err}"
        );
        let shown = format!("{err} {err:?} {:?}", Redlock::builder().nodes([url]));
        assert!(!shown.contains("hunter2"), "password shown: {shown}");
    }
}

/// Passwords that hold a `,`, a blank, an `@` or a `%` never show: not in
/// the error of a URL that does not parse (where its credentials end is
/// unknown: `redis://:hunter2` was shown whole, issue 31 item 5), not in
/// `Error`'s or `ConfigError`'s Display or Debug, not in the `Builder`'s
/// or the `Redlock`'s Debug when the URL is valid.
#[test]
fn passwords_with_commas_blanks_ats_and_percents_never_show() {
    const SECRETS: [&str; 5] = ["hunter2", "hun,ter2", "hun ter2", "hun@ter2", "hun%ter2"];
    for url in [
        "redis://:hunter2",
        "redis://:hun,ter2",
        "redis://:hun ter2",
        "redis://alice:hunter2",
        "redis://:hun%ter2@127.0.0.1",
        "redis://:hun,ter2@127.0.0.1:0",
        "redis://:hun ter2@127.0.0.1:99999",
        "redis://:hun@ter2@127.0.0.1/x",
        "rediss://:hun ter2@[::1",
        "hun,ter2@127.0.0.1",
    ] {
        let err = config_error(Redlock::builder().nodes([url]).build());
        assert!(
            matches!(err, ConfigError::InvalidUrl { .. }),
            "{url}: {err}"
        );
        let shown = format!(
            "{err} {err:?} {} {:?} {:?}",
            Error::Config(err.clone()),
            Error::Config(err.clone()),
            Redlock::builder().nodes([url])
        );
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{url}: {shown}");
        }
    }
    for url in [
        "redis://:hun,ter2@127.0.0.1:7001",
        "redis://alice:hun ter2@127.0.0.1:7001/1",
        "redis://:hun@ter2@127.0.0.1:7001",
        "redis://:hun%25ter2@127.0.0.1:7001",
    ] {
        let builder = Redlock::builder().nodes([url]);
        let redlock = builder.clone().build().expect("a valid URL");
        let shown = format!("{builder:?} {redlock:?}");
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{url}: {shown}");
        }
    }
}

/// What a URL's writer can do about it is in the message: percent-encode
/// a `%`, `?` or `#` in the password.
#[test]
fn url_errors_say_how_to_write_the_password() {
    for (url, advice) in [
        ("redis://:100%@127.0.0.1", "%25"),
        ("redis://:a?b@127.0.0.1", "%3F"),
        ("redis://:a#b@127.0.0.1", "%23"),
    ] {
        let err = config_error(Redlock::builder().nodes([url]).build());
        assert!(err.to_string().contains(advice), "{url}: {err}");
    }
}

#[test]
fn build_rejects_an_unresolvable_host() {
    let err = config_error(
        Redlock::builder()
            .nodes(["redis://no-such-host.invalid:6379"])
            .build(),
    );
    assert!(matches!(err, ConfigError::Unresolvable { .. }), "{err}");
}

#[test]
fn build_rejects_a_zero_or_huge_node_timeout() {
    for timeout in [Duration::ZERO, Duration::from_secs(61)] {
        let err = config_error(
            Redlock::builder()
                .nodes(["redis://127.0.0.1:7001"])
                .node_timeout(timeout)
                .build(),
        );
        assert_eq!(err, ConfigError::InvalidNodeTimeout(timeout));
    }
}

/// The fallback pause is bounded as the node timeout is: zero (a busy
/// loop) and anything above a minute (a wait that would not notice a free
/// lock for as long; `Duration::MAX` was accepted before) are refused by
/// `build()`, as is a jitter above a minute.
#[test]
fn build_rejects_a_zero_or_huge_retry_delay_or_jitter() {
    let build = |delay: Duration, jitter: Duration| {
        Redlock::builder()
            .nodes(["redis://127.0.0.1:7001"])
            .retry_delay(delay)
            .retry_jitter(jitter)
            .build()
    };
    let over = MAX_RETRY_DELAY + Duration::from_millis(1);
    for delay in [Duration::ZERO, over, Duration::MAX] {
        let err = config_error(build(delay, Duration::ZERO));
        assert_eq!(err, ConfigError::InvalidRetryDelay(delay));
        assert!(err.to_string().contains("retry delay"), "{err}");
    }
    for jitter in [over, Duration::MAX] {
        let err = config_error(build(Duration::from_millis(200), jitter));
        assert_eq!(err, ConfigError::InvalidRetryJitter(jitter));
    }
    assert!(build(MAX_RETRY_DELAY, MAX_RETRY_DELAY).is_ok());
    assert!(build(Duration::from_millis(1), Duration::ZERO).is_ok());
}

#[test]
fn lock_rejects_bad_ttls_before_contacting_anyone() {
    // Nothing listens on port 1: had a round been run, the error would be
    // NoQuorum, not Config.
    let redlock = Redlock::builder()
        .nodes(["redis://127.0.0.1:1"])
        .node_timeout(Duration::from_millis(50))
        .build()
        .expect("valid configuration");
    let cases = [
        (Duration::ZERO, ConfigError::TtlTooShort(Duration::ZERO)),
        (
            Duration::from_micros(2_999),
            ConfigError::TtlTooShort(Duration::from_micros(2_999)),
        ),
        (
            MAX_TTL + Duration::from_secs(1),
            ConfigError::TtlTooLong(MAX_TTL + Duration::from_secs(1)),
        ),
    ];
    for (ttl, expected) in cases {
        for result in [
            redlock.lock("r", ttl).map(drop),
            redlock.try_lock("r", ttl).map(drop),
        ] {
            match result {
                Err(Error::Config(e)) => assert_eq!(e, expected),
                other => panic!("{ttl:?}: {other:?}"),
            }
        }
    }
}

#[test]
fn the_defaults_are_documented_values() {
    let redlock = Redlock::builder()
        .nodes([
            "redis://127.0.0.1:7001",
            "redis://127.0.0.1:7002",
            "redis://[::1]:7003",
        ])
        .build()
        .unwrap();
    let shown = format!("{redlock:?}");
    assert!(shown.contains("node_timeout: 50ms"), "{shown}");
    assert!(shown.contains("lock_wait: NoLimit"), "{shown}");
    assert!(shown.contains("unreachable_limit: 10s"), "{shown}");
    assert!(shown.contains("retry_delay: 200ms"), "{shown}");
    assert!(shown.contains("[::1]:7003"), "{shown}");
    assert_eq!((redlock.node_count(), redlock.quorum()), (3, 2));
}

#[test]
fn build_rejects_more_than_64_nodes() {
    let urls: Vec<String> = (0..65)
        .map(|i| format!("redis://127.0.0.1:{}", 7000 + i))
        .collect();
    assert_eq!(
        config_error(Redlock::builder().nodes(&urls).build()),
        ConfigError::TooManyNodes(65)
    );
    assert!(Redlock::builder().nodes(&urls[..64]).build().is_ok());
}

#[cfg(not(feature = "tls"))]
#[test]
fn a_rediss_url_without_the_tls_feature_says_to_enable_it() {
    let err = config_error(
        Redlock::builder()
            .nodes(["rediss://:hunter2@127.0.0.1:6380"])
            .build(),
    );
    assert_eq!(
        err,
        ConfigError::TlsNotEnabled("rediss://***@127.0.0.1:6380".into())
    );
    let shown = err.to_string();
    assert!(shown.contains("feature `tls`"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

/// An empty resource name is a configuration error, before any I/O (no
/// server listens at the URL).
#[test]
fn an_empty_resource_name_is_refused_before_any_io() {
    let redlock = Redlock::builder()
        .nodes(["redis://127.0.0.1:1"])
        .build()
        .unwrap();
    let empty = |e: &Error| matches!(e, Error::Config(ConfigError::EmptyResource));
    assert!(empty(
        &redlock.try_lock("", Duration::from_secs(10)).unwrap_err()
    ));
    assert!(empty(
        &redlock.lock(b"", Duration::from_secs(10)).unwrap_err()
    ));
    let waited = redlock
        .lock_waiting("", Duration::from_secs(10), Wait::NoLimit)
        .unwrap_err();
    assert!(empty(&waited) && waited.is_config(), "{waited}");
    assert!(
        waited.to_string().contains("resource name is empty"),
        "{waited}"
    );
    assert!(empty(&redlock.inspect("").unwrap_err()));
}
