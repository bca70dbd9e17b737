//! The manual's prose: each command's description, and the sections after
//! the options (environment, exit status, guarantees, examples). `cli`
//! hands them to clap, which prints them in `--help` (the short `-h`
//! leaves them out); `generate` turns the same text into the manual pages.
//!
//! The form the text keeps, for both: a description is paragraphs
//! separated by blank lines (clap and man fill them to the width at hand);
//! an after-help text is sections, each a heading on a line of its own
//! ending with `:`, then lines indented by two spaces (paragraphs) or by
//! four and more (kept as they are: tables, commands). Lines stay within
//! 80 columns, so a terminal of 80 shows them as written.

// The sections that more than one text holds, as macros so that `concat!`
// joins them at compile time.

/// The variables the tool reads.
macro_rules! environment {
    () => {
        "Environment:
    REDLOCK_NODES          The masters, when none of --nodes, --cluster and
                           --nodes-file is given: URLs, cluster(URL,...)
                           and sentinel(URL,...;NAME) entries separated by
                           commas or spaces.
    REDLOCK_PASSWORD       The masters' password.
    REDLOCK_PASSWORD_FILE  A file holding it, when REDLOCK_PASSWORD is unset.
    REDLOCK_USER           The ACL user the password belongs to.
    REDLOCK_SENTINEL_PASSWORD
                           The sentinels' password, for sentinel(...)
                           entries whose URLs have none.
    No help or error shows their values. redlock run's COMMAND gets
    REDLOCK_KEY, REDLOCK_VALID_UNTIL_MS and, with --fence,
    REDLOCK_FENCE_TOKEN (redlock run --help).
"
    };
}

/// `redlock run`'s statuses.
macro_rules! exit_status {
    () => {
        "Exit status:
    COMMAND's      COMMAND ran and ended holding the lock throughout. If a
                   signal killed it, redlock ends by the same signal (the
                   shell shows 128 + its number); so it does when a signal
                   ended its wait for the lock.
    1              The lock is held elsewhere (after the wait, if any); -E N
                   makes this N, and -q makes it 0.
    64             The command line is wrong.
    69             No quorum of masters answered: down, unreachable, or too
                   slow for the TTL.
    71             The system refused a process, a thread or a pipe.
    75             The lock was lost while COMMAND ran, which was stopped; or
                   COMMAND ended and the release found the lock gone.
    77             A master refused the credentials or a command (ACL).
    78             The configuration is wrong: no masters, a bad URL, a file
                   that cannot be read; with --fence, a fence domain that
                   is not initialised or needs a repair (masters left
                   out, or in different epochs), or masters that are not
                   the ones the domain was initialised on.
    124            COMMAND ran for --max-hold and was stopped.
    126, 127       COMMAND could not be executed, or was not found.
"
    };
}

/// What redlock run guarantees, and what it cannot.
macro_rules! guarantees {
    () => {
        "Guarantees and limits:
  Under the Redlock model (independent masters; clocks that run at about
  the same rate; a master that loses its data stays down for a TTL before
  it rejoins), COMMAND starts only once a quorum of masters granted the
  lock, and is dead before the lock's validity could end, so two holders
  of one KEY never run at once. The exit status is COMMAND's only when the
  lock held from its start to its end. A cluster is one master to the
  model: a failover of the shard that holds KEY can lose the key, if the
  replica had not received it yet, as a master restarted empty would.

  A key deleted by hand, or a master restarted empty within a TTL, is
  outside that model: redlock notices at the next renewal (at most two
  thirds of the TTL later) and stops COMMAND, but another host may have
  started meanwhile. So may one while COMMAND is in uninterruptible sleep
  (it does not die of SIGKILL; redlock says so when COMMAND is still there
  2s after it). Only a fencing token checked by the protected resource
  covers these cases.

  When redlock is killed with SIGKILL, the lock stays until its TTL ends.
  On Linux COMMAND dies with redlock, but processes COMMAND started do not.
  Processes that leave COMMAND's process group run on without the lock.
  redlock stopped alone (SIGSTOP) while COMMAND runs on cannot renew nor
  stop it: continued past the validity, it kills COMMAND at once, but
  COMMAND ran without the lock meanwhile. Given the terminal, COMMAND
  takes it from the rest of redlock's pipeline: put a pager inside
  (redlock run KEY -c 'cmd | less'), not after redlock.

  A lock kept by --keep is not announced when it runs out: a run that
  waits for it gets it within a retry (about 0.3s) of its expiry.
"
    };
}

/// The examples of `redlock --help`.
macro_rules! examples {
    () => {
        "Examples:
    A nightly job that runs on one host, whichever gets the lock first:
        redlock run -q -n \\
            --nodes redis://r1:6379,redis://r2:6379,redis://r3:6379 \\
            nightly-report -- /usr/local/bin/report --yesterday

    The same in a crontab, with the masters and password in the
    environment and not on any command line:
        REDLOCK_NODES=redis://r1:6379,redis://r2:6379,redis://r3:6379
        REDLOCK_PASSWORD_FILE=/etc/redlock/password
        0 3 * * * redlock run -q -n nightly-report /usr/local/bin/report

    Two Redis Clusters and a standalone master as the three masters
    (quorum 2), a few nodes of each cluster named:
        export REDLOCK_NODES='cluster(redis://c1a:7000,redis://c1b:7000)
            cluster(redis://c2a:7000,redis://c2b:7000) redis://r1:6379'
        redlock run nightly-report -- ./report
    or, the same on the command line:
        redlock run --cluster redis://c1a:7000,redis://c1b:7000 \\
            --cluster redis://c2a:7000,redis://c2b:7000 \\
            --nodes redis://r1:6379 nightly-report -- ./report

    Deploy from one machine at a time, waiting at most 2 minutes for a turn:
        redlock run --wait 2m deploy:web -c 'git pull && make install'

    A migration bounded to an hour, with 30 s to clean up if stopped:
        redlock run --max-hold 1h --grace 30s db:migrate -- ./migrate.sh

    Who holds the deploy lock, and until when?
        redlock status deploy:web
        redlock status --json deploy:web    # for scripts

    An hourly job that cron starts on every host, run by one of them at
    most once an hour, however many hosts start it or how late:
        0 * * * * redlock run --keep --ttl 55m -n -q report:hourly ./report
    The TTL is the period less a margin: a key taken at 10:00:00.03 with
    --ttl 1h would still be there for a run that starts at 11:00:00.02, and
    that hour's run would be skipped on every host. The job must end within
    two thirds of the TTL (36 minutes here): one that ends later leaves the
    renewed key into the next hour, and that run is skipped. A job that may
    run longer names the key after its hour (% is \\% in a crontab), so that
    each hour has a key of its own (and an hour's run may then overlap the
    last hour's, if that one is still running):
        0 * * * * redlock run --keep --ttl 1h -n -q \\
            \"report:$(date -u +\\%Y\\%m\\%dT\\%H)\" ./report

    Fencing tokens: initialise the domain once, then every run's COMMAND
    gets a token above any earlier holder's, to pass to what it writes:
        redlock fence init
        redlock run --fence orders:sync \\
            -c './sync --token \"$REDLOCK_FENCE_TOKEN\"'
    After a master restarted or lost its data, bring it back in:
        redlock fence repair
"
    };
}

/// The tool in a line (`redlock -h`, the manual's NAME).
pub(crate) const ABOUT: &str = "Run a command while holding a lock shared by several hosts";

/// Every form of the command line, for the top-level usage line and the
/// manual's SYNOPSIS.
pub(crate) const USAGE: &str = "redlock run [OPTIONS] KEY [--] COMMAND [ARGS...]
       redlock run [OPTIONS] KEY -c COMMAND_LINE
       redlock run [OPTIONS] -k KEY [-k KEY...] -- COMMAND [ARGS...]
       redlock run [OPTIONS] -k KEY [-k KEY...] -c COMMAND_LINE
       redlock status [OPTIONS] KEY
       redlock status [OPTIONS] -k KEY [-k KEY...]
       redlock fence init [--start N] [OPTIONS]
       redlock fence repair [OPTIONS]
       redlock completions bash|zsh|fish|elvish|powershell
       redlock man [COMMAND...] | redlock man --dir DIR
       redlock --help | --version";

/// `redlock --help`'s description.
pub(crate) const LONG_ABOUT: &str = "\
Run a command while holding a lock shared by several hosts.

redlock run is flock(1) across hosts. It takes the lock KEY on a quorum of \
independent Redis or Valkey masters (the Redlock algorithm), runs COMMAND \
while it holds the lock, renews the lock for as long as COMMAND runs, \
releases it when COMMAND exits (or, with --keep, leaves it until its TTL \
runs out), and exits with COMMAND's status. A whole Redis or Valkey Cluster \
may stand for one master (--cluster, or cluster(...) in a list): in this \
manual a master is either, and each casts one vote.

redlock status looks at a lock without taking it; redlock fence init and \
redlock fence repair are the operator's steps for the fence domain that \
redlock run --fence takes its tokens from. Each command's options and \
details: redlock help COMMAND, or redlock COMMAND --help (-h for a \
summary); the manual pages: redlock man.";

/// `redlock --help` after the commands.
pub(crate) const AFTER_LONG_HELP: &str = concat!(
    environment!(),
    "\n",
    exit_status!(),
    "    redlock status exits 0 held, 1 free, 2 neither; 64, 69, 77 and 78 as
    above. redlock fence exits 0 done, 1 (init) already anchored; 64, 69,
    77 and 78 as above.
",
    "\n",
    guarantees!(),
    "\n",
    examples!(),
    "
See also:
    flock(1), timeout(1), sysexits.h(3head), redlock-run(1),
    redlock-status(1), redlock-fence(1),
    https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
"
);

/// `redlock run`'s summary.
pub(crate) const RUN_ABOUT: &str = "Run COMMAND while holding the lock KEY (flock(1) across hosts)";

/// `redlock run --help`'s description.
pub(crate) const RUN_LONG_ABOUT: &str = "\
Run COMMAND while holding the lock KEY (flock(1) across hosts).

redlock run takes the lock KEY on a quorum of the masters, runs COMMAND \
while it holds the lock, renews the lock for as long as COMMAND runs, \
releases it when COMMAND exits (or, with --keep, leaves it until its TTL \
runs out), and exits with COMMAND's status. Options come before the KEY \
or between it and COMMAND; everything from COMMAND on is COMMAND's.

With -k KEY, repeated (redlock run -k a -k b -- COMMAND), redlock holds \
several keys at once, as one lock: all of them or none on each master, in \
one round per attempt, renewed and released together. Nothing is held while \
it waits, so runs that name the same keys in any order cannot deadlock, and \
a release of any of them wakes the wait. A key given twice counts once; one \
key is the KEY argument's lock. With -k there is no KEY argument, and \
COMMAND goes after -- (or use -c). With --fence the set has one token, \
REDLOCK_FENCE_TOKEN, above every earlier holder's token of each of its keys \
(on --cluster masters the keys must then share a hash tag, {t}a and {t}b, or \
redlock says so and exits 78). On --cluster masters each key goes to its \
slot's node, and a cluster counts when every key is set there.

COMMAND runs without a shell (-c runs COMMAND_LINE with /bin/sh -c), with \
redlock's stdin, stdout and stderr, in a process group of its own. SIGINT, \
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGTSTP sent to redlock are \
sent on to that group. When redlock's stdin is a terminal it runs in the \
foreground of, COMMAND gets the terminal: it can read from it, and Ctrl-C \
and Ctrl-Z reach it directly. When COMMAND stops (Ctrl-Z, or a SIGTSTP sent \
on), redlock stops too, and renews nothing meanwhile. When continued (fg, \
bg), redlock looks at the lock first: if its validity ended during the \
stop, or too little is left to stop COMMAND in time, the stopped COMMAND is \
killed without running again (exit 75); otherwise it gets the terminal back \
and runs on. On Linux, COMMAND is killed if redlock dies.

COMMAND has ended when its process group is empty: as flock(1)'s lock is \
held by every process that inherited it, the lock is held and renewed \
while anything COMMAND leaves running in its group (job &) runs, and \
redlock exits with COMMAND's status once all of it has ended (-v says that \
it waits). When SIGINT, SIGTERM, SIGHUP or SIGQUIT came (which a shell's \
background jobs may ignore), what is left gets SIGTERM, then SIGKILL after \
--grace, instead. Processes that leave the group (setsid, daemons) are not \
waited for.

By default redlock waits for a lock held elsewhere as long as it takes, \
woken by the release (--wait and -n limit it). Masters that cannot be \
reached (no quorum) are retried while the wait lasts, then redlock exits \
69; without a limit, it exits 69 once they have been out of reach for 10s \
in a row, and a lock held elsewhere is waited for as long as it takes. A signal \
(SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) while redlock waits \
for the lock ends the wait; what an attempt in flight set is released, and \
redlock ends by that signal (COMMAND never runs).

When the lock cannot be kept while COMMAND runs (a renewal found its key \
gone or taken on the masters; renewals failed until little validity was \
left; --max-hold passed), redlock sends SIGTERM to COMMAND's group at once, \
then SIGKILL after --grace, and in any case before the lock's validity can \
end; it exits 75 (124 for --max-hold).

A DURATION is a number and a unit: 500ms, 5s, 1.5s, 2m, 1h. A number alone \
is seconds.";

/// `redlock run --help` after the options.
pub(crate) const RUN_AFTER_LONG_HELP: &str = concat!(
    "Command's environment:
    COMMAND's environment is redlock's, with:
    REDLOCK_KEY            The KEY (with several -k, the keys, sorted, one
                           per line).
    REDLOCK_VALID_UNTIL_MS When the lock's validity ends if it is not
                           renewed, in milliseconds since the Unix epoch (as
                           of COMMAND's start; redlock keeps renewing it).
    REDLOCK_FENCE_TOKEN    With --fence: the lock's fencing token.
    and without REDLOCK_PASSWORD, nor REDLOCK_NODES when a URL in it holds a
    password.

",
    exit_status!(),
    "\n",
    guarantees!(),
    "
Examples:
    A nightly job that runs on one host, whichever gets the lock first:
        redlock run -q -n nightly-report -- /usr/local/bin/report

    Deploy from one machine at a time, waiting at most 2 minutes for a turn:
        redlock run --wait 2m deploy:web -c 'git pull && make install'

    More, and the masters' variables: redlock --help.
"
);

/// `redlock status`'s summary.
pub(crate) const STATUS_ABOUT: &str =
    "Say whether the lock KEY is held, and for how long, master by master";

/// `redlock status --help`'s description.
pub(crate) const STATUS_LONG_ABOUT: &str = "\
Say whether the lock KEY is held, and for how long, master by master.

redlock status looks at the lock KEY without taking it: whether each \
master holds its key and for how long (one round of PTTL, each with a \
GETRANGE of the holder label; the lock's secret is never read; a \
cluster's line is named cluster(HOST:PORT,...) and tells of its master \
for KEY's slot), whether that makes the lock held (its key on a quorum of \
masters) or free (absent from a quorum), for how long a quorum will hold \
it at least, and who holds it, if its holder stored a label (redlock run \
--holder-label; the library's Builder::holder_label). With -q it prints nothing: the exit status \
tells; with --json it prints a JSON document (see the README for its \
schema).

With --fence (and --fence-domain NAME) it also says whether each master \
counts for the fence domain, and for one left out why (no anchor, \
restarted, rolled back, ...) and that redlock fence repair brings it back.

With -k KEY -k KEY ... it looks at several keys as one set (as redlock run \
-k holds them), in one round: a line for the set (held: every key on a \
quorum; free: every key absent from a quorum; neither), then each key as \
redlock status KEY shows it; the exit status is then 0 when every key is \
held, 1 when every key is free, 2 otherwise.";

/// `redlock status --help` after the options.
pub(crate) const STATUS_AFTER_LONG_HELP: &str = "\
Exit status:
    0   the lock is held (its key is on a quorum of masters)
    1   the lock is free (its key is absent from a quorum)
    2   neither: masters down, keys left on a minority, a lock being taken
        or expiring
    64, 69, 77, 78 as redlock run: the command line, masters out of reach,
        refused credentials, the configuration

Examples:
    Who holds the deploy lock, and until when?
        redlock status deploy:web
    prints, for instance:
        deploy:web: held on 3 of 3 masters (quorum 2) for at least 28.41s
          r1:6379  held, expires in 28.4s
          r2:6379  held, expires in 28.4s
          r3:6379  held, expires in 28.5s
    In a script: if redlock status -q deploy:web; then echo held; fi
";

/// `redlock fence`'s summary.
pub(crate) const FENCE_ABOUT: &str =
    "Initialise or repair the fence domain that run --fence takes tokens from";

/// `redlock fence --help`'s description.
pub(crate) const FENCE_LONG_ABOUT: &str = "\
Initialise or repair the fence domain that run --fence takes tokens from.

redlock fence init and redlock fence repair are the operator's two steps \
for the fence domain that redlock run --fence takes its tokens from (the \
library's Redlock::fence_init and fence_repair). They take the Masters \
options, --fence-domain NAME (default: default), -q and --json. Each \
prints a summary and a line per master; it exits 0 when every master took \
part, 69 when masters did not answer or too few kept their counter, 77 and \
78 as redlock run.";

/// `redlock fence --help` after the commands (and its two commands').
pub(crate) const FENCE_AFTER_LONG_HELP: &str = "\
Exit status:
    0   done: every master took part
    1   init: the domain is anchored already on some master; nothing written
    64, 69, 77, 78 as redlock run: the command line, masters out of reach or
        too few that kept their counter, refused credentials, the
        configuration

Examples:
    Fencing tokens: initialise the domain once, then every run's COMMAND
    gets a token above any earlier holder's, to pass to what it writes:
        redlock fence init
        redlock run --fence orders:sync \\
            -c './sync --token \"$REDLOCK_FENCE_TOKEN\"'
    After a master restarted or lost its data, bring it back in:
        redlock fence repair
";

/// `redlock fence init`'s summary.
pub(crate) const FENCE_INIT_ABOUT: &str =
    "Anchor a new fence domain on every master (once, before the first run --fence)";

/// `redlock fence init --help`'s description.
pub(crate) const FENCE_INIT_LONG_ABOUT: &str = "\
Anchor a new fence domain on every master (once, before the first run --fence).

Run fence init once, before the first redlock run --fence on a domain: it \
anchors the domain on every master with the counter --start N (default 0), \
so that tokens start at N+1. Every master must answer and none may be \
anchored yet; otherwise nothing is written, and it exits 1 if some master \
is anchored already. Give a new deployment --start 0. After a majority of \
the masters lost their counters (no repair can run), delete the domain's \
hash on the others (DEL redlock-sync:fence:NAME) and run it with --start \
at least the largest token any protected resource ever accepted: tokens \
must never go back.";

/// `redlock fence repair`'s summary.
pub(crate) const FENCE_REPAIR_ABOUT: &str =
    "Bring masters that lost, or may have rolled back, their counter back into the domain";

/// `redlock fence repair --help`'s description.
pub(crate) const FENCE_REPAIR_LONG_ABOUT: &str = "\
Bring masters that lost, or may have rolled back, their counter back into the domain.

Run fence repair when a master is left out of fenced locks: it lost its \
counter (restarted empty without persistence, FLUSHALL), restarted (its \
counter may have gone back), or its data set changed (made a replica and \
promoted again: a rollback by the same process), or after a repair that \
missed a master. redlock run --fence -v and redlock status --fence name \
such a master and why; once too few masters count, redlock run --fence \
exits 78 naming them (and, when the masters are in different epochs, \
saying so), and the library's Redlock::health() shows it \
(NodeHealth::fence_fault).

The repair reads the counters of the masters that kept theirs, behind a \
barrier, and anchors the others with the largest; it is safe at any time, \
also while locks are taken. It needs a quorum of masters that kept their \
counter, else it changes nothing, says what is wrong with each master, and \
exits 69.";

/// `redlock completions`'s summary.
pub(crate) const COMPLETIONS_ABOUT: &str = "Print the completion script for a shell";

/// `redlock completions --help`'s description.
pub(crate) const COMPLETIONS_LONG_ABOUT: &str = "\
Print the completion script for a shell.

Install it where the shell looks for completions, for instance:

bash: redlock completions bash > /etc/bash_completion.d/redlock (or \
~/.local/share/bash-completion/completions/redlock)

zsh: redlock completions zsh > ~/.zfunc/_redlock, with fpath+=~/.zfunc \
before compinit in ~/.zshrc

fish: redlock completions fish > ~/.config/fish/completions/redlock.fish";

/// `redlock man`'s summary.
pub(crate) const MAN_ABOUT: &str = "Print a manual page (roff), or write them all into a directory";

/// `redlock man --help`'s description.
pub(crate) const MAN_LONG_ABOUT: &str = "\
Print a manual page (roff), or write them all into a directory.

redlock man prints redlock(1); redlock man run prints redlock-run(1), \
redlock man fence repair redlock-fence-repair(1). With --dir DIR it writes \
every page into DIR (redlock.1, redlock-run.1, ...), for instance \
/usr/local/share/man/man1. To read one at once: redlock man run | man -l -";

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text, with its name.
    const TEXTS: [(&str, &str); 21] = [
        ("ABOUT", ABOUT),
        ("USAGE", USAGE),
        ("LONG_ABOUT", LONG_ABOUT),
        ("AFTER_LONG_HELP", AFTER_LONG_HELP),
        ("RUN_ABOUT", RUN_ABOUT),
        ("RUN_LONG_ABOUT", RUN_LONG_ABOUT),
        ("RUN_AFTER_LONG_HELP", RUN_AFTER_LONG_HELP),
        ("STATUS_ABOUT", STATUS_ABOUT),
        ("STATUS_LONG_ABOUT", STATUS_LONG_ABOUT),
        ("STATUS_AFTER_LONG_HELP", STATUS_AFTER_LONG_HELP),
        ("FENCE_ABOUT", FENCE_ABOUT),
        ("FENCE_LONG_ABOUT", FENCE_LONG_ABOUT),
        ("FENCE_AFTER_LONG_HELP", FENCE_AFTER_LONG_HELP),
        ("FENCE_INIT_ABOUT", FENCE_INIT_ABOUT),
        ("FENCE_INIT_LONG_ABOUT", FENCE_INIT_LONG_ABOUT),
        ("FENCE_REPAIR_ABOUT", FENCE_REPAIR_ABOUT),
        ("FENCE_REPAIR_LONG_ABOUT", FENCE_REPAIR_LONG_ABOUT),
        ("COMPLETIONS_ABOUT", COMPLETIONS_ABOUT),
        ("COMPLETIONS_LONG_ABOUT", COMPLETIONS_LONG_ABOUT),
        ("MAN_ABOUT", MAN_ABOUT),
        ("MAN_LONG_ABOUT", MAN_LONG_ABOUT),
    ];

    #[test]
    fn after_help_texts_are_headed_sections_within_80_columns() {
        for text in [
            AFTER_LONG_HELP,
            RUN_AFTER_LONG_HELP,
            STATUS_AFTER_LONG_HELP,
            FENCE_AFTER_LONG_HELP,
        ] {
            assert!(text.lines().next().is_some_and(|l| l.ends_with(':')));
            for line in text.lines() {
                assert!(line.chars().count() <= 80, "too wide: {line}");
                let heading = !line.starts_with(' ') && line.ends_with(':');
                assert!(
                    line.is_empty() || heading || line.starts_with("  "),
                    "neither a heading nor indented: {line}"
                );
            }
        }
    }

    #[test]
    fn a_long_about_starts_with_its_summary() {
        for (long, short) in [
            (LONG_ABOUT, ABOUT),
            (RUN_LONG_ABOUT, RUN_ABOUT),
            (STATUS_LONG_ABOUT, STATUS_ABOUT),
            (FENCE_LONG_ABOUT, FENCE_ABOUT),
            (FENCE_INIT_LONG_ABOUT, FENCE_INIT_ABOUT),
            (FENCE_REPAIR_LONG_ABOUT, FENCE_REPAIR_ABOUT),
            (COMPLETIONS_LONG_ABOUT, COMPLETIONS_ABOUT),
            (MAN_LONG_ABOUT, MAN_ABOUT),
        ] {
            assert!(long.starts_with(&format!("{short}.\n\n")), "{short}");
        }
        for (name, text) in TEXTS {
            assert!(!text.is_empty(), "{name}");
        }
    }
}
