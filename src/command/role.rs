//! What a server says it is (`ROLE`): a master, a replica of some master,
//! or a Sentinel. A Sentinel voter's master must show it is a master
//! before a lock goes to it: its connections ask in their handshake (an
//! acquisition waits for the answer), and its watcher asks before it
//! trusts the master the sentinels name. A refusal is the handshake's
//! identity probe's (`identity`: [`NotAVoter::Replica`] naming the
//! master, [`NotAVoter::Sentinel`]), which a standalone master's
//! connection relies on alone; `ROLE` adds that a Sentinel voter's master
//! that will not say is refused too.

use super::reply::describe;
use crate::error::{NodeError, NotAVoter, ProtocolError, ServerError};
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

    /// The error of a Sentinel voter whose master is this, if it is no
    /// master, or cannot tell.
    pub(crate) fn refusal(&self) -> Option<NodeError> {
        match self {
            Role::Master => None,
            Role::Replica { master } => Some(NodeError::NotAVoter(NotAVoter::Replica {
                master: master.clone(),
            })),
            Role::Sentinel => Some(NodeError::NotAVoter(NotAVoter::Sentinel)),
            Role::Unknown(error) => Some(NodeError::RoleRefused(error.clone())),
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
    fn only_a_master_may_vote_and_one_that_will_not_say_may_not() {
        assert_eq!(Role::Master.refusal(), None);
        let replica = Role::Replica {
            master: "10.0.0.1:6379".into(),
        };
        assert_eq!(
            replica.refusal(),
            Some(NodeError::NotAVoter(NotAVoter::Replica {
                master: "10.0.0.1:6379".into()
            }))
        );
        assert_eq!(
            Role::Sentinel.refusal(),
            Some(NodeError::NotAVoter(NotAVoter::Sentinel))
        );
        let unknown = Role::Unknown(ServerError::from_line(b"NOPERM no"));
        assert!(matches!(unknown.refusal(), Some(NodeError::RoleRefused(_))));
    }
}
