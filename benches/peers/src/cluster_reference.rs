//! The cluster reference: the least a Redlock client over cluster voters
//! has to do, written plainly, as the floor `ours` is measured against in
//! the cluster scenario (C1).
//!
//! Each voter is a whole Redis or Valkey Cluster. At start-up the
//! reference asks one seed per cluster for `CLUSTER SLOTS` once, keeps a
//! table slot → master, connects to every master (one non-blocking
//! socket each) and loads the release script there. It never learns the
//! map again and follows no redirect: the scenario moves no slot.
//!
//! A round computes the key's slot (CRC16 and the hash-tag rule), writes
//! the command to the owning master of every voter at once, then waits
//! with poll(2) until a quorum of voters gave the expected reply, a quorum
//! became impossible, or the node timeout passed. It sends what `ours`
//! sends (checked by the scenario's `INFO commandstats` line): the lock
//! command followed by `ECHO tag` in one write, and counts a vote only once
//! the echo came back with the round's tag. Acquire: `SET key value NX PX
//! ttl` + `ECHO`; release: `EVALSHA` of `ours`' own release script (the
//! same body, so the same Lua work on the server) with one key, + `ECHO`.
//! Values are 40 characters, like `ours`' (20 random bytes in hex), but
//! made from a counter: no random bytes are drawn per acquisition.
//!
//! As in the standalone reference, late replies stay owed by their
//! connection and are read and dropped before it is sent to again. Unlike
//! it, an acquisition goes to every voter, queued behind the replies a
//! master still owes, as `ours` queues it behind replies owed by
//! microseconds: so both make the servers do the same work (the standalone
//! reference's rule, a master that owes anything sits the acquisition out,
//! made it send about 10% fewer commands per pair than `ours` here). `ours`
//! still holds back a master that truly lags; the reference need not, as
//! C1 stops no server. Not a full client: no reconnection, no retries; at
//! most 64 voters.

use crate::reference::{reply_len, resolve, BadReply};
use crate::resp::{encode_command, parse, OwnedReply};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// `ours`' release script (src/command/scripts.rs `RELEASE`), byte for
/// byte: with one key, its notice branch is skipped.
const RELEASE_SCRIPT: &[u8] = b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return 1 end return 0";
/// The reply to `SET .. NX PX ..` that means "the key is now ours".
const SET: &[u8] = b"+OK\r\n";
/// The reply to the release script that means "our key was deleted".
const DELETED: &[u8] = b":1\r\n";
/// Connecting and the blocking exchanges at start-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Hash slots of a cluster.
const SLOTS: usize = 16384;
/// Length of a lock value, as `ours`' (20 bytes in hex).
const VALUE_LEN: usize = 40;

/// A set of voters, by index: bit `i` is voter `i`.
type VoterSet = u64;

/// The hand-written cluster reference client.
pub struct ClusterReference {
    voters: Vec<Voter>,
    quorum: usize,
    node_timeout: Duration,
    /// SHA1 of [`RELEASE_SCRIPT`], as SCRIPT LOAD returned it.
    script_sha: Vec<u8>,
    /// Random per client, so that two clients never pick the same value.
    value_prefix: u64,
    values_issued: u64,
    /// The tag of the next round (unique per connection: per client).
    next_tag: u64,
    /// The command of the current round and its `ECHO tag`, encoded
    /// (reused between rounds).
    command: Vec<u8>,
    /// The reply `ECHO tag` must get this round.
    echo_reply: Vec<u8>,
    /// poll(2)'s array and, for each entry, the voter it watches (reused).
    poll_fds: Vec<libc::pollfd>,
    polled: Vec<usize>,
}

/// One cluster: its masters and which of them owns each slot.
struct Voter {
    nodes: Vec<Node>,
    /// Slot → index in `nodes`.
    owner: Box<[u16]>,
    /// The node of the current round.
    current: usize,
}

/// A lock the reference holds.
pub struct Held {
    value: [u8; VALUE_LEN],
    /// The voters whose master was sent its SET.
    holders: VoterSet,
}

/// Which voters a round sends its command to.
#[derive(Clone, Copy)]
enum Recipients {
    /// All of them.
    All,
    /// Those in the set, whether their master owes replies or not.
    Only(VoterSet),
}

impl ClusterReference {
    /// Learns each cluster's slot map from its first seed (`HOST:PORT`),
    /// connects to every master and loads the release script there.
    pub fn connect(clusters: &[Vec<String>], node_timeout: Duration) -> io::Result<Self> {
        if clusters.is_empty() || clusters.len() > VoterSet::BITS as usize {
            let message = format!("{} clusters: the reference takes 1 to 64", clusters.len());
            return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
        }
        let mut voters = Vec::with_capacity(clusters.len());
        let mut script_sha = Vec::new();
        for seeds in clusters {
            let seed = seeds
                .first()
                .ok_or_else(|| invalid("a cluster without seeds"))?;
            let (voter, sha) = Voter::connect(seed)?;
            voters.push(voter);
            script_sha = sha; // The same everywhere: it is the script's SHA1.
        }
        Ok(ClusterReference {
            quorum: voters.len() / 2 + 1,
            voters,
            node_timeout,
            script_sha,
            value_prefix: RandomState::new().build_hasher().finish(),
            values_issued: 0,
            next_tag: 1,
            command: Vec::with_capacity(512),
            echo_reply: Vec::with_capacity(32),
            poll_fds: Vec::new(),
            polled: Vec::new(),
        })
    }

    /// Tries once to take `resource` for `ttl`.
    pub fn acquire(&mut self, resource: &str, ttl: Duration) -> Option<Held> {
        self.values_issued += 1;
        let mut value = [0u8; VALUE_LEN];
        hex(&mut value[..16], self.value_prefix);
        hex(&mut value[16..], self.values_issued);
        let mut ttl_text = [0u8; 20];
        self.command.clear();
        encode(
            &mut self.command,
            &[
                b"SET",
                resource.as_bytes(),
                &value,
                b"NX",
                b"PX",
                decimal(&mut ttl_text, ttl.as_millis() as u64),
            ],
        );
        let started = Instant::now();
        let (quorum, holders) = self.fan_out(resource, SET, Recipients::All);
        let held = Held { value, holders };
        // Redlock's validity rule (drift allowance: 1% + 2 ms).
        let drift = ttl / 100 + Duration::from_millis(2);
        if quorum && started.elapsed() + drift < ttl {
            return Some(held);
        }
        // Undo the SETs that did land.
        self.release(resource, &held);
        None
    }

    /// Deletes `resource` where it still holds the lock's value; true if a
    /// quorum of voters did.
    pub fn release(&mut self, resource: &str, held: &Held) -> bool {
        self.command.clear();
        encode(
            &mut self.command,
            &[
                b"EVALSHA",
                &self.script_sha,
                b"1",
                resource.as_bytes(),
                &held.value,
            ],
        );
        self.fan_out(resource, DELETED, Recipients::Only(held.holders))
            .0
    }

    /// Appends `ECHO tag` to `self.command`, sends it to the owner of
    /// `resource`'s slot in each of the `recipients`, and waits until a
    /// quorum answered `expected` (true), or that became impossible, or the
    /// node timeout passed (false). Also returns the voters it was sent to.
    fn fan_out(
        &mut self,
        resource: &str,
        expected: &[u8],
        recipients: Recipients,
    ) -> (bool, VoterSet) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let mut tag_text = [0u8; 20];
        let tag_text = decimal(&mut tag_text, tag);
        encode(&mut self.command, &[b"ECHO", tag_text]);
        self.echo_reply.clear();
        encode_bulk(&mut self.echo_reply, tag_text);

        let deadline = Instant::now() + self.node_timeout;
        let slot = usize::from(key_slot(resource.as_bytes()));
        let total = self.voters.len();
        let (mut yes, mut no) = (0, 0);
        let mut sent: VoterSet = 0;
        for (index, voter) in self.voters.iter_mut().enumerate() {
            voter.current = usize::from(voter.owner[slot]);
            let node = &mut voter.nodes[voter.current];
            node.start_round();
            let chosen = match recipients {
                Recipients::All => true,
                Recipients::Only(set) => set & (1 << index) != 0,
            };
            if chosen && node.send(&self.command) {
                sent |= 1 << index;
            } else {
                no += 1;
            }
        }
        // A quorum is impossible once more than N - quorum voters said no.
        while yes < self.quorum && no <= total - self.quorum {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.wait_readable(left) {
                break;
            }
            for (fd, &index) in self.poll_fds.iter().zip(&self.polled) {
                if fd.revents == 0 {
                    continue;
                }
                let voter = &mut self.voters[index];
                match voter.nodes[voter.current].take_answer(expected, &self.echo_reply) {
                    Some(true) => yes += 1,
                    Some(false) => no += 1,
                    None => {}
                }
            }
        }
        (yes >= self.quorum, sent)
    }

    /// Waits up to `timeout` until a voter's awaited master has something
    /// to read; `poll_fds[i].revents` then says which (`polled[i]` is the
    /// voter). False on timeout or if poll(2) fails.
    fn wait_readable(&mut self, timeout: Duration) -> bool {
        self.poll_fds.clear();
        self.polled.clear();
        for (index, voter) in self.voters.iter().enumerate() {
            let node = &voter.nodes[voter.current];
            if node.awaiting {
                self.poll_fds.push(libc::pollfd {
                    fd: node.stream.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
                self.polled.push(index);
            }
        }
        if self.poll_fds.is_empty() {
            return false;
        }
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
            return io::Error::last_os_error().kind() == io::ErrorKind::Interrupted;
        }
        ready > 0
    }
}

impl Voter {
    /// Asks `seed` for `CLUSTER SLOTS`, connects to every master it names
    /// and loads the release script on each. Returns the voter and the
    /// script's SHA1.
    fn connect(seed: &str) -> io::Result<(Voter, Vec<u8>)> {
        let mut stream = blocking(seed)?;
        let reply = request(&mut stream, &[b"CLUSTER", b"SLOTS"])?;
        let OwnedReply::Array(ranges) = reply else {
            return Err(invalid(&format!("CLUSTER SLOTS: {reply:?}")));
        };
        let mut masters: Vec<String> = Vec::new();
        let mut owner = vec![u16::MAX; SLOTS].into_boxed_slice();
        for range in &ranges {
            let (start, end, master) = match range {
                OwnedReply::Array(fields) => match fields.as_slice() {
                    [OwnedReply::Integer(start), OwnedReply::Integer(end), OwnedReply::Array(master), ..] => {
                        (*start, *end, master)
                    }
                    _ => return Err(invalid(&format!("CLUSTER SLOTS entry: {range:?}"))),
                },
                _ => return Err(invalid(&format!("CLUSTER SLOTS entry: {range:?}"))),
            };
            let addr = match master.as_slice() {
                [OwnedReply::Bulk(ip), OwnedReply::Integer(port), ..] => {
                    format!("{}:{port}", String::from_utf8_lossy(ip))
                }
                _ => return Err(invalid(&format!("CLUSTER SLOTS master: {master:?}"))),
            };
            let index = match masters.iter().position(|m| *m == addr) {
                Some(index) => index,
                None => {
                    masters.push(addr);
                    masters.len() - 1
                }
            };
            let bad_range = || invalid(&format!("CLUSTER SLOTS range {start}-{end}"));
            let (start, end) = (
                usize::try_from(start).map_err(|_| bad_range())?,
                usize::try_from(end).map_err(|_| bad_range())?,
            );
            for slot in owner.get_mut(start..=end).ok_or_else(bad_range)? {
                *slot = index as u16;
            }
        }
        if owner.contains(&u16::MAX) {
            return Err(invalid("CLUSTER SLOTS leaves slots without a master"));
        }
        let mut nodes = Vec::with_capacity(masters.len());
        let mut sha = Vec::new();
        for addr in &masters {
            let (node, node_sha) = Node::connect(addr)?;
            nodes.push(node);
            sha = node_sha;
        }
        let voter = Voter {
            nodes,
            owner,
            current: 0,
        };
        Ok((voter, sha))
    }
}

/// One master's connection. Every command is followed by `ECHO tag`, so
/// it is owed two replies per command.
struct Node {
    stream: TcpStream,
    /// Bytes read but not yet consumed as replies.
    input: Vec<u8>,
    /// Replies still owed for commands already sent.
    owed: usize,
    /// Whether the current round waits for this node's answer: the last
    /// two replies owed.
    awaiting: bool,
    /// The awaited command's own reply was the expected one (its echo is
    /// still to come).
    command_ok: bool,
    /// Set on an I/O or protocol error: the node stays out from then on.
    broken: bool,
}

impl Node {
    /// Connects (blocking), loads the release script and returns the node,
    /// now non-blocking, with the script's SHA1.
    fn connect(addr: &str) -> io::Result<(Node, Vec<u8>)> {
        let mut stream = blocking(addr)?;
        let sha = match request(&mut stream, &[b"SCRIPT", b"LOAD", RELEASE_SCRIPT])? {
            OwnedReply::Bulk(sha) => sha,
            other => return Err(invalid(&format!("SCRIPT LOAD: {other:?}"))),
        };
        stream.set_nonblocking(true)?;
        let node = Node {
            stream,
            input: Vec::with_capacity(512),
            owed: 0,
            awaiting: false,
            command_ok: false,
            broken: false,
        };
        Ok((node, sha))
    }

    /// A new round begins on this node: an answer an earlier round still
    /// awaited is now merely late, and late replies that have arrived are
    /// read.
    fn start_round(&mut self) {
        self.awaiting = false;
        if self.owed > 0 {
            self.receive();
            self.consume_replies(b"", b"");
        }
    }

    /// Sends `command` (the lock command and its echo), whose answer this
    /// round then awaits. False if the node is unusable.
    fn send(&mut self, command: &[u8]) -> bool {
        if self.broken {
            return false;
        }
        loop {
            match self.stream.write(command) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(n) if n == command.len() => {
                    self.owed += 2;
                    self.awaiting = true;
                    self.command_ok = false;
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
    /// verdict if both awaited replies are complete (`Some(true)`: the
    /// command's was `expected` and the echo's `echo`). A node that breaks
    /// while awaited answers `Some(false)`.
    fn take_answer(&mut self, expected: &[u8], echo: &[u8]) -> Option<bool> {
        self.receive();
        let verdict = self.consume_replies(expected, echo);
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
                    self.broken = true;
                    return;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
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

    /// Takes the complete replies out of `input`. Late ones are dropped;
    /// for the awaited pair, returns whether the command's reply was
    /// `expected` and the echo's `echo`.
    fn consume_replies(&mut self, expected: &[u8], echo: &[u8]) -> Option<bool> {
        let mut verdict = None;
        let mut used = 0;
        while self.owed > 0 {
            match reply_len(&self.input[used..]) {
                Ok(Some(len)) => {
                    let reply = &self.input[used..used + len];
                    used += len;
                    self.owed -= 1;
                    if self.awaiting && self.owed == 1 {
                        self.command_ok = reply == expected;
                    } else if self.awaiting && self.owed == 0 {
                        self.awaiting = false;
                        verdict = Some(self.command_ok && reply == echo);
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
        if self.owed == 0 && !self.input.is_empty() {
            self.broken = true;
        }
        verdict
    }
}

/// A blocking connection for the set-up.
fn blocking(addr: &str) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&resolve(addr)?, SETUP_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
    Ok(stream)
}

/// One command and its reply, on a blocking stream (set-up only).
fn request(stream: &mut TcpStream, args: &[&[u8]]) -> io::Result<OwnedReply> {
    stream.write_all(&encode_command(args))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match parse(&buf) {
            Ok(Some((reply, _))) => return Ok(reply),
            Ok(None) => {}
            Err(why) => return Err(invalid(&why)),
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// Appends a command (a RESP array of bulk strings) to `out`.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut len = [0u8; 20];
    out.push(b'*');
    out.extend_from_slice(decimal(&mut len, args.len() as u64));
    out.extend_from_slice(b"\r\n");
    for arg in args {
        encode_bulk(out, arg);
    }
}

/// Appends `bytes` as a RESP bulk string to `out`.
fn encode_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut len = [0u8; 20];
    out.push(b'$');
    out.extend_from_slice(decimal(&mut len, bytes.len() as u64));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `n` in decimal, written at the end of `buf`, without allocating.
fn decimal(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Writes `n` in lowercase hex, right-aligned and zero-padded, into `out`
/// (its low digits if `out` is short).
fn hex(out: &mut [u8], mut n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in out.iter_mut().rev() {
        *byte = DIGITS[(n & 0xf) as usize];
        n >>= 4;
    }
}

/// CRC16 (XMODEM: polynomial 0x1021, initial value 0) by table, as the
/// servers compute it for the slot.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// The slot of `key`: CRC16 of its hash tag (the bytes between the first
/// `{` and the first `}` after it, if not empty) or of the whole key,
/// modulo 16384.
fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc = (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)];
    }
    crc & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slot_agrees_with_the_tests_own_bitwise_crc() {
        for key in [
            &b"123456789"[..],
            b"",
            b"peers:1:c1:ours:0:17",
            b"{user1000}.following",
            b"{}x",
            b"a}b{c",
            b"x{}{a}",
        ] {
            assert_eq!(key_slot(key), crate::slots::key_slot(key), "{key:?}");
        }
        // The servers' own example (cluster spec): "123456789" -> 0x31C3.
        assert_eq!(key_slot(b"123456789"), 0x31C3 & 0x3FFF);
    }

    #[test]
    fn decimal_writes_digits() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(&mut buf, 0), b"0");
        assert_eq!(decimal(&mut buf, 10_000), b"10000");
        assert_eq!(decimal(&mut buf, u64::MAX), b"18446744073709551615");
    }

    #[test]
    fn hex_pads_and_truncates() {
        let mut out = [0u8; 6];
        hex(&mut out, 0xabc);
        assert_eq!(&out, b"000abc");
        hex(&mut out[..2], 0x1234);
        assert_eq!(&out[..2], b"34");
    }

    #[test]
    fn encode_appends() {
        let mut out = b"*1\r\n$1\r\nX\r\n".to_vec();
        encode(&mut out, &[b"ECHO", b"7"]);
        assert_eq!(out, b"*1\r\n$1\r\nX\r\n*2\r\n$4\r\nECHO\r\n$1\r\n7\r\n");
    }
}
