//! What a connection re-sends when the server refused a release or an
//! extension before running it, on the same connection and for the same
//! round: a script whose server lost its script cache (`NOSCRIPT`) goes
//! again by body (`EVAL`); a native form the server does not have or may
//! not run (see `command::native`) goes in the next form (`DELIFEQ`, then
//! `DELEX … IFEQ`, then the script), unless none is left; a set's release
//! run likewise (see `run`). No I/O here: the
//! ledger (see `owed`) calls this on a judged reply, and the connection
//! writes what it appends.
//!
//! A script refused for want of a right (`NOPERM`, or renamed away) marks
//! the connection's scripts as impossible; the connection then ends unless
//! it can still release natively (see `command::rights`).

use super::owed::{Expect, Ledger, Owed};
use crate::command::native::{self, Known, Native};
use crate::command::rights::{refused_script, Probe};
use crate::command::{
    encode_native_from_script_args, encode_script_head, encode_set_from_script_args, is_noscript,
    ScriptId, Vote,
};
use crate::error::NodeError;
use crate::resp::{encode_args, encode_array_header, Arg};

/// How many owed calls' arguments [`Ledger::tails`] makes room for at
/// once, counting the compacted front (`drop_tail` compacts once half of
/// it is dead): twice the calls a master owes before the round holds it
/// back as lagging (16, `round::held_back`), and a few more.
const TAILS_ROOM_CALLS: usize = 2 * 16 + 4;

/// The most [`Ledger::tails`] reserves ahead of need: a call whose
/// arguments are longer than this over [`TAILS_ROOM_CALLS`] (a set of some
/// thirty names and more) grows it when a lag needs the room, not before.
const TAILS_ROOM_LIMIT: usize = 64 * 1024;

impl Ledger {
    /// Looks at a release's or extension's answer `vote` to `owed` before
    /// it counts: `Ok(true)` if the command was re-sent into `out` instead
    /// (its copy will vote), an error if the connection must end. Forgets
    /// the command's arguments once it is answered for good.
    ///
    /// `round` is the round now waiting: a refused acquisition script (the
    /// first acquisition on a new connection) goes again as `SET` only
    /// while its round waits, when nothing else went out behind it.
    pub(super) fn resent_instead(
        &mut self,
        owed: Owed,
        vote: &Vote,
        round: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Result<bool, NodeError> {
        let refused = match vote {
            Vote::Failed(NodeError::Server(error)) => Some(error),
            _ => None,
        };
        match owed.expect {
            Expect::Script { id, tail_len, .. } => {
                if let Some((lack, refusal)) = refused.and_then(refused_script) {
                    self.forms_changed = true;
                    self.caps.releasing = self
                        .caps
                        .releasing
                        .probed(Probe::Evalsha, Some(lack))
                        .probed(Probe::Eval, Some(lack));
                    // Still of use if it releases natively.
                    if !self.caps.native.can_release() {
                        return Err(refusal);
                    }
                    let awaited = owed.purpose.is_some_and(|p| Some(p.round) == round);
                    if id == ScriptId::AcquireTagged && awaited && self.caps.echo {
                        self.resend_as_set(owed, out);
                        return Ok(true);
                    }
                }
                if is_noscript(vote) {
                    self.resend_as_eval(owed, out);
                    return Ok(true);
                }
                self.drop_tail(tail_len as usize);
                Ok(false)
            }
            Expect::Native {
                form,
                id,
                tail_len,
                notice,
                ..
            } => {
                if let Some(lack) = refused.and_then(native::refusal) {
                    self.forms_changed = true;
                    self.caps.native.set(form, Known::Absent(lack));
                    // A set's acquisition refused with no form left set
                    // nothing: the refusal is this master's answer, and
                    // the connection stays (its next set fails by name).
                    if form != Native::MSetEx || self.has_next_form(id) {
                        self.resend_native(owed, out)?;
                        return Ok(true);
                    }
                }
                if !(notice && self.keep_for_notice(vote, tail_len)) {
                    self.drop_tail(tail_len as usize);
                }
                Ok(false)
            }
            Expect::Run {
                form, id, tail_len, ..
            } => {
                // A release run refused before it ran (its form is marked
                // absent by then: see `run`) goes again in the next form,
                // if one is left: DELIFEQ, then DELEX … IFEQ.
                let next = self.caps.run_for(id).filter(|&next| next != form);
                if let (Some(_), Some(next)) = (refused.and_then(native::refusal), next) {
                    self.resend_run(owed, next, out);
                    return Ok(true);
                }
                self.drop_tail(tail_len as usize);
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// The server answered NOSCRIPT (its script cache was flushed): queues
    /// the same call as EVAL (and, for a plain script, its `ECHO` again),
    /// behind whatever was sent since, for the same purpose. EVAL also puts
    /// the script back in the cache, so later calls go by digest again.
    fn resend_as_eval(&mut self, owed: Owed, out: &mut Vec<u8>) {
        self.move_notices(out, owed.deadline);
        let Expect::Script {
            id,
            tag,
            args,
            tail_len,
            echo,
        } = owed.expect
        else {
            unreachable!("only script calls are re-sent as EVAL")
        };
        let (start, len) = (self.tails_start, tail_len as usize);
        encode_script_head(id, false, usize::from(args), out);
        out.extend_from_slice(&self.tails[start..start + len]);
        self.requeue(owed, owed.expect, false, echo, tag, len, out);
    }

    /// The acquisition script was refused (no scripting right) before it
    /// ran, on a connection that releases natively: queues the acquisition
    /// as `SET … NX PX` and `ECHO tag`, for the same round.
    fn resend_as_set(&mut self, owed: Owed, out: &mut Vec<u8>) {
        self.move_notices(out, owed.deadline);
        let Expect::Script { tag, tail_len, .. } = owed.expect else {
            unreachable!("only the acquisition script goes again as SET")
        };
        let guarded = self.ack_follows(Some(tag));
        let (start, len) = (self.tails_start, tail_len as usize);
        encode_set_from_script_args(&self.tails[start..start + len], out);
        self.drop_tail(len);
        let resent = Owed {
            resent: true,
            expect: Expect::Set { tag },
            ..owed
        };
        self.owed.push_back(resent);
        self.resent_owed += 1;
        self.requeue_guard(guarded, resent, true, out);
        encode_array_header(out, 2);
        encode_args(out, &[Arg::Bytes(b"ECHO"), Arg::Uint(tag)]);
        self.owed.push_back(Owed {
            expect: Expect::Tag { tag, follows: true },
            ..resent
        });
        self.resent_owed += 1;
    }

    /// Whether a command of plain script `id` whose native form was just
    /// refused has a form left here (see `resend_native`).
    fn has_next_form(&self, id: ScriptId) -> bool {
        self.caps.native_for(id).is_some()
            || (self.caps.scripts && self.caps.releasing.refusal().is_none())
    }

    /// The server refused native form `form` of `owed` (now marked absent):
    /// queues the command in its next form, native or the script by body,
    /// behind whatever was sent since. An error if no form is left.
    fn resend_native(&mut self, owed: Owed, out: &mut Vec<u8>) -> Result<(), NodeError> {
        self.move_notices(out, owed.deadline);
        let Expect::Native {
            id,
            tag,
            args,
            tail_len,
            echo,
            form: _,
            notice: _,
        } = owed.expect
        else {
            unreachable!("only native forms go to their next form")
        };
        let (start, len) = (self.tails_start, tail_len as usize);
        let tail = &self.tails[start..start + len];
        let (expect, notice) = match self.caps.native_for(id) {
            Some(next) => {
                let notice = encode_native_from_script_args(next, id, tail, out);
                let expect = Expect::Native {
                    form: next,
                    id,
                    tag,
                    args,
                    tail_len,
                    echo,
                    notice,
                };
                (expect, notice)
            }
            None if self.caps.scripts && self.caps.releasing.refusal().is_none() => {
                // The script publishes the notice itself.
                encode_script_head(id, false, usize::from(args), out);
                out.extend_from_slice(tail);
                self.caps.set_cached(id, true);
                let expect = Expect::Script {
                    id,
                    tag,
                    args,
                    tail_len,
                    echo,
                };
                (expect, false)
            }
            None => return Err(self.caps.no_form_left(id)),
        };
        self.requeue(owed, expect, notice, echo, tag, len, out);
        Ok(())
    }

    /// Queues what a re-sent command is owed (`expect`, its notice's
    /// `PUBSUB NUMSUB`'s, its guard's, its `ECHO`'s), appending the guard's
    /// command and the `ECHO` to `out`, and
    /// moves its arguments (`len` bytes) to the back, as the command moved.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn requeue(
        &mut self,
        owed: Owed,
        expect: Expect,
        notice: bool,
        echo: bool,
        tag: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) {
        let guarded = self.ack_follows(Some(tag));
        let start = self.tails_start;
        self.tails.extend_from_within(start..start + len);
        self.drop_tail(len);
        let resent = Owed {
            resent: true,
            expect,
            ..owed
        };
        self.owed.push_back(resent);
        self.resent_owed += 1;
        if notice {
            self.owed.push_back(Owed {
                expect: Expect::Listeners { tag },
                ..resent
            });
            self.resent_owed += 1;
        }
        self.requeue_guard(guarded, resent, echo, out);
        if echo {
            encode_array_header(out, 2);
            encode_args(out, &[Arg::Bytes(b"ECHO"), Arg::Uint(tag)]);
            self.owed.push_back(Owed {
                expect: Expect::Tag { tag, follows: true },
                ..resent
            });
            self.resent_owed += 1;
        }
    }

    /// A re-sent copy of a guarded command (`guarded`: the original's
    /// guard is still owed) gets a guard of its own, behind it: the first
    /// one ran before the copy, so it cannot count the copy's write.
    fn requeue_guard(&mut self, guarded: bool, resent: Owed, echo: bool, out: &mut Vec<u8>) {
        if let (true, Some(guard)) = (guarded, self.guard) {
            self.expect_ack(guard, resent, echo, out);
            self.resent_owed += 1;
        }
    }

    /// Makes room in the kept arguments for calls of `len` bytes, as many
    /// as a master that falls behind can owe: grown the first time calls
    /// this long are sent, not at some later moment when a master happens
    /// to lag further (a set's calls are several times a single lock's, so
    /// the initial room held only a few of them: tests/allocations.rs'
    /// sets of 8 grew it, 1 run in many, in CI). Bounded by
    /// `TAILS_ROOM_LIMIT`.
    pub(super) fn make_tail_room(&mut self, len: usize) {
        let room = (len * TAILS_ROOM_CALLS).min(TAILS_ROOM_LIMIT);
        if self.tails.capacity() < room {
            self.tails.reserve_exact(room - self.tails.len());
        }
    }

    /// Forgets the arguments of the oldest owed script call.
    pub(super) fn drop_tail(&mut self, len: usize) {
        self.tails_start += len;
        if self.tails_start == self.tails.len() {
            self.tails.clear();
            self.tails_start = 0;
        } else if self.tails_start > self.tails.len() / 2 {
            // Never empty for long under load: compact instead of growing.
            self.tails.drain(..self.tails_start);
            self.tails_start = 0;
        }
    }
}

#[cfg(test)]
mod tail_room_tests {
    use super::super::owed::Ledger;
    use super::TAILS_ROOM_CALLS;

    /// Kept arguments of `calls` calls of `len` bytes, each given room
    /// first as the ledger does when it records one.
    fn keep(ledger: &mut Ledger, calls: usize, len: usize) {
        for _ in 0..calls {
            ledger.make_tail_room(len);
            ledger.tails.extend(std::iter::repeat_n(b'x', len));
        }
    }

    /// Regression (CI, tests/allocations.rs, sets of 8): the kept arguments
    /// held only a few of a set's calls, and grew when a master happened
    /// to lag further than in the warm-up. The first call of a length now
    /// makes room for as many as a lagging master is let owe, twice over
    /// (the compacted front), so those never grow it again.
    #[test]
    fn the_first_long_call_makes_room_for_what_a_lagging_master_owes() {
        let mut ledger = Ledger::new();
        let set_release = 600; // eight keys and their eight channels
        keep(&mut ledger, 1, set_release);
        let room = ledger.tails.capacity();
        assert!(room >= TAILS_ROOM_CALLS * set_release, "{room}");
        keep(&mut ledger, TAILS_ROOM_CALLS - 1, set_release);
        assert_eq!(ledger.tails.capacity(), room, "grown after the first call");
    }

    /// A single lock's calls fit the room the ledger starts with: no
    /// reservation beyond it.
    #[test]
    fn short_calls_reserve_nothing_beyond_the_initial_room() {
        let mut ledger = Ledger::new();
        let initial = ledger.tails.capacity();
        keep(&mut ledger, TAILS_ROOM_CALLS, 100);
        assert_eq!(ledger.tails.capacity(), initial);
    }
}
