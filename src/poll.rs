//! The crate's only `unsafe` code: a safe wrapper around `poll(2)`.
//!
//! A [`PollSet`] is a reusable list of (socket, interest) pairs. The fan-out
//! fills it, waits once for all of them, then reads back what each socket is
//! ready for. Its buffer keeps its capacity between rounds, so steady-state
//! waiting allocates nothing.

#![allow(unsafe_code)] // poll(2) has no safe binding in std or socket2.

use std::io;
use std::os::fd::RawFd;
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

    fn poll(&mut self, millis: libc::c_int) -> io::Result<()> {
        for fd in &mut self.fds {
            fd.revents = 0;
        }
        // SAFETY: `fds` points to `self.fds.len()` initialised `pollfd`s that
        // stay alive and unaliased for the whole call (we hold `&mut self`);
        // poll(2) writes only their `revents` fields. The length fits in
        // `nfds_t` because a set holds one entry per node.
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

    /// Reports which sockets are ready right now, without waiting. For a
    /// check, not a wait: callers never loop on it.
    pub(crate) fn check(&mut self) -> io::Result<()> {
        self.poll(0)
    }

    /// What the socket in `slot` is ready for after the last [`PollSet::wait`].
    pub(crate) fn ready(&self, slot: usize) -> Ready {
        let revents = self.fds.get(slot).map_or(0, |fd| fd.revents);
        Ready {
            readable: revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL)
                != 0,
            writable: revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0,
        }
    }
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
}
