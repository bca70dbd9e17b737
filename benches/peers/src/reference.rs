//! The reference: the least a Redlock client has to do, written plainly, to
//! serve as the floor the real clients are measured against.
//!
//! One non-blocking `TcpStream` per master. A round writes one command to
//! every master at once, then waits with poll(2) and returns as soon as the
//! outcome is known: a quorum (N/2+1) gave the expected reply, or so many did
//! not that a quorum is impossible, or the node timeout passed.
//!
//! Replies that come in after their round has returned are still owed by
//! the connection: each node counts them, and the reply a round awaits is
//! the one after all those owed before it was sent, so a late reply is never
//! taken for the answer to a later command. Late replies that have arrived
//! are read before anything else is sent.
//!
//! A node that still owes a reply (it is slow, or stopped) is not sent the
//! next SET: it sits that round out as a "no" instead of piling up a
//! backlog. It is still sent the release of a lock whose SET it was sent,
//! queued behind that SET, since it may hold the key.
//!
//! Not a full client: no reconnection (a node that fails stays out), no
//! retries, no extension; at most 64 masters.
//!
//! `ref-notify` ([`Reference::connect_notify`]) is the same client made to
//! do the server work `ours` does, as the authors' wider harness's
//! `ref-notify` (`../shared/peers`, `bench/src/adapters/raw.rs`) does: its
//! SET goes to every master, queued behind the replies a master still
//! owes, and its release script also publishes a notice
//! (`redis.pcall('publish', 'redlock:released:'..KEYS[1], '1')`). After a
//! failed acquisition the release goes to the masters that were sent the
//! SET and did not refuse it.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Compare-and-delete: only the holder's value may delete the key.
const RELEASE_SCRIPT: &[u8] =
    b"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
/// `ref-notify`'s release: compare-and-delete, then a notice for waiters
/// (`pcall`: a user without publish rights still releases).
const NOTIFY_RELEASE_SCRIPT: &[u8] = b"if redis.call('get',KEYS[1]) == ARGV[1] then local n = redis.call('del',KEYS[1]); redis.pcall('publish','redlock:released:'..KEYS[1],'1'); return n else return 0 end";
/// The reply to `SET .. NX PX ..` that means "the key is now ours".
const SET: &[u8] = b"+OK\r\n";
/// The reply to the release script that means "our key was deleted".
const DELETED: &[u8] = b":1\r\n";
/// Connecting and the one blocking exchange (SCRIPT LOAD) at start-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(2);

/// The hand-written reference client.
pub struct Reference {
    nodes: Vec<Node>,
    quorum: usize,
    node_timeout: Duration,
    /// `ref-notify`: SET to every master (queued behind owed replies), the
    /// release script publishes.
    notify: bool,
    /// SHA1 of [`RELEASE_SCRIPT`], as SCRIPT LOAD returned it.
    script_sha: Vec<u8>,
    /// Random per client, so that two clients never pick the same value.
    value_prefix: u64,
    values_issued: u64,
    /// The command of the current round, encoded (reused between rounds).
    command: Vec<u8>,
    /// poll(2)'s array and, for each entry, the node it watches (reused).
    poll_fds: Vec<libc::pollfd>,
    polled_nodes: Vec<usize>,
}

/// A lock the reference holds.
pub struct Held {
    value: String,
    /// The nodes that were sent its SET: only they can hold its key.
    holders: NodeSet,
}

/// A set of nodes, by index: bit `i` is node `i`.
type NodeSet = u64;

/// Which nodes a round sends its command to.
#[derive(Clone, Copy)]
enum Recipients {
    /// Those that owe no reply.
    Idle,
    /// All of them, queued behind the replies they owe.
    All,
    /// Those in the set, whether they owe replies or not.
    Only(NodeSet),
}

impl Reference {
    /// Connects to every master (`HOST:PORT`) and loads the release script.
    pub fn connect(addrs: &[String], node_timeout: Duration) -> io::Result<Reference> {
        Reference::connect_as(addrs, node_timeout, false)
    }

    /// `ref-notify`: as [`Reference::connect`], for the server work `ours`
    /// does (see the module's doc).
    pub fn connect_notify(addrs: &[String], node_timeout: Duration) -> io::Result<Reference> {
        Reference::connect_as(addrs, node_timeout, true)
    }

    fn connect_as(addrs: &[String], node_timeout: Duration, notify: bool) -> io::Result<Reference> {
        if addrs.is_empty() || addrs.len() > NodeSet::BITS as usize {
            let message = format!("{} masters: the reference takes 1 to 64", addrs.len());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        }
        let mut nodes = Vec::with_capacity(addrs.len());
        let mut script_sha = Vec::new();
        for addr in addrs {
            let script = if notify {
                NOTIFY_RELEASE_SCRIPT
            } else {
                RELEASE_SCRIPT
            };
            let (node, sha) = Node::connect(addr, script)?;
            nodes.push(node);
            script_sha = sha; // The same on every node: it is the script's SHA1.
        }
        Ok(Reference {
            quorum: nodes.len() / 2 + 1,
            nodes,
            node_timeout,
            notify,
            script_sha,
            value_prefix: RandomState::new().build_hasher().finish(),
            values_issued: 0,
            command: Vec::with_capacity(256),
            poll_fds: Vec::new(),
            polled_nodes: Vec::new(),
        })
    }

    /// Tries once to take `resource` for `ttl`.
    pub fn acquire(&mut self, resource: &str, ttl: Duration) -> Option<Held> {
        self.values_issued += 1;
        let value = format!("{:016x}{:016x}", self.value_prefix, self.values_issued);
        let ttl_ms = ttl.as_millis().to_string();
        encode(
            &mut self.command,
            &[
                b"SET",
                resource.as_bytes(),
                value.as_bytes(),
                b"NX",
                b"PX",
                ttl_ms.as_bytes(),
            ],
        );
        let started = Instant::now();
        let recipients = if self.notify {
            Recipients::All
        } else {
            Recipients::Idle
        };
        let (quorum, sent, refused) = self.fan_out(SET, recipients);
        let holders = if self.notify { sent & !refused } else { sent };
        let held = Held { value, holders };
        // Redlock's validity rule: the keys may already be expiring if the
        // round took most of the TTL (allowance for clock drift: 1% + 2 ms).
        let drift = ttl / 100 + Duration::from_millis(2);
        if quorum && started.elapsed() + drift < ttl {
            return Some(held);
        }
        // Undo the SETs that did land, so the resource is not blocked until
        // the TTL runs out.
        self.release(resource, &held);
        None
    }

    /// Deletes `resource` where it still holds the lock's value; true if a
    /// quorum did.
    pub fn release(&mut self, resource: &str, held: &Held) -> bool {
        encode(
            &mut self.command,
            &[
                b"EVALSHA",
                &self.script_sha,
                b"1",
                resource.as_bytes(),
                held.value.as_bytes(),
            ],
        );
        self.fan_out(DELETED, Recipients::Only(held.holders)).0
    }

    /// Sends `self.command` to the `recipients` and waits until a quorum
    /// answered `expected` (true), or that became impossible, or the node
    /// timeout passed (false). Also returns the nodes it was sent to and
    /// those that answered otherwise.
    fn fan_out(&mut self, expected: &[u8], recipients: Recipients) -> (bool, NodeSet, NodeSet) {
        let deadline = Instant::now() + self.node_timeout;
        let total = self.nodes.len();
        let (mut yes, mut no) = (0, 0);
        let mut sent: NodeSet = 0;
        let mut refused: NodeSet = 0;
        for (index, node) in self.nodes.iter_mut().enumerate() {
            node.start_round();
            let chosen = match recipients {
                Recipients::Idle => node.owed == 0,
                Recipients::All => true,
                Recipients::Only(set) => set & (1 << index) != 0,
            };
            if chosen && node.send(&self.command) {
                sent |= 1 << index;
            } else {
                no += 1;
            }
        }
        // A quorum is impossible once more than N - quorum nodes said no.
        while yes < self.quorum && no <= total - self.quorum {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.wait_readable(left) {
                break;
            }
            for (fd, &index) in self.poll_fds.iter().zip(&self.polled_nodes) {
                if fd.revents == 0 {
                    continue; // Nothing from this node yet.
                }
                match self.nodes[index].take_answer(expected) {
                    Some(true) => yes += 1,
                    Some(false) => {
                        no += 1;
                        refused |= 1 << index;
                    }
                    None => {}
                }
            }
        }
        (yes >= self.quorum, sent, refused)
    }

    /// Waits up to `timeout` until a node awaiting its answer has something
    /// to read; `poll_fds[i].revents` then says which (`polled_nodes[i]` is
    /// the node). False on timeout or if poll(2) fails.
    fn wait_readable(&mut self, timeout: Duration) -> bool {
        self.poll_fds.clear();
        self.polled_nodes.clear();
        for (index, node) in self.nodes.iter().enumerate() {
            if node.awaiting {
                self.poll_fds.push(libc::pollfd {
                    fd: node.stream.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
                self.polled_nodes.push(index);
            }
        }
        if self.poll_fds.is_empty() {
            return false; // Nothing to wait for (the caller's loop prevents it).
        }
        // Rounded up: rounding down would spin with a zero timeout during
        // the last millisecond.
        let timeout_ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `poll_fds` is a live, initialised array of `len()` pollfd
        // values that nothing else touches during the call; poll(2) writes
        // only their `revents` fields.
        let ready = unsafe {
            libc::poll(
                self.poll_fds.as_mut_ptr(),
                self.poll_fds.len() as libc::nfds_t,
                timeout_ms,
            )
        };
        if ready < 0 {
            // On EINTR, no entry is flagged: the caller looks at the clock
            // and polls again.
            return io::Error::last_os_error().kind() == io::ErrorKind::Interrupted;
        }
        ready > 0
    }
}

/// One master's connection.
struct Node {
    stream: TcpStream,
    /// Bytes read but not yet consumed as replies.
    input: Vec<u8>,
    /// Replies still owed for commands already sent.
    owed: usize,
    /// Whether the current round waits for this node's answer: the reply to
    /// the last command sent (the one that brings `owed` to zero).
    awaiting: bool,
    /// Set on an I/O or protocol error: the node stays out from then on.
    broken: bool,
}

impl Node {
    /// Connects (blocking), loads the release script and returns the node,
    /// now non-blocking, with the script's SHA1.
    fn connect(addr: &str, release_script: &[u8]) -> io::Result<(Node, Vec<u8>)> {
        let socket_addr = resolve(addr)?;
        let mut stream = TcpStream::connect_timeout(&socket_addr, SETUP_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
        let mut command = Vec::new();
        encode(&mut command, &[b"SCRIPT", b"LOAD", release_script]);
        stream.write_all(&command)?;
        let sha = read_bulk_reply(&mut stream)?;
        stream.set_nonblocking(true)?;
        let node = Node {
            stream,
            input: Vec::with_capacity(512),
            owed: 0,
            awaiting: false,
            broken: false,
        };
        Ok((node, sha))
    }

    /// A new round begins: an answer an earlier round still awaited is now
    /// merely late, and late replies that have arrived are read.
    fn start_round(&mut self) {
        self.awaiting = false;
        if self.owed > 0 {
            self.receive();
            self.consume_replies(b"");
        }
    }

    /// Sends `command`, which this round then awaits the answer to. False
    /// if the node is unusable.
    fn send(&mut self, command: &[u8]) -> bool {
        if self.broken {
            return false;
        }
        // The socket's send buffer holds at most a command or two, so a
        // short command fits whole. A partial write would leave half a
        // command on the connection: the node is then unusable.
        loop {
            match self.stream.write(command) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(n) if n == command.len() => {
                    self.owed += 1;
                    self.awaiting = true;
                    return true;
                }
                _ => {
                    self.broken = true;
                    return false;
                }
            }
        }
    }

    /// After poll(2) flagged the node: reads what arrived and returns the
    /// verdict on the awaited reply if it is complete (`Some(true)` if it was
    /// `expected`). A node that breaks while awaited answers `Some(false)`.
    fn take_answer(&mut self, expected: &[u8]) -> Option<bool> {
        self.receive();
        let verdict = self.consume_replies(expected);
        if verdict.is_none() && self.broken && self.awaiting {
            self.awaiting = false;
            return Some(false);
        }
        verdict
    }

    /// Reads whatever has arrived, without blocking.
    fn receive(&mut self) {
        let mut chunk = [0u8; 512];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.broken = true; // Closed by the server.
                    return;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    // poll(2) is level-triggered: whatever comes later wakes
                    // it again, so a short read need not be followed by one
                    // more read that would only say EAGAIN.
                    if n < chunk.len() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.broken = true;
                    return;
                }
            }
        }
    }

    /// Takes the complete replies out of `input`, one per owed reply. Late
    /// replies are dropped; for the awaited one, returns whether it was
    /// `expected`.
    fn consume_replies(&mut self, expected: &[u8]) -> Option<bool> {
        let mut verdict = None;
        let mut used = 0;
        while self.owed > 0 {
            match reply_len(&self.input[used..]) {
                Ok(Some(len)) => {
                    let reply = &self.input[used..used + len];
                    used += len;
                    self.owed -= 1;
                    if self.owed == 0 && self.awaiting {
                        self.awaiting = false;
                        verdict = Some(reply == expected);
                    }
                }
                Ok(None) => break,
                Err(BadReply) => {
                    self.broken = true;
                    break;
                }
            }
        }
        self.input.drain(..used);
        // Bytes nobody asked for: the connection is out of step.
        if self.owed == 0 && !self.input.is_empty() {
            self.broken = true;
        }
        verdict
    }
}

/// A reply of a kind SET, EVALSHA and SCRIPT LOAD never send.
pub(crate) struct BadReply;

/// The length of the first reply in `buf` if it is complete. Only simple
/// strings, errors, integers and bulk strings are expected here.
pub(crate) fn reply_len(buf: &[u8]) -> Result<Option<usize>, BadReply> {
    let Some(line_end) = buf.windows(2).position(|pair| pair == b"\r\n") else {
        return Ok(None);
    };
    let line_len = line_end + 2;
    match buf[0] {
        b'+' | b'-' | b':' => Ok(Some(line_len)),
        b'$' => {
            let len: i64 = std::str::from_utf8(&buf[1..line_end])
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or(BadReply)?;
            if len < 0 {
                return Ok(Some(line_len)); // Nil: SET NX found the key taken.
            }
            let total = line_len + len as usize + 2;
            Ok((buf.len() >= total).then_some(total))
        }
        _ => Err(BadReply),
    }
}

/// Reads one bulk-string reply on a blocking stream (SCRIPT LOAD's SHA1).
pub(crate) fn read_bulk_reply(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "unexpected reply");
        match reply_len(&buf) {
            Ok(Some(len)) if buf[0] == b'$' => {
                let start = buf.iter().position(|&b| b == b'\n').ok_or_else(bad)? + 1;
                return Ok(buf[start..len - 2].to_vec());
            }
            Ok(Some(_)) | Err(BadReply) => {
                let text = String::from_utf8_lossy(&buf).trim_end().to_string();
                return Err(io::Error::new(io::ErrorKind::InvalidData, text));
            }
            Ok(None) => {}
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Encodes a command (a RESP array of bulk strings) into `out`.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.clear();
    // Writing to a Vec cannot fail.
    write!(out, "*{}\r\n", args.len()).expect("write to Vec");
    for arg in args {
        write!(out, "${}\r\n", arg.len()).expect("write to Vec");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

pub(crate) fn resolve(addr: &str) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no address for {addr}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_len_finds_the_end_of_each_kind() {
        assert!(matches!(reply_len(b"+OK\r\n"), Ok(Some(5))));
        assert!(matches!(reply_len(b":1\r\n:0\r\n"), Ok(Some(4))));
        assert!(matches!(reply_len(b"-NOSCRIPT x\r\n"), Ok(Some(13))));
        assert!(matches!(reply_len(b"$-1\r\n"), Ok(Some(5))));
        assert!(matches!(reply_len(b"$3\r\nabc\r\n+OK"), Ok(Some(9))));
    }

    #[test]
    fn reply_len_waits_for_incomplete_replies() {
        for partial in [&b""[..], b"+O", b"+OK\r", b"$3\r\nab", b"$3\r\nabc\r"] {
            assert!(matches!(reply_len(partial), Ok(None)), "{partial:?}");
        }
    }

    #[test]
    fn reply_len_rejects_other_kinds() {
        assert!(reply_len(b"*1\r\n:1\r\n").is_err());
        assert!(reply_len(b"$x\r\n").is_err());
    }

    #[test]
    fn encode_writes_a_resp_array() {
        let mut out = b"stale".to_vec();
        encode(&mut out, &[b"GET", b"key"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
    }
}
