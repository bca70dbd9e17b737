//! The command line's grammar, for clap: every command, option, default
//! and help text (the long texts are `help`'s). `args` turns what clap
//! parsed into the tool's invocation and checks what clap cannot;
//! `generate` makes the completions and manual pages from the same
//! definition.
//!
//! Nothing here reads the environment (no clap `env`): `masters` does,
//! so that neither help nor an error can show a variable's value.

use crate::duration;
use crate::help;
use clap::{Args, Parser, Subcommand, ValueHint};
use clap_complete::Shell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The lock's default TTL: renewed every 20 s while the command runs, and
/// what a killed `redlock` leaves behind at most.
pub(crate) const DEFAULT_TTL: &str = "30s";
/// The default time between SIGTERM and SIGKILL when the lock is lost
/// (always cut short to end before the lock's validity).
pub(crate) const DEFAULT_GRACE: &str = "5s";
/// The default time each master has to answer in one round: four times the
/// library's, since a command-line tool starts cold (a new connection and
/// handshake to every master) on hosts that may be busy, and loses nothing
/// by waiting a little longer for a slow master.
pub(crate) const DEFAULT_NODE_TIMEOUT: &str = "200ms";
/// The shortest TTL accepted: the supervision needs some room.
const MIN_TTL: Duration = Duration::from_millis(100);

/// `redlock`.
#[derive(Debug, Parser)]
#[command(
    name = "redlock",
    version,
    // `redlock run -V` too, as the hand-written parser took it.
    propagate_version = true,
    about = help::ABOUT,
    long_about = help::LONG_ABOUT,
    override_usage = help::USAGE,
    after_long_help = help::AFTER_LONG_HELP,
    subcommand_required = true,
    arg_required_else_help = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    #[command(
        about = help::RUN_ABOUT,
        long_about = help::RUN_LONG_ABOUT,
        after_long_help = help::RUN_AFTER_LONG_HELP,
        override_usage = "redlock run [OPTIONS] KEY [--] COMMAND [ARGS...]\n       \
                          redlock run [OPTIONS] KEY -c COMMAND_LINE\n       \
                          redlock run [OPTIONS] -k KEY [-k KEY...] -- COMMAND [ARGS...]\n       \
                          redlock run [OPTIONS] -k KEY [-k KEY...] -c COMMAND_LINE",
        args_override_self = true
    )]
    Run(RunCli),
    #[command(
        about = help::STATUS_ABOUT,
        long_about = help::STATUS_LONG_ABOUT,
        after_long_help = help::STATUS_AFTER_LONG_HELP,
        args_override_self = true
    )]
    Status(StatusCli),
    #[command(
        subcommand,
        about = help::FENCE_ABOUT,
        long_about = help::FENCE_LONG_ABOUT,
        after_long_help = help::FENCE_AFTER_LONG_HELP,
        subcommand_required = true,
        arg_required_else_help = true
    )]
    Fence(FenceCli),
    #[command(about = help::COMPLETIONS_ABOUT, long_about = help::COMPLETIONS_LONG_ABOUT)]
    Completions(CompletionsCli),
    #[command(about = help::MAN_ABOUT, long_about = help::MAN_LONG_ABOUT)]
    Man(ManCli),
}

/// The options every command that talks to the masters takes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Masters")]
pub(crate) struct MastersCli {
    #[arg(
        long,
        value_name = "URL,...",
        help = "The masters: redis:// URLs, cluster(URL,...) and sentinel(URL,...;NAME) entries \
                (default: $REDLOCK_NODES)",
        long_help = "The masters: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] URLs separated by \
                     commas or blanks (default: $REDLOCK_NODES). Use 3 or 5 independent masters, \
                     not replicas of one another. An entry cluster(URL,...) is one master that is \
                     a whole cluster, as --cluster gives it: 'cluster(redis://a:7000,redis://b:7000) \
                     cluster(redis://c:7000) redis://m:6379' is three masters.\n\n\
                     A URL starts only at a redis:// (or rediss://) after a comma, a blank or \
                     cluster(, so a PASSWORD may hold commas, blanks, @ and parentheses as they \
                     are, but no comma or blank followed by redis://, rediss:// or cluster( (write \
                     that comma as %2C); write a % in it as %25, and a comma, blank or parenthesis \
                     in a USER as %2C, %20, %28 or %29.\n\n\
                     An entry sentinel(URL,...;NAME) is one master that Sentinels watch: the \
                     sentinels' URLs, then ; and the name they know the master by \
                     ('sentinel(redis://s1:26379,redis://s2:26379;locks-a)'). redlock asks them for \
                     the current master, checks it is one, and follows a failover. The sentinels \
                     take their own password (in their URLs, or $REDLOCK_SENTINEL_PASSWORD); the \
                     master takes the masters' (--password-file, $REDLOCK_PASSWORD)."
    )]
    pub(crate) nodes: Option<String>,

    #[arg(
        long,
        value_name = "URL,...",
        help = "One master that is a whole Redis or Valkey Cluster, by some of its nodes' URLs",
        long_help = "One master that is a whole Redis or Valkey Cluster, reached through these \
                     URLs of any of its nodes (the form of --nodes; every node takes the same \
                     credentials and TLS). Each command goes to the cluster's master for KEY's \
                     slot. Give one --cluster per cluster. The masters are those of --nodes, then \
                     one per --cluster; given either, --nodes-file and $REDLOCK_NODES are not read."
    )]
    pub(crate) cluster: Vec<String>,

    #[arg(
        long,
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        help = "Read the masters from FILE",
        long_help = "Read the URLs from FILE: one per line, # starts a comment line; a \
                     cluster(...) or sentinel(...) entry may span lines."
    )]
    pub(crate) nodes_file: Option<PathBuf>,

    #[arg(
        long,
        value_name = "NAME",
        help = "The ACL user the password belongs to (default: $REDLOCK_USER)"
    )]
    pub(crate) user: Option<String>,

    #[arg(
        long,
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        help = "Read the password from FILE (default: $REDLOCK_PASSWORD, $REDLOCK_PASSWORD_FILE)",
        long_help = "Read the password from FILE (a trailing line break is dropped). Default: \
                     $REDLOCK_PASSWORD, else the file $REDLOCK_PASSWORD_FILE. It goes to every URL \
                     (a cluster's too) that has no password of its own. A password is never needed \
                     on the command line: one written in --nodes or --cluster works, with a warning \
                     (any user can read a command line)."
    )]
    pub(crate) password_file: Option<PathBuf>,

    #[arg(
        long,
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        help = "For rediss:// masters: the CA certificate(s) (PEM) to trust",
        long_help = "For rediss:// masters: the CA certificate(s) (PEM) their certificates must \
                     chain to. rediss:// needs a redlock built with the cargo feature tls."
    )]
    pub(crate) tls_ca_file: Option<PathBuf>,

    #[arg(
        long,
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        help = "A client certificate chain (PEM), for masters that ask for one"
    )]
    pub(crate) tls_cert_file: Option<PathBuf>,

    #[arg(
        long,
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        help = "The client certificate's private key (PEM)"
    )]
    pub(crate) tls_key_file: Option<PathBuf>,

    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_NODE_TIMEOUT,
        value_parser = duration_value,
        help = "How long each master has to answer in one round"
    )]
    pub(crate) node_timeout: Duration,
}

/// `redlock run`.
#[derive(Debug, Args)]
pub(crate) struct RunCli {
    #[arg(
        short,
        long,
        value_name = "DURATION",
        value_parser = duration_value,
        overrides_with = "nonblock",
        help_heading = "Waiting, when another holds the lock",
        help = "Wait at most DURATION (default: as long as it takes); 0 makes one attempt"
    )]
    pub(crate) wait: Option<Duration>,

    #[arg(
        short,
        long,
        overrides_with = "wait",
        help_heading = "Waiting, when another holds the lock",
        help = "Make one attempt (the same as --wait 0)"
    )]
    pub(crate) nonblock: bool,

    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_TTL,
        value_parser = ttl_value,
        help_heading = "Holding",
        help = "The lock's time to live, renewed while COMMAND runs",
        long_help = "The lock's time to live. It is renewed while COMMAND runs, when a third of it \
                     is left. It is how long the lock outlives a redlock killed with SIGKILL, at \
                     most. At least 100ms."
    )]
    pub(crate) ttl: Duration,

    #[arg(
        long,
        value_name = "DURATION",
        value_parser = max_hold_value,
        help_heading = "Holding",
        help = "Renew the lock for at most DURATION, then stop COMMAND and exit 124",
        long_help = "Renew the lock for at most DURATION from its acquisition, then stop COMMAND \
                     and exit 124 (default: no limit)."
    )]
    pub(crate) max_hold: Option<Duration>,

    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_GRACE,
        value_parser = duration_value,
        help_heading = "Holding",
        help = "Time between SIGTERM and SIGKILL when COMMAND must stop",
        long_help = "Time between SIGTERM and SIGKILL when the lock is lost or --max-hold passes. \
                     Always cut short to end a tenth of the TTL (at most 1s) before the lock's \
                     validity ends."
    )]
    pub(crate) grace: Duration,

    #[arg(
        long,
        help_heading = "Holding",
        help = "When COMMAND ends, leave the lock until its TTL runs out (once per period)",
        long_help = "When COMMAND ends, leave the lock until its TTL runs out instead of releasing \
                     it, so that a job cron starts on several hosts runs at most once per TTL (see \
                     redlock --help, Examples). The lock stays: until one TTL after it was taken, \
                     if COMMAND ends before the first renewal (about two thirds of the TTL in); \
                     for the rest of the TTL its last renewal set, if COMMAND ends after it but \
                     within the TTL (at most one TTL after COMMAND ends, at least a third of a TTL \
                     while renewals succeed); not at all if COMMAND runs past the TTL: it is \
                     released then, as the period it marks is over.\n\n\
                     It is kept whatever COMMAND's status, a signal included (redlock cannot tell \
                     whether a failed COMMAND did part of its work), and released if COMMAND could \
                     not be started or the lock was lost. Use it with -n (or a short --wait) on \
                     every host: a host that waits gets the lock when it runs out, and runs \
                     COMMAND again."
    )]
    pub(crate) keep: bool,

    #[arg(
        long,
        help_heading = "Holding",
        help = "Take the lock with a fencing token, given to COMMAND as REDLOCK_FENCE_TOKEN",
        long_help = "Take the lock with a fencing token and give it to COMMAND as \
                     REDLOCK_FENCE_TOKEN: a number, unique for KEY and rising with each holder, for \
                     COMMAND to pass with every write to what it protects, which refuses a token \
                     below the largest it accepted (so a COMMAND that paused past the lock's \
                     validity cannot overwrite the next holder's work). The masters' fence domain \
                     must have been initialised once (redlock fence init); until then, and while \
                     too few masters have their counter (redlock fence repair), redlock cannot \
                     lock and exits 78."
    )]
    pub(crate) fence: bool,

    #[arg(
        long,
        value_name = "NAME",
        requires = "fence",
        value_parser = domain_value,
        help_heading = "Holding",
        help = "With --fence: the fence domain to take the token from (default: default)",
        long_help = "With --fence: the fence domain to take the token from (default: default). \
                     Keys that share a domain share its counter."
    )]
    pub(crate) fence_domain: Option<String>,

    #[arg(
        long,
        value_name = "N[,TIMEOUT]",
        value_parser = replica_ack_value,
        help_heading = "Holding",
        help = "Count a master's grant only once N of its replicas confirmed it (WAIT)",
        long_help = "For masters that have replicas and may fail over to one: a master's grant \
                     (and each renewal's) counts only once N of its replicas confirmed, within \
                     TIMEOUT (default: half the node timeout), that they received it (WAIT, sent \
                     behind the write): --replica-ack 1 or --replica-ack 1,50ms. A master whose \
                     replicas do not confirm in time is a \"no\" for that attempt; a failover to a \
                     replica that confirmed keeps the lock. WAIT is not consensus: a replica that \
                     confirmed and then died with its master still loses it. Cluster voters wait \
                     for the replicas of the shard master that holds KEY."
    )]
    pub(crate) replica_ack: Option<(u32, Option<Duration>)>,

    #[arg(
        long,
        value_name = "LABEL",
        help_heading = "Holding",
        help = "Store LABEL with the lock, for redlock status to say who holds it",
        long_help = "Store LABEL with the lock (after the random part of the key's value, which \
                     status never reads), so that redlock status, and the library's inspect, show \
                     on any host who holds it: a host name, a job, such as \"$(hostname) \
                     nightly-backup\". 1 to 64 bytes, without control characters or |; otherwise \
                     redlock exits 78. Anyone who can read the key can read LABEL. Default: none."
    )]
    pub(crate) holder_label: Option<String>,

    #[arg(
        short = 'E',
        long,
        value_name = "N",
        default_value_t = crate::exit::HELD_ELSEWHERE,
        help_heading = "Exit status and output",
        help = "Exit with N when the lock is held elsewhere"
    )]
    pub(crate) conflict_exit_code: u8,

    #[arg(
        short,
        long,
        help_heading = "Exit status and output",
        help = "A lock held elsewhere is no failure: exit 0 without a word (overrides -E)",
        long_help = "A lock held elsewhere is no failure: exit 0 without a word (cron: the host \
                     that got the lock does the job). Overrides -E."
    )]
    pub(crate) quiet: bool,

    #[arg(
        short,
        long,
        help_heading = "Exit status and output",
        help = "Say when the lock is taken and released, and how long each took"
    )]
    pub(crate) verbose: bool,

    #[arg(
        long,
        help_heading = "Exit status and output",
        help = "At the end, write a JSON report of the run as the last line on stderr",
        long_help = "At the end (after COMMAND, or when the lock could not be taken), write a JSON \
                     report of the run on stderr, on a line of its own: whether the lock was taken, \
                     in how long, by how many masters, the fencing token, what became of the lock \
                     and how redlock exits (the README gives the schema). stdout stays COMMAND's."
    )]
    pub(crate) json: bool,

    #[arg(
        short = 'c',
        long = "command",
        value_name = "COMMAND_LINE",
        conflicts_with = "command",
        help = "Run COMMAND_LINE with /bin/sh -c instead of COMMAND (after the KEY)"
    )]
    pub(crate) command_line: Option<OsString>,

    #[arg(
        short = 'k',
        long = "key",
        value_name = "KEY",
        help = "Lock KEY; repeat it to hold several keys at once (COMMAND then goes after --)",
        long_help = "Lock KEY; repeat it (-k a -k b) to hold several keys at once, all or none, \
                     as one lock: taken in one round (each master sets every key or none), renewed \
                     and released together, and never held in part while waiting, so two runs \
                     that name the same keys in any order cannot deadlock. Keys given twice count \
                     once; one key is the same as the KEY argument. With -k there is no KEY \
                     argument, and COMMAND goes after -- (or use -c). With --fence the set has \
                     one token (on --cluster masters its keys must then share a hash tag, else \
                     redlock exits 78)."
    )]
    pub(crate) keys: Vec<OsString>,

    #[arg(
        value_name = "KEY",
        help = "The lock's name (a key on every master); without -k only"
    )]
    pub(crate) key: Option<OsString>,

    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_hint = ValueHint::CommandWithArguments,
        help = "The command to run and its arguments, without a shell",
        long_help = "The command to run and its arguments, without a shell (looked up in PATH). \
                     Everything from COMMAND on is COMMAND's, options too; a COMMAND that starts \
                     with - goes after --."
    )]
    pub(crate) command: Vec<OsString>,

    // Last: its heading would hold the options after it.
    #[command(flatten)]
    pub(crate) masters: MastersCli,
}

/// `redlock status`.
#[derive(Debug, Args)]
pub(crate) struct StatusCli {
    #[arg(
        long,
        help = "Also say whether each master counts for the fence domain, and what to run if not"
    )]
    pub(crate) fence: bool,

    #[arg(
        long,
        value_name = "NAME",
        requires = "fence",
        value_parser = domain_value,
        help = "With --fence: the fence domain (default: default)"
    )]
    pub(crate) fence_domain: Option<String>,

    #[arg(
        short,
        long,
        conflicts_with = "json",
        help = "Print nothing: the exit status tells"
    )]
    pub(crate) quiet: bool,

    #[arg(
        long,
        help = "Print a JSON document instead of lines (the README gives the schema)"
    )]
    pub(crate) json: bool,

    #[arg(
        short = 'k',
        long = "key",
        value_name = "KEY",
        help = "Look at KEY; repeat it to look at several keys as one set",
        long_help = "Look at KEY; repeat it (-k a -k b) to look at several keys as one set, as \
                     `redlock run -k a -k b` holds them, in one round: a summary of the set, then \
                     each key as `redlock status KEY` shows it. The status is 0 when every key is \
                     held, 1 when every key is free, 2 otherwise. Keys given twice count once; \
                     one key is the same as the KEY argument, which is not used with -k."
    )]
    pub(crate) keys: Vec<OsString>,

    #[arg(
        value_name = "KEY",
        required_unless_present = "keys",
        conflicts_with = "keys",
        help = "The lock's name; without -k only"
    )]
    pub(crate) key: Option<OsString>,

    // Last: its heading would hold the options after it.
    #[command(flatten)]
    pub(crate) masters: MastersCli,
}

/// `redlock fence init|repair`.
#[derive(Debug, Subcommand)]
pub(crate) enum FenceCli {
    #[command(
        about = help::FENCE_INIT_ABOUT,
        long_about = help::FENCE_INIT_LONG_ABOUT,
        after_long_help = help::FENCE_AFTER_LONG_HELP,
        args_override_self = true
    )]
    Init {
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            help = "The counter to start from: the first token is N+1"
        )]
        start: u64,
        #[command(flatten)]
        common: FenceCommonCli,
    },
    #[command(
        about = help::FENCE_REPAIR_ABOUT,
        long_about = help::FENCE_REPAIR_LONG_ABOUT,
        after_long_help = help::FENCE_AFTER_LONG_HELP,
        args_override_self = true
    )]
    Repair {
        #[command(flatten)]
        common: FenceCommonCli,
    },
}

/// What both fence commands take.
#[derive(Debug, Args)]
pub(crate) struct FenceCommonCli {
    #[arg(
        long,
        value_name = "NAME",
        value_parser = domain_value,
        help = "The fence domain (default: default)"
    )]
    pub(crate) fence_domain: Option<String>,

    #[arg(
        short,
        long,
        conflicts_with = "json",
        help = "Print nothing on stdout: the exit status tells"
    )]
    pub(crate) quiet: bool,

    #[arg(
        long,
        help = "Print a JSON document instead of lines (the README gives the schema)"
    )]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) masters: MastersCli,
}

/// `redlock completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsCli {
    #[arg(value_name = "SHELL", help = "The shell to complete for")]
    pub(crate) shell: Shell,
}

/// `redlock man [COMMAND...]`, `redlock man --dir DIR`.
#[derive(Debug, Args)]
pub(crate) struct ManCli {
    #[arg(
        long,
        value_name = "DIR",
        value_hint = ValueHint::DirPath,
        conflicts_with = "command",
        help = "Write every page into DIR instead (redlock.1, redlock-run.1, ...)"
    )]
    pub(crate) dir: Option<PathBuf>,

    #[arg(
        value_name = "COMMAND",
        help = "The command whose page to print (run, status, fence, fence init, ...)"
    )]
    pub(crate) command: Vec<String>,
}

/// A DURATION option's value.
fn duration_value(text: &str) -> Result<Duration, String> {
    duration::parse(text)
}

/// `--ttl`'s value: a DURATION of at least [`MIN_TTL`].
fn ttl_value(text: &str) -> Result<Duration, String> {
    let ttl = duration::parse(text)?;
    if ttl < MIN_TTL {
        return Err(format!(
            "{} is too short (at least {})",
            duration::show(ttl),
            duration::show(MIN_TTL)
        ));
    }
    Ok(ttl)
}

/// `--max-hold`'s value: a DURATION above zero.
fn max_hold_value(text: &str) -> Result<Duration, String> {
    match duration::parse(text)? {
        Duration::ZERO => Err("0 would stop the command before it starts".into()),
        limit => Ok(limit),
    }
}

/// `--replica-ack`'s value: `N` replicas (at least 1), then optionally a
/// comma and the TIMEOUT (above zero; `None`: half the node timeout).
fn replica_ack_value(text: &str) -> Result<(u32, Option<Duration>), String> {
    let (count, timeout) = match text.split_once(',') {
        Some((count, timeout)) => (count, Some(timeout)),
        None => (text, None),
    };
    let replicas = match count.trim().parse::<u32>() {
        Ok(n) if n > 0 => n,
        _ => {
            return Err(format!(
                "{count:?} is not a number of replicas from 1 (N[,TIMEOUT], such as 1 or 1,50ms)"
            ))
        }
    };
    let timeout = match timeout.map(|t| duration::parse(t.trim())).transpose()? {
        Some(Duration::ZERO) => {
            return Err("a TIMEOUT of 0 would never let a replica confirm".into())
        }
        timeout => timeout,
    };
    Ok((replicas, timeout))
}

/// A `--fence-domain` NAME, which must not be empty.
fn domain_value(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("the NAME is empty".into());
    }
    Ok(name.to_string())
}
