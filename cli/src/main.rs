//! `redlock`: flock(1) across hosts. `redlock run KEY -- COMMAND` runs
//! COMMAND while it holds the lock KEY on a quorum of independent Redis
//! masters (the Redlock algorithm, from the `redlock-sync` library), renews
//! the lock while COMMAND runs, and exits with COMMAND's status.
//! `redlock status KEY` says whether KEY is held, and for how long, master
//! by master. `redlock fence init|repair` initialises or repairs a fence
//! domain (for `run --fence`).
//!
//! The modules, in the order a run uses them: `args` (the command line),
//! `masters` (the voters' URLs and credentials; `list` reads a list of
//! them), `run` (the sequence), `child` (the
//! command's process), `supervise` (the loop that watches the lock while
//! the command runs), `keep` (`--keep`: what becomes of the key when the
//! command ends), `exit` (the statuses); `sys` holds every `unsafe`
//! call, `output` what the tool prints, `help` the manual; `status` is
//! `redlock status`, `fence` is `redlock fence`.

// `unsafe` is denied everywhere; the one exception, `sys`, says why.
#![deny(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod args;
mod child;
mod duration;
mod exit;
mod fence;
mod help;
mod keep;
mod list;
mod masters;
mod output;
mod run;
mod status;
mod supervise;
mod sys;

use args::{Invocation, UsageError};
use exit::Exit;
use std::io::Write;

fn main() {
    let exit = match args::parse(std::env::args_os().skip(1)) {
        Ok(Invocation::Run(args)) => run::run(&args),
        Ok(Invocation::Status(args)) => status::status(&args),
        Ok(Invocation::Fence(args)) => fence::fence(&args),
        Ok(Invocation::Help) => {
            let _ = std::io::stdout().write_all(help::MANUAL.as_bytes());
            Exit::Code(0)
        }
        Ok(Invocation::Version) => {
            println!("redlock {}", env!("CARGO_PKG_VERSION"));
            Exit::Code(0)
        }
        Err(UsageError(message)) => {
            output::say(&message);
            let _ = writeln!(std::io::stderr(), "{}", help::TRY_HELP);
            Exit::Code(UsageError::EXIT)
        }
    };
    match exit {
        Exit::Code(code) => std::process::exit(i32::from(code)),
        Exit::Signal(signal) => sys::die_by(signal),
    }
}
