//! A native release's notice, published only if the release deleted, as
//! the release script publishes it (`redis.pcall('PUBLISH', ...)` after its
//! `DEL`): a notice for a key that was not ours (it expired, and another
//! holder took it) would wake waiters for nothing and could move a queue's
//! turn on. There is no conditional `PUBLISH` without a script, so the
//! connection decides: the release goes out as `DELIFEQ` (or `DELEX …
//! IFEQ`), `PUBSUB NUMSUB channel`, `ECHO tag`, in one write, and once the
//! delete answered 1 and the count is not 0 (an error counts as someone:
//! an ACL may refuse `PUBSUB`), it builds `PUBLISH channel notice` from the
//! arguments it kept for the release, and sends it without waiting for its
//! answer, which is owed (untagged, as every `PUBLISH` nobody waits for)
//! and read like any other. No I/O here: the ledger (see `owed`) calls
//! this on judged replies, and the connection writes what is pending
//! (`Conn::send_notices`).
//!
//! So a release nobody waits for costs what it did with the `PUBLISH`
//! pipelined (a `PUBSUB NUMSUB` instead, in the same write), and one with
//! listeners a write per master more, its notice one round trip later.
//! Listeners that subscribe after the count ran are not told; they are
//! waiters whose subscription was confirmed after the release ran, and a
//! waiter tries again when its subscription is confirmed (see
//! `handle::notify`). Subscribers by pattern (`PSUBSCRIBE`) are not
//! counted: waiters subscribe by name.
//!
//! The notice of a release its round awaits goes out as soon as the
//! release's tag came back (the vote is final; the tag's answer comes in
//! the same read as the others, as a rule): someone waits for it, and a
//! handoff's gap is the time until a waiter hears it.
//! One read after its round (a later round's look, or while a round awaits
//! another command) waits in the connection's pending notices, and goes
//! out in the same write as the connection's next command, or when that
//! round is decided. Either way it goes before any later command on the
//! connection, so the replies come in the order the ledger owes them.
//!
//! A master whose answer came after its round was decided (the others'
//! decided it) publishes when its answer is read, by a later round's look
//! or a settling session, if that is by the release's deadline: a notice
//! read later would announce a release long past, which waiters would take
//! for a new one.

use super::owed::{Expect, Ledger, Owed};
use crate::command::{encode_notice_from_script_args, Vote};
use std::time::Instant;

impl Ledger {
    /// A native release with a notice answered `vote`: if it deleted,
    /// keeps its arguments (`tail_len` bytes, at the front of the tails)
    /// for its notice until the count of listeners that follows comes, and
    /// returns true.
    pub(super) fn keep_for_notice(&mut self, vote: &Vote, tail_len: u32) -> bool {
        let deleted = matches!(vote, Vote::Yes);
        if deleted {
            self.notices.due = Some(tail_len);
        }
        deleted
    }

    /// The count of listeners of a native release's notice came
    /// (`listening`: not 0): if the release deleted (see
    /// [`Ledger::keep_for_notice`]) and someone listens, builds its
    /// `PUBLISH` (see the module docs); in any case forgets the release's
    /// arguments. `owed` is the count's entry: awaited by round `round`
    /// (then the notice is urgent: see [`Ledger::send_confirmed`]), or read
    /// after its round.
    pub(super) fn publish(&mut self, owed: &Owed, round: Option<u64>, listening: bool) {
        let Some(len) = self.notices.due.take() else {
            return;
        };
        let awaited = owed.purpose.is_some_and(|p| Some(p.round) == round);
        let len = len as usize;
        let publish = listening && (awaited || Instant::now() <= owed.deadline);
        if publish {
            let start = self.tails_start;
            let notices = &mut self.notices;
            encode_notice_from_script_args(
                &self.tails[start..start + len],
                self.caps.sharded,
                &mut notices.pending,
            );
            notices.count += 1;
            notices.deadline = notices.deadline.max(Some(owed.deadline));
            notices.urgent |= awaited;
        }
        self.drop_tail(len);
    }

    /// After the answer to `owed`: if it is a release's tag and an urgent
    /// notice waits (see [`Ledger::publish`]), hands the pending notices to
    /// `out` now, not once the round is decided, and returns true: the
    /// connection must send them.
    pub(super) fn send_confirmed(&mut self, owed: &Owed, out: &mut Vec<u8>) -> bool {
        let confirmed = matches!(owed.expect, Expect::Tag { follows: true, .. });
        if !(self.notices.urgent && confirmed) {
            return false;
        }
        self.notices.urgent = false;
        self.move_notices(out, owed.deadline);
        true
    }

    /// Whether every reply owed (if any) is a notice's.
    pub(super) fn owes_only_notices(&self) -> bool {
        self.owed
            .iter()
            .all(|owed| matches!(owed.expect, Expect::Notices { .. }))
    }

    /// Whether notices wait to be sent.
    pub(super) fn has_notices(&self) -> bool {
        self.notices.count > 0
    }

    /// Hands the pending notices to the connection's output `out`, and owes
    /// their answers by `due` (the deadline of the command or round that
    /// sends them: a notice built just before its release's deadline must
    /// not make its master look late), or their releases' if later.
    pub(super) fn move_notices(&mut self, out: &mut Vec<u8>, due: Instant) {
        let notices = &mut self.notices;
        let Some(deadline) = notices.deadline.take().map(|own| own.max(due)) else {
            return;
        };
        notices.urgent = false;
        out.extend_from_slice(&notices.pending);
        notices.pending.clear();
        let left = std::mem::take(&mut notices.count);
        if left > 0 {
            self.owed.push_back(Owed {
                deadline,
                purpose: None,
                expect: Expect::Notices { left },
                resent: false,
            });
        }
    }

    /// A notice's `PUBLISH` answered: one fewer owed by the entry at the
    /// front of the queue, which goes with the last. Nothing to send.
    pub(super) fn noticed(&mut self) -> bool {
        let front = self.owed.front_mut().expect("judged an owed reply");
        match &mut front.expect {
            Expect::Notices { left } if *left > 1 => *left -= 1,
            _ => {
                self.owed.pop_front();
            }
        }
        false
    }
}
