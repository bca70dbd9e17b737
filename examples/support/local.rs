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
//! - [`start_clusters`]: Redis or Valkey Clusters of such servers (the
//!   demo's `--clusters`), joined with `redis-cli --cluster create`, each
//!   node with its cluster file in a directory of the run's own.
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
//!
//! A cluster's nodes keep a file each (`nodes.conf`, a few hundred bytes)
//! in the temporary directory `redlock-demo-PID`, removed as the clusters
//! are dropped; for an example killed by a signal, by a shell started
//! with it that waits for the example to end (see [`Janitor`]).

// Each example uses only part of this file.
#![allow(dead_code)]

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{exit, Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The variable that names the server binary (the project's tests use the
/// same one); unset, `redis-server` on the `PATH`.
const SERVER_VARIABLE: &str = "REDLOCK_TEST_SERVER";
/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long clusters may take to be created and to say `cluster_state:ok`
/// on every node (a few seconds on an idle machine).
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);

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
        Server::start_trying(|| Ok(args.clone()))
    }

    /// Starts a node for a cluster: cluster mode, its cluster file in
    /// `dir` (created), its cluster bus on a free port of its own.
    pub fn start_cluster_node(dir: &Path) -> Result<Server, String> {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let dir = dir
            .to_str()
            .ok_or("the temporary directory's path is not UTF-8")?;
        Server::start_trying(|| {
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &free_port()?.to_string(),
                "--dir",
                dir,
                "--cluster-config-file",
                "nodes.conf",
            ];
            Ok(args.iter().map(|a| a.to_string()).collect())
        })
    }

    /// Starts a server on a free port with the arguments `args` gives, and
    /// waits until it answers; another port (and `args` asked again) if the
    /// server cannot start.
    fn start_trying(args: impl Fn() -> Result<Vec<String>, String>) -> Result<Server, String> {
        let mut last_error = String::new();
        // The port is free when the kernel picks it, but another program
        // may take it before the server binds it: then try another.
        for _ in 0..3 {
            let port = free_port()?;
            let args = args()?;
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

/// Redis or Valkey Clusters started by [`start_clusters`]: their nodes
/// stop, and their directory is removed, when this is dropped.
pub struct Clusters {
    /// Each cluster's nodes.
    clusters: Vec<Vec<Server>>,
    /// Where the nodes keep their cluster files.
    dir: PathBuf,
    janitor: Option<Janitor>,
}

impl Clusters {
    /// Each cluster's seeds: the URL of every node of it.
    pub fn seeds(&self) -> Vec<Vec<String>> {
        self.clusters
            .iter()
            .map(|nodes| nodes.iter().map(Server::url).collect())
            .collect()
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        self.clusters.clear(); // each node killed and waited for
        let _ = fs::remove_dir_all(&self.dir);
        if let Some(janitor) = self.janitor.take() {
            janitor.dismiss();
        }
    }
}

/// A shell that removes a directory once this program has ended, however
/// it ended (a signal, SIGKILL included, leaves no Drop to run): it reads
/// its standard input, a pipe whose writing end only this program holds,
/// which the kernel closes as the program ends; then it removes the
/// directory (again, if a node was writing to it meanwhile). It ignores
/// the signals a terminal sends its whole process group (Ctrl-C), which
/// end the program.
struct Janitor {
    shell: Child,
}

impl Janitor {
    /// Starts the shell for `dir` (`None` if no shell can be started: a
    /// program that is killed then leaves the directory behind).
    fn start(dir: &Path) -> Option<Janitor> {
        const SCRIPT: &str = r#"trap '' INT TERM HUP QUIT; read _;
            for try in 1 2 3 4 5; do
                rm -rf -- "$0"; [ -e "$0" ] || exit 0; sleep 0.2
            done"#;
        let shell = Command::new("/bin/sh")
            .args(["-c", SCRIPT])
            .arg(dir)
            .stdin(Stdio::piped())
            // Not the program's: a reader of its output would wait for
            // the shell too.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        Some(Janitor { shell })
    }

    /// Ends the shell, once the directory is gone, and waits for it.
    fn dismiss(mut self) {
        drop(self.shell.stdin.take());
        let _ = self.shell.wait();
    }
}

/// Starts `count` clusters of `shards` masters each, without replicas: the
/// nodes one after the other from this thread (see the module's notes on
/// which thread must start them), then each cluster joined by `redis-cli
/// --cluster create` (or `valkey-cli`, beside a Valkey server), and waits
/// until every node says `cluster_state:ok` and knows its cluster's nodes.
pub fn start_clusters(count: usize, shards: usize) -> Result<Clusters, String> {
    if shards < 3 {
        return Err("redis-cli creates clusters of 3 masters or more".into());
    }
    let cli = cluster_cli()?;
    let dir = std::env::temp_dir().join(format!("redlock-demo-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut clusters = Clusters {
        clusters: Vec::new(),
        janitor: Janitor::start(&dir),
        dir,
    };
    for c in 0..count {
        let nodes = (0..shards)
            .map(|n| Server::start_cluster_node(&clusters.dir.join(format!("cluster{c}-node{n}"))))
            .collect::<Result<Vec<Server>, String>>()?;
        clusters.clusters.push(nodes);
    }
    // The joins run at once, one redis-cli per cluster.
    let mut joins = Vec::new();
    for nodes in &clusters.clusters {
        let mut command = Command::new(&cli);
        command
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        die_with_this_thread(&mut command);
        let child = command
            .spawn()
            .map_err(|e| format!("running {cli} --cluster create: {e}"))?;
        joins.push(child);
    }
    let deadline = Instant::now() + CLUSTER_TIMEOUT;
    for join in joins {
        finish_join(join, &cli, deadline)?;
    }
    for nodes in &clusters.clusters {
        for node in nodes {
            wait_for_cluster_ok(node.port, shards, deadline)?;
        }
    }
    Ok(clusters)
}

/// Waits for a `redis-cli --cluster create` to succeed, until `deadline`.
fn finish_join(mut join: Child, cli: &str, deadline: Instant) -> Result<(), String> {
    loop {
        match join.try_wait() {
            Ok(Some(status)) => {
                // Its output is a few kilobytes: it fits in the pipes, read
                // once it has ended.
                let mut output = String::new();
                if let Some(mut out) = join.stdout.take() {
                    let _ = out.read_to_string(&mut output);
                }
                if let Some(mut err) = join.stderr.take() {
                    let _ = err.read_to_string(&mut output);
                }
                if status.success() {
                    return Ok(());
                }
                return Err(format!(
                    "{cli} --cluster create failed ({status}):\n{output}"
                ));
            }
            Ok(None) if Instant::now() > deadline => {
                let _ = join.kill();
                let _ = join.wait();
                return Err(format!("{cli} --cluster create did not finish in time"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {cli}: {e}")),
        }
    }
}

/// Waits until the node on `port` says `cluster_state:ok`, and knows
/// `nodes` nodes (its cluster's), until `deadline`.
fn wait_for_cluster_ok(port: u16, nodes: usize, deadline: Instant) -> Result<(), String> {
    let known = format!("cluster_known_nodes:{nodes}");
    loop {
        let info = send_command_bulk(port, &["CLUSTER", "INFO"]).unwrap_or_default();
        let says = |line: &str| info.lines().any(|l| l.trim() == line);
        if says("cluster_state:ok") && says(&known) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the cluster node on port {port} did not say cluster_state:ok in time"
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The command-line client that creates clusters: `redis-cli` on the
/// `PATH` (Debian's redis-server package brings it), else a `valkey-cli`
/// beside the server binary.
fn cluster_cli() -> Result<String, String> {
    let runs = |cli: &str| {
        Command::new(cli)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs("redis-cli") {
        return Ok("redis-cli".into());
    }
    let beside = Path::new(&server_binary()).with_file_name("valkey-cli");
    let beside = beside.to_string_lossy().into_owned();
    if runs(&beside) {
        return Ok(beside);
    }
    Err(
        "no redis-cli to create clusters with: install Debian's redis-tools package \
         (`cargo xtask demo --clusters` does it where it can), or put a valkey-cli beside \
         the server binary"
            .into(),
    )
}

/// A port the kernel says is free now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("finding a free port: {e}"))
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
    let mut line = String::new();
    exchange(port, args)?.read_line(&mut line)?;
    Ok(line.trim_end().to_string())
}

/// Sends one command to the server on `port` and returns its reply's text:
/// a bulk string's contents (`CLUSTER INFO`), or else its first line.
fn send_command_bulk(port: u16, args: &[&str]) -> io::Result<String> {
    let mut reader = exchange(port, args)?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let Some(len) = line
        .trim_end()
        .strip_prefix('$')
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return Ok(line.trim_end().to_string());
    };
    let mut body = vec![0; len + 2];
    reader.read_exact(&mut body)?;
    body.truncate(len);
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Connects to the server on `port`, sends one command, and returns the
/// connection to read the reply from.
fn exchange(port: u16, args: &[&str]) -> io::Result<BufReader<TcpStream>> {
    let timeout = Duration::from_secs(5);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request += &format!("${}\r\n{arg}\r\n", arg.len());
    }
    stream.write_all(request.as_bytes())?;
    Ok(BufReader::new(stream))
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
