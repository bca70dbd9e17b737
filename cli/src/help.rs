//! `redlock --help`: the manual page.

/// The manual, as `--help` prints it (80 columns).
pub(crate) const MANUAL: &str = r#"NAME
    redlock - run a command while holding a lock shared by several hosts

SYNOPSIS
    redlock run [OPTIONS] KEY [--] COMMAND [ARGS...]
    redlock run [OPTIONS] KEY -c COMMAND_LINE
    redlock status [OPTIONS] KEY
    redlock fence init [--start N] [OPTIONS]
    redlock fence repair [OPTIONS]
    redlock --help | --version

DESCRIPTION
    redlock run is flock(1) across hosts. It takes the lock KEY on a quorum
    of independent Redis or Valkey masters (the Redlock algorithm), runs
    COMMAND while it holds the lock, renews the lock for as long as COMMAND
    runs, releases it when COMMAND exits (or, with --keep, leaves it until
    its TTL runs out), and exits with COMMAND's status. A whole Redis or
    Valkey Cluster may stand for one master (--cluster, or cluster(...) in
    a list): in this manual a master is either, and each casts one vote.

    COMMAND runs without a shell (-c runs COMMAND_LINE with /bin/sh -c),
    with redlock's stdin, stdout and stderr, in a process group of its own.
    SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGTSTP sent to
    redlock are sent on to that group. When redlock's stdin is a terminal
    it runs in the foreground of, COMMAND gets the terminal: it can read
    from it, and Ctrl-C and Ctrl-Z reach it directly. When COMMAND stops
    (Ctrl-Z, or a SIGTSTP sent on), redlock stops too, and renews nothing
    meanwhile. When continued (fg, bg), redlock looks at the lock first:
    if its validity ended during the stop, or too little is left to stop
    COMMAND in time, the stopped COMMAND is killed without running again
    (exit 75); otherwise it gets the terminal back and runs on. On Linux,
    COMMAND is killed if redlock dies.

    COMMAND has ended when its process group is empty: as flock(1)'s lock
    is held by every process that inherited it, the lock is held and
    renewed while anything COMMAND leaves running in its group (job &)
    runs, and redlock exits with COMMAND's status once all of it has ended
    (-v says that it waits). When SIGINT, SIGTERM, SIGHUP or SIGQUIT came
    (which a shell's background jobs may ignore), what is left gets
    SIGTERM, then SIGKILL after --grace, instead. Processes that leave the
    group (setsid, daemons) are not waited for.

    A signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) while
    redlock waits for the lock ends the wait; what an attempt in flight
    set is released, and redlock ends by that signal (COMMAND never runs).

    When the lock cannot be kept while COMMAND runs (a renewal found its key
    gone or taken on the masters; renewals failed until little validity was
    left; --max-hold passed), redlock sends SIGTERM to COMMAND's group at
    once, then SIGKILL after --grace, and in any case before the lock's
    validity can end; it exits 75 (124 for --max-hold).

    redlock status looks at the lock KEY without taking it: whether each
    master holds its key and for how long (one round of PTTL; the lock's
    value is never read; a cluster's line is named cluster(HOST:PORT,...)
    and tells of its master for KEY's slot), whether that makes the lock
    held (its key on a quorum of masters) or free (absent from a quorum),
    and for how long a quorum will hold it at least. It takes the Masters
    options below, and -q (print nothing: the exit status tells). With
    --fence (and --fence-domain NAME) it also says whether each master
    counts for the fence domain, and for one left out why (no anchor,
    restarted, rolled back, ...) and that redlock fence repair brings it
    back. It exits 0 if the lock is held, 1 if it is free, 2 if it is
    neither (masters down, keys left on a minority, a lock being taken or
    expiring), and as redlock run for masters out of reach (69) or a wrong
    configuration (78).

    redlock fence init and redlock fence repair are the operator's two
    steps for the fence domain that redlock run --fence takes its tokens
    from (the library's Redlock::fence_init and fence_repair). They take
    the Masters options, --fence-domain NAME (default: default), and -q.
    Each prints a summary and a line per master; it exits 0 when every
    master took part, 69 when masters did not answer or too few kept
    their counter, 77 and 78 as redlock run.

    Run fence init once, before the first redlock run --fence on a domain:
    it anchors the domain on every master with the counter --start N
    (default 0), so that tokens start at N+1. Every master must answer and
    none may be anchored yet; otherwise nothing is written, and it exits 1
    if some master is anchored already. Give a new deployment --start 0.
    After a majority of the masters lost their counters (no repair can
    run), delete the domain's hash on the others (DEL
    redlock-sync:fence:NAME) and run it with --start at least the largest
    token any protected resource ever accepted: tokens must never go back.

    Run fence repair when a master is left out of fenced locks: it lost
    its counter (restarted empty without persistence, FLUSHALL), restarted
    (its counter may have gone back), or its data set changed (made a
    replica and promoted again: a rollback by the same process), or after
    a repair that missed a master. redlock run --fence -v and redlock
    status --fence name such a master and why; once too few masters
    count, redlock run --fence exits 78 naming them (and, when the masters
    are in different epochs, saying so), and the library's
    Redlock::health() shows it (NodeHealth::fence_fault). The repair reads
    the counters of the masters that kept theirs, behind a barrier, and
    anchors the others with the largest; it is safe at any time, also
    while locks are taken. It needs a quorum of masters that kept their
    counter, else it changes nothing, says what is wrong with each master,
    and exits 69.

OPTIONS
  Masters
    --nodes URL,...
        The masters: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] URLs
        separated by commas or blanks (default: $REDLOCK_NODES). Use 3 or
        5 independent masters, not replicas of one another. An entry
        cluster(URL,...) is one master that is a whole cluster, as
        --cluster gives it: 'cluster(redis://a:7000,redis://b:7000)
        cluster(redis://c:7000) redis://m:6379' is three masters. A URL
        starts only at a redis:// (or rediss://) after a comma, a blank
        or cluster(, so a PASSWORD may hold commas, blanks, @ and
        parentheses as they are, but no comma or blank followed by
        redis://, rediss:// or cluster( (write that comma as %2C); write
        a % in it as %25, and a comma, blank or parenthesis in a USER as
        %2C, %20, %28 or %29.
        An entry sentinel(URL,...;NAME) is one master that Sentinels
        watch: the sentinels' URLs, then ; and the name they know the
        master by ('sentinel(redis://s1:26379,redis://s2:26379;locks-a)').
        redlock asks them for the current master, checks it is one
        (ROLE), and follows a failover. The sentinels take their own
        password (in their URLs, or $REDLOCK_SENTINEL_PASSWORD); the
        master takes the masters' (--password-file, $REDLOCK_PASSWORD).
    --cluster URL,...
        One master that is a whole Redis or Valkey Cluster, reached
        through these URLs of any of its nodes (the form of --nodes;
        every node takes the same credentials and TLS). Each command goes
        to the cluster's master for KEY's slot. Give one --cluster per
        cluster. The masters are those of --nodes, then one per
        --cluster; given either, --nodes-file and $REDLOCK_NODES are not
        read.
    --nodes-file FILE
        Read the URLs from FILE: one per line, # starts a comment line;
        a cluster(...) entry may span lines.
    --user NAME
        The ACL user the password belongs to (default: $REDLOCK_USER).
    --password-file FILE
        Read the password from FILE (a trailing line break is dropped).
        Default: $REDLOCK_PASSWORD, else the file $REDLOCK_PASSWORD_FILE.
        It goes to every URL (a cluster's too) that has no password of
        its own. A password is never needed on the command line: one
        written in --nodes or --cluster works, with a warning (any user
        can read a command line).
    --tls-ca-file FILE
        For rediss:// masters: the CA certificate(s) (PEM) their
        certificates must chain to. rediss:// needs a redlock built with
        the cargo feature tls.
    --tls-cert-file FILE, --tls-key-file FILE
        A client certificate chain and its private key (PEM), for masters
        that ask for one.
    --node-timeout DURATION
        How long each master has to answer in one round (default 200ms).

  Waiting, when another holds the lock
    By default redlock waits as long as it takes, woken by the release.
    -w, --wait DURATION
        Wait at most DURATION. --wait 0 makes one attempt.
    -n, --nonblock
        Make one attempt (the same as --wait 0).
    Masters that cannot be reached (no quorum) are retried while the wait
    lasts, then redlock exits 69. Without a limit, it exits 69 if they are
    still out of reach after 10s; a lock still held then is waited for as
    long as it takes.

  Holding
    --ttl DURATION
        The lock's time to live (default 30s). It is renewed while COMMAND
        runs, when a third of it is left. It is how long the lock outlives
        a redlock killed with SIGKILL, at most.
    --max-hold DURATION
        Renew the lock for at most DURATION from its acquisition, then stop
        COMMAND and exit 124 (default: no limit).
    --grace DURATION
        Time between SIGTERM and SIGKILL when the lock is lost or --max-hold
        passes (default 5s). Always cut short to end a tenth of the TTL (at
        most 1s) before the lock's validity ends.
    --keep
        When COMMAND ends, leave the lock until its TTL runs out instead of
        releasing it, so that a job cron starts on several hosts runs at
        most once per TTL (see EXAMPLES). The lock stays:
        - until one TTL after it was taken, if COMMAND ends before the
          first renewal (about two thirds of the TTL in);
        - for the rest of the TTL its last renewal set, if COMMAND ends
          after it but within the TTL: at most one TTL after COMMAND ends
          (at least a third of a TTL while renewals succeed);
        - not at all if COMMAND runs past the TTL: it is released then, as
          the period it marks is over.
        It is kept whatever COMMAND's status, a signal included (redlock
        cannot tell whether a failed COMMAND did part of its work), and
        released if COMMAND could not be started or the lock was lost.
        Use it with -n (or a short --wait) on every host: a host that
        waits gets the lock when it runs out, and runs COMMAND again.
    --fence
        Take the lock with a fencing token and give it to COMMAND as
        REDLOCK_FENCE_TOKEN: a number, unique for KEY and rising with each
        holder, for COMMAND to pass with every write to what it protects,
        which refuses a token below the largest it accepted (so a COMMAND
        that paused past the lock's validity cannot overwrite the next
        holder's work). The masters' fence domain must have been
        initialised once (redlock fence init); until then, and while too
        few masters have their counter (redlock fence repair), redlock
        cannot lock and exits 78.
    --fence-domain NAME
        With --fence: the fence domain to take the token from (default:
        default). Keys that share a domain share its counter.
    --replica-ack N[,TIMEOUT]
        For masters that have replicas and may fail over to one: a
        master's grant (and each renewal's) counts only once N of its
        replicas confirmed, within TIMEOUT (default: half the node
        timeout), that they received it (WAIT, sent behind the write). A
        master whose replicas do not confirm in time is a "no" for that
        attempt; a failover to a replica that confirmed keeps the lock.
        WAIT is not consensus: a replica that confirmed and then died with
        its master still loses it. Cluster voters wait for the replicas
        of the shard master that holds KEY.

  Exit status and output
    -E, --conflict-exit-code N
        Exit with N when the lock is held elsewhere (default 1).
    -q, --quiet
        A lock held elsewhere is no failure: exit 0 without a word (cron:
        the host that got the lock does the job). Overrides -E.
    -v, --verbose
        Say when the lock is taken and released, and how long each took.
    -h, --help
        Print this manual.
    -V, --version
        Print the version.

    A DURATION is a number and a unit: 500ms, 5s, 1.5s, 2m, 1h. A number
    alone is seconds.

ENVIRONMENT
    REDLOCK_NODES          The masters, when none of --nodes, --cluster and
                           --nodes-file is given: URLs and cluster(URL,...)
                           entries separated by commas or spaces.
    REDLOCK_PASSWORD       The masters' password.
    REDLOCK_PASSWORD_FILE  A file holding it, when REDLOCK_PASSWORD is unset.
    REDLOCK_USER           The ACL user the password belongs to.
    REDLOCK_SENTINEL_PASSWORD
                           The sentinels' password, for sentinel(...)
                           entries whose URLs have none.

    COMMAND's environment is redlock's, with:
    REDLOCK_KEY            The KEY.
    REDLOCK_VALID_UNTIL_MS When the lock's validity ends if it is not
                           renewed, in milliseconds since the Unix epoch (as
                           of COMMAND's start; redlock keeps renewing it).
    REDLOCK_FENCE_TOKEN    With --fence: the lock's fencing token.
    and without REDLOCK_PASSWORD, nor REDLOCK_NODES when a URL in it holds a
    password.

EXIT STATUS
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
    redlock status exits 0 held, 1 free, 2 neither; 64, 69, 77 and 78 as
    above. redlock fence exits 0 done, 1 (init) already anchored; 64, 69,
    77 and 78 as above.

GUARANTEES AND LIMITS
    Under the Redlock model (independent masters; clocks that run at about
    the same rate; a master that loses its data stays down for a TTL before
    it rejoins), COMMAND starts only once a quorum of masters granted the
    lock, and is dead before the lock's validity could end, so two holders
    of one KEY never run at once. The exit status is COMMAND's only when
    the lock held from its start to its end. A cluster is one master to
    the model: a failover of the shard that holds KEY can lose the key, if
    the replica had not received it yet, as a master restarted empty
    would.

    A key deleted by hand, or a master restarted empty within a TTL, is
    outside that model: redlock notices at the next renewal (at most two
    thirds of the TTL later) and stops COMMAND, but another host may have
    started meanwhile. So may one while COMMAND is in uninterruptible sleep
    (it does not die of SIGKILL; redlock says so when COMMAND is still
    there 2s after it). Only a fencing token checked by the protected
    resource covers these cases.

    When redlock is killed with SIGKILL, the lock stays until its TTL ends.
    On Linux COMMAND dies with redlock, but processes COMMAND started do
    not. Processes that leave COMMAND's process group run on without the
    lock. redlock stopped alone (SIGSTOP) while COMMAND runs on cannot
    renew nor stop it: continued past the validity, it kills COMMAND at
    once, but COMMAND ran without the lock meanwhile.
    Given the terminal, COMMAND takes it from the rest of redlock's
    pipeline: put a pager inside (redlock run KEY -c 'cmd | less'), not
    after redlock.
    A lock kept by --keep is not announced when it runs out: a run that
    waits for it gets it within a retry (about 0.3s) of its expiry.

EXAMPLES
    A nightly job that runs on one host, whichever gets the lock first:
        redlock run -q -n \
            --nodes redis://r1:6379,redis://r2:6379,redis://r3:6379 \
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
        redlock run --cluster redis://c1a:7000,redis://c1b:7000 \
            --cluster redis://c2a:7000,redis://c2b:7000 \
            --nodes redis://r1:6379 nightly-report -- ./report

    Deploy from one machine at a time, waiting at most 2 minutes for a turn:
        redlock run --wait 2m deploy:web -c 'git pull && make install'

    A migration bounded to an hour, with 30 s to clean up if stopped:
        redlock run --max-hold 1h --grace 30s db:migrate -- ./migrate.sh

    Who holds the deploy lock, and until when?
        redlock status deploy:web
    prints, for instance:
        deploy:web: held on 3 of 3 masters (quorum 2) for at least 28.41s
          r1:6379  held, expires in 28.4s
          r2:6379  held, expires in 28.4s
          r3:6379  held, expires in 28.5s

    An hourly job that cron starts on every host, run by one of them at
    most once an hour, however many hosts start it or how late:
        0 * * * * redlock run --keep --ttl 55m -n -q report:hourly ./report
    The TTL is the period less a margin: a key taken at 10:00:00.03 with
    --ttl 1h would still be there for a run that starts at 11:00:00.02,
    and that hour's run would be skipped on every host. The job must end
    within two thirds of the TTL (36 minutes here): one that ends later
    leaves the renewed key into the next hour, and that run is skipped. A
    job that may run longer names the key after its hour (% is \% in a
    crontab), so that each hour has a key of its own (and an hour's run
    may then overlap the last hour's, if that one is still running):
        0 * * * * redlock run --keep --ttl 1h -n -q \
            "report:$(date -u +\%Y\%m\%dT\%H)" ./report

    Fencing tokens: initialise the domain once, then every run's COMMAND
    gets a token above any earlier holder's, to pass to what it writes:
        redlock fence init
        redlock run --fence orders:sync \
            -c './sync --token "$REDLOCK_FENCE_TOKEN"'
    After a master restarted or lost its data, bring it back in:
        redlock fence repair

SEE ALSO
    flock(1), timeout(1), sysexits.h(3head),
    https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
"#;

/// The short reminder after a usage error.
pub(crate) const TRY_HELP: &str = "usage: redlock run [OPTIONS] KEY [--] COMMAND [ARGS...]
       redlock run [OPTIONS] KEY -c COMMAND_LINE
       redlock status [OPTIONS] KEY
       redlock fence init [--start N] [OPTIONS] | redlock fence repair [OPTIONS]
Try 'redlock --help' for the manual.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manual_fits_80_columns() {
        for line in MANUAL.lines() {
            assert!(line.chars().count() <= 80, "too wide: {line}");
        }
    }
}
