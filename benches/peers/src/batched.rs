//! `ref-batch`: the batched reference, the limit for many threads sharing
//! one client. It makes the servers do what `ours` makes them do per
//! acquisition and release, and pipelines every thread's commands per
//! master: group commit, as an async client on multiplexed connections
//! gets it for free.
//!
//! What each master is sent, per pair, is what `ours` sends (seen with
//! `redis-cli monitor`): `SET key value NX PX ttl` then `ECHO tag`, and
//! `EVALSHA` of `ours`' own release script (the same body, so the same Lua
//! work: `GET`, `DEL`, `PUBLISH`) with the key, the value, the release
//! channel (`redlock-sync:released:{tag}key`, a slot tag of `ours`'
//! length) and a 17-byte notice, then `ECHO tag`. Values are 40
//! characters, as `ours`' (20 random bytes in hex), made from a counter.
//! On a server with the native compare-and-delete (Valkey 9.0+, found by a
//! `DELIFEQ` probe on every master at start-up), the release is what
//! `ours` sends there: `DELIFEQ key value`, `PUBSUB NUMSUB channel`, then
//! `ECHO tag` (ours publishes only when NUMSUB counts a listener; nobody
//! listens here, so neither publishes).
//!
//! One I/O thread owns one non-blocking connection per master. A calling
//! thread encodes its command, queues it and parks. The I/O thread takes
//! everything queued, appends it (and each command's `ECHO`) to every
//! master's output, writes each master once, then waits in one poll(2)
//! for replies, new commands (an eventfd) or the earliest deadline.
//! Replies come back in order on each connection; a command's reply is
//! judged, and its vote counted once its `ECHO` came back. A caller is
//! woken (unparked) as soon as its outcome is known: a quorum said yes, so
//! many said no that a quorum is impossible, or the node timeout passed
//! since it was queued. Replies to a decided command are still read and
//! dropped. Commands queued while the I/O thread reads and wakes go out
//! together in its next write: the more threads, the more commands per
//! system call, on both sides.
//!
//! A reference for the limit, not a client: no reconnection (a master whose
//! connection fails stays out), no retries; a stopped master's replies are
//! awaited for ever (its commands pile up; no scenario stops one while
//! this client runs in it). With one calling thread it pays two thread
//! switches per command that a client calling from its own thread does
//! not: it is not the floor for one thread.

use crate::clients::{Pair, SharedClient};
use crate::reference::{read_bulk_reply, reply_len, resolve, BadReply};
use crate::resp::encode_command;
use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

/// `ours`' release script, byte for byte (so its SHA1 is `ours`' too).
const RELEASE_SCRIPT: &[u8] = b"if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if ARGV[3] then redis.pcall('publish', ARGV[2], ARGV[3]) end return 1 end return 0";
/// The reply to `SET .. NX PX ..` that means "the key is now ours".
const SET: &[u8] = b"+OK\r\n";
/// The release script's reply when it deleted our key.
const DELETED: &[u8] = b":1\r\n";
/// Connecting and SCRIPT LOAD at start-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a caller waits past its node timeout before it stops waiting
/// for the I/O thread (which decides at the node timeout): only a stuck
/// I/O thread is ever that late.
const CALLER_SLACK: Duration = Duration::from_secs(1);
/// The I/O thread's poll(2) timeout when no command is in flight.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// A verdict slot's states.
const PENDING: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// The batched reference: cheap to share between threads (`&self`).
pub struct Batched {
    shared: Arc<Shared>,
    io: Option<JoinHandle<()>>,
    node_timeout: Duration,
    script_sha: Vec<u8>,
    /// Every master has `DELIFEQ`: releases go as ours' native form.
    native: bool,
    /// Random per client, so that two clients never pick the same value.
    value_prefix: u64,
    values_issued: AtomicU64,
}

/// What the callers and the I/O thread share.
struct Shared {
    queue: Mutex<Vec<Submission>>,
    /// The I/O thread waits in poll(2), or is about to: whoever queues a
    /// command wakes it through `wake`.
    sleeping: AtomicBool,
    /// An eventfd in the I/O thread's poll set.
    wake: OwnedFd,
    stop: AtomicBool,
}

/// One caller's command, on its way to every master.
struct Submission {
    command: Vec<u8>,
    /// Replies to skip after the command's own, before its `ECHO`'s.
    extra: u8,
    expected: &'static [u8],
    slot: Arc<Slot>,
    queued: Instant,
}

/// Where the I/O thread leaves a caller's verdict.
struct Slot {
    verdict: AtomicU8,
    caller: Thread,
}

impl Batched {
    /// Connects to every master (`HOST:PORT`), loads the release script
    /// and starts the I/O thread.
    pub fn connect(addrs: &[String], node_timeout: Duration) -> io::Result<Batched> {
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no master"));
        }
        let mut nodes = Vec::with_capacity(addrs.len());
        let mut script_sha = Vec::new();
        let mut native = true;
        for addr in addrs {
            let mut stream = TcpStream::connect_timeout(&resolve(addr)?, SETUP_TIMEOUT)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
            stream.write_all(&encode_command(&[b"SCRIPT", b"LOAD", RELEASE_SCRIPT]))?;
            script_sha = read_bulk_reply(&mut stream)?;
            native &= has_delifeq(&mut stream)?;
            stream.set_nonblocking(true)?;
            nodes.push(IoNode::new(stream));
        }
        // SAFETY: eventfd(2) takes no pointer; a non-negative result is a
        // new descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created above and is owned by nothing else.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Arc::new(Shared {
            queue: Mutex::new(Vec::new()),
            sleeping: AtomicBool::new(false),
            wake,
            stop: AtomicBool::new(false),
        });
        let io = Io {
            shared: Arc::clone(&shared),
            quorum: nodes.len() / 2 + 1,
            nodes,
            ops: Vec::new(),
            free: Vec::new(),
            node_timeout,
            taken: Vec::new(),
            poll_fds: Vec::new(),
            tag: Vec::new(),
        };
        let io = thread::Builder::new()
            .name("ref-batch-io".into())
            .spawn(move || io.run())?;
        Ok(Batched {
            shared,
            io: Some(io),
            node_timeout,
            script_sha,
            native,
            value_prefix: RandomState::new().build_hasher().finish(),
            values_issued: AtomicU64::new(0),
        })
    }

    /// Tries once to take `resource` for `ttl`: its value if a quorum set it.
    fn acquire(&self, resource: &str, ttl: Duration) -> Option<String> {
        let issued = self.values_issued.fetch_add(1, Ordering::Relaxed);
        let value = format!("{:016x}{:016x}{:08x}", self.value_prefix, issued, 0);
        let ttl_ms = ttl.as_millis().to_string();
        let started = Instant::now();
        let command = encode_command(&[
            b"SET",
            resource.as_bytes(),
            value.as_bytes(),
            b"NX",
            b"PX",
            ttl_ms.as_bytes(),
        ]);
        let quorum = self.exchange(command, 0, SET);
        // Redlock's validity rule (clock drift: 1% + 2 ms).
        let drift = ttl / 100 + Duration::from_millis(2);
        if quorum && started.elapsed() + drift < ttl {
            return Some(value);
        }
        self.release(resource, &value); // Wherever a SET landed.
        None
    }

    /// Deletes `resource` where it holds `value`, and publishes the
    /// notice as `ours` does; true if a quorum deleted it.
    fn release(&self, resource: &str, value: &str) -> bool {
        let channel = format!("redlock-sync:released:{{000}}{resource}");
        if self.native {
            let mut command = encode_command(&[b"DELIFEQ", resource.as_bytes(), value.as_bytes()]);
            encode_into(&mut command, &[b"PUBSUB", b"NUMSUB", channel.as_bytes()]);
            return self.exchange(command, 1, DELETED);
        }
        let notice = format!("r{}", &value[..16]);
        let command = encode_command(&[
            b"EVALSHA",
            &self.script_sha,
            b"1",
            resource.as_bytes(),
            value.as_bytes(),
            channel.as_bytes(),
            notice.as_bytes(),
        ]);
        self.exchange(command, 0, DELETED)
    }

    /// Queues `command` (`1 + extra` commands, the first one judged) for
    /// every master and waits for the verdict: true if a quorum answered
    /// `expected`.
    fn exchange(&self, command: Vec<u8>, extra: u8, expected: &'static [u8]) -> bool {
        let slot = Arc::new(Slot {
            verdict: AtomicU8::new(PENDING),
            caller: thread::current(),
        });
        let queued = Instant::now();
        self.shared
            .queue
            .lock()
            .expect("queue poisoned")
            .push(Submission {
                command,
                extra,
                expected,
                slot: Arc::clone(&slot),
                queued,
            });
        if self.shared.sleeping.swap(false, Ordering::SeqCst) {
            self.shared.wake_io();
        }
        let give_up = queued + self.node_timeout + CALLER_SLACK;
        loop {
            match slot.verdict.load(Ordering::Acquire) {
                YES => return true,
                NO => return false,
                _ => {}
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            thread::park_timeout(left);
        }
    }
}

impl SharedClient for Batched {
    fn pair(&self, resource: &str, ttl: Duration) -> Pair {
        let started = Instant::now();
        let Some(value) = self.acquire(resource, ttl) else {
            return Pair::acquire_failed(started);
        };
        let acquired = Instant::now();
        let released = self.release(resource, &value);
        Pair::released(started, acquired, released)
    }
}

impl Drop for Batched {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake_io();
        if let Some(io) = self.io.take() {
            let _ = io.join();
        }
    }
}

impl Shared {
    /// Makes the eventfd readable: the I/O thread's poll(2) returns.
    fn wake_io(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is a live 8-byte buffer; the descriptor is the
        // eventfd this struct owns. A full counter (EAGAIN) is still
        // readable, which is all that matters here.
        unsafe {
            libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
    }

    /// Empties the eventfd's counter.
    fn clear_wake(&self) {
        let mut counter = [0u8; 8];
        // SAFETY: `counter` is a live 8-byte buffer; the descriptor is the
        // eventfd this struct owns (non-blocking: EAGAIN when empty).
        unsafe {
            libc::read(
                self.wake.as_raw_fd(),
                counter.as_mut_ptr().cast(),
                counter.len(),
            );
        }
    }
}

/// The I/O thread's state.
struct Io {
    shared: Arc<Shared>,
    nodes: Vec<IoNode>,
    quorum: usize,
    node_timeout: Duration,
    /// Commands in flight, by id (`None`: a free id, listed in `free`).
    ops: Vec<Option<Op>>,
    free: Vec<usize>,
    /// The queue's last contents, swapped out under the lock (reused).
    taken: Vec<Submission>,
    /// poll(2)'s array: the eventfd first, then every master (reused).
    poll_fds: Vec<libc::pollfd>,
    /// Scratch for a tag's digits.
    tag: Vec<u8>,
}

/// One command in flight on every master.
struct Op {
    slot: Arc<Slot>,
    expected: &'static [u8],
    yes: usize,
    no: usize,
    /// Masters whose reply (and `ECHO`) has not been read yet.
    left: usize,
    decided: bool,
    deadline: Instant,
}

/// One master's connection, as the I/O thread keeps it.
struct IoNode {
    stream: TcpStream,
    /// Encoded commands not written yet (from `written` on).
    output: Vec<u8>,
    written: usize,
    /// Bytes read but not consumed as replies yet.
    input: Vec<u8>,
    /// The commands awaiting their reply here, in the order sent, each with
    /// its verdict once its reply was read and the replies still to skip
    /// before its `ECHO`'s.
    awaited: VecDeque<(usize, Option<bool>, u8)>,
    /// Tags sent and seen (each command's `ECHO` carries the next number).
    tags_sent: u64,
    tags_seen: u64,
    broken: bool,
}

impl IoNode {
    fn new(stream: TcpStream) -> IoNode {
        IoNode {
            stream,
            output: Vec::with_capacity(16 * 1024),
            written: 0,
            input: Vec::with_capacity(16 * 1024),
            awaited: VecDeque::new(),
            tags_sent: 0,
            tags_seen: 0,
            broken: false,
        }
    }

    /// Writes what it can of `output` without blocking.
    fn flush(&mut self) {
        while self.written < self.output.len() && !self.broken {
            match self.stream.write(&self.output[self.written..]) {
                Ok(0) => self.broken = true,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => self.broken = true,
            }
        }
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        }
    }

    /// Reads whatever has arrived, without blocking.
    fn receive(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.broken = true;
                    return;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        return; // Level-triggered poll(2) says when there is more.
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
}

impl Io {
    fn run(mut self) {
        while !self.shared.stop.load(Ordering::SeqCst) {
            self.take_submissions();
            for node in &mut self.nodes {
                node.flush();
            }
            self.expire();
            // Announce the wait, then look once more: a command queued
            // before the announcement is seen here, one queued after it
            // writes the eventfd.
            self.shared.sleeping.store(true, Ordering::SeqCst);
            if !self.shared.queue.lock().expect("queue poisoned").is_empty() {
                self.shared.sleeping.store(false, Ordering::SeqCst);
                continue;
            }
            self.wait();
            self.shared.sleeping.store(false, Ordering::SeqCst);
            if self.poll_fds[0].revents != 0 {
                self.shared.clear_wake();
            }
            for index in 0..self.nodes.len() {
                if self.poll_fds[index + 1].revents != 0 {
                    self.nodes[index].receive();
                    self.consume(index);
                }
            }
        }
    }

    /// Moves every queued command into every master's output, each
    /// followed by its `ECHO tag`.
    fn take_submissions(&mut self) {
        std::mem::swap(
            &mut *self.shared.queue.lock().expect("queue poisoned"),
            &mut self.taken,
        );
        let mut taken = std::mem::take(&mut self.taken);
        for submission in taken.drain(..) {
            let op = Op {
                slot: submission.slot,
                expected: submission.expected,
                yes: 0,
                no: 0,
                left: 0,
                decided: false,
                deadline: submission.queued + self.node_timeout,
            };
            let id = match self.free.pop() {
                Some(id) => {
                    self.ops[id] = Some(op);
                    id
                }
                None => {
                    self.ops.push(Some(op));
                    self.ops.len() - 1
                }
            };
            let mut sent = 0;
            for node in &mut self.nodes {
                if node.broken {
                    continue;
                }
                node.output.extend_from_slice(&submission.command);
                self.tag.clear();
                write!(self.tag, "{}", node.tags_sent).expect("write to Vec");
                node.tags_sent += 1;
                encode_into(&mut node.output, &[b"ECHO", &self.tag]);
                node.awaited.push_back((id, None, submission.extra));
                sent += 1;
            }
            let op = self.ops[id].as_mut().expect("just stored");
            op.left = sent;
            op.no = self.nodes.len() - sent;
            self.settle(id);
        }
        self.taken = taken;
    }

    /// One poll(2): the eventfd, and every master for its replies (and for
    /// room to write, if its output is not all written), until the
    /// earliest deadline of an undecided command.
    fn wait(&mut self) {
        let now = Instant::now();
        let timeout = self
            .ops
            .iter()
            .flatten()
            .filter(|op| !op.decided)
            .map(|op| op.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(IDLE_POLL);
        self.poll_fds.clear();
        self.poll_fds.push(libc::pollfd {
            fd: self.shared.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for node in &self.nodes {
            let mut events = 0;
            if !node.broken && !node.awaited.is_empty() {
                events |= libc::POLLIN;
            }
            if !node.broken && node.written < node.output.len() {
                events |= libc::POLLOUT;
            }
            self.poll_fds.push(libc::pollfd {
                fd: node.stream.as_raw_fd(),
                events,
                revents: 0,
            });
        }
        // Rounded up: rounding down would spin during the last millisecond.
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
            // EINTR or worse: nothing flagged; the loop looks again.
            for fd in &mut self.poll_fds {
                fd.revents = 0;
            }
        }
    }

    /// Takes the complete replies out of master `index`'s input: a
    /// command's reply gives its verdict, its `ECHO` (checked against the
    /// tag sent) makes the verdict count.
    fn consume(&mut self, index: usize) {
        let mut used = 0;
        loop {
            let node = &mut self.nodes[index];
            let Some(&(id, verdict, extra)) = node.awaited.front() else {
                break;
            };
            let len = match any_reply_len(&node.input[used..]) {
                Ok(Some(len)) => len,
                Ok(None) => break,
                Err(BadReply) => {
                    node.broken = true;
                    break;
                }
            };
            let reply = &node.input[used..used + len];
            used += len;
            let Some(verdict) = verdict else {
                let expected = self.ops[id].as_ref().expect("awaited op").expected;
                node.awaited[0].1 = Some(reply == expected);
                continue;
            };
            if extra > 0 {
                node.awaited[0].2 -= 1; // PUBSUB NUMSUB's count: nobody listens here.
                continue;
            }
            // The ECHO's reply: `$len\r\ntag\r\n`, with the next tag.
            let tag = node.tags_seen.to_string();
            self.tag.clear();
            write!(self.tag, "${}\r\n{tag}\r\n", tag.len()).expect("write to Vec");
            let echoed = reply == self.tag.as_slice();
            node.tags_seen += 1;
            node.awaited.pop_front();
            if !echoed {
                node.broken = true; // Out of step: stays out from now on.
            }
            let op = self.ops[id].as_mut().expect("awaited op");
            op.left -= 1;
            if verdict && echoed {
                op.yes += 1;
            } else {
                op.no += 1;
            }
            self.settle(id);
            if !echoed {
                break;
            }
        }
        let node = &mut self.nodes[index];
        node.input.drain(..used);
        if node.broken {
            // Its awaited commands will never be answered: they count as no.
            while let Some((id, _, _)) = self.nodes[index].awaited.pop_front() {
                let op = self.ops[id].as_mut().expect("awaited op");
                op.left -= 1;
                op.no += 1;
                self.settle(id);
            }
        }
    }

    /// Tells the caller of command `id` its verdict once it is known, and
    /// frees the id once every master's reply was read.
    fn settle(&mut self, id: usize) {
        let total = self.nodes.len();
        let quorum = self.quorum;
        let op = self.ops[id].as_mut().expect("live op");
        if !op.decided && (op.yes >= quorum || op.no > total - quorum) {
            op.decided = true;
            let verdict = if op.yes >= quorum { YES } else { NO };
            op.slot.verdict.store(verdict, Ordering::Release);
            op.slot.caller.unpark();
        }
        if op.left == 0 {
            if !op.decided {
                op.slot.verdict.store(NO, Ordering::Release);
                op.slot.caller.unpark();
            }
            self.ops[id] = None;
            self.free.push(id);
        }
    }

    /// Commands undecided at their deadline: no.
    fn expire(&mut self) {
        let now = Instant::now();
        for op in self.ops.iter_mut().flatten() {
            if !op.decided && op.deadline <= now {
                op.decided = true;
                op.slot.verdict.store(NO, Ordering::Release);
                op.slot.caller.unpark();
            }
        }
    }
}

/// Whether the server behind `stream` (blocking) runs `DELIFEQ`: an
/// integer reply to one on a key that holds no lock.
fn has_delifeq(stream: &mut TcpStream) -> io::Result<bool> {
    stream.write_all(&encode_command(&[
        b"DELIFEQ",
        b"redlock-sync-peers:probe",
        b"never a lock value",
    ]))?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        match reply_len(&reply) {
            Ok(Some(_)) => return Ok(reply[0] == b':'),
            Ok(None) => {}
            Err(BadReply) => return Ok(false),
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&chunk[..n]);
    }
}

/// [`reply_len`], arrays (of the kinds it knows) included: `PUBSUB
/// NUMSUB`'s reply.
fn any_reply_len(buf: &[u8]) -> Result<Option<usize>, BadReply> {
    if buf.first() != Some(&b'*') {
        return reply_len(buf);
    }
    let Some(line_end) = buf.windows(2).position(|pair| pair == b"\r\n") else {
        return Ok(None);
    };
    let count: i64 = std::str::from_utf8(&buf[1..line_end])
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(BadReply)?;
    let mut used = line_end + 2;
    for _ in 0..count.max(0) {
        match any_reply_len(&buf[used..])? {
            Some(len) => used += len,
            None => return Ok(None),
        }
    }
    Ok(Some(used))
}

/// Appends a command (a RESP array of bulk strings) to `out`.
fn encode_into(out: &mut Vec<u8>, args: &[&[u8]]) {
    write!(out, "*{}\r\n", args.len()).expect("write to Vec");
    for arg in args {
        write!(out, "${}\r\n", arg.len()).expect("write to Vec");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::Cluster;

    /// Many threads on one batcher: every pair takes and releases its key
    /// on a quorum; every master ran every SET, release (publishing as
    /// ours' does) and ECHO, and no key is left.
    #[test]
    fn threads_share_one_batcher_and_every_key_is_released() {
        let cluster = Cluster::start(3);
        let nodes: Vec<String> = cluster
            .servers
            .iter()
            .map(|s| s.addr().to_string())
            .collect();
        let batched = Batched::connect(&nodes, Duration::from_secs(2)).expect("connect");
        let pairs_per_thread = 200;
        thread::scope(|scope| {
            for thread in 0..8 {
                let batched = &batched;
                scope.spawn(move || {
                    for i in 0..pairs_per_thread {
                        let pair = batched.pair(&format!("t{thread}:{i}"), Duration::from_secs(10));
                        assert!(pair.ok, "pair {i} of thread {thread}");
                    }
                });
            }
        });
        // The master beyond the quorum may still be running the last
        // commands: wait (boundedly) until each ran every ECHO.
        let deadline = Instant::now() + Duration::from_secs(10);
        for server in &cluster.servers {
            while server.calls_of("echo") < 2 * 8 * pairs_per_thread && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
        }
        assert_eq!(cluster.total_keys(), 0, "a key was left");
        let pairs = 8 * pairs_per_thread;
        for server in &cluster.servers {
            assert_eq!(server.calls_of("set"), pairs);
            assert_eq!(server.calls_of("echo"), 2 * pairs);
            if batched.native {
                // And the probe at start-up.
                assert_eq!(server.calls_of("delifeq"), pairs + 1);
                assert_eq!(server.calls_of("pubsub|numsub"), pairs);
            } else {
                assert_eq!(server.calls_of("evalsha"), pairs);
                assert_eq!(server.calls_of("publish"), pairs);
            }
        }
    }

    #[test]
    fn any_reply_len_reads_arrays_whole() {
        let numsub = b"*2\r\n$7\r\nchannel\r\n:0\r\n";
        assert!(matches!(any_reply_len(numsub), Ok(Some(21))));
        assert!(matches!(any_reply_len(&numsub[..15]), Ok(None)));
        assert!(matches!(any_reply_len(b":1\r\n*0\r\n"), Ok(Some(4))));
        assert!(matches!(any_reply_len(b"*0\r\n"), Ok(Some(4))));
    }
}
