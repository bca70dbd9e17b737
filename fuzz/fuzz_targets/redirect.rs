//! Arbitrary bytes as the payload of a server's error reply: classifying
//! it for a cluster round never panics, and a redirect it accepts is one a
//! client can follow: a slot below 16384, a port from 1 to 65535, a host
//! of printable ASCII without spaces, and the same answer from
//! `Redirect::parse` as from `classify`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redlock_sync::cluster::{classify, ClusterError, EndpointRef, Redirect, SLOTS};

fuzz_target!(|line: &[u8]| {
    let parsed = Redirect::parse(line);
    match classify(line) {
        Some(ClusterError::Redirect(redirect)) => {
            assert_eq!(parsed, Ok(redirect));
            assert!(usize::from(redirect.slot) < SLOTS);
            assert_ne!(redirect.port, 0);
            if let EndpointRef::Host(host) = redirect.endpoint {
                assert!(!host.is_empty() && host.bytes().all(|b| b.is_ascii_graphic()));
            }
        }
        Some(ClusterError::BadRedirect(e)) => assert_eq!(parsed, Err(e)),
        Some(_) | None => assert!(parsed.is_err()),
    }
});
