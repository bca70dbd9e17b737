//! A master's identity on one connection (`command::identity`): what the
//! handshake's identity probes told (`INFO server`, `INFO replication`,
//! the same read that decides whether the node may vote and that the
//! round compares across voters), kept for the connection's life, and,
//! on a connection to a standalone master or a Sentinel voter's master,
//! read again ahead of the next command once the connection sat idle for
//! [`IDENTITY_IDLE`] (in the same write: no round trip of its own). A
//! master whose run id or replication id changed since, or that is no
//! voter of its kind now (a replica), was failed over, failed back or
//! restarted under the connection: the grants the connection receives
//! from then on (an acquisition, an extension, fencing's rounds) are
//! refused with [`NodeError::IdentityChanged`], and the connection is set
//! up again (the identity probes, a Sentinel voter's `ROLE`, the fence
//! probe) before its next command. A cluster voter's nodes are not read
//! again: a failover there answers `MOVED`.

use super::expect::{Expect, Owed};
use super::owed::Ledger;
use crate::command::identity::{GivenAs, Identity, IdentityProbe};
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
    /// Queues the identity's read (the handshake's identity probes) to
    /// `out`, if this connection is to a standalone master or a Sentinel
    /// voter's master and its handshake was told the identity (a new
    /// connection's handshake reads it anyway). `limit`: as for any
    /// command; a connection too far behind skips the read (its next idle
    /// spell reads it).
    pub(super) fn expect_identity(&mut self, deadline: Instant, limit: usize, out: &mut Vec<u8>) {
        if self.caps.sharded
            || self.identity.is_empty()
            || self.awaits_handshake()
            || self.len() + 4 > limit
        {
            return;
        }
        for probe in IdentityProbe::both(GivenAs::Standalone) {
            probe.encode(out);
            self.owed.push_back(Owed {
                deadline,
                purpose: None,
                expect: Expect::Identity(probe),
                resent: false,
            });
        }
    }

    /// The connection is gone: what its handshake was told, and whether it
    /// changed since, go with it.
    pub(super) fn forget_identity(&mut self) {
        self.identity = Identity::default();
        self.identity_untaken = false;
        self.identity_changed = false;
        self.recheck = false;
    }

    /// The handshake's identity probe told `found`: kept, and handed to
    /// the round once (see `Conn::take_identity`).
    pub(super) fn identity_told(&mut self, found: Identity) {
        if !found.is_empty() {
            self.identity = self.identity.and(found);
            self.identity_untaken = true;
        }
    }

    /// An identity probe read again told `now` (`None`: no voter of its
    /// kind now): compared with what the handshake was told.
    pub(super) fn identity_reread(&mut self, now: Option<Identity>) {
        let changed = match now {
            Some(now) => self.identity.changed_to(&now),
            None => true,
        };
        if changed {
            self.identity_changed = true;
            self.recheck = true;
        }
    }

    /// What a master that is one no more answers (demoted to a replica,
    /// loading a data set, cut from its own master: `READONLY`, `LOADING`,
    /// `MASTERDOWN`) has the connection set up again (the identity probes,
    /// a Sentinel voter's `ROLE`, the fence probe) before its next command,
    /// so that no later grant counts on what its set-up found before.
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
            Expect::Script { id, .. } | Expect::Native { id, .. } | Expect::Run { id, .. } => {
                !matches!(
                    id,
                    ScriptId::Release
                        | ScriptId::ReleaseTagged
                        | ScriptId::ReleaseSharded
                        | ScriptId::ReleaseShardedTagged
                        | ScriptId::ReleaseSet
                        | ScriptId::ReleaseSetTagged
                        | ScriptId::ReleaseSetSharded
                        | ScriptId::ReleaseSetShardedTagged
                        | ScriptId::FenceProbe
                )
            }
            _ => false,
        };
        if grants {
            Vote::Failed(NodeError::IdentityChanged)
        } else {
            vote
        }
    }
}
