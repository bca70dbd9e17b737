//! `redlock completions SHELL` and `redlock man`: the shell completions
//! (clap_complete) and the manual pages (clap_mangen, in roff), made from
//! the grammar in `cli`, so that they never disagree with it.
//!
//! A page is clap_mangen's sections (NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
//! the commands), then the sections of the command's after-help text in
//! `help` (ENVIRONMENT, EXIT STATUS, ...: each heading a man section, its
//! two-space lines filled paragraphs, deeper lines kept as they are), then
//! VERSION. One page per command, as git's: redlock(1), redlock-run(1),
//! redlock-fence-init(1), ...

use crate::args::ManPages;
use crate::cli::Cli;
use crate::exit::{self, Exit};
use crate::output::say;
use clap::CommandFactory;
use clap_complete::Shell;
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;
use std::io::{self, Write};
use std::path::Path;

/// Prints the completion script for `shell` on stdout.
pub(crate) fn completions(shell: Shell) -> Exit {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "redlock", &mut script);
    write_out(&script)
}

/// Prints one page on stdout, or writes every page into a directory.
pub(crate) fn man(pages: &ManPages) -> Exit {
    match pages {
        ManPages::One(path) => match page(path) {
            Ok(text) => write_out(&text),
            Err(error) => {
                say(&format!("cannot make the manual page: {error}"));
                Exit::Code(exit::OS_ERROR)
            }
        },
        ManPages::All(dir) => match write_all(dir) {
            Ok(()) => Exit::Code(0),
            Err(error) => {
                say(&format!(
                    "cannot write the manual pages into {}: {error}",
                    dir.display()
                ));
                Exit::Code(exit::CANT_CREATE)
            }
        },
    }
}

/// A closed stdout (`| head`) is no failure.
fn write_out(bytes: &[u8]) -> Exit {
    let _ = io::stdout().write_all(bytes);
    Exit::Code(0)
}

/// The grammar as the pages show it: built (so that each command knows
/// its full name, `redlock fence init`), without the `help` command.
fn grammar() -> clap::Command {
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    top
}

/// The page of the command at `path` (`[]`: redlock itself), in roff.
pub(crate) fn page(path: &[String]) -> io::Result<Vec<u8>> {
    let mut command = grammar();
    for name in path {
        command = command
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no command {name}")))?;
    }
    render(command)
}

/// Every page, each into `dir` as NAME.1.
fn write_all(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut pending = vec![grammar()];
    while let Some(command) = pending.pop() {
        pending.extend(command.get_subcommands().cloned());
        let name = command
            .get_display_name()
            .unwrap_or_else(|| command.get_name())
            .to_string();
        std::fs::write(dir.join(format!("{name}.1")), render(command)?)?;
    }
    Ok(())
}

fn render(command: clap::Command) -> io::Result<Vec<u8>> {
    // clap_mangen would put the after-help text in one filled EXTRA
    // section: it goes in as sections of its own instead, before VERSION.
    let after = command.get_after_long_help().map(|text| text.to_string());
    let man = Man::new(command.after_long_help(None::<&str>))
        .source(format!("redlock {}", env!("CARGO_PKG_VERSION")))
        .manual("User Commands");
    let mut out = Vec::new();
    man.render(&mut out)?;
    if let Some(text) = after {
        let extra = sections(&text).to_roff();
        let at = find(&out, b".SH VERSION").unwrap_or(out.len());
        out.splice(at..at, extra.into_bytes());
    }
    Ok(out)
}

/// Where `needle` starts in `haystack`, at the start of a line.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    (0..haystack.len())
        .find(|&i| haystack[i..].starts_with(needle) && (i == 0 || haystack[i - 1] == b'\n'))
}

/// An after-help text (see `help` for its form) as man sections.
fn sections(text: &str) -> Roff {
    let mut roff = Roff::new();
    let mut verbatim = false;
    // A blank line: a break, once more text follows in the section.
    let mut gap = false;
    for line in text.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|_| !line.starts_with(' ')) {
            if verbatim {
                roff.control("fi", []);
                verbatim = false;
            }
            roff.control("SH", [heading.to_uppercase().as_str()]);
            gap = false;
        } else if line.trim().is_empty() {
            gap = true;
        } else {
            let kept = line.strip_prefix("    ");
            if verbatim && kept.is_none() {
                roff.control("fi", []);
                verbatim = false;
            }
            if gap {
                roff.control(if verbatim { "sp" } else { "PP" }, []);
                gap = false;
            }
            if kept.is_some() && !verbatim {
                roff.control("nf", []);
                verbatim = true;
            }
            roff.text([roman(kept.unwrap_or(line.trim_start()))]);
        }
    }
    if verbatim {
        roff.control("fi", []);
    }
    roff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(path: &[&str]) -> String {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        String::from_utf8(page(&path).unwrap()).unwrap()
    }

    #[test]
    fn the_top_page_names_every_command_and_has_the_manual_sections() {
        let top = text(&[]);
        for command in [
            "redlock\\-run",
            "redlock\\-status",
            "redlock\\-fence",
            "redlock\\-man",
        ] {
            assert!(top.contains(command), "{command} in {top}");
        }
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH ENVIRONMENT",
            ".SH \"EXIT STATUS\"",
            ".SH \"GUARANTEES AND LIMITS\"",
            ".SH EXAMPLES",
        ] {
            assert!(top.contains(section), "{section} in {top}");
        }
        assert!(!top.contains(".SH EXTRA"));
    }

    #[test]
    fn each_command_has_a_page_with_its_options() {
        let run = text(&["run"]);
        assert!(run.contains(".TH redlock-run 1"), "{run}");
        assert!(run.contains("\\-\\-max\\-hold"), "{run}");
        assert!(run.contains("REDLOCK_FENCE_TOKEN"), "{run}");
        let init = text(&["fence", "init"]);
        assert!(init.contains("\\-\\-start"), "{init}");
        assert!(page(&["lock".to_string()]).is_err());
    }

    #[test]
    fn verbatim_lines_are_kept_apart_from_filled_ones() {
        let text = "Examples:\n  A paragraph.\n    kept  as is\n\n  More.\n\nSee also:\n    x\n";
        let roff = sections(text).to_roff();
        assert_eq!(
            roff,
            ".SH EXAMPLES\nA paragraph.\n.nf\nkept  as is\n.fi\n.PP\nMore.\n.SH \"SEE ALSO\"\n.nf\nx\n.fi\n"
        );
    }
}
