//! One non-blocking connection to one master: the socket, its input and
//! output buffers, and the queue of replies it still owes us.
//!
//! Commands may be pipelined: a new command can be written while replies to
//! earlier ones are still on their way, because Redis answers in order and
//! [`Conn`] knows exactly which command each reply belongs to, and checks
//! that each reply fits that command. What it never does is guess: a
//! connection that sent something malformed, mistyped or unsolicited, that
//! failed in any way, or whose server stopped answering altogether (see
//! `fanout::lag_limit`) is discarded (closed, buffers dropped), never
//! resynchronised. A stale `+OK` can therefore never be read as the answer
//! to a later command.

use crate::error::{NodeError, Phase, ProtocolError, ServerError};
use crate::node::{Expect, Node};
use crate::resp::{decode, Decoded, Reply, MAX_REPLY_LEN};
use crate::script::{describe, Answer, Vote};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Most replies a connection may owe before no new acquisition is sent on
/// it. A server that lags (busy, or starved of CPU) keeps receiving commands,
/// in order, so that each release follows its acquisition on the same
/// connection; this bound only caps what a frozen server makes us hold.
pub(crate) const MAX_OWED_ACQUIRE: usize = 1024;

/// The same bound for releases and extensions: twice as high, so that every
/// acquisition that was sent always has room for its release behind it.
pub(crate) const MAX_OWED: usize = 2 * MAX_OWED_ACQUIRE;

/// Room for owed replies allocated up front (3 KiB): enough for a server
/// that falls a hundred replies behind for a moment, as the slowest masters
/// do when the client returns at quorum and they lose the CPU for a few
/// milliseconds, so that steady-state locking never grows the queue. A
/// stalled server grows it (once) up to [`MAX_OWED`].
const OWED_CAPACITY: usize = 128;

/// Initial size of the input buffer; lock replies are a few bytes each.
const INPUT_BUFFER_LEN: usize = 4096;

/// Largest the input buffer ever grows: one maximal reply plus one byte, the
/// point at which the decoder has certainly answered or failed.
const MAX_INPUT_BUFFER_LEN: usize = MAX_REPLY_LEN + 1;

/// Who is waiting for an owed reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A handshake command (AUTH, SELECT, SCRIPT LOAD).
    Handshake(Expect),
    /// The command of the round with this number, and the shape of the
    /// replies it may get.
    Round(u64, Answer),
}

#[derive(Clone, Copy, Debug)]
struct Owed {
    deadline: Instant,
    purpose: Purpose,
}

/// A connection to one master (or no connection yet).
pub(crate) struct Conn {
    socket: Option<Socket>,
    /// A non-blocking connect is under way: wait for writability.
    connecting: bool,
    input: InputBuffer,
    /// Bytes written by the caller but not yet accepted by the socket.
    output: Vec<u8>,
    owed: VecDeque<Owed>,
}

impl fmt::Debug for Conn {
    // Hand-written: the output buffer can hold the AUTH command, password
    // and all, so no buffer contents are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("open", &self.is_open())
            .field("connecting", &self.connecting)
            .field("owed", &self.owed.len())
            .field("unread_bytes", &self.input.unread().len())
            .field("unsent_bytes", &self.output.len())
            .finish()
    }
}

impl Conn {
    pub(crate) fn new() -> Conn {
        Conn {
            socket: None,
            connecting: false,
            input: InputBuffer::new(),
            output: Vec::with_capacity(256),
            owed: VecDeque::with_capacity(OWED_CAPACITY),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.socket.is_some()
    }

    /// Closes the connection and forgets everything in flight.
    pub(crate) fn discard(&mut self) {
        self.socket = None;
        self.connecting = false;
        self.input.clear();
        self.output.clear();
        self.owed.clear();
    }

    /// Starts a non-blocking connect to `node` and queues its handshake, to be
    /// sent as soon as the connection is up and answered by `deadline`.
    ///
    /// The procedure: create a non-blocking socket, call connect(2), which
    /// usually answers "in progress"; the caller then polls for writability,
    /// and [`Conn::on_writable`] reads `SO_ERROR` to learn whether the
    /// connection was established.
    pub(crate) fn connect(&mut self, node: &Node, deadline: Instant) -> Result<(), NodeError> {
        self.discard();
        let socket = Socket::new(
            Domain::for_address(node.addr),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(|e| NodeError::from_io(&e))?;
        let setup = socket
            .set_nonblocking(true)
            .and_then(|()| socket.set_tcp_nodelay(true));
        setup.map_err(|e| NodeError::from_io(&e))?;
        match socket.connect(&SockAddr::from(node.addr)) {
            Ok(()) => self.connecting = false,
            Err(e) if connect_in_progress(&e) => self.connecting = true,
            Err(e) => return Err(NodeError::from_io(&e)),
        }
        self.socket = Some(socket);
        self.output.extend_from_slice(&node.handshake);
        for expect in &node.expect {
            self.owed.push_back(Owed {
                deadline,
                purpose: Purpose::Handshake(*expect),
            });
        }
        Ok(())
    }

    /// Queues `frame`, whose reply is owed to `purpose` by `deadline`, and
    /// writes as much as the socket takes now. Refused if `limit` replies
    /// are already owed.
    pub(crate) fn send(
        &mut self,
        frame: &[u8],
        purpose: Purpose,
        deadline: Instant,
        limit: usize,
    ) -> Result<(), NodeError> {
        if self.owed.len() >= limit {
            return Err(NodeError::Backlogged);
        }
        self.output.extend_from_slice(frame);
        self.owed.push_back(Owed { deadline, purpose });
        self.flush()
    }

    /// Writes buffered output until the socket would block.
    fn flush(&mut self) -> Result<(), NodeError> {
        let Some(socket) = &self.socket else {
            return Err(NodeError::Closed);
        };
        if self.connecting {
            return Ok(());
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

    /// The socket became readable: take in what has arrived (one read; poll
    /// reports the socket again if more is waiting).
    pub(crate) fn on_readable(&mut self) -> Result<(), NodeError> {
        self.read_once().map(|_| ())
    }

    /// One non-blocking read. `Ok(false)` if nothing was there.
    fn read_once(&mut self) -> Result<bool, NodeError> {
        let socket = self.socket.as_ref().ok_or(NodeError::Closed)?;
        match self.input.read_from(socket) {
            Ok(0) => Err(NodeError::Closed),
            Ok(_) => Ok(true),
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

    /// Whether the connection is open and its connect has finished.
    pub(crate) fn is_established(&self) -> bool {
        self.socket.is_some() && !self.connecting
    }

    /// Whether the connection is open and owes nothing: nothing should
    /// arrive on it until it is sent a command.
    pub(crate) fn is_idle(&self) -> bool {
        self.is_established() && self.owed.is_empty()
    }

    /// How many replies the connection owes.
    pub(crate) fn owed_len(&self) -> usize {
        self.owed.len()
    }

    /// An idle connection became readable: the server closed it (an idle
    /// timeout, a restart), or sent something nobody asked for. Either way
    /// it must not carry the next command: the error says which.
    pub(crate) fn probe_idle(&mut self) -> Option<NodeError> {
        match self.read_once() {
            Ok(true) => Some(NodeError::Protocol(ProtocolError::Unsolicited)),
            Ok(false) => None, // a spurious wake-up
            Err(e) => Some(e),
        }
    }

    /// Reads and checks, without waiting, the replies to earlier commands
    /// that have arrived but were not read: after a round that returned at
    /// quorum and an idle spell, they sit in the socket past their deadline
    /// although the server answered in time.
    pub(crate) fn catch_up(&mut self) -> Result<(), NodeError> {
        // Each read either takes bytes or ends the loop; the replies it
        // completes are consumed so the buffer never fills.
        while !self.owed.is_empty() && self.read_once()? {
            self.take_replies(None, |_| Vote::No)?;
        }
        Ok(())
    }

    /// Takes buffered replies off the front until the one owed to `round`,
    /// and returns its vote (`None` if it has not fully arrived yet).
    /// Replies to handshakes and earlier rounds are checked and consumed on
    /// the way; an unsolicited or malformed reply is an error.
    pub(crate) fn next_vote(
        &mut self,
        round: u64,
        judge: impl Fn(&Reply<'_>) -> Vote,
    ) -> Result<Option<Vote>, NodeError> {
        self.take_replies(Some(round), judge)
    }

    /// Consumes complete replies in order. With `Some(round)`, stops at that
    /// round's reply and returns its vote; with `None`, consumes all.
    fn take_replies(
        &mut self,
        round: Option<u64>,
        judge: impl Fn(&Reply<'_>) -> Vote,
    ) -> Result<Option<Vote>, NodeError> {
        loop {
            let (vote, used) = match decode(self.input.unread()) {
                Ok(Decoded::Partial) => return Ok(None),
                Err(e) => return Err(NodeError::Protocol(ProtocolError::Malformed(e))),
                Ok(Decoded::Complete(reply, used)) => {
                    let owed = self
                        .owed
                        .pop_front()
                        .ok_or(NodeError::Protocol(ProtocolError::Unsolicited))?;
                    match owed.purpose {
                        Purpose::Handshake(expect) => {
                            check_handshake(expect, &reply)?;
                            (None, used)
                        }
                        Purpose::Round(r, _) if Some(r) == round => (Some(judge(&reply)), used),
                        // A reply to an earlier round, whose outcome was
                        // decided without it: nothing waits for it, but it
                        // must still fit its command, or the replies are
                        // out of step with the commands.
                        Purpose::Round(_, answer) if answer.allows(&reply) => (None, used),
                        Purpose::Round(..) => {
                            return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                                describe(&reply),
                            )))
                        }
                    }
                }
            };
            self.input.consume(used);
            // Bytes beyond the last owed reply are unsolicited; left in
            // place they would be read as the answer to the next command.
            if self.owed.is_empty() && !self.input.unread().is_empty() {
                return Err(NodeError::Protocol(ProtocolError::Unsolicited));
            }
            if vote.is_some() {
                return Ok(vote);
            }
        }
    }

    /// Whether the connection is beyond saving at `now`: a connect that did
    /// not finish by its deadline, or a server whose oldest owed reply is
    /// more than `lag_limit` overdue (frozen, or gone without a word).
    pub(crate) fn is_dead(&self, now: Instant, lag_limit: Duration) -> bool {
        let Some(oldest) = self.owed.front() else {
            return false;
        };
        if self.connecting {
            oldest.deadline <= now
        } else {
            oldest
                .deadline
                .checked_add(lag_limit)
                .is_some_and(|limit| limit <= now)
        }
    }

    /// The phase the connection is in, for a timeout error.
    pub(crate) fn phase(&self) -> Phase {
        if self.connecting {
            Phase::Connect
        } else if matches!(
            self.owed.front(),
            Some(Owed {
                purpose: Purpose::Handshake(_),
                ..
            })
        ) {
            Phase::Handshake
        } else {
            Phase::Reply
        }
    }

    /// What to poll this connection for: (read, write).
    pub(crate) fn interest(&self) -> (bool, bool) {
        if self.connecting {
            (false, true)
        } else {
            (!self.owed.is_empty(), !self.output.is_empty())
        }
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

fn check_handshake(expect: Expect, reply: &Reply<'_>) -> Result<(), NodeError> {
    match (expect, reply) {
        (Expect::Ok, Reply::Simple(b"OK")) => Ok(()),
        (Expect::Ok, Reply::Error(line)) => Err(NodeError::Server(ServerError::from_line(line))),
        (Expect::Digest(digest), Reply::Bulk(got)) if *got == digest => Ok(()),
        // A script that cannot be loaded (an ACL may forbid SCRIPT) is not
        // fatal: EVALSHA will answer NOSCRIPT and EVAL is sent instead.
        (Expect::Digest(_), Reply::Error(_)) => Ok(()),
        (_, other) => Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
            format!("{other:?} to a handshake command")
                .chars()
                .take(96)
                .collect(),
        ))),
    }
}

/// A read buffer that keeps its allocation: bytes live in `data[start..end]`,
/// reads go to `data[end..]`, and the buffer is compacted or grown (up to
/// [`MAX_INPUT_BUFFER_LEN`]) only when a reply does not fit.
struct InputBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl InputBuffer {
    fn new() -> InputBuffer {
        InputBuffer {
            data: vec![0; INPUT_BUFFER_LEN],
            start: 0,
            end: 0,
        }
    }

    fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    fn unread(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.clear();
        }
    }

    fn read_from(&mut self, mut socket: &Socket) -> io::Result<usize> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < MAX_INPUT_BUFFER_LEN {
                let len = (self.data.len() * 2).min(MAX_INPUT_BUFFER_LEN);
                self.data.resize(len, 0);
            } else {
                // Unreachable with a correct decoder (it fails before a
                // reply exceeds MAX_REPLY_LEN), but never read unboundedly.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "reply exceeds the input buffer",
                ));
            }
        }
        socket
            .read(&mut self.data[self.end..])
            .inspect(|n| self.end += n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    #[test]
    fn debug_output_never_shows_the_handshake() {
        // A listener that never answers: the handshake stays queued.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "redis://alice:hunter2@{}",
            listener.local_addr().expect("addr")
        );
        let node = Node::from_url(&url).expect("valid URL");
        let mut conn = Conn::new();
        conn.connect(&node, Instant::now() + Duration::from_secs(5))
            .expect("connect started");
        let shown = format!("{conn:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("alice"),
            "{shown}"
        );
        assert!(shown.contains("owed: 3"), "{shown}");
    }
}
