//! The examples never leave a server running, however they end: their
//! standard output closed early (`cargo xtask demo | head -1`), or the
//! example killed with SIGTERM, SIGINT or SIGKILL; nor does the demo on
//! local clusters (`cargo xtask demo --clusters`), whose nodes' directory
//! goes too.
//!
//! Each case starts an example, reads the first line it prints (it comes
//! once its local servers answer), notes the server processes it started
//! (its descendants in /proc), ends it, and checks that none of those
//! processes runs any more and that nothing panicked. Before the fix, an
//! example killed by a signal left its servers running: Drop never ran.
//!
//! The examples are built here (`cargo build --release --examples`, in the
//! project's own target directory); a server binary must be installed
//! (`cargo xtask test` makes sure of it). Linux only: it reads /proc, and
//! only Linux has the parent-death signal the examples rely on.

#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// How long an example (or cargo) may take to print its first line; a
/// generous bound, for a busy machine.
const FIRST_LINE_WITHIN: Duration = Duration::from_secs(300);
/// How long an example may take to end once told to.
const END_WITHIN: Duration = Duration::from_secs(60);
/// How long its servers may take to end after it.
const SERVERS_END_WITHIN: Duration = Duration::from_secs(10);

/// How the example is made to end.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Its standard output is closed after the first line.
    CloseStdout,
    /// This signal is sent to it (and only to it).
    Signal(&'static str),
}

#[test]
fn the_demo_through_cargo_run_with_stdout_closed() {
    // `cargo xtask demo | head -1`: cargo between the reader and the demo.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["run", "--quiet", "--release", "--example", "contention"])
        .args(["--target-dir", target_dir().to_str().expect("UTF-8 path")])
        .args(["--", "--seconds", "2"])
        .current_dir(project_root());
    check_ends_clean(command, 5, End::CloseStdout);
}

#[test]
fn the_demo_with_stdout_closed() {
    check_ends_clean(
        example("contention", &["--seconds", "2"]),
        5,
        End::CloseStdout,
    );
}

#[test]
fn the_demo_killed_with_sigterm() {
    check_ends_clean(
        example("contention", &["--seconds", "60"]),
        5,
        End::Signal("TERM"),
    );
}

#[test]
fn the_demo_killed_with_sigint() {
    check_ends_clean(
        example("contention", &["--seconds", "60"]),
        5,
        End::Signal("INT"),
    );
}

#[test]
fn the_demo_killed_with_sigkill() {
    check_ends_clean(
        example("contention", &["--seconds", "60"]),
        5,
        End::Signal("KILL"),
    );
}

#[test]
fn the_cluster_demo_with_stdout_closed() {
    let pid = check_ends_clean(
        example("contention", &["--clusters", "--seconds", "2"]),
        9,
        End::CloseStdout,
    );
    assert_directory_goes(pid);
}

/// Ctrl-C: the demo on three local clusters of three masters, killed with
/// SIGINT, leaves no node running, nor the directory of their cluster
/// files; nor does a run that ends by itself.
#[test]
fn the_cluster_demo_killed_with_sigint_and_one_that_ends() {
    let killed = check_ends_clean(
        example("contention", &["--clusters", "--seconds", "60"]),
        9,
        End::Signal("INT"),
    );
    assert_directory_goes(killed);
    let run = example("contention", &["--clusters", "--seconds", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the example");
    let pid = run.id();
    let done = run.wait_with_output().expect("waiting for the example");
    assert!(done.status.success(), "{done:?}");
    assert!(
        !demo_directory(pid).exists(),
        "the run left its directory: {done:?}"
    );
}

/// The directory of the cluster files of the demo run `pid`.
fn demo_directory(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("redlock-demo-{pid}"))
}

/// Waits until the demo run `pid`'s directory is gone; panics if it is
/// still there after [`SERVERS_END_WITHIN`].
fn assert_directory_goes(pid: u32) {
    let deadline = Instant::now() + SERVERS_END_WITHIN;
    while demo_directory(pid).exists() {
        assert!(
            Instant::now() < deadline,
            "{} is still there",
            demo_directory(pid).display()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_recipe_with_stdout_closed() {
    // The recipes start their servers through `local::masters`.
    check_ends_clean(example("cron_job", &[]), 3, End::CloseStdout);
}

#[test]
fn a_recipe_killed_with_sigterm() {
    check_ends_clean(example("cron_job", &[]), 3, End::Signal("TERM"));
}

/// Runs `command` (an example, or cargo running one), ends it as `end`
/// says once it has printed its first line, and checks that none of the
/// `servers` server processes it started survives it, and that it did not
/// panic. Returns the process id it had.
fn check_ends_clean(mut command: Command, servers: usize, end: End) -> u32 {
    let mut run = Run {
        child: command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the example"),
        servers: Vec::new(),
    };
    let stderr = read_all_later(run.child.stderr.take().expect("piped"));
    let (first, stdout) = first_line(&mut run.child);
    assert!(
        first.contains("local masters") || first.contains("local clusters"),
        "first line: {first:?}"
    );
    run.servers = servers_under(run.child.id());
    assert_eq!(
        run.servers.len(),
        servers,
        "server processes under {} after {first:?}: {:?}",
        run.child.id(),
        run.servers
    );

    let _stdout = match end {
        End::CloseStdout => {
            drop(stdout);
            None
        }
        End::Signal(signal) => {
            let status = Command::new("kill")
                .args([format!("-{signal}"), run.child.id().to_string()])
                .status()
                .expect("running kill");
            assert!(status.success(), "kill -{signal}: {status}");
            Some(stdout) // open until the end: only the signal ends it
        }
    };
    let status = run.wait(END_WITHIN);

    let deadline = Instant::now() + SERVERS_END_WITHIN;
    while run.servers.iter().any(Server::runs) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let running: Vec<&Server> = run.servers.iter().filter(|s| s.runs()).collect();
    assert!(
        running.is_empty(),
        "{end:?}: the example ended ({status}) and left these servers running: {running:?}"
    );
    // The servers wrote to the same stderr: it ends with the last of them.
    let stderr = stderr
        .recv_timeout(SERVERS_END_WITHIN)
        .expect("the example's stderr is still open");
    assert!(
        !stderr.contains("panicked"),
        "{end:?}: the example panicked ({status}):\n{stderr}"
    );
    run.child.id()
}

/// An example run; dropping it kills what is left of it (after a failed
/// check), so that the test itself leaves nothing behind.
struct Run {
    child: Child,
    servers: Vec<Server>,
}

impl Run {
    fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the example") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the example did not end within {within:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for server in self.servers.iter().filter(|s| s.runs()) {
            let _ = Command::new("kill")
                .args(["-KILL", &server.pid.to_string()])
                .status();
        }
    }
}

/// The example binary `name`, with `args`.
fn example(name: &str, args: &[&str]) -> Command {
    let mut command = Command::new(examples_dir().join(name));
    command.args(args);
    command
}

/// Where the examples are, built once for all the tests.
fn examples_dir() -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args(["build", "--release", "--examples", "--target-dir"])
            .arg(target_dir())
            .current_dir(project_root())
            .output()
            .map_err(|e| format!("running cargo: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    });
    if let Err(e) = built {
        panic!("building the examples failed:\n{e}");
    }
    target_dir().join("release").join("examples")
}

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in a subdirectory of the project")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    project_root().join("target")
}

/// The first line `child` prints on stdout, and its stdout, still open.
fn first_line(child: &mut Child) -> (String, BufReader<ChildStdout>) {
    let stdout = child.stdout.take().expect("piped");
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = sender.send((line, reader));
    });
    receiver
        .recv_timeout(FIRST_LINE_WITHIN)
        .unwrap_or_else(|_| panic!("no line from the example within {FIRST_LINE_WITHIN:?}"))
}

/// Reads all of `pipe` in a thread, for after the example has ended.
fn read_all_later(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    receiver
}

/// A server process, known by its pid and its start time (so that a new
/// process given the same pid is not taken for it).
#[derive(Debug)]
struct Server {
    pid: u32,
    started: u64,
}

impl Server {
    /// Whether it still runs: it exists, is the same process, and is not a
    /// zombie (dead, waiting to be reaped by whoever inherited it).
    fn runs(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.started == self.started && s.state != 'Z')
    }
}

/// The server processes among the descendants of `root`.
fn servers_under(root: u32) -> Vec<Server> {
    let binary =
        std::env::var("REDLOCK_TEST_SERVER").unwrap_or_else(|_| "redis-server".to_string());
    let name = Path::new(&binary)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The kernel keeps the first 15 bytes of a process's name.
    let comm: String = name.chars().take(15).collect();
    let all: Vec<(u32, Stat)> = fs::read_dir("/proc")
        .expect("reading /proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect();
    let mut family = vec![root];
    let mut i = 0;
    while i < family.len() {
        let parent = family[i];
        family.extend(
            all.iter()
                .filter(|(_, s)| s.parent == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    all.iter()
        .filter(|(pid, s)| family.contains(pid) && s.comm == comm && s.state != 'Z')
        .map(|(pid, s)| Server {
            pid: *pid,
            started: s.started,
        })
        .collect()
}

struct Stat {
    comm: String,
    state: char,
    parent: u32,
    /// Clock ticks after boot.
    started: u64,
}

/// Fields of /proc/PID/stat: "pid (comm) state ppid ... starttime ...".
fn stat(pid: u32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = text.rsplit_once(") ")?;
    let comm = head.split_once(" (")?.1.to_string();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        comm,
        state: fields.first()?.chars().next()?,
        parent: fields.get(1)?.parse().ok()?,
        // starttime is field 22; `rest` starts at field 3.
        started: fields.get(19)?.parse().ok()?,
    })
}
