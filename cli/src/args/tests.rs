//! `args`' tests: the forms the command line takes, what it refuses, and
//! what its errors never show.

use super::*;

fn parse_line(line: &str) -> Result<Invocation, clap::Error> {
    let words = line.split(' ').filter(|w| !w.is_empty());
    parse(std::iter::once("redlock").chain(words).map(OsString::from))
}

fn parse_words(words: &[&str]) -> Result<Invocation, clap::Error> {
    parse(
        std::iter::once("redlock")
            .chain(words.iter().copied())
            .map(OsString::from),
    )
}

fn run(line: &str) -> RunArgs {
    match parse_line(line) {
        Ok(Invocation::Run(args)) => *args,
        other => panic!("{line}: {other:?}"),
    }
}

fn status(line: &str) -> StatusArgs {
    match parse_line(line) {
        Ok(Invocation::Status(args)) => *args,
        other => panic!("{line}: {other:?}"),
    }
}

fn fence(line: &str) -> FenceArgs {
    match parse_line(line) {
        Ok(Invocation::Fence(args)) => *args,
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
fn the_grammar_is_consistent() {
    // clap's own checks of the definition (conflicts, ids, headings).
    Cli::command().debug_assert();
}

#[test]
fn parses_the_forms_the_issue_writes_out() {
    let a = run("run --nodes redis://h1:6379,redis://h2:6379,redis://h3:6379 KEY -- cmd args");
    assert_eq!(a.keys, ["KEY"]);
    assert_eq!(a.command, exec("cmd", &["args"]));
    assert_eq!(
        a.masters.nodes.as_deref(),
        Some("redis://h1:6379,redis://h2:6379,redis://h3:6379")
    );
    assert_eq!(
        (a.wait, a.ttl, a.max_hold, a.keep, a.grace),
        (
            Wait::NoLimit,
            Duration::from_secs(30),
            None,
            false,
            Duration::from_secs(5)
        )
    );
    assert_eq!(a.node_timeout, Duration::from_millis(200));
    assert_eq!(
        (a.conflict_exit, a.quiet, a.verbose, a.json),
        (1, false, false, false)
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
    assert_eq!(
        run("run -nqw5s K cmd").wait,
        Wait::UpTo(Duration::from_secs(5))
    );
    // The last of -n and --wait wins, as any option given twice.
    assert_eq!(run("run --wait 5s -n K cmd").wait, Wait::Once);
    assert_eq!(
        run("run -n --wait 5s K cmd").wait,
        Wait::UpTo(Duration::from_secs(5))
    );
    assert_eq!(
        run("run --ttl 1m --ttl 2m -q -q K cmd").ttl,
        Duration::from_secs(120)
    );
    assert!(run("run --json K cmd").json);
}

#[test]
fn everything_from_the_command_on_belongs_to_the_command() {
    assert_eq!(
        run("run K ls -l --all").command,
        exec("ls", &["-l", "--all"])
    );
    assert_eq!(
        run("run K cmd -v --wait 5s").command,
        exec("cmd", &["-v", "--wait", "5s"])
    );
    assert_eq!(run("run K -- -weird").command, exec("-weird", &[]));
    assert_eq!(run("run K -- a -- b").command, exec("a", &["--", "b"]));
    // A word that starts with - and is no option of redlock's starts the
    // command, as before.
    assert_eq!(run("run K -x y").command, exec("-x", &["y"]));
    assert_eq!(run("run K --bogus").command, exec("--bogus", &[]));
    assert_eq!(run("run -- -K cmd").keys, ["-K"]);
    let Ok(Invocation::Run(a)) = parse_words(&["run", "K", "-c", "echo a && echo b"]) else {
        panic!("not a run");
    };
    assert_eq!(a.command, ChildCommand::Shell("echo a && echo b".into()));
    assert_eq!(
        run("run K --command=true").command,
        ChildCommand::Shell("true".into())
    );
    // Options between the KEY and the COMMAND are redlock's.
    let a = run("run K --wait 5s cmd");
    assert_eq!(
        (a.wait, a.command),
        (Wait::UpTo(Duration::from_secs(5)), exec("cmd", &[]))
    );
}

#[test]
fn refuses_what_it_cannot_use_with_a_reason() {
    for words in [
        &[][..],
        &["lock", "K", "cmd"],
        &["run"],
        &["run", "K"],
        &["run", "K", "--"],
        &["run", "K", "-c"],
        &["run", "K", "-c", "a", "b"],
        &["run", "--bogus", "K", "cmd"],
        &["run", "-x", "K", "cmd"],
        &["run", "--wait", "K", "cmd"],
        &["run", "--wait", "5x", "K", "cmd"],
        &["run", "-E", "256", "K", "cmd"],
        &["run", "-E", "-1", "K", "cmd"],
        &["run", "--quiet=yes", "K", "cmd"],
        &["run", "--keep=yes", "K", "cmd"],
        &["run", "--ttl", "10ms", "K", "cmd"],
        &["run", "--max-hold", "0", "K", "cmd"],
        &["run", "", "cmd"],
        &["run", "K", "--", ""],
        &["run", "--fence-domain", "d", "K", "cmd"],
        &["run", "--fence", "--fence-domain=", "K", "cmd"],
    ] {
        match parse_words(words) {
            Err(error) => {
                assert!(!error.to_string().is_empty());
                assert!(
                    !matches!(
                        error.kind(),
                        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                    ),
                    "{words:?}"
                );
            }
            Ok(other) => panic!("{words:?} should be refused, parsed as {other:?}"),
        }
    }
    let error = parse_words(&["run", "--ttl", "10ms", "K", "cmd"]).unwrap_err();
    assert!(error.to_string().contains("too short"), "{error}");
    let error = parse_words(&["run", "", "cmd"]).unwrap_err();
    assert!(error.to_string().contains("the KEY is empty"), "{error}");
    assert!(error.to_string().contains("redlock run"), "{error}");
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
        let Err(error) = parse_line(&line) else {
            panic!("{line}: accepted")
        };
        assert_eq!(error.kind(), ErrorKind::ValueValidation, "{line}: {error}");
        assert!(
            error.to_string().contains("--replica-ack"),
            "{line}: {error}"
        );
    }
    let Err(error) = parse_line("run --replica-ack") else {
        panic!("accepted without a value")
    };
    assert!(error.to_string().contains("N[,TIMEOUT]"), "{error}");
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
    assert_eq!(
        status("status --cluster redis://a:1 K").masters.clusters,
        ["redis://a:1"]
    );
    assert_eq!(
        fence("fence repair --cluster redis://a:1").masters.clusters,
        ["redis://a:1"]
    );
    assert!(parse_line("status --cluster").is_err());
}

#[test]
fn status_takes_the_masters_options_and_one_key() {
    let a = status("status --nodes redis://h:1 --node-timeout 1s -q deploy:web");
    assert_eq!(a.keys, ["deploy:web"]);
    assert_eq!(a.masters.nodes.as_deref(), Some("redis://h:1"));
    assert_eq!(a.node_timeout, Duration::from_secs(1));
    assert!(a.quiet && !a.json);
    let a = status("status -- -K");
    assert_eq!(a.keys, ["-K"]);
    assert!(!a.quiet);
    assert_eq!(a.fence, None);
    assert_eq!(status("status --fence K").fence, Some(None));
    assert_eq!(
        status("status --fence --fence-domain d K").fence,
        Some(Some("d".to_string()))
    );
    assert!(status("status --json K").json);
    for line in [
        "status",
        "status K extra",
        "status --ttl 5s K",
        "status --nodes",
        "status --fence-domain d K",
        "status -q --json K",
    ] {
        assert!(parse_line(line).is_err(), "{line:?} should be refused");
    }
}

#[test]
fn status_takes_several_keys_with_k_sorted_and_each_once() {
    let a = status("status -k b --key a -k b --json");
    assert_eq!(a.keys, ["a", "b"]);
    assert!(a.json);
    assert_eq!(status("status -k K -k K").keys, ["K"]);
    for line in ["status -k a K", "status K -k a", "status -k"] {
        assert!(parse_line(line).is_err(), "{line:?} should be refused");
    }
    assert!(parse_words(&["status", "-k", "a", "-k", ""]).is_err());
}

#[test]
fn fence_takes_init_or_repair_and_the_masters_options() {
    let a = fence(
        "fence init --start 41 --nodes redis://h:1 --fence-domain orders -q --node-timeout 1s",
    );
    assert_eq!(a.action, FenceAction::Init { start: 41 });
    assert_eq!(a.domain.as_deref(), Some("orders"));
    assert_eq!(a.masters.nodes.as_deref(), Some("redis://h:1"));
    assert_eq!(a.node_timeout, Duration::from_secs(1));
    assert!(a.quiet && !a.json);
    let a = fence("fence repair --json");
    assert_eq!(
        (a.action, a.domain, a.quiet, a.json),
        (FenceAction::Repair, None, false, true)
    );
    assert_eq!(fence("fence init").action, FenceAction::Init { start: 0 });
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
        "fence repair -q --json",
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
fn help_and_version_are_reported_as_such() {
    for (line, kind) in [
        ("--help", ErrorKind::DisplayHelp),
        ("help", ErrorKind::DisplayHelp),
        ("help run", ErrorKind::DisplayHelp),
        ("run --nodes x -h", ErrorKind::DisplayHelp),
        ("fence repair -h", ErrorKind::DisplayHelp),
        ("--version", ErrorKind::DisplayVersion),
        ("-V", ErrorKind::DisplayVersion),
        ("run -V", ErrorKind::DisplayVersion),
        ("fence repair --version", ErrorKind::DisplayVersion),
    ] {
        assert_eq!(parse_line(line).unwrap_err().kind(), kind, "{line}");
    }
    // No command: the help, as an error (status 64).
    let error = parse_line("").unwrap_err();
    assert_eq!(
        error.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
}

#[test]
fn completions_and_man_take_their_arguments() {
    assert_eq!(
        parse_line("completions zsh").unwrap(),
        Invocation::Completions(Shell::Zsh)
    );
    assert!(parse_line("completions tcsh").is_err());
    assert!(parse_line("completions").is_err());
    assert_eq!(
        parse_line("man").unwrap(),
        Invocation::Man(ManPages::One(vec![]))
    );
    assert_eq!(
        parse_line("man fence init").unwrap(),
        Invocation::Man(ManPages::One(vec!["fence".into(), "init".into()]))
    );
    assert_eq!(
        parse_line("man --dir /tmp/x").unwrap(),
        Invocation::Man(ManPages::All("/tmp/x".into()))
    );
    for line in [
        "man lock",
        "man run init",
        "man help",
        "man --dir /tmp/x run",
    ] {
        assert!(parse_line(line).is_err(), "{line:?} should be refused");
    }
}

/// clap quotes arguments in its errors; none that may hold a password
/// shows (each of these showed it before `hide_secrets`).
#[test]
fn errors_never_show_an_argument_with_credentials() {
    let url = "redis://:hun,ter 2@h:1";
    for words in [
        vec!["status", "K", url],
        vec!["--nodes", url, "status", "K"],
        vec!["status", &format!("--nodes={url}"), "--bogus", "K", "x"],
        vec!["run", &format!("--wait={url}"), "K", "cmd"],
        vec!["run", &format!("-nw{url}"), "K", "cmd"],
        vec!["run", &format!("--wait=5{url}"), "K", "cmd"],
        vec!["fence", "init", "--start", url],
        vec!["completions", url],
        vec!["man", url],
    ] {
        let argv: Vec<OsString> = std::iter::once("redlock")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect();
        let error = parse(argv.clone()).expect_err("refused");
        let raw = error.render().to_string();
        let shown = hide_secrets(&raw, &argv);
        for piece in ["hun", "ter 2"] {
            assert!(!shown.contains(piece), "{words:?}: {shown}");
        }
        assert!(shown.starts_with("error: "), "{words:?}: {shown}");
    }
}

#[test]
fn hiding_leaves_arguments_without_an_at_alone() {
    let argv: Vec<OsString> = ["redlock", "status", "K", "extra"]
        .map(OsString::from)
        .to_vec();
    let text = "error: unexpected argument 'extra' found";
    assert_eq!(hide_secrets(text, &argv), text);
    let argv: Vec<OsString> = ["redlock", "--x=pw@b"].map(OsString::from).to_vec();
    assert_eq!(
        hide_secrets("'--x=pw@b' and 'pw@b', 'w@b' but not 'pw' nor 'x'", &argv),
        format!("'{HIDDEN}' and '{HIDDEN}', '{HIDDEN}' but not 'pw' nor 'x'")
    );
}

#[test]
fn repeated_keys_are_a_sorted_set_and_command_follows_the_double_dash() {
    let a = run("run -k b -k a -k b -- sleep 1");
    assert_eq!(a.keys, ["a", "b"]);
    assert_eq!(
        a.command,
        ChildCommand::Exec {
            program: "sleep".into(),
            args: vec!["1".into()],
        }
    );
    // Options after COMMAND's name are COMMAND's.
    let a = run("run -k a --key b -- ls -v");
    assert_eq!(a.keys, ["a", "b"]);
    assert!(!a.verbose);
    let a = run("run -k a -k b -c true");
    assert_eq!(a.command, ChildCommand::Shell("true".into()));
}

#[test]
fn with_keys_every_word_before_the_double_dash_is_redlocks_or_the_line_is_refused() {
    // Regression: any `--` on the line used to do, so COMMAND's name before
    // it took KEY's place and its options were read as redlock's
    // (`grep -v x -- f` ran `grep x -- f`, redlock verbose).
    for line in [
        "run -k a -k b grep -v x -- f.txt",
        "run -k a b -- cmd",
        "run -k a grep -- grep",
        "run -k a -n sleep -- 1",
    ] {
        assert!(parse_line(line).is_err(), "{line}");
    }
    // A `--` inside COMMAND, after the first, is COMMAND's.
    let a = run("run -k a -k b -v -- grep -v -- x");
    assert!(a.verbose);
    assert_eq!(
        a.command,
        ChildCommand::Exec {
            program: "grep".into(),
            args: vec!["-v".into(), "--".into(), "x".into()],
        }
    );
}

#[test]
fn one_key_given_twice_is_one_key() {
    assert_eq!(run("run -k a -k a -- true").keys, ["a"]);
}

#[test]
fn keys_without_double_dash_or_with_an_empty_key_or_no_command_are_usage_errors() {
    for line in [
        "run -k a -k b sleep 1",
        "run -k a -k b -c true extra",
        "run",
        "run -k a --",
        "run KEY",
    ] {
        assert!(parse_line(line).is_err(), "{line}");
    }
    assert!(parse_words(&["run", "-k", "", "--", "true"]).is_err());
}
