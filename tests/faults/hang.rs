//! What a child process that overran its time was doing: the stacks of its
//! threads (from gdb, when gdb is on PATH) and the end of what it wrote.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long gdb may take to attach and print the stacks.
const GDB_LIMIT: Duration = Duration::from_secs(60);

/// Lines of a child's stdout and stderr shown (their ends).
const TAIL_LINES: usize = 20;

/// Takes the stacks of `child`'s threads (if gdb is on PATH), then kills
/// it, reaps it and describes it all: the text for the test's panic.
pub fn describe_and_kill(mut child: Child) -> String {
    let pid = child.id();
    let stacks = backtraces(pid);
    let _ = child.kill();
    // Once killed, its pipes reach their end: this returns what it wrote.
    let (stdout, stderr) = match child.wait_with_output() {
        Ok(output) => (output.stdout, output.stderr),
        Err(e) => (Vec::new(), format!("(output lost: {e})").into_bytes()),
    };
    format!(
        "child {pid}, its threads' stacks:\n{stacks}\n\
         its stdout ({} bytes), last {TAIL_LINES} lines:\n{}\n\
         its stderr ({} bytes), last {TAIL_LINES} lines:\n{}",
        stdout.len(),
        tail(&stdout),
        stderr.len(),
        tail(&stderr),
    )
}

/// The last lines of `bytes`, as text.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// `gdb -batch -ex "thread apply all bt" -p PID`, bounded by [`GDB_LIMIT`];
/// the thread and frame lines of its output (all of it if it has none).
fn backtraces(pid: u32) -> String {
    let spawned = Command::new("gdb")
        .args([
            "-batch",
            "-ex",
            "thread apply all bt",
            "-p",
            &pid.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut gdb = match spawned {
        Ok(gdb) => gdb,
        Err(e) => return format!("(no stacks: gdb did not start: {e})"),
    };
    // Read as gdb writes, so that a long output cannot block it.
    let readers = [
        gdb.stdout.take().map(read_all),
        gdb.stderr.take().map(read_all),
    ];
    let until = Instant::now() + GDB_LIMIT;
    let mut overran = false;
    while matches!(gdb.try_wait(), Ok(None)) {
        if Instant::now() > until {
            let _ = gdb.kill();
            overran = true;
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let _ = gdb.wait();
    let output: Vec<u8> = readers
        .into_iter()
        .flatten()
        .flat_map(|r| r.join().unwrap_or_default())
        .collect();
    let text = String::from_utf8_lossy(&output);
    let frames: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Thread ") || l.starts_with('#'))
        .collect();
    let mut shown = if frames.is_empty() {
        text.into_owned()
    } else {
        frames.join("\n")
    };
    if overran {
        shown.push_str(&format!("\n(gdb killed after {GDB_LIMIT:?})"));
    }
    shown
}

/// Reads `pipe` to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}
