//! The one line `cargo xtask test` ends with: the tests passed, failed and
//! ignored over every pass, counted from the result lines cargo test's
//! binaries print, and what kept a pass from giving a full count.
//!
//! Each test binary (and each crate's doc tests) prints `running N tests`,
//! then, unless it crashes, one line such as
//! `test result: ok. 5 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.01s`.
//! A pass that prints no result line at all did not build (or cargo failed
//! before running anything); a `running` line without its result line is a
//! binary that crashed. Either way the counts are incomplete, and the
//! summary says so rather than look clean.

/// What one pass's output tells.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    /// Test binaries that printed their result line.
    pub finished: u64,
    /// Test binaries that started (`running N tests`) and printed no result
    /// line: they crashed, or were killed.
    pub unfinished: u64,
}

impl Counts {
    /// Counts the result lines in `output`, cargo test's standard output
    /// (colours and all).
    pub fn of(output: &str) -> Counts {
        let mut counts = Counts::default();
        // Whether the last `running` line still waits for its result.
        let mut open = false;
        for line in output.lines() {
            let line = without_colours(line);
            let line = line.trim_end();
            if is_running_line(line) {
                if open {
                    counts.unfinished += 1;
                }
                open = true;
            } else if let Some(result) = line.strip_prefix("test result: ") {
                open = false;
                counts.finished += 1;
                // "ok. 5 passed; 1 failed; 2 ignored; 0 measured; ..."
                let figures = result.split_once(". ").map_or("", |(_, figures)| figures);
                for figure in figures.split("; ") {
                    let Some((number, what)) = figure.split_once(' ') else {
                        continue;
                    };
                    let Ok(number) = number.parse::<u64>() else {
                        continue;
                    };
                    match what {
                        "passed" => counts.passed += number,
                        "failed" => counts.failed += number,
                        "ignored" => counts.ignored += number,
                        _ => {}
                    }
                }
            }
        }
        if open {
            counts.unfinished += 1;
        }
        counts
    }
}

/// `running 1 test`, `running 12 tests`.
fn is_running_line(line: &str) -> bool {
    line.strip_prefix("running ")
        .and_then(|rest| rest.strip_suffix(" tests").or(rest.strip_suffix(" test")))
        .is_some_and(|n| n.parse::<u64>().is_ok())
}

/// `line` without the escape sequences of colours (`ESC [ 32 m`, `ESC ( B`),
/// which the tests print when their output goes to a terminal.
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Skip to the sequence's final byte (a letter, in those).
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How one pass of `cargo xtask test` went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    /// It ran: what it printed, and whether cargo exited with success.
    Ran {
        name: String,
        counts: Counts,
        success: bool,
    },
    /// It did not run, and why.
    Skipped { name: String, why: String },
}

impl Pass {
    /// Whether this pass makes the whole run fail.
    pub fn failed(&self) -> bool {
        match self {
            Pass::Ran {
                counts, success, ..
            } => !success || counts.failed > 0 || counts.unfinished > 0,
            Pass::Skipped { .. } => false,
        }
    }

    /// What went wrong beyond failed tests, if anything: the part of the
    /// counts a reader must not trust.
    fn trouble(&self) -> Option<String> {
        let Pass::Ran {
            name,
            counts,
            success,
        } = self
        else {
            return None;
        };
        if counts.finished == 0 && counts.unfinished == 0 && !success {
            return Some(format!(
                "the {name} pass ran no tests: it did not build, or cargo failed (see above)"
            ));
        }
        if counts.unfinished > 0 {
            return Some(format!(
                "in the {name} pass, {} crashed before its result line (see above)",
                plural(counts.unfinished, "test binary", "test binaries")
            ));
        }
        if !success && counts.failed == 0 {
            return Some(format!(
                "the {name} pass failed with no failed test: see cargo's error above"
            ));
        }
        None
    }
}

/// The summary line: the counts over every pass that ran, the passes
/// skipped, and anything that makes the counts incomplete.
pub fn line(passes: &[Pass]) -> String {
    let mut total = Counts::default();
    for pass in passes {
        if let Pass::Ran { counts, .. } = pass {
            total.passed += counts.passed;
            total.failed += counts.failed;
            total.ignored += counts.ignored;
        }
    }
    let mut line = format!(
        "{} passed, {} failed, {} ignored",
        total.passed, total.failed, total.ignored
    );
    let ran = passes
        .iter()
        .filter(|p| matches!(p, Pass::Ran { .. }))
        .count();
    line += &format!(" ({})", plural(ran as u64, "pass", "passes"));
    let skipped: Vec<String> = passes
        .iter()
        .filter_map(|pass| match pass {
            Pass::Skipped { name, why } => Some(format!("{name} ({why})")),
            Pass::Ran { .. } => None,
        })
        .collect();
    if !skipped.is_empty() {
        line += &format!("; skipped: {}", skipped.join(", "));
    }
    let troubles: Vec<String> = passes.iter().filter_map(Pass::trouble).collect();
    if !troubles.is_empty() {
        line += &format!("; INCOMPLETE: {}", troubles.join("; "));
    }
    if passes.iter().any(Pass::failed) {
        line += "; FAILED";
    }
    line
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two binaries and the doc tests, all passing (as cargo test prints
    /// them without a terminal).
    const ALL_PASS: &str = "
running 3 tests
test a ... ok
test b ... ok
test c ... ignored

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s


running 1 test
test d ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s


running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 2 filtered out; finished in 0.00s

";

    /// A binary with a failing test (its captured output included).
    const ONE_FAILS: &str = "
running 2 tests
test lock::takes ... ok
test lock::releases ... FAILED

failures:

---- lock::releases stdout ----
thread 'lock::releases' panicked at tests/lock.rs:10:5:
assertion `left == right` failed
  left: 1
 right: 0

failures:
    lock::releases

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s

";

    /// A pass whose build failed: compiler errors go to stderr, and
    /// nothing at all to stdout.
    const BUILD_FAILED: &str = "";

    /// A binary that aborted in the middle (cargo reports the signal on
    /// stderr), after one that finished.
    const CRASHED: &str = "
running 1 test
test a ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s


running 4 tests
test b ... ok
";

    /// What `cargo test --no-fail-fast` printed on stdout for a crate whose
    /// unit tests have one failing test, whose integration test binary
    /// aborts in its second test, and whose one doc test passes (the
    /// backtrace shortened).
    const REAL: &str = "
running 3 tests
test tests::ign ... ignored
test tests::ok ... ok
test tests::fails ... FAILED

failures:

---- tests::fails stdout ----

thread 'tests::fails' (19834) panicked at src/lib.rs:9:26:
assertion `left == right` failed
  left: 1
 right: 2
stack backtrace:
   0: __rustc::rust_begin_unwind
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.


failures:
    tests::fails

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.08s


running 2 tests
test fine ... ok

running 1 test
test src/lib.rs - f (line 1) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.07s

";

    fn ran(name: &str, output: &str, success: bool) -> Pass {
        Pass::Ran {
            name: name.into(),
            counts: Counts::of(output),
            success,
        }
    }

    #[test]
    fn counts_every_binary_of_a_passing_run() {
        let counts = Counts::of(ALL_PASS);
        assert_eq!(
            counts,
            Counts {
                passed: 3,
                failed: 0,
                ignored: 1,
                finished: 3,
                unfinished: 0
            }
        );
    }

    #[test]
    fn counts_a_failing_test() {
        let counts = Counts::of(ONE_FAILS);
        assert_eq!((counts.passed, counts.failed, counts.finished), (1, 1, 1));
        let line = line(&[ran("workspace", ONE_FAILS, false)]);
        assert_eq!(line, "1 passed, 1 failed, 0 ignored (1 pass); FAILED");
    }

    #[test]
    fn reads_real_output_with_a_failure_and_a_crash() {
        assert_eq!(
            Counts::of(REAL),
            Counts {
                passed: 2,
                failed: 1,
                ignored: 1,
                finished: 2,
                unfinished: 1
            }
        );
        assert_eq!(
            line(&[ran("workspace", REAL, false)]),
            "2 passed, 1 failed, 1 ignored (1 pass); INCOMPLETE: in the workspace pass, 1 \
             test binary crashed before its result line (see above); FAILED"
        );
    }

    #[test]
    fn reads_coloured_output() {
        // As libtest colours on a terminal (its reset is `ESC ( B ESC [ m`).
        let coloured = "running 2 tests\n\
            test a ... \x1b[32mok\x1b(B\x1b[m\n\
            test result: \x1b[31mFAILED\x1b(B\x1b[m. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let counts = Counts::of(coloured);
        assert_eq!((counts.passed, counts.failed, counts.unfinished), (1, 1, 0));
    }

    #[test]
    fn a_pass_that_did_not_build_is_no_clean_count() {
        let passes = [
            ran("workspace", ALL_PASS, true),
            ran("TLS", BUILD_FAILED, false),
        ];
        assert!(passes[1].failed());
        assert_eq!(
            line(&passes),
            "3 passed, 0 failed, 1 ignored (2 passes); INCOMPLETE: the TLS pass ran no \
             tests: it did not build, or cargo failed (see above); FAILED"
        );
    }

    #[test]
    fn a_crashed_binary_is_no_clean_count() {
        let counts = Counts::of(CRASHED);
        assert_eq!(
            (counts.passed, counts.finished, counts.unfinished),
            (1, 1, 1)
        );
        // A crash fails the pass even if cargo's status were lost.
        let pass = ran("workspace", CRASHED, true);
        assert!(pass.failed());
        assert_eq!(
            line(&[pass]),
            "1 passed, 0 failed, 0 ignored (1 pass); INCOMPLETE: in the workspace pass, 1 \
             test binary crashed before its result line (see above); FAILED"
        );
    }

    #[test]
    fn a_binary_that_crashed_before_the_next_one_started_is_counted() {
        let output = "running 2 tests\ntest a ... ok\nrunning 1 test\ntest b ... ok\n\
            test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let counts = Counts::of(output);
        assert_eq!((counts.finished, counts.unfinished), (1, 1));
    }

    #[test]
    fn a_failure_without_failed_tests_is_named() {
        // cargo exited with failure although every binary that ran passed
        // (say, it could not run a later one).
        let line = line(&[ran("workspace", ALL_PASS, false)]);
        assert_eq!(
            line,
            "3 passed, 0 failed, 1 ignored (1 pass); INCOMPLETE: the workspace pass failed \
             with no failed test: see cargo's error above; FAILED"
        );
    }

    #[test]
    fn sums_the_passes_and_names_the_skipped_ones() {
        let passes = [
            ran("workspace", ALL_PASS, true),
            ran("TLS", ONE_FAILS, false),
            Pass::Skipped {
                name: "TLS doc tests".into(),
                why: "test options given".into(),
            },
        ];
        assert_eq!(
            line(&passes),
            "4 passed, 1 failed, 1 ignored (2 passes); skipped: TLS doc tests (test options \
             given); FAILED"
        );
        let clean = [
            ran("workspace", ALL_PASS, true),
            Pass::Skipped {
                name: "TLS".into(),
                why: "REDLOCK_TEST_SERVER is set".into(),
            },
        ];
        assert!(!clean.iter().any(Pass::failed));
        assert_eq!(
            line(&clean),
            "3 passed, 0 failed, 1 ignored (1 pass); skipped: TLS (REDLOCK_TEST_SERVER is set)"
        );
    }
}
