//! The command: started in a process group of its own, signalled as a
//! group, reaped; and, when the tool's stdin is a terminal it runs in the
//! foreground of, given the terminal as a shell gives it to a foreground
//! job.

use crate::args::ChildCommand;
use crate::exit;
use crate::masters::{nodes_variable_has_credentials, NODES_VARIABLE, PASSWORD_VARIABLE};
use crate::sys::{self, Reaped, Spawn};
use std::ffi::OsString;
use std::io;
use std::os::fd::RawFd;
use std::process::{Command, ExitStatus};

/// The key, for the command.
pub(crate) const KEY_VARIABLE: &str = "REDLOCK_KEY";
/// When the lock's validity ends if it is not renewed, in milliseconds
/// since the Unix epoch (wall clock), as of the command's start.
pub(crate) const VALID_UNTIL_VARIABLE: &str = "REDLOCK_VALID_UNTIL_MS";

/// The lock's fencing token (`--fence`), for the command to pass with
/// every write to the resource it protects.
pub(crate) const FENCE_TOKEN_VARIABLE: &str = "REDLOCK_FENCE_TOKEN";

/// What the command gets from the lock.
#[derive(Debug)]
pub(crate) struct LockEnv {
    pub(crate) key: OsString,
    pub(crate) valid_until_ms: u128,
    /// With `--fence`: the lock's fencing token.
    pub(crate) fence_token: Option<u64>,
}

/// A running command.
#[derive(Debug)]
pub(crate) struct Running {
    /// Its pid, which is also its process group's id.
    pid: u32,
    /// The terminal it was given, if any.
    terminal: Option<RawFd>,
}

/// Starts `command` with `lock`'s environment, stdin, stdout and stderr
/// inherited. The environment loses the password (`REDLOCK_PASSWORD`, and
/// `REDLOCK_NODES` when its URLs carry one).
pub(crate) fn start(command: &ChildCommand, lock: &LockEnv) -> io::Result<Running> {
    let mut cmd = match command {
        ChildCommand::Exec { program, args } => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
        ChildCommand::Shell(line) => {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c").arg(line);
            cmd
        }
    };
    cmd.env(KEY_VARIABLE, &lock.key)
        .env(VALID_UNTIL_VARIABLE, lock.valid_until_ms.to_string())
        .env_remove(PASSWORD_VARIABLE);
    // Never inherited: a token the command finds is this lock's.
    match lock.fence_token {
        Some(token) => cmd.env(FENCE_TOKEN_VARIABLE, token.to_string()),
        None => cmd.env_remove(FENCE_TOKEN_VARIABLE),
    };
    if std::env::var_os(NODES_VARIABLE).is_some_and(|v| nodes_variable_has_credentials(&v)) {
        cmd.env_remove(NODES_VARIABLE);
    }
    let terminal = sys::foreground_terminal();
    let child = sys::spawn(&mut cmd, Spawn { terminal })?;
    Ok(Running {
        pid: child.id(),
        terminal,
    })
}

/// The exit status for a command that could not be started: 127 if it was
/// not found, 126 if it could not be executed, 71 if the system refused a
/// process.
pub(crate) fn exit_status_for(error: &io::Error) -> u8 {
    match error.raw_os_error() {
        Some(libc::ENOENT) => exit::NOT_FOUND,
        Some(libc::EAGAIN | libc::ENOMEM) => exit::OS_ERROR,
        _ => exit::CANNOT_EXECUTE,
    }
}

impl Running {
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to the command's process group. A group already gone
    /// is no error.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        let _ = sys::signal_group(self.pid, signal);
    }

    /// The command's exit status, once it has ended (without waiting).
    ///
    /// When it holds the terminal and is stopped from it (Ctrl-Z), the tool
    /// takes the terminal back and stops too, so that the shell sees its
    /// job stopped; when continued (`fg`, `bg`), it hands the terminal back
    /// if it is in the foreground again, and continues the command. The
    /// lock is not renewed while the tool is stopped.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match sys::reap(self.pid, self.terminal.is_some())? {
            Reaped::Running => Ok(None),
            Reaped::Exited(status) => {
                if let Some(fd) = self.terminal.take() {
                    self.take_back_terminal(fd);
                }
                Ok(Some(status))
            }
            Reaped::Stopped => {
                if let Some(fd) = self.terminal {
                    self.take_back_terminal(fd);
                    sys::stop_self();
                    // Continued: in the foreground again (fg), or not (bg).
                    if sys::terminal_owner(fd) == Some(sys::own_group()) {
                        sys::give_terminal(fd, self.pid);
                    }
                }
                self.signal(sys::SIGCONT);
                Ok(None)
            }
        }
    }

    /// Gives the tool's group the terminal the command holds (if it still
    /// holds it: the shell may have moved it since).
    fn take_back_terminal(&self, fd: RawFd) {
        if sys::terminal_owner(fd) == Some(self.pid) {
            sys::give_terminal(fd, sys::own_group());
        }
    }
}
