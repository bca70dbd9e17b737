//! How many bytes of arguments a connection may keep for the script calls
//! it still owes replies for (see [`Ledger::tails`] and `resend`, which
//! re-sends them by body after a `NOSCRIPT`). The count of owed replies is
//! bounded (`MAX_OWED`), but one call of a large set keeps up to some
//! 600 KiB, so a master that stops answering (frozen, SIGSTOPped: the
//! kernel still takes our writes) would make a connection keep hundreds of
//! MiB before that count is reached. A call that would keep more than the
//! bounds below is refused as one on a connection that owes too many
//! replies is: [`NodeError::Backlogged`], before anything is written, so
//! the master is not sent it this round and counts as failed in its tally
//! (the round's held-back rules, `round::held_back`, unchanged). A refused
//! acquisition sets nothing there, so nothing is left to release.
//!
//! Calls that keep no arguments (`SET NX`, `PING`, `PTTL`) are not bounded
//! here: a single lock never meets this bound.

use super::owed::Ledger;
use crate::command::{Encoded, Form, ScriptId};
use crate::error::NodeError;
use crate::names::{MAX_SET_BYTES, MAX_SET_LEN};

/// The most bytes of arguments a connection keeps with a call that is not
/// a release (an acquisition, an extension, fencing's scripts): 4 MiB.
/// Some fifteen acquisitions or extensions of the largest set (1024 names,
/// 256 KiB of them: about 270 KiB each), far more than a master that is
/// merely behind owes (the round holds a master back as lagging once it
/// owes 16 replies, `round::held_back`), and thousands of any small set's.
pub(crate) const MAX_KEPT: usize = 4 << 20;

/// The same bound for a release: four times as high (16 MiB), so that the
/// calls kept under [`MAX_KEPT`] leave room for the releases that must
/// follow them (a set's release keeps its keys and one channel per key,
/// about twice an acquisition's bytes). A release refused here leaves its
/// keys on that master until their TTL, as one refused for owing
/// `MAX_OWED` replies does.
pub(crate) const MAX_KEPT_RELEASE: usize = 4 * MAX_KEPT;

// The largest set's call (a key and a channel per name, and each
// argument's framing: the bound `owed` checks against u32) fits the cap
// several times over: an idle connection never refuses one.
const _: () = assert!(4 * (2 * MAX_SET_BYTES + 256 * MAX_SET_LEN) <= MAX_KEPT);

/// Whether a connection that keeps `kept` bytes may keep `len` more for a
/// call (a release if `release`).
pub(super) fn fits(kept: usize, len: usize, release: bool) -> bool {
    let cap = if release { MAX_KEPT_RELEASE } else { MAX_KEPT };
    kept.saturating_add(len) <= cap
}

/// Whether script `id` releases (deletes keys).
fn releases(id: ScriptId) -> bool {
    matches!(
        id,
        ScriptId::Release
            | ScriptId::ReleaseTagged
            | ScriptId::ReleaseSharded
            | ScriptId::ReleaseShardedTagged
            | ScriptId::ReleaseSet
            | ScriptId::ReleaseSetTagged
            | ScriptId::ReleaseSetSharded
            | ScriptId::ReleaseSetShardedTagged
    )
}

impl Ledger {
    /// The bytes of arguments kept now for owed calls.
    pub(super) fn kept(&self) -> usize {
        self.tails.len() - self.tails_start
    }

    /// Refuses `command` in `form` ([`NodeError::Backlogged`]) if the
    /// arguments it would keep do not fit the bounds above.
    #[inline]
    pub(super) fn room_to_keep(
        &self,
        command: &Encoded,
        form: Option<Form>,
    ) -> Result<(), NodeError> {
        let id = match form {
            Some(
                Form::ScriptThenEcho { id, .. }
                | Form::TaggedScript { id, .. }
                | Form::Native { id, .. }
                | Form::Run { id, .. },
            ) => id,
            _ => return Ok(()),
        };
        let (tail, _) = command.script_args(id);
        if fits(self.kept(), tail.len(), releases(id)) {
            Ok(())
        } else {
            Err(NodeError::Backlogged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::owed::{Ledger, Purpose};
    use super::super::tests::encoded;
    use super::{fits, releases, MAX_KEPT, MAX_KEPT_RELEASE};
    use crate::command::{Command, ScriptId, SetCommand};
    use crate::conn::MAX_OWED;
    use crate::error::NodeError;
    use crate::names::Names;
    use std::time::{Duration, Instant};

    /// A ledger that is never answered (a frozen master) keeps a large
    /// set's extensions until the next would pass `MAX_KEPT`, refuses
    /// that one (`Backlogged`, nothing written, nothing owed), and still
    /// takes the set's release behind them.
    #[test]
    fn an_unanswered_ledger_refuses_a_large_sets_call_past_the_bound_but_not_its_release() {
        let (mut keys, mut channels) = (Names::default(), Names::default());
        let name = |c: &str, i: usize| format!("{c}{i:04}{}", "n".repeat(245));
        keys.fill((0..1000).map(|i| name("k", i)), |_| Ok(()))
            .unwrap();
        channels
            .fill((0..1000).map(|i| name("c", i)), |_| Ok(()))
            .unwrap();
        let extend = Command::Set(SetCommand::Extend {
            keys: keys.keys(),
            value: b"v",
            ttl_ms: 30_000,
            repair: true,
        });
        let purpose = Purpose { round: 1, op: 0 };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut ledger = Ledger::new();
        let mut out = Vec::new();
        let mut sent = 0;
        let refused = loop {
            assert!(sent < 100, "{sent} calls kept, {} bytes", ledger.kept());
            let call = encoded(extend, 1 + sent);
            let (owed, written) = (ledger.len(), out.len());
            match ledger.record(&call, purpose, deadline, MAX_OWED, false, &mut out) {
                Ok(()) => sent += 1,
                Err(e) => break (e, owed == ledger.len() && written == out.len()),
            }
        };
        assert!(
            matches!(refused, (NodeError::Backlogged, true)),
            "{refused:?}"
        );
        let kept = ledger.kept();
        let each = kept / sent as usize;
        assert!(
            kept <= MAX_KEPT && kept + each > MAX_KEPT,
            "{sent} calls, {kept} bytes"
        );
        let release = Command::Set(SetCommand::Release {
            keys: keys.keys(),
            value: b"v",
            notify: Some((b"rN", channels.keys())),
        });
        let call = encoded(release, 1 + sent);
        ledger
            .record(&call, purpose, deadline, MAX_OWED, false, &mut out)
            .expect("a release has room behind them");
        assert!(ledger.kept() > MAX_KEPT);
    }

    /// A call fits while what is kept with it stays within its cap: up to
    /// and including the cap, not a byte past it.
    #[test]
    fn a_call_fits_up_to_its_cap_and_not_a_byte_beyond() {
        assert!(fits(0, MAX_KEPT, false));
        assert!(fits(MAX_KEPT - 100, 100, false));
        assert!(!fits(MAX_KEPT - 100, 101, false));
        assert!(!fits(MAX_KEPT, 1, false));
        assert!(fits(MAX_KEPT_RELEASE - 100, 100, true));
        assert!(!fits(MAX_KEPT_RELEASE, 1, true));
    }

    /// Releases have room beyond what acquisitions and extensions may keep
    /// (a connection full of those still takes the releases that follow);
    /// a call that keeps nothing always fits; no overflow at the extremes.
    #[test]
    fn releases_have_room_where_other_calls_are_refused() {
        assert!(!fits(MAX_KEPT, 600 << 10, false));
        assert!(fits(MAX_KEPT, 600 << 10, true));
        assert!(fits(MAX_KEPT_RELEASE, 0, true));
        assert!(!fits(usize::MAX, 1, true));
        assert!(!fits(1, usize::MAX, false));
    }

    /// Every release, a cluster node's sharded twins included, gets the
    /// releases' cap; the acquisitions and extensions do not.
    #[test]
    fn every_release_script_and_only_those_count_as_releases() {
        for id in [
            ScriptId::Release,
            ScriptId::ReleaseTagged,
            ScriptId::ReleaseSharded,
            ScriptId::ReleaseShardedTagged,
            ScriptId::ReleaseSet,
            ScriptId::ReleaseSetTagged,
            ScriptId::ReleaseSetSharded,
            ScriptId::ReleaseSetShardedTagged,
        ] {
            assert!(releases(id), "{id:?}");
        }
        for id in [ScriptId::Extend, ScriptId::AcquireSet, ScriptId::ExtendSet] {
            assert!(!releases(id), "{id:?}");
        }
    }
}
