//! The command line, read by clap from `cli`'s grammar and turned into
//! what each command needs: `redlock run [OPTIONS] KEY [--] COMMAND
//! [ARGS...]` or `... KEY -c COMMAND_LINE`, as flock(1) takes them, and
//! `redlock run -k KEY [-k KEY...] -- COMMAND` for several keys;
//! `redlock status [OPTIONS] KEY` (or `-k KEY [-k KEY...]` for a set);
//! `redlock fence init [--start N]` and
//! `redlock fence repair`; `redlock completions SHELL` and `redlock man`.
//!
//! A wrong command line exits 64 (EX_USAGE), with clap's message and the
//! command's usage, from which every argument that may hold a password
//! (one with an `@`: a URL's credentials) is cut out. Nothing here reads
//! the environment: `masters` does, for the masters and credentials; and
//! `list` reads a list of masters, which clap hands over as one string.

use crate::cli::{Cli, Command, FenceCli, FenceCommonCli, MastersCli, RunCli, StatusCli};
use crate::exit;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use clap_complete::Shell;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invocation {
    Run(Box<RunArgs>),
    Status(Box<StatusArgs>),
    Fence(Box<FenceArgs>),
    /// `redlock completions SHELL`.
    Completions(Shell),
    /// `redlock man`: one page (the commands' names, none for redlock(1)),
    /// or every page into a directory.
    Man(ManPages),
}

/// `redlock run`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RunArgs {
    /// The keys to lock, sorted and each once: one (the KEY argument, or
    /// one `-k`), or several (a set, taken with the library's set calls).
    pub(crate) keys: Vec<OsString>,
    pub(crate) command: ChildCommand,
    pub(crate) masters: MasterArgs,
    pub(crate) wait: Wait,
    pub(crate) ttl: Duration,
    /// `None`: renewed for as long as the command runs.
    pub(crate) max_hold: Option<Duration>,
    /// `--keep`: leave the key to its TTL when the command ends (see
    /// `keep`).
    pub(crate) keep: bool,
    /// `--fence`: take the lock with a fencing token, passed to the
    /// command as `REDLOCK_FENCE_TOKEN`.
    pub(crate) fence: bool,
    /// `--fence-domain`: the fence domain's name (`None`: the library's
    /// default); only with `--fence`.
    pub(crate) fence_domain: Option<String>,
    /// `--holder-label`: stored with the lock, for `status` to show.
    pub(crate) holder_label: Option<String>,
    pub(crate) grace: Duration,
    pub(crate) node_timeout: Duration,
    /// `--replica-ack N[,TIMEOUT]`: the library's replica guard, each
    /// master's grant counting only once N of its replicas confirmed it
    /// within TIMEOUT (`None`: half the node timeout).
    pub(crate) replica_ack: Option<(u32, Option<Duration>)>,
    /// The status when the lock is held elsewhere.
    pub(crate) conflict_exit: u8,
    pub(crate) quiet: bool,
    pub(crate) verbose: bool,
    /// `--json`: a JSON report on stderr at the end.
    pub(crate) json: bool,
}

/// `redlock status`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StatusArgs {
    /// The keys to look at, sorted and each once: one (the KEY argument,
    /// or one `-k`), or several (a set, looked at in one round).
    pub(crate) keys: Vec<OsString>,
    pub(crate) masters: MasterArgs,
    pub(crate) node_timeout: Duration,
    /// Say nothing: the exit status alone tells.
    pub(crate) quiet: bool,
    /// `--json`: a JSON document on stdout instead of lines.
    pub(crate) json: bool,
    /// `--fence` (with `--fence-domain NAME`, `Some(None)` for the
    /// default domain): also say whether each master counts for fencing.
    pub(crate) fence: Option<Option<String>>,
}

/// `redlock fence init|repair`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FenceArgs {
    pub(crate) action: FenceAction,
    /// `--fence-domain` (`None`: the library's default).
    pub(crate) domain: Option<String>,
    pub(crate) masters: MasterArgs,
    pub(crate) node_timeout: Duration,
    /// Print nothing on stdout: the exit status alone tells.
    pub(crate) quiet: bool,
    /// `--json`: a JSON document on stdout instead of lines.
    pub(crate) json: bool,
}

/// What `redlock fence` does to the domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceAction {
    /// `init [--start N]`: `Redlock::fence_init(start)`.
    Init { start: u64 },
    /// `repair`: `Redlock::fence_repair()`.
    Repair,
}

/// `redlock man`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ManPages {
    /// Print the page of this command (`[]`: redlock(1); `["fence",
    /// "init"]`: redlock-fence-init(1)).
    One(Vec<String>),
    /// Write every page into this directory.
    All(PathBuf),
}

/// Where the voters and credentials come from (with the environment: see
/// `masters`).
#[derive(Default, PartialEq, Eq)]
pub(crate) struct MasterArgs {
    /// `--nodes`: URLs, `cluster(...)` and `sentinel(...;NAME)` groups
    /// separated by commas or white space.
    pub(crate) nodes: Option<String>,
    /// Each `--cluster`: one cluster voter, by the URLs of some of its
    /// nodes.
    pub(crate) clusters: Vec<String>,
    pub(crate) nodes_file: Option<PathBuf>,
    pub(crate) user: Option<String>,
    pub(crate) password_file: Option<PathBuf>,
    /// For `rediss://` masters: the CA certificate(s) to trust (PEM).
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// For masters that ask for a client certificate: its chain and key.
    pub(crate) tls_cert_file: Option<PathBuf>,
    pub(crate) tls_key_file: Option<PathBuf>,
}

impl std::fmt::Debug for MasterArgs {
    // `--nodes` and `--cluster` may hold a password: only the files are
    // shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterArgs")
            .field("nodes", &self.nodes.as_ref().map(|_| "..."))
            .field("clusters", &self.clusters.len())
            .field("nodes_file", &self.nodes_file)
            .field("user", &self.user)
            .field("password_file", &self.password_file)
            .finish_non_exhaustive()
    }
}

/// How long to wait for a lock held elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// One attempt (`-n`, `--wait 0`).
    Once,
    UpTo(Duration),
    /// Until it is ours (the default, as flock's).
    NoLimit,
}

/// What to run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ChildCommand {
    /// A program (looked up in `PATH`) and its arguments, without a shell.
    Exec {
        program: OsString,
        args: Vec<OsString>,
    },
    /// A command line for `/bin/sh -c`.
    Shell(OsString),
}

/// Parses the command line, program name first. On `Err`, the caller
/// hands the error to [`print_early`]: help and version are "errors" too,
/// as clap reports them.
pub(crate) fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Invocation, clap::Error> {
    let argv: Vec<OsString> = argv.into_iter().collect();
    // What follows the line's first `--`, if it has one: with `-k`,
    // COMMAND must be exactly that, or options after COMMAND's name would
    // be taken as redlock's (`-k a grep -v x -- f` would run `grep x -- f`).
    let after_dash_dash = argv
        .iter()
        .skip(1)
        .position(|arg| arg == "--")
        .map(|at| argv[at + 2..].to_vec());
    Ok(match Cli::try_parse_from(argv)?.command {
        Command::Run(run) => Invocation::Run(Box::new(run_args(run, after_dash_dash)?)),
        Command::Status(status) => Invocation::Status(Box::new(status_args(status)?)),
        Command::Fence(FenceCli::Init { start, common }) => {
            Invocation::Fence(Box::new(fence_args(FenceAction::Init { start }, common)))
        }
        Command::Fence(FenceCli::Repair { common }) => {
            Invocation::Fence(Box::new(fence_args(FenceAction::Repair, common)))
        }
        Command::Completions(completions) => Invocation::Completions(completions.shell),
        Command::Man(man) => Invocation::Man(match man.dir {
            Some(dir) => ManPages::All(dir),
            None => {
                man_page_exists(&man.command)?;
                ManPages::One(man.command)
            }
        }),
    })
}

/// Prints what clap reported, and returns the exit status: help and the
/// version on stdout (0); anything else on stderr, without the arguments
/// that may hold a password (`argv`: the command line), with status 64.
pub(crate) fn print_early(error: &clap::Error, argv: &[OsString]) -> u8 {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        // Made from the grammar alone: no argument shows. A closed stdout
        // (`| head`) is no failure.
        let _ = error.print();
        return 0;
    }
    let text = hide_secrets(&error.render().to_string(), argv);
    let _ = std::io::stderr().write_all(text.as_bytes());
    exit::USAGE
}

/// What stands in an error for an argument that may hold a password.
const HIDDEN: &str = "(an argument with an @, not shown: it may hold a password)";

/// `text` with every piece of an argument of `argv` that has an `@` in it
/// (a URL with credentials: `redis://:PASSWORD@host`) replaced by
/// [`HIDDEN`]: the whole argument, or any tail of it that holds its last
/// `@` (`--nodes=VALUE`'s value, `-nwVALUE`'s, the unit a DURATION's error
/// quotes). clap quotes arguments in its errors (an argument too many, an
/// unknown option, an invalid value, the tip to put one after `--`); this
/// is how none of them shows a password.
fn hide_secrets(text: &str, argv: &[OsString]) -> String {
    let mut hidden = vec![false; text.len()];
    for arg in argv {
        let arg = arg.to_string_lossy();
        let Some(at) = arg.rfind('@') else {
            continue;
        };
        let (head, tail) = arg.split_at(at);
        for (start, _) in text.match_indices(tail) {
            // As far back as the text goes on as the argument does.
            let same = text.as_bytes()[..start]
                .iter()
                .rev()
                .zip(head.as_bytes().iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            let mut from = start - same;
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            hidden[from..start + tail.len()].fill(true);
        }
    }
    let mut shown = String::with_capacity(text.len());
    let mut in_hidden = false;
    for (i, c) in text.char_indices() {
        match (hidden[i], in_hidden) {
            (true, false) => shown.push_str(HIDDEN),
            (false, _) => shown.push(c),
            (true, true) => {}
        }
        in_hidden = hidden[i];
    }
    shown
}

/// A usage error found after clap's parse, with the usage of `command`
/// (its path from the top: `["run"]`).
fn usage_error(command: &[&str], message: &str) -> clap::Error {
    let mut top = Cli::command();
    top.build();
    let mut at = &mut top;
    for name in command {
        at = at
            .find_subcommand_mut(name)
            .expect("a command of the grammar");
    }
    at.error(ErrorKind::ValueValidation, message)
}

fn master_args(cli: MastersCli) -> (MasterArgs, Duration) {
    let masters = MasterArgs {
        nodes: cli.nodes,
        clusters: cli.cluster,
        nodes_file: cli.nodes_file,
        user: cli.user,
        password_file: cli.password_file,
        tls_ca_file: cli.tls_ca_file,
        tls_cert_file: cli.tls_cert_file,
        tls_key_file: cli.tls_key_file,
    };
    (masters, cli.node_timeout)
}

/// The keys of `redlock run` and the words of its COMMAND: the KEY
/// argument, or with `-k` every `-k` (sorted, each once), the KEY
/// argument's place then being COMMAND's first word.
/// `after_dash_dash`: the words after the line's first `--`, if any.
fn run_keys(
    cli: &mut RunCli,
    after_dash_dash: Option<Vec<OsString>>,
) -> Result<Vec<OsString>, clap::Error> {
    let mut keys = std::mem::take(&mut cli.keys);
    if keys.is_empty() {
        match cli.key.take() {
            Some(key) => keys.push(key),
            None => return Err(usage_error(&["run"], "no KEY: give KEY, or -k KEY")),
        }
    } else if let Some(word) = cli.key.take() {
        if cli.command_line.is_some() {
            return Err(usage_error(
                &["run"],
                "-k and -c take no other argument (the KEY argument is not used with -k)",
            ));
        }
        // Every word clap read as KEY or COMMAND must be one after the
        // first `--`, all of them: a word before it, or an option of
        // COMMAND's taken as redlock's, shows as a difference.
        let as_read = || std::iter::once(&word).chain(cli.command.iter());
        let after_only = after_dash_dash
            .as_ref()
            .is_some_and(|after| as_read().eq(after.iter()));
        if !after_only {
            return Err(usage_error(
                &["run"],
                "with -k, COMMAND goes after --: redlock run -k KEY [-k KEY...] -- COMMAND",
            ));
        }
        cli.command.insert(0, word);
    }
    if keys.iter().any(|key| key.is_empty()) {
        return Err(usage_error(&["run"], "the KEY is empty"));
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

fn run_args(
    mut cli: RunCli,
    after_dash_dash: Option<Vec<OsString>>,
) -> Result<RunArgs, clap::Error> {
    let keys = run_keys(&mut cli, after_dash_dash)?;
    let command = match (cli.command_line, cli.command) {
        (Some(line), _) => ChildCommand::Shell(line),
        (None, command) if command.is_empty() => {
            return Err(usage_error(
                &["run"],
                "no COMMAND: give COMMAND [ARGS...] or -c COMMAND_LINE",
            ))
        }
        (None, command) => {
            let mut words = command.into_iter();
            let program = words.next().unwrap_or_default();
            if program.is_empty() {
                return Err(usage_error(&["run"], "the COMMAND is empty"));
            }
            ChildCommand::Exec {
                program,
                args: words.collect(),
            }
        }
    };
    let wait = match (cli.nonblock, cli.wait) {
        (true, _) | (false, Some(Duration::ZERO)) => Wait::Once,
        (false, Some(limit)) => Wait::UpTo(limit),
        (false, None) => Wait::NoLimit,
    };
    let (masters, node_timeout) = master_args(cli.masters);
    Ok(RunArgs {
        keys,
        command,
        masters,
        wait,
        ttl: cli.ttl,
        max_hold: cli.max_hold,
        keep: cli.keep,
        fence: cli.fence,
        fence_domain: cli.fence_domain,
        holder_label: cli.holder_label,
        grace: cli.grace,
        node_timeout,
        replica_ack: cli.replica_ack,
        conflict_exit: cli.conflict_exit_code,
        quiet: cli.quiet,
        verbose: cli.verbose,
        json: cli.json,
    })
}

fn status_args(cli: StatusCli) -> Result<StatusArgs, clap::Error> {
    // clap has checked that there is a KEY or -k, not both.
    let mut keys: Vec<OsString> = cli.key.into_iter().chain(cli.keys).collect();
    if keys.iter().any(|key| key.is_empty()) {
        return Err(usage_error(&["status"], "the KEY is empty"));
    }
    keys.sort();
    keys.dedup();
    let (masters, node_timeout) = master_args(cli.masters);
    Ok(StatusArgs {
        keys,
        masters,
        node_timeout,
        quiet: cli.quiet,
        json: cli.json,
        fence: cli.fence.then_some(cli.fence_domain),
    })
}

fn fence_args(action: FenceAction, cli: FenceCommonCli) -> FenceArgs {
    let (masters, node_timeout) = master_args(cli.masters);
    FenceArgs {
        action,
        domain: cli.fence_domain,
        masters,
        node_timeout,
        quiet: cli.quiet,
        json: cli.json,
    }
}

/// Checks that `redlock man`'s COMMAND names a command.
fn man_page_exists(path: &[String]) -> Result<(), clap::Error> {
    let mut at = Cli::command();
    for name in path {
        match at.find_subcommand(name) {
            Some(command) if name != "help" => at = command.clone(),
            _ => {
                let message = format!(
                    "no command {:?}: the pages are those of redlock, run, status, fence, \
                     fence init, fence repair, completions and man",
                    path.join(" ")
                );
                return Err(usage_error(&["man"], &message));
            }
        }
    }
    Ok(())
}

impl std::fmt::Display for ChildCommand {
    /// The program's name (its arguments may hold anything).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildCommand::Exec { program, .. } => write!(f, "{}", program.to_string_lossy()),
            ChildCommand::Shell(_) => f.write_str("/bin/sh"),
        }
    }
}

#[cfg(test)]
mod tests;
