//! The tool's only `unsafe` code: the process and signal calls std does not
//! offer, each behind a safe function.
//!
//! - [`SignalPipe`]: signal handlers that write the signal's number to a
//!   socket pair (the self-pipe trick), so that the main loop waits for
//!   signals, the child and its deadlines in one blocking read.
//! - [`spawn`]: starts the command in a process group of its own, with the
//!   parent-death signal on Linux, and the terminal when the tool has it.
//! - [`signal_group`], [`group_is_empty`], [`reap_any`],
//!   [`adopt_orphans`], [`give_terminal`], [`stop_self`]: what the
//!   supervision does to the command's group and to itself.
//! - [`die_by`]: ends the tool by the signal that ended the command.

#![allow(unsafe_code)] // the point of this module; every block says why it is sound

use std::io::{self, Read};
use std::mem::MaybeUninit;
use std::os::fd::{IntoRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

pub(crate) use libc::{SIGCONT, SIGKILL, SIGTERM, SIGTSTP};

/// The write end of the signal pipe, for the handler (-1: none yet).
static PIPE_WRITER: AtomicI32 = AtomicI32::new(-1);

/// The signals sent on to the command's group while it runs. Their default
/// action ends a process: while the tool waits for the lock, each ends the
/// wait (and the tool, by that signal).
pub(crate) const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Of [`FORWARDED`], those that ask the command to end (SIGUSR1 and
/// SIGUSR2 are a program's own, often to reopen logs or report).
pub(crate) const ASK_TO_END: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Every signal the tool handles, from its start: [`FORWARDED`]; SIGTSTP
/// (sent on to the command's group, the tool stopping once the command
/// has); SIGCHLD (the command changed state); SIGCONT (the tool was
/// continued: it looks at the lock before anything else).
pub(crate) const HANDLED: [libc::c_int; 9] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGTSTP,
    libc::SIGCHLD,
    libc::SIGCONT,
];

/// Signals delivered to the process, as numbers read from a pipe.
#[derive(Debug)]
pub(crate) struct SignalPipe {
    reader: UnixStream,
}

impl SignalPipe {
    /// Installs a handler for each of [`HANDLED`] that writes the signal's
    /// number to a new pipe, and returns the pipe's reading end. Once only.
    pub(crate) fn install() -> io::Result<SignalPipe> {
        let (reader, writer) = UnixStream::pair()?;
        // A full pipe drops a signal instead of blocking the handler: the
        // reader already has one to wake up for, and the loop checks the
        // child on every wake-up whatever woke it.
        writer.set_nonblocking(true)?;
        let previous = PIPE_WRITER.swap(writer.into_raw_fd(), Ordering::SeqCst);
        assert_eq!(previous, -1, "SignalPipe::install is called once");
        for signal in HANDLED {
            // SAFETY: `action` is fully initialised (zeroed, then its
            // handler, flags and mask set) before sigaction reads it; the
            // handler only calls write(2), which is async-signal-safe, on a
            // descriptor that stays open for the life of the process (it
            // was leaked above, on purpose).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                // SA_RESTART: the library's threads see as few EINTRs as
                // possible (its poll loops handle them anyway).
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(SignalPipe { reader })
    }

    /// Waits up to `timeout` for signals, and appends those that came (in
    /// order, once each time they were delivered) to `signals`.
    pub(crate) fn wait(&self, timeout: Duration, signals: &mut Vec<libc::c_int>) {
        // A zero timeout means "forever" to SO_RCVTIMEO.
        let timeout = timeout.max(Duration::from_micros(1));
        if self.reader.set_read_timeout(Some(timeout)).is_err() {
            return;
        }
        let mut buf = [0u8; 64];
        let mut reader = &self.reader;
        if let Ok(n) = reader.read(&mut buf) {
            signals.extend(buf[..n].iter().map(|&s| libc::c_int::from(s)));
        }
        // Err: the timeout passed, or a signal interrupted the read (its
        // number is in the pipe for the next call).
    }
}

/// The byte [`wake`] writes to the signal pipe: no signal's number.
pub(crate) const WAKE: libc::c_int = 0;

/// Wakes the loop that waits on the signal pipe (from another thread: the
/// library's renewal thread, when it finds the lock lost), as a signal
/// would, with [`WAKE`]. Does nothing before the pipe is installed.
pub(crate) fn wake() {
    on_signal(WAKE);
}

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE_WRITER.load(Ordering::Relaxed);
    // Every signal number fits in a byte (Linux: 1..=64).
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe and reads one byte from a
    // local. errno, where we know how to reach it, is saved and restored
    // around it, so that the code the signal interrupted does not see it
    // change; the pointer is this thread's own.
    unsafe {
        let errno = errno_location();
        let saved = errno.map(|errno| *errno);
        libc::write(fd, std::ptr::addr_of!(byte).cast(), 1);
        if let (Some(errno), Some(saved)) = (errno, saved) {
            *errno = saved;
        }
    }
}

/// Where this thread's `errno` lives, on the systems we know.
fn errno_location() -> Option<*mut libc::c_int> {
    // SAFETY (each): the functions take nothing and return this thread's
    // errno's address.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return Some(unsafe { libc::__errno_location() });
    #[cfg(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "dragonfly"
    ))]
    return Some(unsafe { libc::__error() });
    #[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
    return Some(unsafe { libc::__errno() });
    #[allow(unreachable_code)]
    None
}

/// How the command is started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spawn {
    /// Hand the command the terminal on this descriptor (its group becomes
    /// the terminal's foreground group), as a shell does for a foreground
    /// job: it can then read from it, and Ctrl-C reaches it directly.
    pub(crate) terminal: Option<RawFd>,
}

/// Starts `command` in a new process group (the command leads it), and
/// returns once it runs the new program (std waits for the `exec`).
///
/// Between `fork` and `exec` the child: restores the signal handlers and
/// mask the program should start with; on Linux, asks for SIGKILL when
/// this thread (the main thread, which lives as long as the tool) ends,
/// then checks that the tool did not end before that request (it would
/// never come); and takes the terminal if `how` says so.
pub(crate) fn spawn(command: &mut Command, how: Spawn) -> io::Result<Child> {
    let parent = std::process::id();
    let mut all = MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset initialises `all`; pthread_sigmask only reads
    // `all` and writes the current mask into `old`, which is then
    // initialised (it returns 0 on success, checked).
    let old = unsafe {
        libc::sigfillset(all.as_mut_ptr());
        // Blocked while the child runs our handlers' code (until its
        // pre_exec resets them): a signal sent to the new group then would
        // otherwise write into our pipe.
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), old.as_mut_ptr());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        old.assume_init()
    };
    command.process_group(0);
    let terminal = how.terminal;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes only sigaction,
    // prctl, getppid, getpid, tcsetpgrp and sigprocmask calls, allocates
    // nothing and takes no lock. It reads only copies made before the fork.
    unsafe {
        command.pre_exec(move || {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for signal in HANDLED {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The tool may have died before the request: then no signal
                // will come, and the command must not start orphaned.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            let _ = parent;
            if let Some(fd) = terminal {
                // SIGTTOU is still blocked (the whole mask is): a process
                // outside the foreground group may then take the terminal.
                // Best effort: without it, the command still runs.
                libc::tcsetpgrp(fd, libc::getpid());
            }
            if libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn();
    // SAFETY: restores the mask saved above; `old` is initialised.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    child
}

/// Sends `signal` to the process group `group`.
pub(crate) fn signal_group(group: u32, signal: libc::c_int) -> io::Result<()> {
    let group = libc::pid_t::try_from(group).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: kill(2) has no memory-safety preconditions. The group is led
    // by our child; once that is reaped, the kernel does not give its
    // number to a new process while any process of the group lives, and
    // the supervision stops signalling the group once it is empty.
    if unsafe { libc::kill(-group, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether no process is left in the process group `group` (a zombie
/// still counts: an orphan of the group is reaped by [`reap_any`]).
pub(crate) fn group_is_empty(group: u32) -> bool {
    // Signal 0 checks that the group exists, and sends nothing. EPERM: it
    // has processes, none of which we may signal (a setuid program).
    matches!(
        signal_group(group, 0),
        Err(error) if error.raw_os_error() == Some(libc::ESRCH)
    )
}

/// On Linux, makes the tool the reaper of the processes orphaned below it
/// (`PR_SET_CHILD_SUBREAPER`): what the command leaves running when it
/// exits becomes the tool's child, so that the tool sees it end and reaps
/// it, instead of waiting on an init process that may be slow to reap (a
/// zombie still counts as a member of its group). Best effort; elsewhere,
/// orphans go to init as before.
pub(crate) fn adopt_orphans() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes integers only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// What became of a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reaped {
    /// Stopped by a signal (job control).
    Stopped,
    /// Ended: reaped.
    Exited(ExitStatus),
}

/// Reaps one child of the tool that ended, or reports one that stopped,
/// without waiting: `None` when no child changed (or there is none).
pub(crate) fn reap_any() -> io::Result<Option<(u32, Reaped)>> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into a local.
        let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        match rc {
            0 => return Ok(None),
            -1 => {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::ECHILD) => return Ok(None),
                    _ => return Err(error),
                }
            }
            pid => {
                let status = ExitStatus::from_raw(status);
                let what = match status.stopped_signal() {
                    Some(_) => Reaped::Stopped,
                    None => Reaped::Exited(status),
                };
                return Ok(Some((pid as u32, what)));
            }
        }
    }
}

/// Stdin, if it is a terminal whose foreground process group is ours: the
/// tool runs in the foreground of a shell's terminal and the command may
/// read from it, so it should get it. (Only stdin: with output alone on the
/// terminal, the command needs no foreground, and other commands of the
/// tool's pipeline keep theirs.)
pub(crate) fn foreground_terminal() -> Option<RawFd> {
    let stdin = libc::STDIN_FILENO;
    // SAFETY: getpgrp cannot fail; isatty and tcgetpgrp only query the
    // descriptor (a closed one gives an error, not undefined behaviour).
    let ours = unsafe { libc::isatty(stdin) == 1 && libc::tcgetpgrp(stdin) == libc::getpgrp() };
    ours.then_some(stdin)
}

/// The foreground process group of the terminal on `fd`, if it has one.
pub(crate) fn terminal_owner(fd: RawFd) -> Option<u32> {
    // SAFETY: tcgetpgrp only queries the descriptor.
    let group = unsafe { libc::tcgetpgrp(fd) };
    u32::try_from(group).ok().filter(|&g| g > 0)
}

/// The tool's own process group.
pub(crate) fn own_group() -> u32 {
    // SAFETY: getpgrp cannot fail.
    unsafe { libc::getpgrp() as u32 }
}

/// Makes `group` the foreground process group of the terminal on `fd`.
/// Best effort.
pub(crate) fn give_terminal(fd: RawFd, group: u32) {
    // SAFETY: sigemptyset/sigaddset initialise `ttou`; pthread_sigmask reads
    // it and writes the old mask into `old` (initialised when it returns
    // 0), which is restored at the end; tcsetpgrp only takes integers.
    unsafe {
        let mut ttou = MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(ttou.as_mut_ptr());
        libc::sigaddset(ttou.as_mut_ptr(), libc::SIGTTOU);
        // From the background, tcsetpgrp would stop the tool with SIGTTOU
        // unless this thread blocks it.
        if libc::pthread_sigmask(libc::SIG_BLOCK, ttou.as_ptr(), old.as_mut_ptr()) != 0 {
            return;
        }
        libc::tcsetpgrp(fd, group as libc::pid_t);
        libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
    }
}

/// Stops the tool (SIGSTOP) until it is continued: its job then shows as
/// stopped in the shell.
pub(crate) fn stop_self() {
    // SAFETY: raise(3) has no memory-safety preconditions.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}

/// Ends the tool by `signal`, as the command ended, so that the caller sees
/// the command's own way of ending (a shell running a script stops at a
/// command killed by SIGINT, say). Without a core dump. Falls back to exit
/// status `128 + signal` should the signal not end the process.
pub(crate) fn die_by(signal: libc::c_int) -> ! {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads a local; signal, sigemptyset, sigaddset,
    // pthread_sigmask and raise take integers and locals (the set is
    // initialised by sigemptyset before it is read).
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, set.as_ptr(), std::ptr::null_mut());
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}
