//! What a child process that overran its time was doing: the stacks of its
//! threads (from gdb, when gdb is on PATH) and the end of what it wrote.

use crate::process::Running;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long gdb may take to attach and print the stacks.
const GDB_LIMIT: Duration = Duration::from_secs(60);

/// Lines of a child's stdout and stderr shown (their ends).
const TAIL_LINES: usize = 20;

/// Takes the stacks of the child's threads (if gdb is on PATH), then kills
/// it, reaps it and describes it all: the text for the test's panic.
pub fn describe_and_kill(child: Running) -> String {
    let pid = child.id();
    let stacks = backtraces(pid);
    let output = child.end();
    format!(
        "child {pid}, its threads' stacks:\n{stacks}\n\
         its stdout ({} bytes), last {TAIL_LINES} lines:\n{}\n\
         its stderr ({} bytes), last {TAIL_LINES} lines:\n{}",
        output.stdout.len(),
        tail(&output.stdout),
        output.stderr.len(),
        tail(&output.stderr),
    )
}

/// The last lines of `bytes`, as text.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// `gdb -batch -ex "thread apply all bt" -p PID`, bounded by [`GDB_LIMIT`]:
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
        Ok(gdb) => Running::new(gdb),
        Err(e) => return format!("(no stacks: gdb did not start: {e})"),
    };
    let finished = gdb.exited_by(Instant::now() + GDB_LIMIT);
    let output = gdb.end();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let frames: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Thread ") || l.starts_with('#'))
        .collect();
    let mut shown = if frames.is_empty() {
        text.clone()
    } else {
        frames.join("\n")
    };
    if !finished {
        shown.push_str(&format!("\n(gdb killed after {GDB_LIMIT:?})"));
    }
    shown
}
