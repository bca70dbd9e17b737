//! A set's release or extension without scripts (`Builder::allow_scripts
//! (false)`): a run of native commands, one per key (see
//! `command::Form::Run`), owed as one entry ([`Expect::Run`]) whatever the
//! set's size, so that the owed queue and its limits count a set as one
//! command. The run's replies are matched in order; the master's vote, the
//! set's, comes with the last of them, then waits for the run's `ECHO` as
//! any command's does.
//!
//! - A release deletes each key that holds the value (`DELIFEQ`, or
//!   `DELEX … IFEQ`): yes if every key did, as the set's release script
//!   answers. The notice of each key deleted is published (on its
//!   channel, as the script does from inside), built from the script's
//!   arguments kept for the run; unlike a single native release's, it goes
//!   without a count of listeners first (a `PUBLISH` nobody hears costs
//!   the server little, and a set's K counts would cost more).
//! - An extension resets each key's TTL if it holds the value (`SET …
//!   IFEQ`), and where the set's extension repairs, sets each key left
//!   absent (`SET … NX`, behind its `IFEQ` one: a key the `IFEQ` reset
//!   exists, so the `NX` does nothing). The master counts only if every key
//!   got its TTL. Unlike the script, the run is not atomic: a master where
//!   one key is another's has extended the others (the master does not
//!   count, as with the script, and those keys expire with their TTL).
//! - After an `ASK` redirect, each command of the run goes behind an
//!   `ASKING` of its own (the server honours one `ASKING` for the one
//!   command after it): their answers are read in place, inside the run.
//! - A server's error on any command of the run is the master's vote (the
//!   first one), at the run's end; a refusal of the command itself (it is
//!   unknown, or the ACL forbids it) marks the form absent here. A release
//!   run refused so goes again in the next form if one is left (`DELIFEQ`
//!   is tried first on a new connection before its probes answer; Redis
//!   8.4 has `DELEX … IFEQ` only): see `resend_run`, called from
//!   `Ledger::resent_instead` as a single command's re-sending is, from
//!   the release's arguments kept for the run. Otherwise the next command
//!   has no form left on this connection and fails by name (an extension
//!   has one native form, `SET … IFEQ`, and no script to fall back to).

use super::expect::{provisional_if, Step};
use super::expect::{Expect, Owed};
use super::owed::{Ledger, Purpose};
use crate::command::native::{self, Known, Native};
use crate::command::{encode_release_run_from_script_args, Encoded, ReplicaAck, ScriptId, Vote};
use crate::error::{NodeError, ServerError};
use crate::resp::{decode, Decoded, Reply, ServerErrorKind};
use std::time::Instant;

// An owed script call keeps its argument count as a u16 and its kept
// arguments' length as a u32, and a run its replies as a u16: the largest
// set's (a key and a channel per name, a few more; two commands per key)
// fit. Raising the set limits past these fails the build.
const _: () = assert!(2 * crate::names::MAX_SET_LEN + 16 <= u16::MAX as usize);
const _: () =
    assert!(2 * crate::names::MAX_SET_BYTES + 256 * crate::names::MAX_SET_LEN <= u32::MAX as usize);

impl Ledger {
    /// Appends a set's run (see the module docs) of `form` for plain
    /// script `id`, its `ECHO` (unless `unawaited`) and the replica guard's
    /// command before it, and owes them; `like` is the run's `ECHO` entry.
    /// If `asking` (an `ASKING` was queued for its first command), every
    /// later command gets its own.
    pub(super) fn record_run(
        &mut self,
        command: &Encoded,
        (form, id): (Native, ScriptId),
        like: Owed,
        (guard, unawaited, asking): (Option<ReplicaAck>, bool, bool),
        out: &mut Vec<u8>,
    ) {
        let tag = command.tag();
        let echo = !unawaited;
        let (left, per_key) = command.run_len();
        let releases = form != Native::SetIfEq;
        // A release keeps the script's arguments: to be sent again in its
        // next form if this one is refused (see `resend_run`), and, with a
        // notice, to build each key's from: the notice, then a channel per
        // key (after the key count, the keys, the mode and the value).
        let (tail, _) = command.script_args(id);
        let (tail_len, notice_at, cursor) = if releases {
            self.make_tail_room(tail.len());
            self.tails.extend_from_slice(tail);
            let (notice_at, cursor) = notice_of(tail, left);
            (tail.len() as u32, notice_at, cursor)
        } else {
            (0, 0, 0)
        };
        let commands = command.native(form, false);
        if asking {
            let mut rest = commands;
            while !rest.is_empty() {
                if rest.len() < commands.len() {
                    out.extend_from_slice(super::cluster::ASKING);
                }
                let (first, after) = rest.split_at(command_len(rest));
                out.extend_from_slice(first);
                rest = after;
            }
        } else {
            out.extend_from_slice(commands);
        }
        let run = Owed {
            expect: Expect::Run {
                form,
                id,
                tag,
                left,
                per_key,
                all: true,
                key_ok: false,
                tail_len,
                notice_at,
                cursor,
                echo,
                asks: asking,
                asking: false,
                ran: false,
            },
            ..like
        };
        self.owed.push_back(run);
        if let Some(guard) = guard {
            self.expect_ack(guard, run, echo, out);
        }
        if echo {
            out.extend_from_slice(command.echo());
            self.owed.push_back(like);
        }
    }

    /// Takes in one judged reply that answers part of the entry at the
    /// front of the owed queue: a run's (a command's, or an `ASKING`'s:
    /// see `run_asked`), or a notice's (see `Ledger::noticed`).
    pub(super) fn take_part(
        &mut self,
        step: Step,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
        out: &mut Vec<u8>,
    ) -> Result<bool, NodeError> {
        match step {
            Step::RunReply(reply) => self.run_reply(reply, round, deliver, out),
            Step::RunAsked => Ok(self.run_asked()),
            _ => Ok(self.noticed()),
        }
    }

    /// Takes in one reply of the run at the front of the owed queue: its
    /// vote once it is the last (see `Ledger::apply`).
    fn run_reply(
        &mut self,
        reply: Result<bool, ServerError>,
        round: Option<u64>,
        deliver: &mut impl FnMut(u16, Vote),
        out: &mut Vec<u8>,
    ) -> Result<bool, NodeError> {
        let front = self.owed.front_mut().expect("judged an owed reply");
        let (deadline, purpose) = (front.deadline, front.purpose);
        let Expect::Run {
            form,
            left,
            per_key,
            all,
            key_ok,
            tail_len,
            notice_at,
            cursor,
            echo,
            asks,
            asking,
            ran,
            ..
        } = &mut front.expect
        else {
            unreachable!("a run's reply answers a run")
        };
        let form = *form;
        let (done, second) = match reply {
            Ok(done) => {
                *ran = true;
                (done, *per_key == 2 && *left % 2 == 1)
            }
            Err(error) => {
                if let Some(lack) = native::refusal(&error) {
                    self.caps.native.set(form, Known::Absent(lack));
                    self.forms_changed = true;
                }
                self.run_error.get_or_insert(error);
                (false, *per_key == 2 && *left % 2 == 1)
            }
        };
        *left -= 1;
        // Per key: one reply, or the IFEQ's and then the NX's.
        let key_done = if *per_key == 2 && !second {
            *key_ok = done;
            None
        } else {
            Some(done || (second && *key_ok))
        };
        let mut publish = None;
        if let Some(ok) = key_done {
            *all &= ok;
            if *notice_at > 0 {
                publish = Some((ok, *notice_at, *cursor, *tail_len));
                *cursor = next_bulk(&self.tails[self.tails_start..], *cursor as usize) as u32;
            }
        }
        let (finished, all, echo, ran) = (*left == 0, *all, *echo, *ran);
        // An ASKING's answer comes before the next command's.
        *asking = *asks && !finished;
        if let Some((true, notice, at, len)) = publish {
            let (notice, at, len) = (notice as usize, at as usize, len as usize);
            self.publish_key((notice, at), len, deadline, purpose, round);
        }
        if !finished {
            return Ok(false);
        }
        // Its kept arguments go once it is answered for good (see
        // `Ledger::resent_instead`).
        let owed = self.owed.pop_front().expect("the run");
        let vote = match self.run_error.take() {
            Some(error) if ran && is_redirect(&error) => {
                Vote::Failed(NodeError::Server(partly_run(&error)))
            }
            Some(error) => Vote::Failed(NodeError::Server(error)),
            None if all => Vote::Yes,
            None => Vote::No,
        };
        self.apply(owed, provisional_if(echo, vote), round, deliver, out)
    }

    /// The server refused the form of release run `owed` (now marked
    /// absent) before running it, and `next` is left: queues the run again
    /// in that form, from its kept arguments, behind whatever was sent
    /// since, for the same purpose (as `resend_native` does a single
    /// release). After an `ASK`, each command has its `ASKING` again.
    pub(super) fn resend_run(&mut self, owed: Owed, next: Native, out: &mut Vec<u8>) {
        self.move_notices(out, owed.deadline);
        let Expect::Run {
            id,
            tag,
            tail_len,
            echo,
            asks,
            ..
        } = owed.expect
        else {
            unreachable!("only runs are re-sent as runs")
        };
        let (start, len) = (self.tails_start, tail_len as usize);
        let tail = &self.tails[start..start + len];
        let before_each = if asks { super::cluster::ASKING } else { b"" };
        let keys = encode_release_run_from_script_args(next, tail, before_each, out);
        // At most MAX_SET_LEN (see the assertions above).
        let left = keys as u16;
        let (notice_at, cursor) = notice_of(tail, left);
        let expect = Expect::Run {
            form: next,
            id,
            tag,
            left,
            per_key: 1,
            all: true,
            key_ok: false,
            tail_len,
            notice_at,
            cursor,
            echo,
            asks,
            // Each command's `ASKING` is answered first.
            asking: asks,
            ran: false,
        };
        self.requeue(owed, expect, false, echo, tag, len, out);
    }

    /// Takes in the answer to an `ASKING` inside the run at the front of
    /// the owed queue (`+OK`, or an error: the command after it then
    /// answers for itself, with a redirect): its command's answer is next.
    fn run_asked(&mut self) -> bool {
        let front = self.owed.front_mut().expect("judged an owed reply");
        if let Expect::Run { asking, .. } = &mut front.expect {
            *asking = false;
        }
        false
    }

    /// Builds the notice (at `notice`) of the key whose channel starts at
    /// `at` in the run's kept arguments (`len` bytes at the front of the
    /// tails), as `notice::publish` does for a single release; an empty
    /// channel is no one's.
    fn publish_key(
        &mut self,
        (notice, at): (usize, usize),
        len: usize,
        deadline: Instant,
        purpose: Option<Purpose>,
        round: Option<u64>,
    ) {
        let awaited = purpose.is_some_and(|p| Some(p.round) == round);
        if !(awaited || Instant::now() <= deadline) {
            return;
        }
        let tail = &self.tails[self.tails_start..self.tails_start + len];
        let (notice, channel) = (bulk_at(tail, notice), bulk_at(tail, at));
        if channel.is_empty() {
            return;
        }
        let notices = &mut self.notices;
        native::encode_publish(channel, notice, self.caps.sharded, &mut notices.pending);
        notices.count += 1;
        notices.deadline = notices.deadline.max(Some(deadline));
        notices.urgent |= awaited;
    }
}

/// Where the notice is in a set release script's arguments `tail` for a
/// run of `keys` replies, and its first channel (after the key count, the
/// keys, the mode and the value); (0, 0) if it tells nobody.
fn notice_of(tail: &[u8], keys: u16) -> (u32, u32) {
    match bulk_offsets(tail).nth(usize::from(keys) + 3) {
        Some(at) => (at as u32, next_bulk(tail, at) as u32),
        None => (0, 0),
    }
}

/// The length of the command at the front of `commands` (which we
/// encoded: an array of bulk strings).
fn command_len(commands: &[u8]) -> usize {
    let line_end = |at: usize| {
        commands[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(commands.len(), |i| at + i + 1)
    };
    let number = |at: usize, end: usize| -> usize {
        std::str::from_utf8(&commands[at + 1..end - 2])
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let end = line_end(0);
    let mut at = end;
    for _ in 0..number(0, end) {
        let end = line_end(at);
        at = (end + number(at, end) + 2).min(commands.len());
    }
    at
}

/// The offsets of the bulk strings of a script call's arguments (which we
/// encoded), in order.
fn bulk_offsets(tail: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at;
        match decode(&tail[at..]) {
            Ok(Decoded::Complete(Reply::Bulk(_), used)) => {
                at += used;
                Some(start)
            }
            _ => None,
        }
    })
}

/// The offset of the bulk string after the one at `at`.
fn next_bulk(tail: &[u8], at: usize) -> usize {
    match tail.get(at..).map(decode) {
        Some(Ok(Decoded::Complete(_, used))) => at + used,
        _ => tail.len(),
    }
}

/// The bulk string at `at`.
fn bulk_at(tail: &[u8], at: usize) -> &[u8] {
    match tail.get(at..).map(decode) {
        Some(Ok(Decoded::Complete(Reply::Bulk(bytes), _))) => bytes,
        _ => b"",
    }
}

/// Whether `error` sends the command elsewhere (`MOVED`, `ASK`).
fn is_redirect(error: &ServerError) -> bool {
    matches!(error.kind(), ServerErrorKind::Moved | ServerErrorKind::Ask)
}

/// The failure of a run that met a redirect after some of its commands
/// ran here (its slot migrating mid-run): following the redirect would
/// send the whole run again to the other node, running those commands
/// twice (an extension's repairing `SET NX` would create a second copy of a
/// key the migration has not moved yet). A `TRYAGAIN`, as the server says
/// of a multi-key command on a migrating slot: the master fails this round.
fn partly_run(error: &ServerError) -> ServerError {
    let line =
        format!("TRYAGAIN a set's run met a redirect after some of its commands ran ({error})");
    ServerError::from_line(line.as_bytes())
}
