//! Who a master is: its run id (`INFO server`, new at every start of the
//! process) and its replication id (`INFO replication`, new at every
//! promotion: a replica made master, a master made replica and promoted
//! back). A connection records both in its set-up; one that sat idle
//! reads them again ahead of its next command, and a master whose
//! identity changed under it (a failback that kept the process, a restart
//! behind a proxy that kept our connection) has its grants on that
//! connection refused and the connection set up again, `ROLE` and all,
//! before any grant of it counts (see `conn`).

use super::reply::describe;
use crate::error::{NodeError, ProtocolError};
use crate::resp::{encode_command, Arg, Reply};

/// Bytes of an id as `INFO` shows it (40 hex digits).
const ID_LEN: usize = 40;

/// An id as `INFO` shows it.
pub(crate) type Id = [u8; ID_LEN];

/// The `INFO` section an identity check reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// `INFO server`: `run_id`.
    Server,
    /// `INFO replication`: `role` and `master_replid`.
    Replication,
}

/// What one `INFO` section showed of the identity (`None` where it did
/// not say: an ACL that refuses `INFO`, or a field absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) id: Option<Id>,
    /// `INFO replication` only: whether `role:master`.
    pub(crate) master: Option<bool>,
}

/// A connection's record of its master's identity, from its set-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    run_id: Option<Id>,
    replid: Option<Id>,
}

impl Section {
    /// Both sections, in the order they are asked.
    pub(crate) const BOTH: [Section; 2] = [Section::Server, Section::Replication];

    /// Appends `INFO <section>`.
    pub(crate) fn encode(self, out: &mut Vec<u8>) {
        let name: &[u8] = match self {
            Section::Server => b"server",
            Section::Replication => b"replication",
        };
        encode_command(out, &[Arg::Bytes(b"INFO"), Arg::Bytes(name)]);
    }

    /// Reads the section's answer: its id (and role); an error reply says
    /// nothing; another shape is a protocol error.
    pub(crate) fn judge(self, reply: &Reply<'_>) -> Result<Seen, NodeError> {
        let text = match reply {
            Reply::Bulk(text) => text,
            Reply::Error(_) => return Ok(Seen::default()),
            other => {
                return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                    format!("{} to INFO", describe(other)),
                )))
            }
        };
        let field: &[u8] = match self {
            Section::Server => b"run_id:",
            Section::Replication => b"master_replid:",
        };
        let mut seen = Seen::default();
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(id) = line.strip_prefix(field) {
                seen.id = Id::try_from(id).ok();
            } else if let Some(role) = line.strip_prefix(b"role:".as_slice()) {
                if self == Section::Replication {
                    seen.master = Some(role == b"master");
                }
            }
        }
        Ok(seen)
    }
}

impl Identity {
    /// Records what the set-up's `section` showed.
    pub(crate) fn record(&mut self, section: Section, seen: Seen) {
        match section {
            Section::Server => self.run_id = seen.id,
            Section::Replication => self.replid = seen.id,
        }
    }

    /// Whether a later read of `section` that showed `seen` says the
    /// master changed: another id than the one recorded, or no master.
    pub(crate) fn changed(&self, section: Section, seen: Seen) -> bool {
        let recorded = match section {
            Section::Server => self.run_id,
            Section::Replication => self.replid,
        };
        let other_id = matches!((recorded, seen.id), (Some(a), Some(b)) if a != b);
        other_id || seen.master == Some(false)
    }

    /// Whether the set-up recorded anything to compare with.
    pub(crate) fn is_known(&self) -> bool {
        self.run_id.is_some() || self.replid.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn judge(section: Section, bytes: &[u8]) -> Result<Seen, NodeError> {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("a reply")
        };
        section.judge(&reply)
    }

    fn bulk(text: &str) -> Vec<u8> {
        format!("${}\r\n{text}\r\n", text.len()).into_bytes()
    }

    const RUN_A: &str = "b1c2a0f8a6d4c2e0f8a6d4c2e0f8a6d4c2e0f8a6";
    const RUN_B: &str = "0000000000000000000000000000000000000001";

    #[test]
    fn reads_the_ids_and_the_role() {
        let server = bulk(&format!(
            "# Server\r\nredis_version:7.0.15\r\nrun_id:{RUN_A}\r\ntcp_port:6379\r\n"
        ));
        let seen = judge(Section::Server, &server).unwrap();
        assert_eq!(seen.id, Some(*b"b1c2a0f8a6d4c2e0f8a6d4c2e0f8a6d4c2e0f8a6"));
        assert_eq!(seen.master, None);
        let replication = bulk(&format!(
            "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_replid:{RUN_B}\r\nmaster_replid2:{RUN_A}\r\n"
        ));
        let seen = judge(Section::Replication, &replication).unwrap();
        assert_eq!(seen.master, Some(false));
        assert_eq!(seen.id.map(|id| id[39]), Some(b'1'));
        assert_eq!(
            judge(Section::Server, b"-NOPERM no\r\n").unwrap(),
            Seen::default()
        );
        assert!(matches!(
            judge(Section::Server, b":1\r\n"),
            Err(NodeError::Protocol(_))
        ));
    }

    #[test]
    fn another_id_or_a_replica_is_a_change_and_unknowns_are_not() {
        let id = |s: &str| Some(Id::try_from(s.as_bytes()).unwrap());
        let mut identity = Identity::default();
        assert!(!identity.is_known());
        identity.record(
            Section::Server,
            Seen {
                id: id(RUN_A),
                master: None,
            },
        );
        identity.record(
            Section::Replication,
            Seen {
                id: id(RUN_A),
                master: Some(true),
            },
        );
        assert!(identity.is_known());
        let same = Seen {
            id: id(RUN_A),
            master: Some(true),
        };
        assert!(!identity.changed(Section::Replication, same));
        let other = Seen {
            id: id(RUN_B),
            master: Some(true),
        };
        assert!(identity.changed(Section::Replication, other));
        assert!(identity.changed(Section::Server, other));
        let replica = Seen {
            id: id(RUN_A),
            master: Some(false),
        };
        assert!(identity.changed(Section::Replication, replica));
        // INFO refused now: nothing to tell.
        assert!(!identity.changed(Section::Server, Seen::default()));
    }
}
