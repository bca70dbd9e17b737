//! Running out of file descriptors: the error keeps the operating system's
//! own message. In a binary of its own, since it lowers the process's limit.

mod support;

use redlock_sync::{NodeError, NodeOutcome, Redlock};
use std::time::Duration;
use support::Cluster;

/// The number the next descriptor would get: the lowest one free.
fn lowest_free_descriptor() -> u64 {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open("/dev/null").expect("/dev/null");
    file.as_raw_fd() as u64
}

fn set_soft_limit(limit: u64) -> u64 {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one struct we pass,
    // which lives for the whole call.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut current), 0);
        let wanted = libc::rlimit {
            #[allow(clippy::unnecessary_cast)]
            rlim_cur: limit as libc::rlim_t,
            rlim_max: current.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &wanted), 0);
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not everywhere
    let before = current.rlim_cur as u64;
    before
}

#[test]
fn running_out_of_descriptors_is_reported_with_the_os_message() {
    let cluster = Cluster::start(3);
    let redlock = Redlock::builder()
        .nodes(cluster.urls())
        .lock_wait(Duration::ZERO)
        .build()
        .unwrap();
    // A new descriptor takes the lowest free number, which must be below
    // the limit: with the limit at that number, no socket can be made.
    let before = set_soft_limit(lowest_free_descriptor());
    let result = redlock.try_lock("r", Duration::from_secs(10));
    set_soft_limit(before);
    let err = result.expect_err("no sockets to be had");
    let failures: Vec<&NodeError> = err
        .nodes()
        .expect("a report")
        .iter()
        .filter_map(|s| match s.outcome() {
            NodeOutcome::Failed(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(!failures.is_empty(), "{err}");
    for failure in failures {
        match failure {
            NodeError::Io(io) => assert_eq!(io.raw_os_error(), Some(libc::EMFILE), "{err}"),
            other => panic!("not the OS error: {other}"),
        }
    }
    assert!(err.to_string().contains("Too many open files"), "{err}");
}
