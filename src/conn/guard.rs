//! The replica guard on one connection (`Builder::replica_ack`; the
//! command and its answer are `command::replica_ack`'s): a command that
//! writes goes out as `command`, `WAIT replicas t`, `ECHO tag` in one
//! write (a tagged script: `command`, `WAIT`), and its vote stays
//! provisional until the `WAIT` answered; it counts as a yes only if
//! enough replicas confirmed the write. `WAIT` counts only this
//! connection's own writes, which is why it goes right behind the
//! command, and `t` is the guard's timeout bounded by what is left of the
//! round (never 0, which would wait for ever).
//!
//! A command the server refused before running it and that the
//! connection re-sends (see `resend`) goes behind later commands: its copy
//! is followed by a `WAIT` of its own, as the first one ran before the
//! copy. A `WAIT` (or `WAITAOF`) the server does not know or the user may
//! not run is remembered: the connection sends no guarded command again,
//! and says why (a new connection tries again).
//!
//! No I/O here: the ledger (see `owed`) calls this as it records commands
//! and takes in replies.

use super::owed::{Expect, Ledger, Owed, Provisional};
use crate::command::{Acked, Encoded, ReplicaAck, Vote};
use crate::error::{NodeError, ProtocolError};
use std::time::Instant;

impl Ledger {
    /// The guard `command` goes out with here, if any; an error if the
    /// connection learnt that its server refuses the guard's command.
    #[inline]
    pub(super) fn guard_for(&self, command: &Encoded) -> Result<Option<ReplicaAck>, NodeError> {
        match self.guard {
            Some(guard) if command.is_guarded() => match &self.guard_refused {
                Some(refusal) => Err(refusal.clone()),
                None => Ok(Some(guard)),
            },
            _ => Ok(None),
        }
    }

    /// Appends `guard`'s command to `out`, behind the command that `like`
    /// owes (same tag, purpose and deadline), and owes its answer, before
    /// the command's `ECHO` if `echo`.
    pub(super) fn expect_ack(
        &mut self,
        guard: ReplicaAck,
        like: Owed,
        echo: bool,
        out: &mut Vec<u8>,
    ) {
        let Some(tag) = like.expect.tag() else {
            unreachable!("a guarded command carries a tag")
        };
        guard.encode(like.deadline.saturating_duration_since(Instant::now()), out);
        self.owed.push_back(Owed {
            expect: Expect::Ack {
                tag,
                echo,
                aof: guard.aof.is_some(),
            },
            ..like
        });
    }

    /// Whether the next reply owed is the guard's answer for the command
    /// tagged `tag` (just answered): its vote then waits for it.
    #[inline]
    pub(super) fn ack_follows(&self, tag: Option<u64>) -> bool {
        matches!(
            (self.owed.front(), tag),
            (Some(Owed { expect: Expect::Ack { tag: t, .. }, .. }), Some(tag)) if *t == tag
        )
    }

    /// The guard's answer `acked` to `ack` (an [`Expect::Ack`]): the vote
    /// of its command, settled (see [`Ledger::settle`]), to deliver now;
    /// `None` while it still waits for its `ECHO`, or if the command was
    /// re-sent (its copy has a guard of its own: this one ran before it).
    pub(super) fn take_ack(
        &mut self,
        ack: Expect,
        acked: Acked,
    ) -> Result<Option<Vote>, NodeError> {
        let Expect::Ack { echo, .. } = ack else {
            unreachable!("only the guard's command is acknowledged")
        };
        let vote = match self.provisional.take() {
            Some(Provisional::Resent) => {
                if echo {
                    self.provisional = Some(Provisional::Resent);
                }
                return Ok(None);
            }
            Some(Provisional::Vote(vote)) => self.settle(vote, acked),
            None => {
                return Err(NodeError::Protocol(ProtocolError::UnexpectedReply(
                    "a replica acknowledgement without its command".into(),
                )))
            }
        };
        if echo {
            self.provisional = Some(Provisional::Vote(vote));
            return Ok(None);
        }
        Ok(Some(vote))
    }

    /// The guard answered `acked` for the command whose vote is `vote`:
    /// the vote it leaves (see `ReplicaAck::settle`). A refusal that will
    /// repeat stops guarded commands on this connection.
    pub(super) fn settle(&mut self, vote: Vote, acked: Acked) -> Vote {
        let Some(guard) = self.guard else {
            return vote;
        };
        if let Acked::Refused(error) = &acked {
            let refusal = NodeError::ReplicaAckRefused {
                command: guard.command(),
                error: error.clone(),
            };
            if refusal.is_permanent() {
                self.guard_refused = Some(refusal);
            }
        }
        guard.settle(vote, acked)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{
        connected_guarded, encoded, read_all, received, received_within, DEADLINE, ROUND,
    };
    use super::super::MAX_OWED;
    use crate::command::{Command, ReplicaAck, ScriptId, Vote};
    use crate::error::NodeError;
    use std::io::Write;
    use std::time::{Duration, Instant};

    const GUARD: ReplicaAck = ReplicaAck {
        replicas: 1,
        timeout: Duration::from_millis(200),
        aof: None,
    };
    const WAIT: &[u8] = b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n200\r\n";
    const ACQUIRE: Command<'static> = Command::Acquire {
        resource: b"r",
        value: b"v",
        ttl_ms: 1000,
    };

    fn echo(tag: u64) -> Vec<u8> {
        format!(
            "*2\r\n$4\r\nECHO\r\n${}\r\n{tag}\r\n",
            tag.to_string().len()
        )
        .into_bytes()
    }

    #[test]
    fn a_guarded_set_counts_once_its_wait_and_its_tag_are_back() {
        let (mut conn, mut server) = connected_guarded(GUARD);
        let deadline = Instant::now() + DEADLINE;
        let acquire = encoded(ACQUIRE, 7);
        conn.send(&acquire, ROUND, deadline, MAX_OWED, false)
            .unwrap();
        // SET, WAIT, ECHO: one write, WAIT right behind the SET.
        let sent = received(&mut server);
        assert_eq!(sent, [acquire.plain(), WAIT, &echo(7)].concat());
        let mut votes = Vec::new();
        server.write_all(b"+OK\r\n:1\r\n$1\r\n7\r\n").unwrap();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(matches!(votes[..], [(0, Vote::Yes)]), "{votes:?}");

        // Too few replicas: the grant is the master's failure, named.
        conn.send(&encoded(ACQUIRE, 8), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        received(&mut server);
        server.write_all(b"+OK\r\n:0\r\n$1\r\n8\r\n").unwrap();
        votes.clear();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(
            matches!(
                votes[..],
                [(
                    0,
                    Vote::Failed(NodeError::ReplicasBehind {
                        acked: 0,
                        wanted: 1
                    })
                )]
            ),
            "{votes:?}"
        );
        // A held key wrote nothing: it stays a "no".
        conn.send(&encoded(ACQUIRE, 9), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        received(&mut server);
        server.write_all(b"$-1\r\n:0\r\n$1\r\n9\r\n").unwrap();
        votes.clear();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(matches!(votes[..], [(0, Vote::No)]), "{votes:?}");
        assert_eq!(conn.settled_tag(), 9);

        // A release is not guarded.
        let release = Command::Release {
            resource: b"r",
            value: b"v",
            notify: None,
        };
        conn.send(&encoded(release, 10), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        let sent = received(&mut server);
        assert!(
            !sent.windows(4).any(|w| w == b"WAIT"),
            "{}",
            sent.escape_ascii()
        );
    }

    #[test]
    fn a_tagged_script_waits_for_its_wait() {
        let (mut conn, mut server) = connected_guarded(GUARD);
        conn.ledger.caps.echo = false; // an ACL that refuses ECHO
        let deadline = Instant::now() + DEADLINE;
        let acquire = encoded(ACQUIRE, 9);
        conn.send(&acquire, ROUND, deadline, MAX_OWED, false)
            .unwrap();
        let mut call = Vec::new();
        acquire.encode_script_call(ScriptId::AcquireTagged, false, &mut call);
        assert_eq!(received(&mut server), [&call[..], WAIT].concat());
        // The script's answer carries the tag; the vote waits for WAIT.
        server.write_all(b":19\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        conn.transport.read_once().unwrap();
        let mut votes = Vec::new();
        conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
            .unwrap();
        assert!(votes.is_empty(), "{votes:?}");
        server.write_all(b":0\r\n").unwrap();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(
            matches!(
                votes[..],
                [(0, Vote::Failed(NodeError::ReplicasBehind { .. }))]
            ),
            "{votes:?}"
        );
    }

    #[test]
    fn a_command_resent_after_noscript_gets_a_wait_of_its_own() {
        let (mut conn, mut server) = connected_guarded(GUARD);
        let extend = Command::Extend {
            resource: b"r",
            value: b"v",
            ttl_ms: 1000,
        };
        let deadline = Instant::now() + DEADLINE;
        let encoded = encoded(extend, 3);
        conn.send(&encoded, ROUND, deadline, MAX_OWED, false)
            .unwrap();
        let mut call = Vec::new();
        encoded.encode_script_call(ScriptId::Extend, true, &mut call);
        assert_eq!(received(&mut server), [&call[..], WAIT, &echo(3)].concat());
        // NOSCRIPT, and the WAIT that ran before the copy.
        server
            .write_all(b"-NOSCRIPT No matching script.\r\n:1\r\n$1\r\n3\r\n")
            .unwrap();
        let mut votes = Vec::new();
        std::thread::sleep(Duration::from_millis(20));
        conn.transport.read_once().unwrap();
        conn.take_replies(Some(1), &mut |op, v| votes.push((op, v)))
            .unwrap();
        assert!(votes.is_empty(), "{votes:?}");
        call.clear();
        encoded.encode_script_call(ScriptId::Extend, false, &mut call);
        assert_eq!(received(&mut server), [&call[..], WAIT, &echo(3)].concat());
        // The copy's WAIT decides.
        server.write_all(b":1\r\n:0\r\n$1\r\n3\r\n").unwrap();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        assert!(
            matches!(
                votes[..],
                [(0, Vote::Failed(NodeError::ReplicasBehind { .. }))]
            ),
            "{votes:?}"
        );
        assert_eq!(conn.settled_tag(), 3);
    }

    #[test]
    fn a_server_without_waitaof_is_sent_no_guarded_command_again() {
        let aof = ReplicaAck {
            aof: Some(false),
            ..GUARD
        };
        let (mut conn, mut server) = connected_guarded(aof);
        let deadline = Instant::now() + DEADLINE;
        conn.send(&encoded(ACQUIRE, 4), ROUND, deadline, MAX_OWED, false)
            .unwrap();
        let sent = received(&mut server);
        assert!(
            sent.ends_with(
                &[
                    &b"*4\r\n$7\r\nWAITAOF\r\n$1\r\n0\r\n$1\r\n1\r\n$3\r\n200\r\n"[..],
                    &echo(4)
                ]
                .concat()
            ),
            "{}",
            sent.escape_ascii()
        );
        server
            .write_all(
                b"+OK\r\n-ERR unknown command 'WAITAOF', with args beginning with: \r\n$1\r\n4\r\n",
            )
            .unwrap();
        let mut votes = Vec::new();
        read_all(&mut conn, 1, &mut |op, v| votes.push((op, v)));
        let [(0, Vote::Failed(error))] = &votes[..] else {
            panic!("{votes:?}")
        };
        assert!(
            matches!(
                error,
                NodeError::ReplicaAckRefused {
                    command: "WAITAOF",
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.is_permanent(), "{error}");
        assert!(error.to_string().contains("Redis 7.2+"), "{error}");
        // Not sent again on this connection, and nothing written.
        let again = conn.send(&encoded(ACQUIRE, 5), ROUND, deadline, MAX_OWED, false);
        assert_eq!(again, Err(error.clone()));
        assert_eq!(conn.owed_len(), 0);
        assert!(received_within(&mut server, Duration::from_millis(100)).is_empty());
    }
}
