//! The crate's only `unsafe` code: the operating-system calls that neither
//! std nor socket2 offers, each behind a safe function.
//!
//! - [`PollSet`]: `poll(2)` over a reusable list of sockets. The fan-out
//!   fills it, waits once for all of them, then reads back what each socket
//!   is ready for. Its buffer keeps its capacity, so waiting allocates
//!   nothing.
//! - [`boot_clock`]: a clock that keeps counting while the host is
//!   suspended, for lock validity (`Instant` stops during a suspend on
//!   Linux, while the masters' TTLs keep running).
//! - [`fork_generation`]: how many times this process is removed by `fork`
//!   from the process that created its connections, so that a child never
//!   uses its parent's sockets.

#![allow(unsafe_code)] // the point of this module; every block says why it is sound

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// What a socket is ready for after [`PollSet::wait`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ready {
    /// Bytes can be read (or the peer closed, or an error is pending: a read
    /// then reports which, so all three are folded in here).
    pub(crate) readable: bool,
    /// Bytes can be written (for a connecting socket: the connect finished,
    /// successfully or not).
    pub(crate) writable: bool,
}

/// A reusable `poll(2)` set.
#[derive(Debug, Default)]
pub(crate) struct PollSet {
    fds: Vec<libc::pollfd>,
}

impl PollSet {
    /// Empties the set, keeping its capacity.
    pub(crate) fn clear(&mut self) {
        self.fds.clear();
    }

    /// Adds a socket and returns its slot, for [`PollSet::ready`].
    pub(crate) fn add(&mut self, fd: RawFd, read: bool, write: bool) -> usize {
        let mut events = 0;
        if read {
            events |= libc::POLLIN;
        }
        if write {
            events |= libc::POLLOUT;
        }
        self.fds.push(libc::pollfd {
            fd,
            events,
            revents: 0,
        });
        self.fds.len() - 1
    }

    /// Waits until a socket in the set is ready or `timeout` has passed.
    ///
    /// The timeout is rounded *up* to whole milliseconds (poll's unit), so a
    /// wait never ends before its deadline and the caller never spins on a
    /// zero timeout. An interrupted wait (`EINTR`) returns normally with no
    /// socket ready; the caller recomputes its deadlines and waits again.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let millis = timeout
            .as_nanos()
            .div_ceil(1_000_000)
            .clamp(1, libc::c_int::MAX as u128) as libc::c_int;
        self.poll(millis)
    }

    /// Reports which sockets are ready right now, without waiting. For a
    /// look, not a wait: callers never loop on it.
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.poll(0)
    }

    fn poll(&mut self, millis: libc::c_int) -> io::Result<()> {
        for fd in &mut self.fds {
            fd.revents = 0;
        }
        // SAFETY: `fds` points to `self.fds.len()` initialised `pollfd`s that
        // stay alive and unaliased for the whole call (we hold `&mut self`);
        // poll(2) writes only their `revents` fields. The length fits in
        // `nfds_t`: a set holds a few entries per master, and a client has
        // at most 64 masters.
        let n = unsafe {
            libc::poll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                millis,
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(());
        }
        Err(err)
    }

    /// What the socket in `slot` is ready for after the last wait or check.
    pub(crate) fn ready(&self, slot: usize) -> Ready {
        let revents = self.fds.get(slot).map_or(0, |fd| fd.revents);
        Ready {
            readable: revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL)
                != 0,
            writable: revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0,
        }
    }
}

/// The clock that lock validity is measured on.
///
/// Linux and Android: `CLOCK_BOOTTIME`, which counts the time the host
/// spent suspended (`CLOCK_MONOTONIC`, behind `Instant`, does not). macOS
/// and iOS: `CLOCK_MONOTONIC`, which there counts sleep too. Other systems:
/// `CLOCK_MONOTONIC`, whatever it does during a suspend (the guide's known
/// limits say so).
#[cfg(any(target_os = "linux", target_os = "android"))]
const VALIDITY_CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const VALIDITY_CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// The time on the validity clock (see [`VALIDITY_CLOCK`]), from an
/// arbitrary fixed origin. Never goes backwards.
pub(crate) fn boot_clock() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; clock_gettime(2) only writes it. The clock id is one the
    // platform defines (checked at compile time by the cfg above).
    let rc = unsafe { libc::clock_gettime(VALIDITY_CLOCK, &mut ts) };
    // The call can only fail for an unknown clock id, which the cfg rules
    // out; a zero reading would only make validity look shorter.
    debug_assert_eq!(rc, 0, "clock_gettime failed");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Incremented in the child after every `fork(2)` of this process.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Runs in the child right after `fork(2)`. Only async-signal-safe work is
/// allowed there: one atomic increment.
extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// How many forks separate this process from the first one that called
/// [`watch_forks`]: a value recorded with a connection and compared later
/// tells whether the connection belongs to this process or was inherited
/// from a parent (whose socket must never be read or written by a child).
/// One relaxed atomic load.
pub(crate) fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// Makes [`fork_generation`] count forks (once per process; later calls do
/// nothing). Returns an error only if the C library refused to register the
/// handler (out of memory).
pub(crate) fn watch_forks() -> io::Result<()> {
    static REGISTER: Once = Once::new();
    let mut result = Ok(());
    REGISTER.call_once(|| {
        // SAFETY: the handler is a plain `extern "C" fn` with no arguments
        // that lives for the whole program and only does an atomic
        // increment, which is async-signal-safe as a forked child of a
        // multi-threaded process requires. The other two handlers are null.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        if rc != 0 {
            result = Err(io::Error::from_raw_os_error(rc));
        }
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    #[test]
    fn reports_readable_and_writable_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");

        let mut set = PollSet::default();
        let slot = set.add(client.as_raw_fd(), true, false);
        let started = Instant::now();
        set.wait(Duration::from_millis(20)).expect("poll");
        assert!(started.elapsed() >= Duration::from_millis(20), "woke early");
        assert_eq!(set.ready(slot), Ready::default());

        server.write_all(b"+OK\r\n").expect("write");
        set.wait(Duration::from_secs(10)).expect("poll");
        assert!(set.ready(slot).readable);

        set.clear();
        let slot = set.add(client.as_raw_fd(), false, true);
        set.wait(Duration::from_secs(10)).expect("poll");
        assert!(set.ready(slot).writable);
    }

    #[test]
    fn a_sub_millisecond_timeout_still_waits() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut set = PollSet::default();
        set.add(listener.as_raw_fd(), true, false);
        let started = Instant::now();
        set.wait(Duration::from_nanos(1)).expect("poll");
        assert!(started.elapsed() >= Duration::from_millis(1));
    }

    #[test]
    fn the_boot_clock_advances_with_the_monotonic_one() {
        let (boot, mono) = (boot_clock(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (boot_passed, mono_passed) = (boot_clock() - boot, mono.elapsed());
        assert!(boot_passed >= Duration::from_millis(20), "{boot_passed:?}");
        // Without a suspend in between, the two agree closely.
        let gap = boot_passed.abs_diff(mono_passed);
        assert!(
            gap < Duration::from_millis(5),
            "{boot_passed:?} vs {mono_passed:?}"
        );
    }

    #[test]
    fn a_forked_child_sees_a_new_generation() {
        watch_forks().expect("registered");
        let before = fork_generation();
        // SAFETY (test): the child only reads an atomic and calls _exit,
        // both async-signal-safe.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = if fork_generation() == before + 1 {
                0
            } else {
                1
            };
            // SAFETY: _exit ends the child at once, without running the
            // parent's atexit handlers or flushing its copied buffers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(fork_generation(), before, "the parent's generation moved");
    }
}
