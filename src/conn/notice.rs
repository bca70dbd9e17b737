//! A native release's notice, published only if the release deleted, as
//! the release script publishes it (`redis.pcall('PUBLISH', ...)` after its
//! `DEL`): a notice for a key that was not ours (it expired, and another
//! holder took it) would wake waiters for nothing and could move a queue's
//! turn on. There is no conditional `PUBLISH` without a script, so the
//! connection writes it itself: once the compare-and-delete answered 1 and
//! its tag came back (the vote is final), it appends `PUBLISH channel
//! notice`, built from the arguments it kept for the release, and writes
//! it at once, without waiting for its answer, which is owed (untagged, as
//! every `PUBLISH` nobody waits for) and read like any other. No I/O here:
//! the ledger (see `owed`) calls this on judged replies.
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
    /// for its notice until its vote is final, and returns true.
    pub(super) fn keep_for_notice(&mut self, vote: &Vote, tail_len: u32) -> bool {
        let deleted = matches!(vote, Vote::Yes);
        if deleted {
            self.notice_due = Some(tail_len);
        }
        deleted
    }

    /// The vote of a deleting native release is final: if `confirmed` (its
    /// tag came back, or none follows), appends its `PUBLISH` to `out` and
    /// owes its answer; in any case forgets the release's arguments.
    /// Returns whether it wrote. Does nothing unless a notice is due.
    ///
    /// `owed` is the release's (or its tag's) entry: awaited by round
    /// `round`, or read after its round (see the module docs).
    pub(super) fn publish_notice(
        &mut self,
        owed: &Owed,
        round: Option<u64>,
        confirmed: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(len) = self.notice_due.take() else {
            return false;
        };
        let awaited = owed.purpose.is_some_and(|p| Some(p.round) == round);
        let publish = confirmed && (awaited || Instant::now() <= owed.deadline);
        let len = len as usize;
        if publish {
            let start = self.tails_start;
            encode_notice_from_script_args(&self.tails[start..start + len], out);
            self.owed.push_back(Owed {
                deadline: owed.deadline,
                purpose: None,
                expect: Expect::Notice,
                resent: false,
            });
        }
        self.drop_tail(len);
        publish
    }
}
