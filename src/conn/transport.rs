//! The byte stream under one connection: a non-blocking TCP socket and its
//! input and output buffers.
//!
//! It knows nothing of commands or replies: the connection above it queues
//! bytes to send, and decodes what [`Transport::unread`] holds. Everything
//! that touches the socket is here, so that a secured stream can take the
//! socket's place without the layers above noticing: with the feature
//! `tls`, a `rediss://` node's transport passes its bytes through a
//! `tls::Session` (see `tls`), and its opening has one phase more (the TLS
//! handshake, after the TCP connect). Its input and output buffers still
//! hold plaintext only.

use super::buffer::InputBuffer;
use super::node::Node;
use crate::error::{NodeError, Phase};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::fmt;
use std::io;
#[cfg(feature = "tls")]
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

/// A non-blocking TCP stream to one server (or no stream yet).
pub(crate) struct Transport {
    socket: Option<Socket>,
    /// A non-blocking connect is under way: wait for writability.
    connecting: bool,
    /// The TLS session of a `rediss://` connection.
    #[cfg(feature = "tls")]
    tls: Option<Box<super::tls::Session>>,
    input: InputBuffer,
    /// The last read left room in the input buffer: it took all the socket
    /// held (never known over TLS).
    drained: bool,
    /// Bytes queued but not yet accepted by the socket.
    output: Vec<u8>,
}

impl fmt::Debug for Transport {
    // Hand-written: the output buffer can hold the AUTH command, password
    // and all, so no buffer contents are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("open", &self.is_open())
            .field("opening", &self.opening_phase())
            .field("unread_bytes", &self.input.unread().len())
            .field("unsent_bytes", &self.output.len())
            .finish()
    }
}

impl Transport {
    pub(crate) fn new() -> Transport {
        Transport {
            socket: None,
            connecting: false,
            #[cfg(feature = "tls")]
            tls: None,
            input: InputBuffer::new(),
            drained: false,
            output: Vec::with_capacity(512),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.socket.is_some()
    }

    /// Whether the stream is open and its opening (connect, and TLS
    /// handshake if any) has finished.
    pub(crate) fn is_established(&self) -> bool {
        self.socket.is_some() && self.opening_phase().is_none()
    }

    /// Whether the stream is (to be) secured by TLS.
    pub(crate) fn is_secure(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        return false;
    }

    /// Whether the opening is still under way.
    pub(crate) fn is_connecting(&self) -> bool {
        self.opening_phase().is_some()
    }

    /// Where the opening stands: the TCP connect, the TLS handshake, or
    /// done (`None`).
    pub(crate) fn opening_phase(&self) -> Option<Phase> {
        if self.connecting {
            return Some(Phase::Connect);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_ref().filter(|tls| tls.is_handshaking()) {
            // A server that never answers our ClientHello is most likely
            // a plaintext port: the error says so.
            return Some(match tls.has_answered() {
                true => Phase::Tls,
                false => Phase::TlsUnanswered,
            });
        }
        None
    }

    /// Closes the socket and drops everything buffered (the buffers keep
    /// their allocations for the next connection).
    pub(crate) fn close(&mut self) {
        self.socket = None;
        self.connecting = false;
        #[cfg(feature = "tls")]
        {
            self.tls = None;
        }
        self.input.clear();
        self.output.clear();
    }

    /// Starts a non-blocking connect to `node`, at the address it has now
    /// (with its TLS session, for a `rediss://` node).
    ///
    /// The procedure: create a non-blocking socket and call connect(2),
    /// which usually answers "in progress"; the caller then polls for
    /// writability, and [`Transport::on_writable`] reads `SO_ERROR` to learn
    /// whether the connection was established. Over TLS, the handshake
    /// follows, driven by [`Transport::on_writable`] and
    /// [`Transport::read_once`] as [`Transport::interest`] asks. Bytes
    /// queued meanwhile are sent once the opening is done.
    pub(crate) fn connect(&mut self, node: &Node) -> Result<(), NodeError> {
        self.close();
        // A cluster node met by name may not have resolved yet: it is
        // looked up away from the rounds (see `address`).
        let addr = node.addr().ok_or(NodeError::Unresolved)?;
        #[cfg(feature = "tls")]
        if let Some(target) = &node.tls {
            self.tls = Some(Box::new(super::tls::Session::new(target)?));
        }
        self.connect_to(addr)
    }

    fn connect_to(&mut self, addr: SocketAddr) -> Result<(), NodeError> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .map_err(|e| NodeError::from_io(&e))?;
        let setup = socket
            .set_nonblocking(true)
            .and_then(|()| socket.set_tcp_nodelay(true));
        setup.map_err(|e| NodeError::from_io(&e))?;
        match socket.connect(&SockAddr::from(addr)) {
            Ok(()) => self.connecting = false,
            Err(e) if connect_in_progress(&e) => self.connecting = true,
            Err(e) => return Err(NodeError::from_io(&e)),
        }
        self.socket = Some(socket);
        Ok(())
    }

    /// The buffer of bytes to send: commands are encoded straight into it,
    /// then [`Transport::flush`] writes them.
    pub(crate) fn output(&mut self) -> &mut Vec<u8> {
        &mut self.output
    }

    /// Writes buffered output until the socket would block.
    pub(crate) fn flush(&mut self) -> Result<(), NodeError> {
        let Some(socket) = &self.socket else {
            return Err(NodeError::Closed);
        };
        if self.connecting {
            return Ok(());
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            return tls.write(&mut SocketIo(socket), &mut self.output);
        }
        let mut written = 0;
        while written < self.output.len() {
            match send_no_signal(socket, &self.output[written..]) {
                Ok(0) => return Err(NodeError::Closed),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NodeError::from_io(&e)),
            }
        }
        self.output.drain(..written);
        Ok(())
    }

    /// The socket became writable: finish a connect, then flush.
    pub(crate) fn on_writable(&mut self) -> Result<(), NodeError> {
        if self.connecting {
            let socket = self.socket.as_ref().ok_or(NodeError::Closed)?;
            match socket.take_error() {
                Ok(None) => self.connecting = false,
                Ok(Some(e)) | Err(e) => return Err(NodeError::from_io(&e)),
            }
        }
        self.flush()
    }

    /// One non-blocking read into the input buffer. `Ok(false)` if nothing
    /// was there (over TLS: no data, only records such as session tickets,
    /// or handshake messages); a closed stream is an error.
    pub(crate) fn read_once(&mut self) -> Result<bool, NodeError> {
        let socket = self.socket.as_ref().ok_or(NodeError::Closed)?;
        self.drained = false;
        #[cfg(feature = "tls")]
        if let Some(tls) = &mut self.tls {
            let was_handshaking = tls.is_handshaking();
            let got = tls.read(&mut SocketIo(socket), &mut self.input)?;
            if was_handshaking && !tls.is_handshaking() {
                // The handshake is done: what waited for it goes out.
                self.flush()?;
            }
            return Ok(got);
        }
        match self.input.read_from(socket) {
            Ok((0, _)) => Err(NodeError::Closed),
            Ok((_, filled)) => {
                self.drained = !filled;
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(NodeError::from_io(&e)),
        }
    }

    /// Whether the last [`Transport::read_once`] took all the socket held
    /// (it read less than it had room for): reading again at once would
    /// most likely find nothing.
    pub(crate) fn drained(&self) -> bool {
        self.drained
    }

    /// The bytes read but not yet consumed.
    pub(crate) fn unread(&self) -> &[u8] {
        self.input.unread()
    }

    /// Marks the first `n` unread bytes as consumed.
    pub(crate) fn consume(&mut self, n: usize) {
        self.input.consume(n);
    }

    /// What to poll the socket for: (read, write), given whether the layer
    /// above wants to read.
    pub(crate) fn interest(&self, wants_read: bool) -> (bool, bool) {
        if self.connecting {
            return (false, true);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            if tls.is_handshaking() {
                return tls.handshake_interest();
            }
            return (wants_read, !self.output.is_empty() || tls.wants_write());
        }
        (wants_read, !self.output.is_empty())
    }

    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.socket.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// Whether a non-blocking connect(2) error only means "under way".
fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == io::ErrorKind::WouldBlock
}

/// Writes without raising SIGPIPE when the peer has closed: a library must
/// not kill a host process that left SIGPIPE at its default action. Every
/// Unix but Apple's takes `MSG_NOSIGNAL` per call; there, the flag is absent
/// and the process is expected to ignore SIGPIPE (as Rust binaries do).
fn send_no_signal(socket: &Socket, bytes: &[u8]) -> io::Result<usize> {
    #[cfg(not(target_vendor = "apple"))]
    const FLAGS: libc::c_int = libc::MSG_NOSIGNAL;
    #[cfg(target_vendor = "apple")]
    const FLAGS: libc::c_int = 0;
    socket.send_with_flags(bytes, FLAGS)
}

/// The socket as a byte stream, for the TLS session: reads and writes
/// (without SIGPIPE) as the plaintext path does.
#[cfg(feature = "tls")]
struct SocketIo<'a>(&'a Socket);

#[cfg(feature = "tls")]
impl Read for SocketIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut socket = self.0;
        socket.read(buf)
    }
}

#[cfg(feature = "tls")]
impl std::io::Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        send_no_signal(self.0, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
