//! The command line, parsed by hand: `redlock run [OPTIONS] KEY [--] COMMAND
//! [ARGS...]` or `... KEY -c COMMAND_LINE`, as flock(1) takes them;
//! `redlock status [OPTIONS] KEY`; and `redlock fence init [--start N]` and
//! `redlock fence repair`, the operator's steps for a fence domain.
//!
//! Options come before the key; everything after it is the command's.
//! Long options take their value as `--wait 5s` or `--wait=5s`, short ones
//! as `-w 5s` or `-w5s`; flags cluster (`-nq`). Nothing here reads the
//! environment: `masters` does, for the masters and credentials.

use crate::duration;
use crate::exit;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

/// The lock's default TTL: renewed every 20 s while the command runs, and
/// what a killed `redlock` leaves behind at most.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The default time between SIGTERM and SIGKILL when the lock is lost
/// (always cut short to end before the lock's validity).
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// The default time each master has to answer in one round: four times the
/// library's, since a command-line tool starts cold (a new connection and
/// handshake to every master) on hosts that may be busy, and loses nothing
/// by waiting a little longer for a slow master.
pub(crate) const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// The shortest TTL accepted: the supervision needs some room.
const MIN_TTL: Duration = Duration::from_millis(100);

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invocation {
    Run(Box<RunArgs>),
    Status(Box<StatusArgs>),
    Fence(Box<FenceArgs>),
    Help,
    Version,
}

/// `redlock run`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RunArgs {
    pub(crate) key: OsString,
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
}

/// `redlock status`'s arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StatusArgs {
    pub(crate) key: OsString,
    pub(crate) masters: MasterArgs,
    pub(crate) node_timeout: Duration,
    /// Say nothing: the exit status alone tells.
    pub(crate) quiet: bool,
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
}

/// What `redlock fence` does to the domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceAction {
    /// `init [--start N]`: `Redlock::fence_init(start)`.
    Init { start: u64 },
    /// `repair`: `Redlock::fence_repair()`.
    Repair,
}

/// Where the voters and credentials come from (with the environment: see
/// `masters`).
#[derive(Default, PartialEq, Eq)]
pub(crate) struct MasterArgs {
    /// `--nodes`: URLs and `cluster(...)` groups separated by commas or
    /// white space.
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

/// A command line that cannot be used, with why (exit status 64).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UsageError(pub(crate) String);

impl UsageError {
    pub(crate) const EXIT: u8 = exit::USAGE;
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, UsageError> {
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        return Err(usage(
            "a command is missing: redlock run [OPTIONS] KEY COMMAND [ARGS...], redlock status \
             KEY, or redlock fence init|repair",
        ));
    };
    match first.to_str() {
        Some("run") => parse_run(args),
        Some("status") => parse_status(args),
        Some("fence") => parse_fence(args),
        Some("-h" | "--help" | "help") => Ok(Invocation::Help),
        Some("-V" | "--version") => Ok(Invocation::Version),
        _ => Err(usage(format!(
            "unknown command {}: the commands are `run`, `status` and `fence`",
            quoted(&first)
        ))),
    }
}

/// The value of option `name`: attached (`--name=value`, `-xvalue`) or the
/// next argument, as UTF-8.
fn option_value(
    name: &str,
    attached: &mut Option<OsString>,
    args: &mut impl Iterator<Item = OsString>,
    what: &str,
) -> Result<String, UsageError> {
    let value = match attached.take() {
        Some(value) => value,
        None => args
            .next()
            .ok_or_else(|| usage(format!("{name} needs {what}")))?,
    };
    value
        .into_string()
        .map_err(|v| usage(format!("{name}: {} is not UTF-8", quoted(&v))))
}

const DURATION: &str = "a DURATION (such as 500ms, 5s, 2m)";

fn duration_of(name: &str, text: String) -> Result<Duration, UsageError> {
    duration::parse(&text).map_err(|e| usage(format!("{name}: {e}")))
}

/// The options every command takes (the masters, their credentials, the
/// node timeout): `Ok(true)` if `name` is one, its value taken by `value`.
fn common_option(
    name: &str,
    masters: &mut MasterArgs,
    node_timeout: &mut Duration,
    mut value: impl FnMut(&str) -> Result<String, UsageError>,
) -> Result<bool, UsageError> {
    match name {
        "--node-timeout" => *node_timeout = duration_of(name, value(DURATION)?)?,
        "--nodes" => masters.nodes = Some(value("a list of URLs")?),
        "--cluster" => masters.clusters.push(value("a list of URLs")?),
        "--nodes-file" => masters.nodes_file = Some(value("a FILE")?.into()),
        "--user" => masters.user = Some(value("a NAME")?),
        "--password-file" => masters.password_file = Some(value("a FILE")?.into()),
        "--tls-ca-file" => masters.tls_ca_file = Some(value("a FILE")?.into()),
        "--tls-cert-file" => masters.tls_cert_file = Some(value("a FILE")?.into()),
        "--tls-key-file" => masters.tls_key_file = Some(value("a FILE")?.into()),
        _ => return Ok(false),
    }
    Ok(true)
}

/// What `parse_options` gathered for a command that runs no COMMAND
/// (`status`, `fence`): the common options, `-q`, and the operands.
struct Gathered {
    masters: MasterArgs,
    node_timeout: Duration,
    quiet: bool,
    /// The arguments that are no option (and any after `--`); the first
    /// ends the options.
    operands: Vec<OsString>,
}

/// Reads the value of the option at hand; its argument names the value
/// for a message ("a FILE").
type Value<'a> = &'a mut dyn FnMut(&str) -> Result<String, UsageError>;

/// How reading the options ends early: `-h` or `-V` (which win wherever
/// they stand), or a usage error.
type Early = Result<Invocation, UsageError>;

/// Reads `[OPTIONS] [OPERANDS...]` for `command`: the common options, `-q`,
/// `-h`, `-V`, and those `own` takes (it returns `Ok(true)` for an option
/// it knows, its value read by the `Value` it is given). Options come
/// before the operands; at most `max_operands` of them.
fn parse_options(
    mut args: impl Iterator<Item = OsString>,
    command: &str,
    max_operands: usize,
    mut own: impl FnMut(&str, Value<'_>) -> Result<bool, UsageError>,
) -> Result<Gathered, Early> {
    let mut gathered = Gathered {
        masters: MasterArgs::default(),
        node_timeout: DEFAULT_NODE_TIMEOUT,
        quiet: false,
        operands: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let option = match Opt::parse(&arg).map_err(Err)? {
            Some(option) if gathered.operands.is_empty() => option,
            _ if gathered.operands.len() < max_operands => {
                gathered.operands.push(arg);
                continue;
            }
            _ => return Err(Err(usage(too_many(command, &arg)))),
        };
        if option.name == "--" {
            gathered.operands.extend(args.by_ref().take(max_operands));
            if let Some(extra) = args.next() {
                return Err(Err(usage(too_many(command, &extra))));
            }
            break;
        }
        for (name, mut attached) in option.expand() {
            let mut value = |what: &str| option_value(&name, &mut attached, &mut args, what);
            let (masters, timeout) = (&mut gathered.masters, &mut gathered.node_timeout);
            let known = common_option(&name, masters, timeout, &mut value).map_err(Err)?
                || own(&name, &mut value).map_err(Err)?;
            if !known {
                match name.as_str() {
                    "-h" | "--help" => return Err(Ok(Invocation::Help)),
                    "-V" | "--version" => return Err(Ok(Invocation::Version)),
                    "-q" | "--quiet" => gathered.quiet = true,
                    _ => return Err(Err(usage(format!("unknown option {name} for {command}")))),
                }
            }
            if attached.is_some() {
                return Err(Err(usage(format!("{name} takes no value"))));
            }
        }
    }
    Ok(gathered)
}

/// The message for an argument `command` has no room for.
fn too_many(command: &str, arg: &OsStr) -> String {
    match command {
        "status" => format!("{} follows the KEY", quoted(arg)),
        _ => format!("{}: {command} takes options only", quoted(arg)),
    }
}

/// `redlock status [OPTIONS] KEY`.
fn parse_status(args: impl Iterator<Item = OsString>) -> Result<Invocation, UsageError> {
    let (mut fence, mut domain) = (false, None);
    let own = |name: &str, value: Value<'_>| {
        match name {
            "--fence" => fence = true,
            "--fence-domain" => domain = Some(domain_name(value("a NAME")?)?),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let gathered = match parse_options(args, "status", 1, own) {
        Ok(gathered) => gathered,
        Err(early) => return early,
    };
    if domain.is_some() && !fence {
        return Err(usage("--fence-domain goes with --fence"));
    }
    let key = gathered
        .operands
        .into_iter()
        .next()
        .ok_or_else(|| usage("the KEY is missing: redlock status [OPTIONS] KEY"))?;
    if key.is_empty() {
        return Err(usage("the KEY is empty"));
    }
    Ok(Invocation::Status(Box::new(StatusArgs {
        key,
        masters: gathered.masters,
        node_timeout: gathered.node_timeout,
        quiet: gathered.quiet,
        fence: fence.then_some(domain),
    })))
}

/// `redlock fence init [--start N] [OPTIONS]` or `redlock fence repair
/// [OPTIONS]`.
fn parse_fence(mut args: impl Iterator<Item = OsString>) -> Result<Invocation, UsageError> {
    const FORMS: &str =
        "redlock fence init [--start N] [OPTIONS], or redlock fence repair [OPTIONS]";
    let Some(first) = args.next() else {
        return Err(usage(format!("init or repair is missing: {FORMS}")));
    };
    let (mut action, command) = match first.to_str() {
        Some("init") => (FenceAction::Init { start: 0 }, "fence init"),
        Some("repair") => (FenceAction::Repair, "fence repair"),
        Some("-h" | "--help") => return Ok(Invocation::Help),
        _ => {
            return Err(usage(format!(
                "unknown fence action {}: {FORMS}",
                quoted(&first)
            )))
        }
    };
    let mut domain = None;
    let own = |name: &str, value: Value<'_>| -> Result<bool, UsageError> {
        match (name, &mut action) {
            ("--fence-domain", _) => domain = Some(domain_name(value("a NAME")?)?),
            ("--start", FenceAction::Init { start }) => {
                let text = value("a number N")?;
                *start = text
                    .parse()
                    .map_err(|_| usage(format!("--start: {text:?} is not a number from 0")))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let gathered = match parse_options(args, command, 0, own) {
        Ok(gathered) => gathered,
        Err(early) => return early,
    };
    Ok(Invocation::Fence(Box::new(FenceArgs {
        action,
        domain,
        masters: gathered.masters,
        node_timeout: gathered.node_timeout,
        quiet: gathered.quiet,
    })))
}

/// A `--fence-domain` NAME, which must not be empty.
fn domain_name(name: String) -> Result<String, UsageError> {
    if name.is_empty() {
        return Err(usage("--fence-domain: the NAME is empty"));
    }
    Ok(name)
}

fn parse_run(mut args: impl Iterator<Item = OsString>) -> Result<Invocation, UsageError> {
    let mut masters = MasterArgs::default();
    let mut wait = Wait::NoLimit;
    let mut ttl = DEFAULT_TTL;
    let mut max_hold = None;
    let mut keep = false;
    let mut fence = false;
    let mut fence_domain = None;
    let mut grace = DEFAULT_GRACE;
    let mut node_timeout = DEFAULT_NODE_TIMEOUT;
    let mut replica_ack = None;
    let mut conflict_exit = exit::HELD_ELSEWHERE;
    let mut quiet = false;
    let mut verbose = false;

    let key = loop {
        let Some(arg) = args.next() else {
            return Err(usage("the KEY and the COMMAND are missing"));
        };
        let Some(option) = Opt::parse(&arg)? else {
            break arg; // the first argument that is no option: the key
        };
        if option.name == "--" {
            match args.next() {
                Some(key) => break key,
                None => return Err(usage("the KEY and the COMMAND are missing")),
            }
        }
        for (name, mut attached) in option.expand() {
            let value = |what: &str| option_value(&name, &mut attached, &mut args, what);
            if common_option(&name, &mut masters, &mut node_timeout, value)? {
                continue;
            }
            let mut value = |what: &str| option_value(&name, &mut attached, &mut args, what);
            let duration = |text: String| duration_of(&name, text);
            match name.as_str() {
                "-h" | "--help" => return Ok(Invocation::Help),
                "-V" | "--version" => return Ok(Invocation::Version),
                "-n" | "--nonblock" => wait = Wait::Once,
                "-q" | "--quiet" => quiet = true,
                "-v" | "--verbose" => verbose = true,
                "-w" | "--wait" => {
                    wait = match duration(value(DURATION)?)? {
                        Duration::ZERO => Wait::Once,
                        limit => Wait::UpTo(limit),
                    }
                }
                "--ttl" => ttl = duration(value(DURATION)?)?,
                "--max-hold" => max_hold = Some(duration(value(DURATION)?)?),
                "--keep" => keep = true,
                "--fence" => fence = true,
                "--fence-domain" => fence_domain = Some(domain_name(value("a NAME")?)?),
                "--grace" => grace = duration(value(DURATION)?)?,
                "--replica-ack" => replica_ack = Some(replica_ack_of(&value("N[,TIMEOUT]")?)?),
                "-E" | "--conflict-exit-code" => {
                    let text = value("a number from 0 to 255")?;
                    conflict_exit = text.parse().map_err(|_| {
                        usage(format!("{name}: {text:?} is not a number from 0 to 255"))
                    })?;
                }
                "-c" | "--command" => {
                    return Err(usage(format!(
                        "{name} comes after the KEY: redlock run [OPTIONS] KEY -c COMMAND_LINE"
                    )))
                }
                _ => return Err(usage(format!("unknown option {name}"))),
            }
            if attached.is_some() {
                return Err(usage(format!("{name} takes no value")));
            }
        }
    };
    if key.is_empty() {
        return Err(usage("the KEY is empty"));
    }
    let command = parse_command(args)?;
    if ttl < MIN_TTL {
        return Err(usage(format!(
            "--ttl {} is too short (at least {})",
            duration::show(ttl),
            duration::show(MIN_TTL)
        )));
    }
    if fence_domain.is_some() && !fence {
        return Err(usage("--fence-domain goes with --fence"));
    }
    if max_hold == Some(Duration::ZERO) {
        return Err(usage(
            "--max-hold 0 would stop the command before it starts",
        ));
    }
    Ok(Invocation::Run(Box::new(RunArgs {
        key,
        command,
        masters,
        wait,
        ttl,
        max_hold,
        keep,
        fence,
        fence_domain,
        grace,
        node_timeout,
        replica_ack,
        conflict_exit,
        quiet,
        verbose,
    })))
}

/// `--replica-ack`'s value: `N` replicas (at least 1), then optionally a
/// comma and the TIMEOUT (above zero).
fn replica_ack_of(text: &str) -> Result<(u32, Option<Duration>), UsageError> {
    let (count, timeout) = match text.split_once(',') {
        Some((count, timeout)) => (count, Some(timeout)),
        None => (text, None),
    };
    let replicas = match count.trim().parse::<u32>() {
        Ok(n) if n > 0 => n,
        _ => {
            return Err(usage(format!(
                "--replica-ack: {count:?} is not a number of replicas from 1 (N[,TIMEOUT], such \
                 as 1 or 1,50ms)"
            )))
        }
    };
    let timeout = match timeout {
        None => None,
        Some(text) => match duration_of("--replica-ack", text.trim().to_string())? {
            Duration::ZERO => {
                return Err(usage(
                    "--replica-ack: a TIMEOUT of 0 would never let a replica confirm",
                ))
            }
            timeout => Some(timeout),
        },
    };
    Ok((replicas, timeout))
}

/// What follows the key: `-c COMMAND_LINE`, or `[--] PROGRAM [ARGS...]`.
fn parse_command(mut args: impl Iterator<Item = OsString>) -> Result<ChildCommand, UsageError> {
    let Some(first) = args.next() else {
        return Err(usage("the COMMAND is missing (after the KEY)"));
    };
    let shell_line = match first.to_str() {
        Some("-c" | "--command") => Some(
            args.next()
                .ok_or_else(|| usage("-c needs a COMMAND_LINE"))?,
        ),
        Some(text) => text.strip_prefix("--command=").map(OsString::from),
        None => None,
    };
    if let Some(line) = shell_line {
        if let Some(extra) = args.next() {
            return Err(usage(format!(
                "-c takes one COMMAND_LINE; {} follows it (quote the whole line)",
                quoted(&extra)
            )));
        }
        return Ok(ChildCommand::Shell(line));
    }
    let program = match first.to_str() {
        Some("--") => args
            .next()
            .ok_or_else(|| usage("the COMMAND is missing after --"))?,
        _ => first,
    };
    if program.is_empty() {
        return Err(usage("the COMMAND is empty"));
    }
    Ok(ChildCommand::Exec {
        program,
        args: args.collect(),
    })
}

/// One argument that is an option: `--name[=value]`, or short options
/// `-xyz` (`--` alone, the end of the options, is a long option without a
/// name).
struct Opt {
    /// `--name`; or the short options' letters, after the dash.
    name: String,
    /// `--name=value`'s value.
    attached: Option<OsString>,
    short: bool,
}

impl Opt {
    /// `None` if `arg` is no option (`-` alone is none either).
    fn parse(arg: &OsStr) -> Result<Option<Opt>, UsageError> {
        let bytes = arg.as_bytes();
        if bytes.len() < 2 || bytes[0] != b'-' {
            return Ok(None);
        }
        let (name, attached, short) = match bytes.strip_prefix(b"--") {
            Some(long) => match long.iter().position(|&b| b == b'=') {
                Some(eq) => (&bytes[..eq + 2], Some(&long[eq + 1..]), false),
                None => (bytes, None, false),
            },
            None => (&bytes[1..], None, true),
        };
        let Some(name) = std::str::from_utf8(name).ok().filter(|n| n.is_ascii()) else {
            return Err(usage(format!("unknown option {}", quoted(arg))));
        };
        Ok(Some(Opt {
            name: name.to_string(),
            attached: attached.map(|value| OsStr::from_bytes(value).to_os_string()),
            short,
        }))
    }

    /// Each option this argument holds, with any value attached to it:
    /// `-nqw5s` is `-n`, `-q`, and `-w` with `5s`.
    fn expand(self) -> Vec<(String, Option<OsString>)> {
        if !self.short {
            return vec![(self.name, self.attached)];
        }
        let mut out = Vec::new();
        for (i, letter) in self.name.char_indices() {
            let name = format!("-{letter}");
            let rest = &self.name[i + 1..];
            if SHORT_WITH_VALUE.contains(&name.as_str()) && !rest.is_empty() {
                out.push((name, Some(rest.into())));
                break;
            }
            out.push((name, None));
        }
        out
    }
}

/// The short options that take a value.
const SHORT_WITH_VALUE: [&str; 3] = ["-w", "-E", "-c"];

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// An argument for a message, quoted, never lossy beyond replacement
/// characters.
fn quoted(arg: &OsStr) -> String {
    format!("{:?}", arg.to_string_lossy())
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
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Invocation, UsageError> {
        parse(line.split(' ').map(OsString::from))
    }

    fn run(line: &str) -> RunArgs {
        match parse_line(line) {
            Ok(Invocation::Run(args)) => *args,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn exec(program: &str, args: &[&str]) -> ChildCommand {
        ChildCommand::Exec {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
        }
    }

    #[test]
    fn replica_ack_takes_a_count_and_an_optional_timeout() {
        assert_eq!(run("run k true").replica_ack, None);
        assert_eq!(
            run("run --replica-ack 1 k true").replica_ack,
            Some((1, None))
        );
        assert_eq!(
            run("run --replica-ack=2,50ms k true").replica_ack,
            Some((2, Some(Duration::from_millis(50))))
        );
        for bad in ["0", "x", "-1", "1,0", "1,soon", ",1s", ""] {
            let line = format!("run --replica-ack={bad} k true");
            let Err(UsageError(message)) = parse_line(&line) else {
                panic!("{line}: accepted")
            };
            assert!(message.starts_with("--replica-ack"), "{line}: {message}");
        }
        let Err(UsageError(message)) = parse_line("run --replica-ack") else {
            panic!("accepted without a value")
        };
        assert!(message.contains("N[,TIMEOUT]"), "{message}");
    }

    #[test]
    fn parses_the_forms_the_issue_writes_out() {
        let a = run("run --nodes redis://h1:6379,redis://h2:6379,redis://h3:6379 KEY -- cmd args");
        assert_eq!(a.key, "KEY");
        assert_eq!(a.command, exec("cmd", &["args"]));
        assert_eq!(
            a.masters.nodes.as_deref(),
            Some("redis://h1:6379,redis://h2:6379,redis://h3:6379")
        );
        assert_eq!(
            (a.wait, a.ttl, a.max_hold, a.keep),
            (Wait::NoLimit, DEFAULT_TTL, None, false)
        );
        assert_eq!(run("run --wait 0 KEY -- cmd").wait, Wait::Once);
        assert_eq!(
            run("run --wait 5s KEY -- cmd").wait,
            Wait::UpTo(Duration::from_secs(5))
        );
    }

    #[test]
    fn takes_values_attached_or_separate_and_clustered_flags() {
        let a = run("run -nqv -E9 --ttl=2m --max-hold 1h --grace=500ms K cmd");
        assert_eq!(a.wait, Wait::Once);
        assert!(a.quiet && a.verbose);
        assert_eq!(a.conflict_exit, 9);
        assert_eq!(a.ttl, Duration::from_secs(120));
        assert_eq!(a.max_hold, Some(Duration::from_secs(3600)));
        assert_eq!(a.grace, Duration::from_millis(500));
        assert!(run("run --keep --ttl 55m -nq K cmd").keep);
        assert_eq!(
            run("run -w2m K cmd").wait,
            Wait::UpTo(Duration::from_secs(120))
        );
        assert_eq!(run("run -qw 0 K cmd").wait, Wait::Once);
    }

    #[test]
    fn everything_after_the_key_belongs_to_the_command() {
        assert_eq!(
            run("run K ls -l --all").command,
            exec("ls", &["-l", "--all"])
        );
        assert_eq!(run("run K -- -weird").command, exec("-weird", &[]));
        assert_eq!(run("run K -- a -- b").command, exec("a", &["--", "b"]));
        assert_eq!(run("run -- -K cmd").key, "-K");
        assert_eq!(
            parse(["run", "K", "-c", "echo a && echo b"].map(OsString::from)).map(|i| match i {
                Invocation::Run(a) => a.command,
                _ => unreachable!(),
            }),
            Ok(ChildCommand::Shell("echo a && echo b".into()))
        );
        assert_eq!(
            run("run K --command=true").command,
            ChildCommand::Shell("true".into())
        );
    }

    #[test]
    fn refuses_what_it_cannot_use_with_a_reason() {
        for line in [
            "",
            "lock K cmd",
            "run",
            "run K",
            "run K --",
            "run K -c",
            "run K -c a b",
            "run --bogus K cmd",
            "run -x K cmd",
            "run --wait K cmd",
            "run --wait 5 K",
            "run --wait 5x K cmd",
            "run -E 256 K cmd",
            "run -E -1 K cmd",
            "run --quiet=yes K cmd",
            "run --keep=yes K cmd",
            "run --ttl 10ms K cmd",
            "run --max-hold 0 K cmd",
            "run -c cmd K",
        ] {
            match parse_line(line) {
                Err(UsageError(message)) => assert!(!message.is_empty()),
                Ok(other) => panic!("{line:?} should be refused, parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn debug_output_never_shows_the_nodes_list() {
        let a = run("run --nodes redis://:hunter2@h:1 --cluster redis://:hunter2@c:1 K cmd");
        assert!(!format!("{a:?}").contains("hunter2"));
    }

    #[test]
    fn every_command_takes_clusters_one_per_option() {
        let a = run(
            "run --cluster redis://a:1,redis://b:1 --nodes redis://m:1 --cluster=redis://c:1 K cmd",
        );
        assert_eq!(
            a.masters.clusters,
            ["redis://a:1,redis://b:1", "redis://c:1"]
        );
        assert_eq!(a.masters.nodes.as_deref(), Some("redis://m:1"));
        let Ok(Invocation::Status(s)) = parse_line("status --cluster redis://a:1 K") else {
            panic!("not a status");
        };
        assert_eq!(s.masters.clusters, ["redis://a:1"]);
        let Ok(Invocation::Fence(f)) = parse_line("fence repair --cluster redis://a:1") else {
            panic!("not a fence repair");
        };
        assert_eq!(f.masters.clusters, ["redis://a:1"]);
        assert!(parse_line("status --cluster").is_err());
    }

    #[test]
    fn status_takes_the_masters_options_and_one_key() {
        let Ok(Invocation::Status(a)) =
            parse_line("status --nodes redis://h:1 --node-timeout 1s -q deploy:web")
        else {
            panic!("not a status");
        };
        assert_eq!(a.key, "deploy:web");
        assert_eq!(a.masters.nodes.as_deref(), Some("redis://h:1"));
        assert_eq!(a.node_timeout, Duration::from_secs(1));
        assert!(a.quiet);
        let Ok(Invocation::Status(a)) = parse_line("status -- -K") else {
            panic!("not a status");
        };
        assert_eq!(a.key, "-K");
        assert!(!a.quiet);
        assert_eq!(a.fence, None);
        let Ok(Invocation::Status(a)) = parse_line("status --fence K") else {
            panic!("not a status");
        };
        assert_eq!(a.fence, Some(None));
        let Ok(Invocation::Status(a)) = parse_line("status --fence --fence-domain d K") else {
            panic!("not a status");
        };
        assert_eq!(a.fence, Some(Some("d".to_string())));
        for line in [
            "status",
            "status K extra",
            "status --ttl 5s K",
            "status --nodes",
            "status --fence-domain d K",
        ] {
            assert!(parse_line(line).is_err(), "{line:?} should be refused");
        }
    }

    #[test]
    fn fence_takes_init_or_repair_and_the_masters_options() {
        let Ok(Invocation::Fence(a)) = parse_line(
            "fence init --start 41 --nodes redis://h:1 --fence-domain orders -q --node-timeout 1s",
        ) else {
            panic!("not a fence init");
        };
        assert_eq!(a.action, FenceAction::Init { start: 41 });
        assert_eq!(a.domain.as_deref(), Some("orders"));
        assert_eq!(a.masters.nodes.as_deref(), Some("redis://h:1"));
        assert_eq!(a.node_timeout, Duration::from_secs(1));
        assert!(a.quiet);
        let Ok(Invocation::Fence(a)) = parse_line("fence repair") else {
            panic!("not a fence repair");
        };
        assert_eq!(
            (a.action, a.domain, a.quiet),
            (FenceAction::Repair, None, false)
        );
        assert_eq!(
            parse_line("fence init").map(|i| match i {
                Invocation::Fence(a) => a.action,
                _ => unreachable!(),
            }),
            Ok(FenceAction::Init { start: 0 })
        );
        assert_eq!(parse_line("fence repair -h"), Ok(Invocation::Help));
        for line in [
            "fence",
            "fence seed",
            "fence init extra",
            "fence init --start",
            "fence init --start -1",
            "fence init --start ten",
            "fence repair --start 5",
            "fence repair --fence-domain=",
            "fence init --ttl 5s",
            "run --fence-domain d K cmd",
        ] {
            assert!(parse_line(line).is_err(), "{line:?} should be refused");
        }
        assert_eq!(
            run("run --fence --fence-domain d K cmd")
                .fence_domain
                .as_deref(),
            Some("d")
        );
    }

    #[test]
    fn help_and_version_win_wherever_they_stand() {
        assert_eq!(parse_line("--help"), Ok(Invocation::Help));
        assert_eq!(parse_line("help"), Ok(Invocation::Help));
        assert_eq!(parse_line("run --nodes x -h"), Ok(Invocation::Help));
        assert_eq!(parse_line("--version"), Ok(Invocation::Version));
        assert_eq!(parse_line("run -V"), Ok(Invocation::Version));
    }
}
