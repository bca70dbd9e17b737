//! `redlock`: flock(1) across hosts. `redlock run KEY -- COMMAND` runs
//! COMMAND while it holds the lock KEY on a quorum of independent Redis
//! masters (the Redlock algorithm, from the `redlock-sync` library), renews
//! the lock while COMMAND runs, and exits with COMMAND's status.
//! `redlock status KEY` says whether KEY is held, and for how long, master
//! by master. `redlock fence init|repair` initialises or repairs a fence
//! domain (for `run --fence`). `redlock completions` and `redlock man`
//! print the shell completions and the manual pages.
//!
//! The modules, in the order a run uses them: `cli` (the command line's
//! grammar, for clap; `help` its long texts), `args` (what clap parsed,
//! checked and turned into each command's arguments), `masters` (the
//! voters' URLs and credentials; `list` reads a list of them), `run` (the
//! sequence), `child` (the command's process), `supervise` (the loop that
//! watches the lock while the command runs; `held` is the lock on one key
//! or a set of keys), `keep` (`--keep`: what
//! becomes of the key when the command ends), `exit` (the statuses);
//! `sys` holds every `unsafe` call, `output` what the tool prints, `json`
//! the `--json` documents; `status` is `redlock status` (`status_set` for
//! several keys), `fence` is
//! `redlock fence`, `generate` makes the completions and manual pages.

// `unsafe` is denied everywhere; the one exception, `sys`, says why.
#![deny(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod args;
mod child;
mod cli;
mod duration;
mod exit;
mod fence;
mod generate;
mod held;
mod help;
mod json;
mod keep;
mod list;
mod masters;
mod output;
mod run;
mod status;
mod status_set;
mod supervise;
mod sys;

use args::Invocation;
use exit::Exit;

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let exit = match args::parse(argv.iter().cloned()) {
        Ok(Invocation::Run(args)) => run::run(&args),
        Ok(Invocation::Status(args)) => status::status(&args),
        Ok(Invocation::Fence(args)) => fence::fence(&args),
        Ok(Invocation::Completions(shell)) => generate::completions(shell),
        Ok(Invocation::Man(pages)) => generate::man(&pages),
        Err(early) => Exit::Code(args::print_early(&early, &argv)),
    };
    match exit {
        Exit::Code(code) => std::process::exit(i32::from(code)),
        Exit::Signal(signal) => sys::die_by(signal),
    }
}
