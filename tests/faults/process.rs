//! Child processes whose stdout and stderr are read as they write them.
//!
//! A pipe holds 64 KiB on Linux: a child that writes more blocks until
//! someone reads. Waiting for such a child to exit before reading its
//! output never ends (a contending child writes a line per lock it took,
//! some 35-65 KiB in 9 s here).

use std::io::Read;
use std::process::{Child, Output};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A child process and the threads reading its output.
pub struct Running {
    child: Child,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
}

impl Running {
    /// Starts reading the child's piped stdout and stderr (those not piped
    /// give nothing).
    pub fn new(mut child: Child) -> Running {
        let stdout = child.stdout.take().map(read_all);
        let stderr = child.stderr.take().map(read_all);
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the child exits or `limit` passes: whether it exited.
    pub fn exited_by(&mut self, limit: Instant) -> bool {
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) if Instant::now() < limit => thread::sleep(Duration::from_millis(20)),
                // Still running at the limit, or not to be waited for.
                _ => return false,
            }
        }
    }

    /// Kills the child if it still runs, reaps it, and returns its status
    /// and all it wrote.
    pub fn end(mut self) -> Output {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
        }
        let status = self.child.wait().expect("reap a child process");
        // Its pipes reach their end once it (and any child it left holding
        // them) is gone.
        let collect = |reader: Option<JoinHandle<Vec<u8>>>| {
            reader.map_or_else(Vec::new, |r| r.join().unwrap_or_default())
        };
        Output {
            status,
            stdout: collect(self.stdout),
            stderr: collect(self.stderr),
        }
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}
