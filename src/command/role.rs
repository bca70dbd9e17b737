//! What a server says it is (`ROLE`): a master, a replica of some master,
//! or a Sentinel. A voter must be a master: a replica named as one (by
//! the user, or by a Sentinel that has not caught up) would grant locks
//! that its master never sees, or refuse them all (`READONLY`). Every new
//! connection to a standalone master or a Sentinel voter's master asks,
//! in its handshake; a Sentinel voter's watcher asks too, before it
//! trusts the master the sentinels name.

use super::reply::describe;
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_command, Arg, Reply};

/// What `ROLE` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Master,
    /// A replica, and its master's `host:port` as the replica names it.
    Replica {
        master: String,
    },
    Sentinel,
    /// `ROLE` was refused (an ACL without it, or renamed): the server
    /// cannot tell.
    Unknown(ServerError),
}

impl Role {
    /// Appends `ROLE`.
    pub(crate) fn encode(out: &mut Vec<u8>) {
        encode_command(out, &[Arg::Bytes(b"ROLE")]);
    }

    /// Reads `ROLE`'s answer: `master …`, `slave host port …` (`replica`
    /// on some forks), `sentinel …`, or an error. Another shape is a
    /// protocol error.
    pub(crate) fn judge(reply: &Reply<'_>) -> Result<Role, NodeError> {
        let unexpected = || {
            NodeError::Protocol(ProtocolError::UnexpectedReply(format!(
                "{} to ROLE",
                describe(reply)
            )))
        };
        let items = match reply {
            Reply::Error(line) => return Ok(Role::Unknown(ServerError::from_line(line))),
            Reply::Array(items) => items,
            _ => return Err(unexpected()),
        };
        let mut it = items.iter();
        match it.next() {
            Some(Reply::Bulk(b"master")) => Ok(Role::Master),
            Some(Reply::Bulk(b"sentinel")) => Ok(Role::Sentinel),
            Some(Reply::Bulk(b"slave" | b"replica")) => match (it.next(), it.next()) {
                (Some(Reply::Bulk(host)), Some(Reply::Integer(port))) => {
                    let host = String::from_utf8_lossy(host);
                    let master = if host.contains(':') {
                        format!("[{host}]:{port}")
                    } else {
                        format!("{host}:{port}")
                    };
                    Ok(Role::Replica { master })
                }
                _ => Err(unexpected()),
            },
            _ => Err(unexpected()),
        }
    }

    /// The error of a voter whose node is this, if it is no master;
    /// `strict`: a role that cannot be told is an error too (a Sentinel
    /// voter's master must be shown to be one).
    pub(crate) fn refusal(&self, strict: bool) -> Option<NodeError> {
        match self {
            Role::Master => None,
            Role::Replica { master } => Some(NodeError::NotMaster {
                master: Some(master.clone()),
            }),
            Role::Sentinel => Some(NodeError::NotMaster { master: None }),
            Role::Unknown(error) if strict => Some(NodeError::RoleRefused(error.clone())),
            Role::Unknown(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn judge(bytes: &[u8]) -> Result<Role, NodeError> {
        let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
            panic!("a reply")
        };
        Role::judge(&reply)
    }

    #[test]
    fn reads_every_role_and_names_a_replicas_master() {
        assert_eq!(
            judge(b"*3\r\n$6\r\nmaster\r\n:42\r\n*0\r\n"),
            Ok(Role::Master)
        );
        let replica = b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6380\r\n$9\r\nconnected\r\n:7\r\n";
        assert_eq!(
            judge(replica),
            Ok(Role::Replica {
                master: "127.0.0.1:6380".into()
            })
        );
        let v6 = b"*5\r\n$5\r\nslave\r\n$3\r\n::1\r\n:6380\r\n$9\r\nconnected\r\n:7\r\n";
        assert_eq!(
            judge(v6),
            Ok(Role::Replica {
                master: "[::1]:6380".into()
            })
        );
        assert_eq!(
            judge(b"*2\r\n$8\r\nsentinel\r\n*1\r\n$1\r\nm\r\n"),
            Ok(Role::Sentinel)
        );
        let refused = judge(b"-NOPERM this user has no permissions to run the 'role' command\r\n");
        assert!(matches!(refused, Ok(Role::Unknown(_))));
        for bad in [
            &b":1\r\n"[..],
            b"*0\r\n",
            b"*2\r\n$5\r\nslave\r\n:1\r\n",
            b"$6\r\nmaster\r\n",
        ] {
            assert!(matches!(judge(bad), Err(NodeError::Protocol(_))), "{bad:?}");
        }
    }

    #[test]
    fn only_a_master_may_vote_and_a_strict_check_wants_to_know() {
        assert_eq!(Role::Master.refusal(true), None);
        let replica = Role::Replica {
            master: "10.0.0.1:6379".into(),
        };
        let error = replica.refusal(false).expect("refused");
        assert!(error.to_string().contains("10.0.0.1:6379"), "{error}");
        assert!(Role::Sentinel.refusal(false).is_some());
        let unknown = Role::Unknown(ServerError::from_line(b"NOPERM no"));
        assert_eq!(unknown.refusal(false), None);
        assert!(matches!(
            unknown.refusal(true),
            Some(NodeError::RoleRefused(_))
        ));
    }
}
