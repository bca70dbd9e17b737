//! The command: started in a process group of its own, signalled as a
//! group, watched until that group is empty; and, when the tool's stdin is
//! a terminal it runs in the foreground of, given the terminal as a shell
//! gives it to a foreground job.
//!
//! The command has ended when its process group has: like flock(1), whose
//! lock is held until every process that inherited it is gone, the tool
//! holds the lock while anything the command left behind in its group
//! (`job &`) runs. The tool adopts those orphans (`sys::adopt_orphans`), so
//! it reaps them and hears them end.

use crate::args::ChildCommand;
use crate::exit;
use crate::masters::{
    nodes_variable_has_credentials, NODES_VARIABLE, PASSWORD_VARIABLE, SENTINEL_PASSWORD_VARIABLE,
};
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
    /// How its first process (the group's leader) ended, once reaped.
    leader: Option<ExitStatus>,
}

/// What [`Running::watch`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// The command runs.
    Runs,
    /// The command (its first process) was stopped (job control); reported
    /// once for each stop.
    Stopped,
    /// The command's first process has exited, and processes it left in its
    /// group run on.
    LeftBehind,
    /// The command has ended, its whole group with it: its first process's
    /// status.
    Ended(ExitStatus),
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
        .env_remove(PASSWORD_VARIABLE)
        .env_remove(SENTINEL_PASSWORD_VARIABLE);
    // Never inherited: a token the command finds is this lock's.
    match lock.fence_token {
        Some(token) => cmd.env(FENCE_TOKEN_VARIABLE, token.to_string()),
        None => cmd.env_remove(FENCE_TOKEN_VARIABLE),
    };
    if std::env::var_os(NODES_VARIABLE).is_some_and(|v| nodes_variable_has_credentials(&v)) {
        cmd.env_remove(NODES_VARIABLE);
    }
    let terminal = sys::foreground_terminal();
    sys::adopt_orphans();
    let child = sys::spawn(&mut cmd, Spawn { terminal })?;
    Ok(Running {
        pid: child.id(),
        terminal,
        leader: None,
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

    /// Whether the command's first process still runs (or is stopped).
    pub(crate) fn leader_runs(&self) -> bool {
        self.leader.is_none()
    }

    /// Whether the command was given the terminal: it is stopped from it
    /// (Ctrl-Z), and the tool stops with it, as a shell's job.
    pub(crate) fn has_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Reaps what has ended (the command's first process, and orphans the
    /// tool adopted), without waiting, and says where the command stands.
    /// When its first process exits, the tool takes the terminal back.
    pub(crate) fn watch(&mut self) -> io::Result<Watch> {
        let mut stopped = false;
        while let Some((pid, what)) = sys::reap_any()? {
            if pid != self.pid {
                continue; // an adopted orphan, ended (or stopped)
            }
            match what {
                Reaped::Stopped => stopped = true,
                Reaped::Exited(status) => {
                    stopped = false;
                    self.leader = Some(status);
                    if let Some(fd) = self.terminal.take() {
                        self.take_back_terminal(fd);
                    }
                }
            }
        }
        Ok(match self.leader {
            None if stopped => Watch::Stopped,
            None => Watch::Runs,
            Some(status) if sys::group_is_empty(self.pid) => Watch::Ended(status),
            Some(_) => Watch::LeftBehind,
        })
    }

    /// Before the tool stops itself with the stopped command: gives the
    /// tool's group back the terminal the command holds.
    pub(crate) fn suspend(&self) {
        if let Some(fd) = self.terminal {
            self.take_back_terminal(fd);
        }
    }

    /// Continues the stopped command: gives it the terminal again if the
    /// tool was continued in the foreground (`fg`, not `bg`), then sends
    /// SIGCONT to its group.
    pub(crate) fn resume(&self) {
        if let Some(fd) = self.terminal {
            if sys::terminal_owner(fd) == Some(sys::own_group()) {
                sys::give_terminal(fd, self.pid);
            }
        }
        self.signal(sys::SIGCONT);
    }

    /// Gives the tool's group the terminal the command holds (if it still
    /// holds it: the shell may have moved it since).
    fn take_back_terminal(&self, fd: RawFd) {
        if sys::terminal_owner(fd) == Some(self.pid) {
            sys::give_terminal(fd, sys::own_group());
        }
    }
}
