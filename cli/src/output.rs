//! What the tool says on stderr: one line per message, and a progress line
//! while it waits for a lock, when stderr is a terminal.
//!
//! Nothing here panics when stderr is closed or full (`eprintln!` would):
//! the tool must go on supervising its command whatever happens to its
//! output.

use crate::duration;
use std::io::{self, IsTerminal, Write};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long a wait lasts before the progress line shows.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);
/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Writes `redlock: message` on stderr.
pub(crate) fn say(message: &str) {
    let _ = writeln!(io::stderr().lock(), "redlock: {message}");
}

/// The key as it may be shown: printable ASCII as is, other bytes escaped.
pub(crate) fn show_key(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// A line on the terminal that counts the seconds a wait has lasted, from
/// [`Progress::start`] until the value is dropped (which erases it).
#[derive(Debug)]
pub(crate) struct Progress {
    stop: Sender<()>,
    /// Taken by `drop`, to join it.
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the line for a wait for `key`, if stderr is a terminal.
    pub(crate) fn start(key: &[u8]) -> Option<Progress> {
        if !io::stderr().is_terminal() {
            return None;
        }
        let label = format!("redlock: waiting for {}", show_key(key));
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        let thread = thread::Builder::new()
            .name("redlock-progress".into())
            .spawn(move || {
                let mut shown = false;
                let mut wait = PROGRESS_AFTER;
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                    let line = progress_line(&label, started.elapsed());
                    shown = write!(io::stderr().lock(), "\r{line}\x1b[K").is_ok() || shown;
                    wait = PROGRESS_EVERY;
                }
                if shown {
                    let _ = write!(io::stderr().lock(), "\r\x1b[K");
                }
            })
            .ok()?;
        Some(Progress {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        // Joined, so that the line is erased before anything else is said.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn progress_line(label: &str, waited: Duration) -> String {
    format!(
        "{label}: {}",
        duration::show(Duration::from_secs(waited.as_secs()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_counts_whole_seconds() {
        let line = progress_line("redlock: waiting for k", Duration::from_millis(12_700));
        assert_eq!(line, "redlock: waiting for k: 12s");
    }

    #[test]
    fn keys_are_shown_escaped() {
        assert_eq!(show_key(b"job:1"), "job:1");
        assert_eq!(show_key(b"a\nb\xff"), "a\\nb\\xff");
    }
}
