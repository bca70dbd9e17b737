//! `redlock fence init [--start N]` and `redlock fence repair`: the
//! operator's two steps for a fence domain (the library's
//! `Redlock::fence_init` and `Redlock::fence_repair`; docs/fencing.md,
//! sections 8 and 9). Prints a summary and what each master did, a line
//! each, on stdout; says on stderr why it failed.

use crate::args::{FenceAction, FenceArgs};
use crate::exit::{self, Exit};
use crate::json;
use crate::masters;
use crate::output::{say, show_key};
use redlock_sync::{Builder, Error, FenceFault, NodeOutcome, NodeReport};
use std::io::Write;
use NodeOutcome::{Agreed, Declined};

/// Runs the action on the domain and returns how the tool ends: 0 when
/// every master took part, `exit::ANCHORED` for an `init` refused because
/// the domain is anchored already, otherwise as the library's error says
/// (69 masters out of reach or no quorum, 77 refused, 78 configuration).
pub(crate) fn fence(args: &FenceArgs) -> Exit {
    let domain = args.domain.as_deref();
    let fencing = |builder: Builder| match domain {
        Some(domain) => builder.fencing(true).fence_domain(domain),
        None => builder.fencing(true),
    };
    let redlock = match masters::client(&args.masters, args.node_timeout, fencing) {
        Ok(redlock) => redlock,
        Err(failed) => return failed.exit,
    };
    let name = show_key(domain.unwrap_or(DEFAULT_DOMAIN).as_bytes());
    let result = match args.action {
        FenceAction::Init { start } => redlock.fence_init(start),
        FenceAction::Repair => redlock.fence_repair(),
    };
    let done = judge(&result, args.action, &name);
    if let Some(trouble) = &done.trouble {
        say(&format!("fence domain {name}: {trouble}"));
    }
    if let (false, true, Some(report)) = (args.quiet, args.json, done.report) {
        json::print(&document(&done, report, args.action, &name));
    } else if let (false, Some(report)) = (args.quiet, done.report) {
        let mut out = format!("fence domain {name}: {}\n", done.summary);
        let width = report.iter().map(|s| s.node().len()).max().unwrap_or(0);
        for status in report {
            let state = state(status.outcome(), done.words);
            out.push_str(&format!("  {:width$}  {state}\n", status.node()));
        }
        // A closed stdout (`| head -1`) undoes nothing that was done.
        let _ = std::io::stdout().write_all(out.as_bytes());
    }
    Exit::Code(done.code)
}

/// The library's fence domain when none is given (`Builder::fence_domain`).
const DEFAULT_DOMAIN: &str = "default";

/// What came of an action, for the output and the exit status.
struct Done<'a> {
    /// What each master did, if the action got as far as the masters.
    report: Option<&'a NodeReport>,
    /// How to read the report's outcomes.
    words: Words,
    /// The first line on stdout, after the domain's name.
    summary: String,
    /// Why it failed, for stderr.
    trouble: Option<String>,
    code: u8,
}

/// Which action's words a master's outcome is told in.
#[derive(Clone, Copy)]
enum Words {
    /// `init`'s anchors (agreed: anchored).
    Anchors,
    /// `init` refused, nothing written (agreed: answered without an anchor;
    /// declined: anchored).
    Refusal,
    /// `repair` (agreed: in the fresh epoch; not sent: not anchored).
    Repair,
}

fn judge<'a>(result: &'a Result<NodeReport, Error>, action: FenceAction, name: &str) -> Done<'a> {
    let report = match result {
        Ok(report) => Some(report),
        Err(error) => error.nodes(),
    };
    let words = match (result, action) {
        (Err(Error::FenceInitRefused(_)), _) => Words::Refusal,
        (_, FenceAction::Init { .. }) => Words::Anchors,
        (_, FenceAction::Repair) => Words::Repair,
    };
    let counts = report.map_or((0, 0, 0), |r| {
        (count(r, Agreed), count(r, Declined), r.len())
    });
    let (agreed, declined, n) = counts;
    let (summary, trouble, code) = match (result, action) {
        (Ok(_), FenceAction::Init { start }) => (
            format!(
                "initialised on {n} masters at {start}: tokens start at {}",
                start + 1
            ),
            None,
            0,
        ),
        (Ok(_), FenceAction::Repair) if agreed == n => {
            (format!("repaired: all {n} masters count"), None, 0)
        }
        // A quorum passed the barrier, but masters that did not answer
        // are still left out.
        (Ok(report), FenceAction::Repair) => (
            format!("repaired on {agreed} of {n} masters"),
            Some(format!(
                "{} of {n} masters did not take part: run redlock fence repair again once \
                 they answer",
                n - agreed
            )),
            exit::for_error(&Error::NoQuorum(report.clone())),
        ),
        (Err(Error::FenceInitRefused(_)), _) if declined > 0 => (
            format!("not initialised: already anchored on {declined} of {n} masters"),
            Some(format!(
                "already initialised (anchored on {declined} of {n} masters), nothing \
                 written; a master that lost its counter or restarted needs redlock fence \
                 repair instead"
            )),
            exit::ANCHORED,
        ),
        (Err(error @ Error::FenceInitRefused(_)), _) => (
            format!(
                "not initialised: {} of {n} masters did not answer",
                n - agreed
            ),
            Some(format!(
                "not initialised: every master must answer, {} of {n} did not (nothing \
                 written)",
                n - agreed
            )),
            exit::for_error(error),
        ),
        (Err(Error::NoQuorum(report)), FenceAction::Repair) => repair_failed(report, name),
        (Err(error), _) if report.is_none() => {
            let what = match action {
                FenceAction::Init { .. } => "not initialised",
                FenceAction::Repair => "not repaired",
            };
            let trouble = format!("{what}: {error}");
            (trouble.clone(), Some(trouble), exit::for_error(error))
        }
        (Err(error), _) => {
            let what = match action {
                FenceAction::Init { .. } => "not initialised",
                FenceAction::Repair => "not repaired",
            };
            let summary = format!("{what}: {agreed} of {n} masters took part");
            (
                summary,
                Some(format!("{what}: {error}")),
                exit::for_error(error),
            )
        }
    };
    Done {
        report,
        words,
        summary,
        trouble,
        code,
    }
}

/// The summary, the trouble and the status of a repair that failed for
/// want of masters: too few kept their counter (the domain must be
/// initialised again), or too few answered (run it again later).
fn repair_failed(report: &NodeReport, name: &str) -> (String, Option<String>, u8) {
    let n = report.len();
    let quorum = n / 2 + 1;
    let failed = |lost: bool| {
        report
            .iter()
            .filter(|s| {
                matches!(s.outcome(), NodeOutcome::Failed(e) if e.fence_fault().is_some() == lost)
            })
            .count()
    };
    let (kept, lost, silent) = (count(report, Agreed), failed(true), failed(false));
    let summary =
        format!("not repaired: {kept} of {n} masters kept their counter, {quorum} needed");
    let trouble = if kept >= quorum || kept + silent >= quorum {
        format!(
            "not repaired: {silent} of {n} masters did not answer (or could not take part): run \
             redlock fence repair again once they answer"
        )
    } else {
        format!(
            "not repaired: only {kept} of {n} masters kept their counter ({lost} lost it, \
             restarted or rolled back), and a repair needs {quorum}: initialise the domain \
             again: DEL redlock-sync:fence:{name} on every master, then redlock fence init \
             --start N, N at least the largest token any resource accepted"
        )
    };
    (
        summary,
        Some(trouble),
        exit::for_error(&Error::NoQuorum(report.clone())),
    )
}

fn count(report: &NodeReport, outcome: NodeOutcome) -> usize {
    report.iter().filter(|s| *s.outcome() == outcome).count()
}

/// One master's part, in the action's words.
fn state(outcome: &NodeOutcome, words: Words) -> String {
    match (outcome, words) {
        (Agreed, Words::Anchors) => "anchored".into(),
        (Agreed, Words::Refusal) => "not anchored yet".into(),
        (Declined, Words::Refusal) => "already anchored".into(),
        (Agreed, Words::Repair) => "anchored in the new epoch: counts".into(),
        (NodeOutcome::NotSent, Words::Repair) => "left out: no valid anchor".into(),
        (NodeOutcome::Failed(error), Words::Repair) => match error.fence_fault() {
            Some(fault) => format!("left out: {}", why(fault)),
            None => format!("no answer: {error}"),
        },
        (NodeOutcome::Failed(error), _) => format!("failed: {error}"),
        (other, _) => format!("{other:?}"),
    }
}

/// The `--json` document of an action that got as far as the masters.
fn document(done: &Done<'_>, report: &NodeReport, action: FenceAction, name: &str) -> json::Fence {
    let (action, start) = match action {
        FenceAction::Init { start } => ("init", Some(start)),
        FenceAction::Repair => ("repair", None),
    };
    json::Fence {
        domain: name.to_string(),
        action,
        start,
        done: done.code == 0,
        summary: done.summary.clone(),
        error: done.trouble.clone(),
        exit_code: done.code,
        masters: report
            .iter()
            .map(|status| {
                let (state, fault, detail) = json_state(status.outcome(), done.words);
                json::FenceMaster {
                    address: status.node().to_string(),
                    state,
                    fault,
                    detail,
                }
            })
            .collect(),
    }
}

/// One master's part, as `json::FenceMaster` names it: its state, why it
/// is left out, and what is wrong in words.
fn json_state(
    outcome: &NodeOutcome,
    words: Words,
) -> (&'static str, Option<&'static str>, Option<String>) {
    match (outcome, words) {
        (Agreed, Words::Anchors) => ("anchored", None, None),
        (Agreed, Words::Refusal) => ("not_anchored", None, None),
        (Declined, Words::Refusal) => ("already_anchored", None, None),
        (Agreed, Words::Repair) => ("counts", None, None),
        (NodeOutcome::NotSent, Words::Repair) => (
            "left_out",
            Some(json::fault_name(FenceFault::Unanchored)),
            Some("no valid anchor".into()),
        ),
        (NodeOutcome::Failed(error), Words::Repair) => match error.fence_fault() {
            Some(fault) => ("left_out", Some(json::fault_name(fault)), Some(why(fault))),
            None => ("no_answer", None, Some(error.to_string())),
        },
        (NodeOutcome::Failed(error), _) => ("failed", None, Some(error.to_string())),
        (other, _) => ("other", None, Some(format!("{other:?}"))),
    }
}

/// Why a master is left out of the fence domain, in a repair's words.
fn why(fault: FenceFault) -> String {
    match fault {
        FenceFault::Unanchored => "no anchor (it lost its data)".into(),
        FenceFault::Restarted => {
            "restarted since it was anchored (its counter may have gone back)".into()
        }
        FenceFault::ReplicationChanged => "its data set changed since it was anchored (a new \
             replication id: promoted, failed back, or a replica now)"
            .into(),
        FenceFault::OldAnchor => "anchored by an earlier redlock-sync, and its place cannot be \
             told while a master does not answer"
            .into(),
        FenceFault::OtherEpoch => "in another epoch than the others".into(),
        FenceFault::InfoRefused => {
            "INFO is refused, so restarts cannot be told (grant +info)".into()
        }
        other => other.to_string(),
    }
}
