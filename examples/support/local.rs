//! Demo scaffolding, not a recipe: local servers for the examples to lock
//! on, so that each runs on a machine with nothing but `redis-server`
//! installed. In your own program the masters' URLs come from your
//! configuration, and none of this file is needed.
//!
//! Each example includes it with
//!
//! ```ignore
//! #[path = "support/local.rs"]
//! mod local;
//! ```
//!
//! - [`masters`]: the URLs `--nodes URL,...` names, or else those of `n`
//!   servers started here.
//! - [`Server`]: one server process (`redis-server`, or the binary the
//!   variable `REDLOCK_TEST_SERVER` names) on a free loopback port, without
//!   persistence; [`Server::kill`], [`Server::restart`], [`Server::pause`]
//!   and [`Server::command`] for the examples that provoke failures.
//!
//! No server outlives the example, however the example ends:
//!
//! - It returns or panics: dropping a [`Server`] kills the process and
//!   waits for it.
//! - It is killed (SIGTERM, SIGINT, SIGKILL, ...): Drop does not run then,
//!   so on Linux each server is started with a parent-death signal
//!   (`prctl(PR_SET_PDEATHSIG, SIGKILL)`): the kernel kills the server
//!   when the thread that started it ends, whatever ended it. Start and
//!   restart servers from a thread that outlives them (here, `main`).
//! - Its standard output is closed (`cargo xtask demo | head -1`): a Rust
//!   program ignores SIGPIPE, so the next `println!` would panic. Starting
//!   a server restores SIGPIPE's default action, so that the example ends
//!   there quietly, as `cat` or `seq` would, and the kernel kills its
//!   servers. (The library itself writes to sockets without raising
//!   SIGPIPE.)
//!
//! On other systems than Linux only the first holds: an example killed by
//! a signal leaves its servers running.

// Each example uses only part of this file.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{exit, Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The variable that names the server binary (the project's tests use the
/// same one); unset, `redis-server` on the `PATH`.
const SERVER_VARIABLE: &str = "REDLOCK_TEST_SERVER";
/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The masters to lock on: the ones `--nodes URL,URL,...` names (no local
/// servers then), or `n` local servers started now, which stop when the
/// returned `Vec` is dropped. Prints where they are. Exits with status 2
/// and a message on a bad argument, or when no server can be started.
pub fn masters(n: usize) -> (Option<Vec<Server>>, Vec<String>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, urls] if flag == "--nodes" => {
            return (None, urls.split(',').map(str::to_string).collect())
        }
        _ => {
            eprintln!("usage: {} [--nodes URL,URL,...]", env!("CARGO_CRATE_NAME"));
            exit(2);
        }
    }
    match start_servers(n) {
        Ok(servers) => {
            let urls: Vec<String> = servers.iter().map(Server::url).collect();
            println!(
                "{n} local masters ({}): {}",
                server_version(),
                urls.join(" ")
            );
            (Some(servers), urls)
        }
        Err(e) => {
            eprintln!("{e}; or pass --nodes URL,...");
            exit(2);
        }
    }
}

/// Starts `n` servers, one after the other from this thread (see the
/// module's notes on which thread must start them).
pub fn start_servers(n: usize) -> Result<Vec<Server>, String> {
    (0..n).map(|_| Server::start(&[])).collect()
}

/// The server binary's version, such as "Redis server v=7.0.15", or an
/// empty string if it cannot be run.
pub fn server_version() -> String {
    let output = Command::new(server_binary()).arg("--version").output();
    let text = output.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    let words: Vec<String> = text
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .map(str::to_string)
        .collect();
    words.join(" ")
}

fn server_binary() -> String {
    std::env::var(SERVER_VARIABLE).unwrap_or_else(|_| "redis-server".to_string())
}

/// One local server process on 127.0.0.1, without persistence, killed when
/// dropped.
pub struct Server {
    port: u16,
    /// The caller's extra arguments, kept for [`Server::restart`].
    args: Vec<String>,
    /// `None` once killed.
    child: Option<Child>,
}

impl Server {
    /// Starts a server on a free port with extra arguments (such as
    /// `["--requirepass", "s3cret"]`), and waits until it answers.
    pub fn start(args: &[&str]) -> Result<Server, String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut last_error = String::new();
        // The port is free when the kernel picks it, but another program
        // may take it before the server binds it: then try another.
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|listener| listener.local_addr())
                .map_err(|e| format!("finding a free port: {e}"))?
                .port();
            match launch(port, &args) {
                Ok(child) => {
                    return Ok(Server {
                        port,
                        args,
                        child: Some(child),
                    })
                }
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
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

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL: it may be paused) and waits for it to
    /// end. Its data is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, killing it first if it
    /// runs. It starts empty: nothing was persisted.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.child = Some(launch(self.port, &self.args)?);
        Ok(())
    }

    /// Freezes the server (SIGSTOP) until the returned guard is dropped:
    /// it still accepts connections, but answers nothing.
    pub fn pause(&self) -> Paused<'_> {
        self.signal(libc::SIGSTOP);
        Paused { server: self }
    }

    /// Sends one command and returns the first line of its reply, such as
    /// `:1` for an integer reply or `-ERR ...` for an error; enough for
    /// `DEL`, `PTTL` and `PING`.
    pub fn command(&self, args: &[&str]) -> io::Result<String> {
        send_command(self.port, args)
    }

    fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) has no memory-safety preconditions. The pid is
            // our child's, not yet waited for, so it names no other process.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A paused server; dropping this resumes it (SIGCONT).
#[must_use = "the server resumes as soon as this is dropped"]
pub struct Paused<'a> {
    server: &'a Server,
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.server.signal(libc::SIGCONT);
    }
}

/// Starts the server process on `port` and waits until it answers PING.
fn launch(port: u16, extra: &[String]) -> Result<Child, String> {
    end_quietly_when_stdout_closes();
    let mut command = Command::new(server_binary());
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"]) // no persistence
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null()); // its log; errors in its arguments go to stderr
    die_with_this_thread(&mut command);
    let mut child = command.spawn().map_err(|e| {
        format!(
            "no server to start: `{}` cannot be run ({e}). Install redis-server (`cargo \
             xtask example NAME` does it where it can), or set {SERVER_VARIABLE} to a \
             redis-server-compatible binary",
            server_binary()
        )
    })?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            // Most likely another program took the port first.
            return Err(format!(
                "the server on port {port} exited at start ({status})"
            ));
        }
        // A server with a password answers PING with a NOAUTH error.
        if let Ok(reply) = send_command(port, &["PING"]) {
            if reply == "+PONG" || reply.starts_with("-NOAUTH") {
                return Ok(child);
            }
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the server on port {port} did not answer in time"));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Sends one command to the server on `port` (see [`Server::command`]).
fn send_command(port: u16, args: &[&str]) -> io::Result<String> {
    let timeout = Duration::from_secs(5);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request += &format!("${}\r\n{arg}\r\n", arg.len());
    }
    stream.write_all(request.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    Ok(line.trim_end().to_string())
}

/// Asks the kernel to kill the server when the thread that starts it ends,
/// however it ends (Linux only: see the module's notes).
#[cfg(target_os = "linux")]
fn die_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes only the prctl and
    // getppid system calls, allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // If this program died before the request, no signal will come:
            // do not start a server nobody will stop.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_this_thread(_command: &mut Command) {}

/// Restores SIGPIPE's default action (see the module's notes; Linux only,
/// where the servers die with the program).
#[cfg(target_os = "linux")]
fn end_quietly_when_stdout_closes() {
    // SAFETY: signal(2) with SIG_DFL installs no handler code: it only sets
    // what a write to a closed pipe does. The library does not rely on
    // SIGPIPE being ignored (its socket writes never raise it).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(target_os = "linux"))]
fn end_quietly_when_stdout_closes() {}
