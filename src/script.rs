//! The three lock commands: how each is encoded and how a reply to it counts.

use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_command, Arg, Reply, ServerErrorKind};

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// Compare-and-delete: deletes the key only if it still holds our value.
pub(crate) const RELEASE: Script = Script {
    body: b"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end",
    digest: b"ae3671744a5dbb24ea37ef607b8b10ac7856d43e",
};

/// Compare-and-pexpire: resets the key's TTL only if it still holds our value.
pub(crate) const EXTEND: Script = Script {
    body: b"if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end",
    digest: b"0be193f9697b4b30826e1bc553c0064e0e04668c",
};

/// One node's vote on a command.
#[derive(Debug)]
pub(crate) enum Vote {
    /// Done: the key was set, deleted or extended.
    Yes,
    /// Refused: the key is held by another value (or gone).
    No,
    /// The reply was an error or made no sense for the command.
    Failed(NodeError),
}

/// The replies a command may legitimately get: every reply, including the
/// ones nobody waits for any more, is checked against its command's shape,
/// so a server that answers out of turn is caught rather than believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// SET NX PX: `+OK`, a null bulk, or an error.
    Set,
    /// Our scripts: `:0`, `:1`, or an error.
    Script,
}

impl Answer {
    pub(crate) fn allows(self, reply: &Reply<'_>) -> bool {
        matches!(
            (self, reply),
            (_, Reply::Error(_))
                | (Answer::Set, Reply::Simple(b"OK") | Reply::Nil)
                | (Answer::Script, Reply::Integer(0 | 1))
        )
    }
}

/// A lock command for one resource and value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Command<'a> {
    /// `SET resource value NX PX ttl`.
    Acquire {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// The compare-and-delete script.
    Release { resource: &'a [u8], value: &'a [u8] },
    /// The compare-and-pexpire script.
    Extend {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
}

impl Command<'_> {
    /// Appends the command, in its usual form (EVALSHA for scripts), to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            } => encode_command(
                out,
                &[
                    Arg::Bytes(b"SET"),
                    Arg::Bytes(resource),
                    Arg::Bytes(value),
                    Arg::Bytes(b"NX"),
                    Arg::Bytes(b"PX"),
                    Arg::Uint(ttl_ms),
                ],
            ),
            _ => self.encode_script(out, b"EVALSHA"),
        }
    }

    /// Appends the EVAL form of a script command, for a server that answered
    /// NOSCRIPT (its script cache was flushed). Returns false for SET, which
    /// has no other form.
    pub(crate) fn encode_fallback(&self, out: &mut Vec<u8>) -> bool {
        match self {
            Command::Acquire { .. } => false,
            _ => {
                self.encode_script(out, b"EVAL");
                true
            }
        }
    }

    fn encode_script(&self, out: &mut Vec<u8>, verb: &'static [u8]) {
        let (script, resource, value, ttl_ms) = match *self {
            Command::Release { resource, value } => (&RELEASE, resource, value, None),
            Command::Extend {
                resource,
                value,
                ttl_ms,
            } => (&EXTEND, resource, value, Some(ttl_ms)),
            Command::Acquire { .. } => return,
        };
        let name = if verb == b"EVAL" {
            script.body
        } else {
            script.digest
        };
        let args = [
            Arg::Bytes(verb),
            Arg::Bytes(name),
            Arg::Bytes(b"1"),
            Arg::Bytes(resource),
            Arg::Bytes(value),
            Arg::Uint(ttl_ms.unwrap_or(0)),
        ];
        let used = if ttl_ms.is_some() { 6 } else { 5 };
        encode_command(out, &args[..used]);
    }

    /// The shape of the replies this command may get.
    pub(crate) fn answer(&self) -> Answer {
        match self {
            Command::Acquire { .. } => Answer::Set,
            Command::Release { .. } | Command::Extend { .. } => Answer::Script,
        }
    }

    /// How a reply to this command counts.
    pub(crate) fn judge(&self, reply: &Reply<'_>) -> Vote {
        match (self, reply) {
            (_, Reply::Error(line)) => {
                Vote::Failed(NodeError::Server(ServerError::from_line(line)))
            }
            (Command::Acquire { .. }, Reply::Simple(b"OK")) => Vote::Yes,
            (Command::Acquire { .. }, Reply::Nil) => Vote::No,
            (Command::Release { .. } | Command::Extend { .. }, Reply::Integer(1)) => Vote::Yes,
            (Command::Release { .. } | Command::Extend { .. }, Reply::Integer(0)) => Vote::No,
            (_, other) => Vote::Failed(NodeError::Protocol(ProtocolError::UnexpectedReply(
                describe(other),
            ))),
        }
    }
}

/// Whether a vote is a NOSCRIPT error (answered by re-sending with EVAL).
pub(crate) fn is_noscript(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeError::Server(e)) if e.kind() == ServerErrorKind::NoScript)
}

/// A short description of an unexpected reply for error messages, with the
/// payload cut to a few bytes (it came from a server we no longer trust).
pub(crate) fn describe(reply: &Reply<'_>) -> String {
    let mut text = format!("{reply:?}");
    if text.len() > 64 {
        let mut cut = 61;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode, Decoded};

    fn args(frame: &[u8]) -> Vec<Vec<u8>> {
        let Ok(Decoded::Complete(Reply::Array(a), _)) = decode(frame) else {
            panic!("not a command")
        };
        a.iter()
            .map(|r| match r {
                Reply::Bulk(b) => b.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn encodes_each_command() {
        let mut out = Vec::new();
        Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1500,
        }
        .encode(&mut out);
        assert_eq!(args(&out), [&b"SET"[..], b"r", b"v", b"NX", b"PX", b"1500"]);

        out.clear();
        let release = Command::Release {
            resource: b"r",
            value: b"v",
        };
        release.encode(&mut out);
        assert_eq!(
            args(&out),
            [&b"EVALSHA"[..], RELEASE.digest, b"1", b"r", b"v"]
        );

        out.clear();
        assert!(release.encode_fallback(&mut out));
        assert_eq!(args(&out), [&b"EVAL"[..], RELEASE.body, b"1", b"r", b"v"]);

        out.clear();
        Command::Extend {
            resource: b"r",
            value: b"v",
            ttl_ms: 7,
        }
        .encode(&mut out);
        assert_eq!(
            args(&out),
            [&b"EVALSHA"[..], EXTEND.digest, b"1", b"r", b"v", b"7"]
        );
    }

    #[test]
    fn judges_replies() {
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1,
        };
        let release = Command::Release {
            resource: b"r",
            value: b"v",
        };
        assert!(matches!(acquire.judge(&Reply::Simple(b"OK")), Vote::Yes));
        assert!(matches!(acquire.judge(&Reply::Nil), Vote::No));
        assert!(matches!(
            acquire.judge(&Reply::Integer(1)),
            Vote::Failed(NodeError::Protocol(_))
        ));
        assert!(matches!(release.judge(&Reply::Integer(1)), Vote::Yes));
        assert!(matches!(release.judge(&Reply::Integer(0)), Vote::No));
        assert!(matches!(
            release.judge(&Reply::Integer(2)),
            Vote::Failed(NodeError::Protocol(_))
        ));
        assert!(matches!(
            release.judge(&Reply::Simple(b"OK")),
            Vote::Failed(NodeError::Protocol(_))
        ));
        let noscript = release.judge(&Reply::Error(b"NOSCRIPT No matching script."));
        assert!(is_noscript(&noscript));
        let long = [b'x'; 500];
        match acquire.judge(&Reply::Bulk(&long)) {
            Vote::Failed(NodeError::Protocol(ProtocolError::UnexpectedReply(text))) => {
                assert!(text.len() <= 64, "{text}")
            }
            other => panic!("{other:?}"),
        }
    }
}
