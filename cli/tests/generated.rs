//! What `redlock` generates from its grammar: the shell completions
//! (`redlock completions SHELL`), the manual pages (`redlock man`), and
//! the help (`--help`, `-h`), each complete and never showing the
//! environment's values. No server is needed.

// The harness names the test servers' types.
#[path = "../../tests/support/mod.rs"]
mod support;

mod harness;

use harness::{finish, redlock, Scratch};
use std::fs;

/// The commands every generated text names.
const COMMANDS: [&str; 5] = ["run", "status", "fence", "completions", "man"];

#[test]
fn completions_for_bash_zsh_and_fish_name_every_command_and_option() {
    for shell in ["bash", "zsh", "fish"] {
        let done = finish(redlock().args(["completions", shell]));
        assert_eq!(done.status.code(), Some(0), "{shell}: {done:?}");
        assert!(done.stderr.is_empty(), "{shell}: {done:?}");
        assert!(done.stdout.len() > 1000, "{shell}: {done:?}");
        for word in COMMANDS
            .iter()
            .chain(&["init", "repair", "nodes", "max-hold", "json"])
        {
            assert!(done.stdout.contains(word), "{shell}: {word} missing");
        }
    }
    let done = finish(redlock().args(["completions", "tcsh"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");
}

#[test]
fn man_prints_each_commands_page_and_writes_them_all() {
    let done = finish(redlock().arg("man"));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(done.stdout.starts_with(".ie"), "roff: {done:?}");
    assert!(done.stdout.contains(".TH redlock 1"), "{done:?}");
    for command in COMMANDS {
        assert!(
            done.stdout.contains(&format!("redlock\\-{command}(1)")),
            "{command} missing"
        );
    }
    for section in [".SH ENVIRONMENT", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
        assert!(done.stdout.contains(section), "{section} missing");
    }
    let done = finish(redlock().args(["man", "fence", "repair"]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(
        done.stdout.contains(".TH redlock-fence-repair 1"),
        "{done:?}"
    );
    assert!(done
        .stdout
        .contains("Run fence repair when a master is left out"));
    let done = finish(redlock().args(["man", "lock"]));
    assert_eq!(done.status.code(), Some(64), "{done:?}");

    let scratch = Scratch::new();
    let dir = scratch.file("man1");
    let done = finish(redlock().args(["man", "--dir", &dir]));
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    let mut pages: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            "redlock-completions.1",
            "redlock-fence-init.1",
            "redlock-fence-repair.1",
            "redlock-fence.1",
            "redlock-man.1",
            "redlock-run.1",
            "redlock-status.1",
            "redlock.1"
        ]
    );
    for page in pages {
        let text = fs::read_to_string(format!("{dir}/{page}")).unwrap();
        assert!(text.contains(".SH SYNOPSIS"), "{page}");
    }
}

/// The long help says what the old manual said: each command's
/// description, every option, the environment, the exit statuses, the
/// guarantees and the examples; `-h` is the summary.
#[test]
fn the_help_holds_the_manual() {
    let top = finish(redlock().arg("--help"));
    assert_eq!(top.status.code(), Some(0), "{top:?}");
    for text in [
        "redlock run [OPTIONS] KEY [--] COMMAND [ARGS...]",
        "redlock status [OPTIONS] KEY",
        "REDLOCK_PASSWORD_FILE",
        "Exit status:",
        "126, 127",
        "Guarantees and limits:",
        "Examples:",
        "flock(1)",
    ] {
        assert!(top.stdout.contains(text), "{text} missing: {}", top.stdout);
    }
    let run = finish(redlock().args(["run", "--help"]));
    for text in [
        "--nodes <URL,...>",
        "%2C",
        "--cluster",
        "--nodes-file",
        "--user",
        "--password-file",
        "--tls-ca-file",
        "--tls-cert-file",
        "--tls-key-file",
        "--node-timeout",
        "[default: 200ms]",
        "--wait",
        "--nonblock",
        "--ttl",
        "[default: 30s]",
        "--max-hold",
        "--grace",
        "[default: 5s]",
        "--keep",
        "--fence",
        "--fence-domain",
        "--holder-label",
        "--conflict-exit-code",
        "--quiet",
        "--verbose",
        "--json",
        "REDLOCK_VALID_UNTIL_MS",
        "COMMAND has ended when its process group is empty",
    ] {
        assert!(run.stdout.contains(text), "{text} missing: {}", run.stdout);
    }
    let short = finish(redlock().args(["run", "-h"]));
    assert!(short.stdout.len() < run.stdout.len() / 2, "{short:?}");
    assert!(short.stdout.contains("--max-hold"));
    let status = finish(redlock().args(["help", "status"]));
    assert!(status.stdout.contains("0   the lock is held"), "{status:?}");
    let init = finish(redlock().args(["fence", "init", "--help"]));
    assert!(init.stdout.contains("--start <N>"), "{init:?}");
    let version = finish(redlock().arg("--version"));
    assert_eq!(
        version.stdout,
        format!("redlock {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// `-k`'s help says what a fenced set does: it gets one token (it once
/// said "Not with --fence: redlock exits 78", from before fenced sets
/// were built).
#[test]
fn the_key_options_help_gives_a_fenced_set_one_token() {
    let run = finish(redlock().args(["run", "--help"]));
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let words = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!words.contains("Not with --fence"), "{words}");
    assert!(
        words.contains("With --fence the set has one token (on --cluster"),
        "{words}"
    );
}

/// clap's help could show an environment variable's value (its `env`
/// feature does, `[env: NAME=VALUE]`); the tool's never does.
#[test]
fn help_and_errors_never_show_the_environments_values() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["status", "-h"],
        &["fence", "repair", "--help"],
        &["run", "--bogus"],
        &["status"],
    ] {
        let done = finish(
            redlock()
                .args(args)
                .env("REDLOCK_NODES", "redis://:n0de-secret@h:1")
                .env("REDLOCK_PASSWORD", "pa55-secret")
                .env("REDLOCK_USER", "us3r-secret"),
        );
        for text in [&done.stdout, &done.stderr] {
            assert!(!text.contains("secret"), "{args:?}: {text}");
        }
    }
}
