//! The replica guard (`Builder::replica_ack`): a command that sets or
//! extends a key is followed, on the same connection and in the same
//! write, by `WAIT replicas timeout` (or `WAITAOF local replicas timeout`),
//! and its grant counts only if the master answers that enough replicas
//! have the write. `WAIT` counts only the writes of the connection that
//! sends it, which is why it rides right behind the command it guards.
//!
//! Here: the setting ([`ReplicaAck`]), its command encoded with a timeout
//! bounded by what the round has left, its answer read ([`Acked`]), and
//! the vote it leaves ([`ReplicaAck::settle`]). No I/O: the connection's
//! ledger writes the command and hands the answer here.

use super::reply::{describe, Vote};
use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_args, encode_array_header, Arg, Reply};
use std::time::Duration;

/// The shortest wait sent: `WAIT … 0` would block until the replicas
/// answer, however long that takes.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// The replica guard's setting: how many replicas must have a write, how
/// long the master may wait for them, and whether they must have it in
/// their append-only file (`WAITAOF`; `local`: this master too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplicaAck {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
    /// `Some(local)`: `WAITAOF`, with `numlocal` 1 if `local`.
    pub(crate) aof: Option<bool>,
}

/// What the master answered the guard's command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Acked {
    /// How many replicas acknowledged, and (`WAITAOF`) whether the master
    /// fsynced the write itself.
    Count { replicas: u32, local: bool },
    /// The command was refused (unknown, forbidden, or not possible here).
    Refused(ServerError),
}

impl ReplicaAck {
    /// The command's name, for messages.
    pub(crate) fn command(self) -> &'static str {
        match self.aof {
            Some(_) => "WAITAOF",
            None => "WAIT",
        }
    }

    /// Appends the guard's command, with the guard's timeout bounded by
    /// `left` (what is left of the round), in whole milliseconds, at
    /// least one.
    pub(crate) fn encode(self, left: Duration, out: &mut Vec<u8>) {
        let wait = self.timeout.min(left).max(MIN_WAIT);
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let replicas = Arg::Uint(u64::from(self.replicas));
        match self.aof {
            None => {
                encode_array_header(out, 3);
                encode_args(out, &[Arg::Bytes(b"WAIT"), replicas, Arg::Uint(ms)]);
            }
            Some(local) => {
                encode_array_header(out, 4);
                let local = Arg::Uint(u64::from(local));
                encode_args(
                    out,
                    &[Arg::Bytes(b"WAITAOF"), local, replicas, Arg::Uint(ms)],
                );
            }
        }
    }

    /// Reads the answer: `WAIT`'s count, `WAITAOF`'s pair, or an error. A
    /// reply of another shape is a protocol error.
    pub(crate) fn judge(aof: bool, reply: &Reply<'_>) -> Result<Acked, NodeError> {
        let count = |n: i64| u32::try_from(n).ok();
        let acked = match (aof, reply) {
            (_, Reply::Error(line)) => Some(Acked::Refused(ServerError::from_line(line))),
            (false, Reply::Integer(n)) => count(*n).map(|replicas| Acked::Count {
                replicas,
                local: false,
            }),
            (true, Reply::Array(items)) if items.len() == 2 => {
                let mut it = items.iter();
                match (it.next(), it.next()) {
                    (Some(Reply::Integer(local @ (0 | 1))), Some(Reply::Integer(n))) => count(n)
                        .map(|replicas| Acked::Count {
                            replicas,
                            local: local == 1,
                        }),
                    _ => None,
                }
            }
            _ => None,
        };
        acked.ok_or_else(|| {
            NodeError::Protocol(ProtocolError::UnexpectedReply(format!(
                "{} to {}",
                describe(reply),
                if aof { "WAITAOF" } else { "WAIT" }
            )))
        })
    }

    /// The vote of a command whose guard answered `acked`: a grant (a key
    /// set or extended) stays one only if enough replicas (and, if asked,
    /// the master's own fsync) confirmed it; otherwise it is the master's
    /// failure for the round, named. A refusal or a failure of the command
    /// itself is left as it is (nothing was written to confirm).
    pub(crate) fn settle(self, vote: Vote, acked: Acked) -> Vote {
        if !matches!(vote, Vote::Yes | Vote::Read(_)) {
            return vote;
        }
        match acked {
            Acked::Count { replicas, local } => {
                if replicas < self.replicas {
                    Vote::Failed(NodeError::ReplicasBehind {
                        acked: replicas,
                        wanted: self.replicas,
                    })
                } else if self.aof == Some(true) && !local {
                    Vote::Failed(NodeError::NotFsynced)
                } else {
                    vote
                }
            }
            Acked::Refused(error) => Vote::Failed(NodeError::ReplicaAckRefused {
                command: self.command(),
                error,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::fence::Reading;

    const WAIT: ReplicaAck = ReplicaAck {
        replicas: 1,
        timeout: Duration::from_millis(200),
        aof: None,
    };

    fn encoded(ack: ReplicaAck, left: Duration) -> Vec<u8> {
        let mut out = Vec::new();
        ack.encode(left, &mut out);
        out
    }

    #[test]
    fn the_wait_is_bounded_by_the_round_and_never_zero() {
        let full = encoded(WAIT, Duration::from_secs(1));
        assert_eq!(full, b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n200\r\n");
        let cut = encoded(WAIT, Duration::from_micros(42_900));
        assert_eq!(cut, b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$2\r\n42\r\n");
        // Nothing left: one millisecond, never WAIT's "for ever".
        let none = encoded(WAIT, Duration::ZERO);
        assert_eq!(none, b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n1\r\n");
        let aof = ReplicaAck {
            replicas: 2,
            aof: Some(true),
            ..WAIT
        };
        assert_eq!(
            encoded(aof, Duration::from_secs(1)),
            b"*4\r\n$7\r\nWAITAOF\r\n$1\r\n1\r\n$1\r\n2\r\n$3\r\n200\r\n"
        );
    }

    #[test]
    fn a_grant_counts_only_with_enough_replicas() {
        let count = |replicas, local| Acked::Count { replicas, local };
        assert!(matches!(WAIT.settle(Vote::Yes, count(1, false)), Vote::Yes));
        assert!(matches!(WAIT.settle(Vote::Yes, count(3, false)), Vote::Yes));
        assert!(matches!(
            WAIT.settle(Vote::Yes, count(0, false)),
            Vote::Failed(NodeError::ReplicasBehind {
                acked: 0,
                wanted: 1
            })
        ));
        let read = Vote::Read(Reading::default());
        assert!(matches!(
            WAIT.settle(read, count(0, false)),
            Vote::Failed(NodeError::ReplicasBehind { .. })
        ));
        // A refusal wrote nothing: it stays what it is.
        assert!(matches!(WAIT.settle(Vote::No, count(0, false)), Vote::No));
        let local = ReplicaAck {
            aof: Some(true),
            ..WAIT
        };
        assert!(matches!(local.settle(Vote::Yes, count(1, true)), Vote::Yes));
        assert!(matches!(
            local.settle(Vote::Yes, count(1, false)),
            Vote::Failed(NodeError::NotFsynced)
        ));
        let refused = Acked::Refused(ServerError::from_line(b"ERR unknown command 'WAITAOF'"));
        assert!(matches!(
            local.settle(Vote::Yes, refused),
            Vote::Failed(NodeError::ReplicaAckRefused {
                command: "WAITAOF",
                ..
            })
        ));
    }

    #[test]
    fn answers_of_another_shape_are_protocol_errors() {
        use crate::resp::{decode, Decoded};
        let judge = |aof, bytes: &[u8]| {
            let Ok(Decoded::Complete(reply, _)) = decode(bytes) else {
                panic!("a reply")
            };
            ReplicaAck::judge(aof, &reply)
        };
        assert_eq!(
            judge(false, b":2\r\n"),
            Ok(Acked::Count {
                replicas: 2,
                local: false
            })
        );
        assert_eq!(
            judge(true, b"*2\r\n:1\r\n:0\r\n"),
            Ok(Acked::Count {
                replicas: 0,
                local: true
            })
        );
        assert!(matches!(judge(true, b"-ERR x\r\n"), Ok(Acked::Refused(_))));
        for (aof, bad) in [
            (false, &b"*2\r\n:1\r\n:0\r\n"[..]),
            (true, b":1\r\n"),
            (false, b":-1\r\n"),
            (true, b"*2\r\n:2\r\n:0\r\n"),
            (true, b"*1\r\n:1\r\n"),
            (false, b"$1\r\n1\r\n"),
        ] {
            assert!(
                matches!(judge(aof, bad), Err(NodeError::Protocol(_))),
                "{bad:?}"
            );
        }
    }
}
