//! A scripted fake Redis node, for protocol faults a real server cannot be
//! made to produce: silence, half replies, garbage, slow drip-fed replies,
//! connections closed mid-reply.
//!
//! It listens on 127.0.0.1 with one thread per connection, decodes the
//! (possibly pipelined) commands it receives with the crate's RESP decoder,
//! and asks the script what to do with each, in order.

use super::resp::parse_command;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How often blocked threads look at the shutdown flag. Dropping the node
/// also shuts the sockets down, so this only bounds a rare race.
const POLL: Duration = Duration::from_millis(50);

/// What the fake node does with one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write these bytes (e.g. `b"+OK\r\n"`, or several replies at once).
    Reply(Vec<u8>),
    /// Never answer this command; keep the connection open (later commands
    /// on the connection are still given to the script).
    Silence,
    /// Close the connection without answering.
    Close,
    /// Write the bytes (e.g. half a reply), then close.
    ReplyThenClose(Vec<u8>),
    /// Write the bytes one at a time with this pause between them; stops
    /// early if the peer closed or the node is dropped.
    Trickle(Vec<u8>, Duration),
    /// Write the first bytes, pause, then write the second (in a segment of
    /// its own): a surplus reply that comes a moment after the real one.
    /// Later commands on the connection wait for both.
    ReplyThenLater(Vec<u8>, Duration, Vec<u8>),
}

type Script = dyn Fn(&[Vec<u8>], usize) -> Action + Send + Sync;

/// One command: its arguments (the command name first).
type Command = Vec<Vec<u8>>;

/// A script that answers every command with `bytes`.
pub fn always(bytes: &'static [u8]) -> impl Fn(&[Vec<u8>], usize) -> Action + Send + Sync {
    move |_, _| Action::Reply(bytes.to_vec())
}

/// A script that never answers anything.
pub fn silent() -> impl Fn(&[Vec<u8>], usize) -> Action + Send + Sync {
    |_, _| Action::Silence
}

/// A script that closes each connection on its first command.
pub fn closing() -> impl Fn(&[Vec<u8>], usize) -> Action + Send + Sync {
    |_, _| Action::Close
}

/// A fake node listening on 127.0.0.1; dropping it stops every thread.
pub struct FakeNode {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

/// State shared by the node handle, the accept thread and the connections.
struct Shared {
    script: Box<Script>,
    /// Set when the node is dropped; the condvar wakes trickle pauses.
    stopping: Mutex<bool>,
    stop: Condvar,
    connections: AtomicUsize,
    commands: Mutex<Vec<Command>>,
    /// A clone of every open connection, by number, so that drop can shut
    /// them down (which wakes a thread blocked reading or writing).
    open: Mutex<HashMap<usize, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl FakeNode {
    /// Starts the node. `script` gets each complete command received (its
    /// arguments) and the 0-based index of that command on its connection.
    pub fn start(script: impl Fn(&[Vec<u8>], usize) -> Action + Send + Sync + 'static) -> FakeNode {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("fake node: binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("fake node: local_addr");
        let shared = Arc::new(Shared {
            script: Box::new(script),
            stopping: Mutex::new(false),
            stop: Condvar::new(),
            connections: AtomicUsize::new(0),
            commands: Mutex::new(Vec::new()),
            open: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name(format!("fake-node-{}", addr.port()))
            .spawn(move || accept_loop(&listener, &accept_shared))
            .expect("fake node: spawning the accept thread");
        FakeNode {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Every command received so far, in order of arrival.
    pub fn commands(&self) -> Vec<Vec<Vec<u8>>> {
        lock(&self.shared.commands).clone()
    }

    /// Connections currently open (closed by neither side yet, as far as
    /// the node has noticed).
    pub fn open_connections(&self) -> usize {
        lock(&self.shared.open).len()
    }
}

impl std::fmt::Debug for FakeNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeNode")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        *lock(&self.shared.stopping) = true;
        self.shared.stop.notify_all();
        // The accept thread polls the flag; once it is gone, no connection
        // can be added, so shutting down the registered ones reaches all.
        let mut panicked = self.accept_thread.take().is_some_and(|t| t.join().is_err());
        for stream in lock(&self.shared.open).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for thread in threads {
            panicked |= thread.join().is_err();
        }
        if panicked && !thread::panicking() {
            panic!("a fake node thread panicked (the script?): see its message above");
        }
    }
}

impl Shared {
    fn is_stopping(&self) -> bool {
        *lock(&self.stopping)
    }

    /// Sleeps for `pause`, or less if the node is dropped meanwhile; returns
    /// whether the node is still running.
    fn sleep(&self, pause: Duration) -> bool {
        let stopping = lock(&self.stopping);
        let (stopping, _) = self
            .stop
            .wait_timeout_while(stopping, pause, |stopping| !*stopping)
            .unwrap_or_else(PoisonError::into_inner);
        !*stopping
    }
}

/// Locks a mutex, ignoring poisoning: a panicking script must not turn
/// every later use (and the node's drop) into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.is_stopping() {
        // accept() cannot be interrupted portably, so wait with poll(2)
        // first and look at the flag between waits.
        if !readable(listener, POLL) {
            continue;
        }
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            // E.g. a connection reset before it was accepted: not ours to report.
            Err(_) => continue,
        };
        let id = shared.connections.fetch_add(1, Ordering::SeqCst);
        let registered = stream.try_clone().expect("fake node: cloning a connection");
        lock(&shared.open).insert(id, registered);
        let conn_shared = Arc::clone(shared);
        let handle = thread::Builder::new()
            .name(format!("fake-node-conn-{id}"))
            .spawn(move || serve(stream, id, &conn_shared))
            .expect("fake node: spawning a connection thread");
        lock(&shared.threads).push(handle);
    }
}

/// Whether `listener` has a connection to accept within `timeout`.
fn readable(listener: &TcpListener, timeout: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is one valid pollfd that outlives the call, matching the
    // count of 1; the descriptor stays open because `listener` is borrowed.
    let ready = unsafe { libc::poll(&mut fd, 1, millis) };
    ready > 0
}

/// Removes a connection from the open set when its thread ends, even if the
/// script panicked.
struct Registration<'a> {
    shared: &'a Shared,
    id: usize,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        lock(&self.shared.open).remove(&self.id);
    }
}

/// Serves one connection until either side closes it or the node is dropped.
fn serve(mut stream: TcpStream, id: usize, shared: &Shared) {
    let _registration = Registration { shared, id };
    // Trickled bytes must leave one by one, not wait for Nagle.
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(POLL))
        .expect("fake node: setting a read timeout");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut index = 0;
    loop {
        match parse_command_at(&buf) {
            Ok(Some((args, used))) => {
                buf.drain(..used);
                lock(&shared.commands).push(args.clone());
                let action = (shared.script)(&args, index);
                index += 1;
                if !perform(&mut stream, action, shared) {
                    break;
                }
                continue;
            }
            Ok(None) => {}
            Err(why) => {
                // What redis-server does with a malformed request.
                let _ = stream.write_all(format!("-ERR Protocol error: {why}\r\n").as_bytes());
                break;
            }
        }
        if shared.is_stopping() {
            break;
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_transient(&e) => {}
            Err(_) => break,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Carries out `action`; returns whether to keep the connection open.
fn perform(stream: &mut TcpStream, action: Action, shared: &Shared) -> bool {
    match action {
        Action::Reply(bytes) => stream.write_all(&bytes).is_ok(),
        Action::Silence => true,
        Action::Close => false,
        Action::ReplyThenClose(bytes) => {
            let _ = stream.write_all(&bytes);
            false
        }
        Action::ReplyThenLater(first, pause, later) => {
            stream.write_all(&first).is_ok()
                && shared.sleep(pause)
                && stream.write_all(&later).is_ok()
        }
        Action::Trickle(bytes, pause) => {
            for (i, byte) in bytes.iter().enumerate() {
                if i > 0 && !shared.sleep(pause) {
                    return false;
                }
                // The first write after the peer closed may still succeed;
                // the next one fails, which ends the trickle.
                if stream.write_all(&[*byte]).is_err() {
                    return false;
                }
            }
            true
        }
    }
}

/// The command at the start of `buf` (an array of bulk strings) and the
/// number of bytes it used, `None` if incomplete, or why it is malformed.
fn parse_command_at(buf: &[u8]) -> Result<Option<(Command, usize)>, String> {
    parse_command(buf)
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// One command of the client's protocol, as a fake node sees it.
///
/// The client tags every command: it follows it with `ECHO tag`, and only
/// counts the command's answer once the echo carries the tag back. On a
/// connection that cannot `ECHO` (and for the first acquisition on a new
/// connection) it uses tagged scripts instead, whose last argument is the
/// tag and whose answer is `2 * tag + 1` (done) or `2 * tag` (not done).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// AUTH, SELECT, SCRIPT LOAD, or the probes of a new connection
    /// (`INFO server`, `INFO replication`, `ROLE`, `ECHO 0`, `EVALSHA`/`EVAL` with
    /// a key count but no key, and the native commands on the key
    /// `redlock-sync:probe`).
    Handshake,
    /// An acquisition: `SET key value NX PX ttl` (`tag: None`: its `ECHO`
    /// follows) or the tagged acquire script (`tag: Some`).
    Acquire { key: Vec<u8>, tag: Option<u64> },
    /// `ECHO tag` after a command, or `PING tag`.
    Echo { tag: u64 },
    /// The release script: plain (`tag: None`, its `ECHO` follows) or
    /// tagged.
    Release { key: Vec<u8>, tag: Option<u64> },
    /// The extend script, plain or tagged.
    Extend { key: Vec<u8>, tag: Option<u64> },
    /// Anything else.
    Other,
}

impl Call {
    pub fn parse(args: &[Vec<u8>]) -> Call {
        let name = args[0].to_ascii_uppercase();
        let tag_at = |i: usize| -> u64 {
            std::str::from_utf8(&args[i])
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no tag in {args:?}"))
        };
        match name.as_slice() {
            b"AUTH" | b"SELECT" | b"SCRIPT" | b"ROLE" | b"INFO" => Call::Handshake,
            // The native commands' probes, on a key no lock uses.
            _ if args.get(1).is_some_and(|a| a == b"redlock-sync:probe") => Call::Handshake,
            // MSETEX's probe: `MSETEX 1 redlock-sync:probe value NX PX 0`.
            b"MSETEX" if args.get(2).is_some_and(|a| a == b"redlock-sync:probe") => Call::Handshake,
            b"ECHO" | b"PING" if args.get(1).is_some_and(|a| a == b"0") => Call::Handshake,
            // The rights probes: a key count of one and no key.
            b"EVAL" | b"EVALSHA" if args.len() == 3 => Call::Handshake,
            b"ECHO" | b"PING" => Call::Echo { tag: tag_at(1) },
            b"SET" => Call::Acquire {
                key: args[1].clone(),
                tag: None,
            },
            b"EVAL" | b"EVALSHA" => {
                // By body (EVAL), or by digest: the tagged scripts' digests
                // start 8dcf61f0 (acquire), 73d1aadf (release; dac89bb0 on a
                // cluster node) and 31e4197f (extend); the plain ones
                // 79d323f6 (release; eb479486 on a cluster node), e95849a1
                // (extend).
                let script = String::from_utf8_lossy(&args[1]);
                let tagged = ["tonumber", "8dcf61f0", "73d1aadf", "dac89bb0", "31e4197f"]
                    .iter()
                    .any(|mark| script.contains(mark));
                let key = args[3].clone();
                let tag = tagged.then(|| tag_at(args.len() - 1));
                if script.contains("'del'")
                    || ["73d1aadf", "dac89bb0", "79d323f6", "eb479486"]
                        .iter()
                        .any(|digest| script.starts_with(digest))
                {
                    Call::Release { key, tag }
                } else if script.contains("'pexpire'")
                    || script.starts_with("31e4197f")
                    || script.starts_with("e95849a1")
                {
                    Call::Extend { key, tag }
                } else {
                    Call::Acquire { key, tag }
                }
            }
            _ => Call::Other,
        }
    }

    /// What a healthy server answers when the command did what was asked.
    pub fn yes(&self) -> Vec<u8> {
        self.answer(true)
    }

    /// What a healthy server answers when it did not (held by someone else,
    /// or not ours).
    pub fn no(&self) -> Vec<u8> {
        self.answer(false)
    }

    fn answer(&self, done: bool) -> Vec<u8> {
        match self {
            Call::Acquire { tag: None, .. } if done => b"+OK\r\n".to_vec(),
            Call::Acquire { tag: None, .. } => b"$-1\r\n".to_vec(),
            Call::Release { tag: None, .. } | Call::Extend { tag: None, .. } => {
                format!(":{}\r\n", u8::from(done)).into_bytes()
            }
            Call::Acquire { tag: Some(tag), .. }
            | Call::Release { tag: Some(tag), .. }
            | Call::Extend { tag: Some(tag), .. } => {
                format!(":{}\r\n", 2 * tag + u64::from(done)).into_bytes()
            }
            Call::Echo { tag } => format!("${}\r\n{tag}\r\n", tag.to_string().len()).into_bytes(),
            Call::Handshake | Call::Other => panic!("no lock answer for {self:?}"),
        }
    }
}

/// What a healthy server that does not cache scripts answers to the
/// client's connection set-up: `+OK` to AUTH and SELECT, an error to
/// SCRIPT LOAD (the client then sends scripts with EVAL), `NOPERM` to INFO
/// (an ACL user without `@dangerous`: the client learns nothing of what
/// the server is, and checks nothing), the probe echoed,
/// the argument error that says the rights probes' commands may run,
/// what Redis 7 answers the native commands' probes (it has none), and
/// `ROLE`'s answer of a master (a Sentinel voter's master asks).
pub fn handshake_reply(args: &[Vec<u8>]) -> Vec<u8> {
    match args[0].to_ascii_uppercase().as_slice() {
        b"SCRIPT" => b"-ERR this fake node loads no scripts\r\n".to_vec(),
        b"INFO" => b"-NOPERM this fake node does not say what it is\r\n".to_vec(),
        b"ECHO" | b"PING" => b"$1\r\n0\r\n".to_vec(),
        b"EVAL" | b"EVALSHA" => {
            b"-ERR Number of keys can't be greater than number of args\r\n".to_vec()
        }
        // A server without native compare-and-delete (Redis 7).
        b"DELIFEQ" | b"DELEX" | b"MSETEX" => b"-ERR unknown command\r\n".to_vec(),
        b"SET" => b"-ERR syntax error\r\n".to_vec(),
        b"ROLE" => b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n".to_vec(),
        _ => b"+OK\r\n".to_vec(),
    }
}

/// A script for a fake node that answers the connection set-up and the
/// `ECHO` tags like a healthy server, and every other command (each lock
/// command, and anything unexpected) with `on_call`.
pub fn lock_server(
    on_call: impl Fn(&Call) -> Action + Send + Sync + 'static,
) -> impl Fn(&[Vec<u8>], usize) -> Action + Send + Sync + 'static {
    move |args, _| match Call::parse(args) {
        Call::Handshake => Action::Reply(handshake_reply(args)),
        call @ Call::Echo { .. } => Action::Reply(call.yes()),
        call => on_call(&call),
    }
}
