//! A master's identity on one connection (`command::identity`): recorded
//! by the set-up (`INFO server`, `INFO replication`, for the connections
//! that ask `ROLE`: standalone masters and Sentinel voters' masters), and
//! read again ahead of the next command once the connection sat idle for
//! [`IDENTITY_IDLE`] (in the same write: no round trip of its own). A
//! master whose run id or replication id changed since, or that is a
//! replica now, was failed over, failed back or restarted under the
//! connection: the grants the connection receives from then on (an
//! acquisition, an extension, fencing's rounds) are refused with
//! [`NodeError::IdentityChanged`], and the connection is set up again
//! (`ROLE`, the fence probe, the identity) before its next command.

use super::expect::{Expect, Owed};
use super::owed::Ledger;
use crate::command::identity::{Section, Seen};
use crate::command::{ScriptId, Vote};
use crate::error::NodeError;
use crate::resp::ServerErrorKind;
use std::time::{Duration, Instant};

/// How long a connection may sit idle before its next command goes behind
/// a fresh read of the master's identity. A busy connection learns of a
/// demotion at once (its writes are refused `READONLY`); an idle one
/// could not.
pub(crate) const IDENTITY_IDLE: Duration = Duration::from_secs(1);

impl Ledger {
    /// Queues the identity's read (`INFO server`, `INFO replication`) to
    /// `out`, if this connection keeps its master's identity and its
    /// set-up recorded it (a new connection's set-up reads it anyway).
    /// `limit`: as for any command; a connection too far behind skips the
    /// read (its next idle spell reads it).
    pub(super) fn expect_identity(&mut self, deadline: Instant, limit: usize, out: &mut Vec<u8>) {
        if !self.identity.is_known() || self.awaits_handshake() || self.len() + 4 > limit {
            return;
        }
        for section in Section::BOTH {
            section.encode(out);
            self.owed.push_back(Owed {
                deadline,
                purpose: None,
                expect: Expect::Identity(section),
                resent: false,
            });
        }
    }

    /// An `INFO` section answered: the set-up's is recorded, a later one
    /// compared with it.
    pub(super) fn identity_read(&mut self, expect: Expect, section: Section, seen: Seen) {
        match expect {
            Expect::Handshake(_) => self.identity.record(section, seen),
            _ if self.identity.changed(section, seen) => {
                self.identity_changed = true;
                self.recheck = true;
            }
            _ => {}
        }
    }

    /// What a master that is one no more answers (demoted to a replica,
    /// loading a data set, cut from its own master: `READONLY`, `LOADING`,
    /// `MASTERDOWN`) has the connection set up again (`ROLE`, the fence
    /// probe, the identity) before its next command, so that no later
    /// grant counts on what its set-up found before.
    pub(super) fn note_demotion(&mut self, vote: &Vote) {
        if let Vote::Failed(NodeError::Server(error)) = vote {
            if matches!(
                error.kind(),
                ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown | ServerErrorKind::Loading
            ) {
                self.recheck = true;
            }
        }
    }

    /// A grant answered after the master's identity changed does not
    /// count (see the module's notes); other votes stay as they are.
    pub(super) fn screen_identity(&self, expect: Expect, vote: Vote) -> Vote {
        if !self.identity_changed || !matches!(vote, Vote::Yes | Vote::Read(_)) {
            return vote;
        }
        let grants = match expect {
            Expect::Set { .. } => true,
            Expect::Script { id, .. } | Expect::Native { id, .. } => !matches!(
                id,
                ScriptId::Release | ScriptId::ReleaseTagged | ScriptId::FenceProbe
            ),
            _ => false,
        };
        if grants {
            Vote::Failed(NodeError::IdentityChanged)
        } else {
            vote
        }
    }
}
