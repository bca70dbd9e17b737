//! What the `redlock` tests share: the tool's command line, waiting for a
//! process with a limit, a scratch directory, and looking at processes.

// Every test file compiles its own copy and uses only part of it.
#![allow(dead_code)]

use crate::support::Cluster;
use std::borrow::BorrowMut;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The limit for anything a test waits for: generous, since the machine may
/// be busy; only a hang reaches it.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The variables the tool reads, removed from every test's environment.
const TOOL_VARIABLES: [&str; 4] = [
    "REDLOCK_NODES",
    "REDLOCK_PASSWORD",
    "REDLOCK_PASSWORD_FILE",
    "REDLOCK_USER",
];

/// `redlock` with a clean environment (none of the tool's variables).
pub fn redlock() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redlock"));
    for variable in TOOL_VARIABLES {
        command.env_remove(variable);
    }
    command
}

/// `redlock run --nodes URL,... ARGS...`.
pub fn redlock_run(cluster: &Cluster, args: &[&str]) -> Command {
    let mut command = redlock();
    command
        .arg("run")
        .arg("--nodes")
        .arg(nodes(cluster))
        .args(args);
    command
}

/// The cluster's URLs, separated by commas.
pub fn nodes(cluster: &Cluster) -> String {
    cluster.urls().join(",")
}

/// What a finished process left.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the spawn to the exit.
    pub took: Duration,
}

/// Runs `command` to its end (at most [`PATIENCE`]), capturing its output.
pub fn finish(mut command: impl BorrowMut<Command>) -> Finished {
    let started = Instant::now();
    let child = command
        .borrow_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning redlock");
    collect(child, started)
}

/// Waits for a child spawned with piped stdout and stderr, and collects
/// its output.
pub fn collect(mut child: Child, started: Instant) -> Finished {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = wait(&mut child, PATIENCE);
    let took = started.elapsed();
    Finished {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        took,
    }
}

/// Waits at most `limit` for `child` to end; kills it and panics if it
/// does not.
pub fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pid {} did not end within {limit:?}", child.id());
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits at most [`PATIENCE`] until `ready` holds; panics with `what`.
pub fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Milliseconds since the Unix epoch, as `date +%s%3N` prints them.
pub fn wall_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis()
}

/// Whether process `pid` is running: it exists and is no zombie (an
/// orphan's zombie waits for an init process that may be slow to reap).
pub fn is_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) STATE ...": the state follows the last ')'.
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Whether process `pid` is stopped (job control: state `T`).
pub fn is_stopped(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    state == Some('T')
}

/// Whether process `pid` has a thread named `name` (threads name
/// themselves: the tool's `redlock-acquire` runs while it takes the lock).
pub fn has_thread(pid: u32, name: &str) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
    })
}

/// Sends `signal` to process `pid`.
pub fn signal(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("pid fits in pid_t");
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal})");
}

/// A directory of its own, removed on drop.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("redlock-cli-test-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("creating a scratch directory");
        Scratch(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A file in the directory, as a string for shell scripts.
    pub fn file(&self, name: &str) -> String {
        self.0
            .join(name)
            .to_str()
            .expect("UTF-8 temp path")
            .to_string()
    }

    /// The file's contents, if it exists.
    pub fn read(&self, name: &str) -> Option<String> {
        fs::read_to_string(self.0.join(name)).ok()
    }

    /// Waits until the file exists and holds a line, and returns that line.
    pub fn wait_for(&self, name: &str) -> String {
        let mut line = String::new();
        until(&format!("{name} to be written"), || match self.read(name) {
            Some(text) if text.ends_with('\n') => {
                line = text.trim().to_string();
                true
            }
            _ => false,
        });
        line
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Writes an executable script `appender` in `scratch` and returns its
/// path: it writes its parent's pid (`redlock`'s, when it is the command)
/// to `tool` and its own to `pid`, then appends a line to `log` every
/// 10 ms, and one more as soon as it is continued after a stop, until
/// `end` exists, and exits 4; it ignores SIGTERM (only SIGKILL stops it
/// before its end). One process (perl, after `exec`),
/// so that a stop reaches it whole: a shell loop forks `sleep` every
/// round, and a stop that catches a fork between vfork and exec leaves the
/// shell blocked, not stopped.
pub fn appender(scratch: &Scratch) -> String {
    let path = scratch.file("appender");
    let script = format!(
        r#"#!/bin/sh
echo $PPID > {tool}
echo $$ > {pid}
exec perl -e '
    $| = 1;
    open(my $log, ">>", "{log}") or die "{log}: $!";
    $SIG{{CONT}} = sub {{ print $log "continued\n"; $log->flush }};
    $SIG{{TERM}} = "IGNORE";
    until (-e "{end}") {{
        print $log "x
";
        $log->flush;
        select(undef, undef, undef, 0.01);
    }}
    exit 4;
'
"#,
        tool = scratch.file("tool"),
        pid = scratch.file("pid"),
        log = scratch.file("log"),
        end = scratch.file("end"),
    );
    fs::write(&path, script).expect("writing the appender");
    let mut permissions = fs::metadata(&path).expect("the appender").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    fs::set_permissions(&path, permissions).expect("making the appender executable");
    path
}

/// The lines [`appender`] has written so far.
pub fn appended(scratch: &Scratch) -> usize {
    scratch.read("log").map_or(0, |text| text.lines().count())
}

/// The number the shell wrote into a file (a pid, a time).
pub fn number(text: &str) -> u128 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text:?}"))
}

/// Whether every master of `cluster` has a subscriber on `key`'s release
/// channel: a `redlock` waiting for `key` listens there (the library
/// subscribes once its first try found the lock held), so this tells that
/// it waits.
pub fn listening_for_release(cluster: &Cluster, key: &str) -> bool {
    let channel = crate::support::release_channel(key);
    cluster.servers.iter().all(|server| {
        matches!(
            server.cmd(&["PUBSUB", "NUMSUB", &channel]),
            crate::support::OwnedReply::Array(items)
                if matches!(items.get(1), Some(crate::support::OwnedReply::Integer(n)) if *n > 0)
        )
    })
}

/// Waits until no key is left on `cluster`'s masters, up to 5 s. `redlock`
/// exits once a quorum released the lock: the other masters run the
/// release a moment later, on a busy machine not before the test looks. A
/// key left behind would stay far longer: the default TTL is 30 s, renewed
/// when 10 s are left.
pub fn released(cluster: &Cluster, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.total_keys() != 0 {
        assert!(Instant::now() < deadline, "a key left: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}
