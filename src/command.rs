//! The lock commands: what each sends, in which form a connection sends it,
//! and how a reply to it counts.
//!
//! Every command carries a *tag*, a number unique on its connection, and its
//! positive answer carries the tag back: the scripts return `2 * tag +
//! status`, and a plain `SET` is followed by `ECHO tag`. RESP2 has no
//! request ids, so this is what makes "a reply answers exactly the command
//! it is matched to" hold for any timing: a surplus or stale reply shifts
//! the stream by one, and the shifted stream fails the next tag check
//! before any vote is counted. The tag is always a script call's last
//! argument. Error replies carry no tag, but an error
//! only ever counts against a command, never for it.

use crate::error::{NodeError, ProtocolError, ServerError};
use crate::resp::{encode_args, encode_array_header, encode_bulk, Arg, Reply, ServerErrorKind};

/// A Lua script and its SHA-1 digest (what EVALSHA names it by).
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) body: &'static [u8],
    pub(crate) digest: &'static [u8],
}

/// `SET key value NX PX ttl` in a script, for a connection that may not run
/// `ECHO` (an ACL that forbids it): `2 * tag + 1` if set, `2 * tag` if held.
/// ARGV: value, ttl in ms, tag.
pub(crate) const ACQUIRE: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return t + 1 end return t",
    digest: b"8dcf61f018a9eeb23fbeb34c1403817eb528551a",
};

/// Compare-and-delete: deletes the key only if it still holds our value,
/// then, if a channel is given as a second key, publishes a release notice
/// there. The publish is a `pcall`: an ACL user who may not publish (Redis
/// 7's default for new users) must not turn a done release into an error
/// after the key is gone. `2 * tag + 1` if deleted, `2 * tag` if not ours.
/// ARGV: value, then the notice if there is a channel, then the tag.
pub(crate) const RELEASE: Script = Script {
    body: b"local t = tonumber(ARGV[#ARGV]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) if KEYS[2] then redis.pcall('publish', KEYS[2], ARGV[2]) end return t + 1 end return t",
    digest: b"bab843d58ffb5e77c9bc7938256d1542d2598e72",
};

/// Compare-and-pexpire: resets the key's TTL only if it still holds our
/// value. `2 * tag + 1` if extended, `2 * tag` if not ours. ARGV: value, ttl
/// in ms, tag.
pub(crate) const EXTEND: Script = Script {
    body: b"local t = tonumber(ARGV[3]) * 2 if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return t + 1 end return t",
    digest: b"31e4197f956c390a314b20ec698e08f16e13cd80",
};

/// The scripts, by [`ScriptId`]: loaded on every new connection.
pub(crate) const SCRIPTS: [&Script; 3] = [&ACQUIRE, &RELEASE, &EXTEND];

/// A script, by its index in [`SCRIPTS`] (small enough to keep in a queue
/// entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Acquire = 0,
    Release = 1,
    Extend = 2,
}

impl ScriptId {
    pub(crate) fn script(self) -> &'static Script {
        SCRIPTS[self as usize]
    }
}

/// Tags stay below 2^52 so that `2 * tag + 1`, computed by Lua in a double,
/// is exact. A connection would need 2^52 commands to wrap.
pub(crate) const TAG_LIMIT: u64 = 1 << 52;

/// A lock command for one resource and value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Command<'a> {
    /// Set the key if it is absent (`SET resource value NX PX ttl`).
    Acquire {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// Compare-and-delete, publishing on `notify` (a channel name) if given.
    Release {
        resource: &'a [u8],
        value: &'a [u8],
        notify: Option<(&'a [u8], &'a [u8])>,
    },
    /// Compare-and-pexpire.
    Extend {
        resource: &'a [u8],
        value: &'a [u8],
        ttl_ms: u64,
    },
    /// `PING tag`: answers with the tag (a health check).
    Ping,
}

/// How a connection sends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `SET ... NX PX` then `ECHO tag`.
    SetThenEcho,
    /// `PING tag`.
    Ping,
    /// A script, by digest (`EVALSHA`) or by body (`EVAL`).
    Script { id: ScriptId, by_digest: bool },
}

/// What the connection can do, learned from its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// The scripts were loaded (SCRIPT LOAD succeeded), so EVALSHA works
    /// unless the script cache is flushed later. An ACL may forbid SCRIPT
    /// but allow EVAL: then scripts go by body from the start.
    pub(crate) scripts_loaded: bool,
    /// `ECHO` answered during the handshake, so an acquisition can be a
    /// plain `SET` followed by `ECHO tag` (cheaper for the server than the
    /// acquire script). Until that is known, acquisitions use the script.
    pub(crate) echo: bool,
}

impl Default for Capabilities {
    /// Before the handshake has answered: assume the scripts are loaded
    /// (they are loaded first, in the same write) and do not assume ECHO.
    fn default() -> Capabilities {
        Capabilities {
            scripts_loaded: true,
            echo: false,
        }
    }
}

impl Command<'_> {
    /// The form this command takes on a connection with `caps`.
    pub(crate) fn form(&self, caps: Capabilities) -> Form {
        let script = |id| Form::Script {
            id,
            by_digest: caps.scripts_loaded,
        };
        match self {
            Command::Acquire { .. } if caps.echo => Form::SetThenEcho,
            Command::Acquire { .. } => script(ScriptId::Acquire),
            Command::Release { .. } => script(ScriptId::Release),
            Command::Extend { .. } => script(ScriptId::Extend),
            Command::Ping => Form::Ping,
        }
    }

    /// Appends the `SET ... NX PX` of an acquisition and its `ECHO tag`.
    pub(crate) fn encode_set_then_echo(&self, tag: u64, out: &mut Vec<u8>) {
        if let Command::Acquire {
            resource,
            value,
            ttl_ms,
        } = *self
        {
            encode_array_header(out, 6);
            encode_args(
                out,
                &[
                    Arg::Bytes(b"SET"),
                    Arg::Bytes(resource),
                    Arg::Bytes(value),
                    Arg::Bytes(b"NX"),
                    Arg::Bytes(b"PX"),
                    Arg::Uint(ttl_ms),
                ],
            );
            encode_array_header(out, 2);
            encode_args(out, &[Arg::Bytes(b"ECHO"), Arg::Uint(tag)]);
        }
    }

    /// Appends `PING tag`.
    pub(crate) fn encode_ping(tag: u64, out: &mut Vec<u8>) {
        encode_array_header(out, 2);
        encode_args(out, &[Arg::Bytes(b"PING"), Arg::Uint(tag)]);
    }

    /// Appends the arguments of this command's script after the script name
    /// (key count, keys, arguments): the part that is the same for EVALSHA
    /// and EVAL, kept by the connection so that it can re-send the command
    /// as EVAL. Returns how many arguments it wrote.
    pub(crate) fn encode_script_args(&self, tag: u64, out: &mut Vec<u8>) -> usize {
        let args: &[Arg<'_>] = match *self {
            Command::Acquire {
                resource,
                value,
                ttl_ms,
            }
            | Command::Extend {
                resource,
                value,
                ttl_ms,
            } => &[
                Arg::Bytes(b"1"),
                Arg::Bytes(resource),
                Arg::Bytes(value),
                Arg::Uint(ttl_ms),
                Arg::Uint(tag),
            ],
            Command::Release {
                resource,
                value,
                notify: None,
            } => &[
                Arg::Bytes(b"1"),
                Arg::Bytes(resource),
                Arg::Bytes(value),
                Arg::Uint(tag),
            ],
            Command::Release {
                resource,
                value,
                notify: Some((channel, notice)),
            } => &[
                Arg::Bytes(b"2"),
                Arg::Bytes(resource),
                Arg::Bytes(channel),
                Arg::Bytes(value),
                Arg::Bytes(notice),
                Arg::Uint(tag),
            ],
            Command::Ping => &[],
        };
        encode_args(out, args);
        args.len()
    }
}

/// Appends the start of a script call (`*argc EVALSHA digest` or `*argc EVAL
/// body`) whose remaining `args` arguments follow.
pub(crate) fn encode_script_head(id: ScriptId, by_digest: bool, args: usize, out: &mut Vec<u8>) {
    let script = id.script();
    encode_array_header(out, 2 + args);
    if by_digest {
        encode_bulk(out, b"EVALSHA");
        encode_bulk(out, script.digest);
    } else {
        encode_bulk(out, b"EVAL");
        encode_bulk(out, script.body);
    }
}

/// One node's vote on a command.
#[derive(Debug)]
pub(crate) enum Vote {
    /// Done: the key was set, deleted or extended (or the ping answered).
    Yes,
    /// Refused: the key is held by another value (or, for release and
    /// extend, is not ours).
    No,
    /// The server answered with an error.
    Failed(NodeError),
}

/// How a script's reply counts, given the tag its command carried: `Ok`
/// with the vote, or a protocol error for a reply that cannot answer this
/// command (a wrong type, or a number that does not carry the tag).
pub(crate) fn judge_script(reply: &Reply<'_>, tag: u64) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Integer(n) if n >= 0 && (n as u64) >> 1 == tag => {
            Ok(if n & 1 == 1 { Vote::Yes } else { Vote::No })
        }
        Reply::Error(line) => Ok(Vote::Failed(NodeError::Server(ServerError::from_line(
            line,
        )))),
        ref other => Err(unexpected(other)),
    }
}

/// How the reply to the `SET` of a [`Form::SetThenEcho`] counts, before its
/// tag has been checked.
pub(crate) fn judge_set(reply: &Reply<'_>) -> Result<Vote, NodeError> {
    match *reply {
        Reply::Simple(b"OK") => Ok(Vote::Yes),
        Reply::Nil => Ok(Vote::No),
        Reply::Error(line) => Ok(Vote::Failed(NodeError::Server(ServerError::from_line(
            line,
        )))),
        ref other => Err(unexpected(other)),
    }
}

/// Whether a reply to `ECHO tag` or `PING tag` carries the tag: `Ok(None)`
/// if so, `Ok(Some(error))` for an error reply, and a protocol error for
/// anything else.
pub(crate) fn check_tag(reply: &Reply<'_>, tag: u64) -> Result<Option<ServerError>, NodeError> {
    match *reply {
        Reply::Bulk(bytes) if bytes == crate::resp::Decimal::unsigned(tag).as_bytes() => Ok(None),
        Reply::Error(line) => Ok(Some(ServerError::from_line(line))),
        ref other => Err(unexpected(other)),
    }
}

/// Whether a vote is a NOSCRIPT error (answered by re-sending with EVAL).
pub(crate) fn is_noscript(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeError::Server(e)) if e.kind() == ServerErrorKind::NoScript)
}

fn unexpected(reply: &Reply<'_>) -> NodeError {
    NodeError::Protocol(ProtocolError::UnexpectedReply(describe(reply)))
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

    fn commands(mut frame: &[u8]) -> Vec<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        while !frame.is_empty() {
            let Ok(Decoded::Complete(Reply::Array(a), used)) = decode(frame) else {
                panic!("not a command")
            };
            out.push(
                a.iter()
                    .map(|r| match r {
                        Reply::Bulk(b) => b.to_vec(),
                        other => panic!("{other:?}"),
                    })
                    .collect(),
            );
            frame = &frame[used..];
        }
        out
    }

    fn script_call(command: Command<'_>, tag: u64, by_digest: bool) -> Vec<Vec<u8>> {
        let Form::Script { id, .. } = command.form(Capabilities::default()) else {
            panic!("not a script")
        };
        let mut args = Vec::new();
        let n = command.encode_script_args(tag, &mut args);
        let mut out = Vec::new();
        encode_script_head(id, by_digest, n, &mut out);
        out.extend_from_slice(&args);
        let mut decoded = commands(&out);
        assert_eq!(decoded.len(), 1);
        decoded.remove(0)
    }

    #[test]
    fn encodes_each_command_with_its_tag() {
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1500,
        };
        let mut out = Vec::new();
        acquire.encode_set_then_echo(42, &mut out);
        assert_eq!(
            commands(&out),
            [
                vec![&b"SET"[..], b"r", b"v", b"NX", b"PX", b"1500"],
                vec![&b"ECHO"[..], b"42"]
            ]
        );
        assert_eq!(
            script_call(acquire, 7, true),
            [
                &b"EVALSHA"[..],
                ACQUIRE.digest,
                b"1",
                b"r",
                b"v",
                b"1500",
                b"7"
            ]
        );
        let release = Command::Release {
            resource: b"r",
            value: b"v",
            notify: None,
        };
        assert_eq!(
            script_call(release, 9, false),
            [&b"EVAL"[..], RELEASE.body, b"1", b"r", b"v", b"9"]
        );
        let notifying = Command::Release {
            resource: b"r",
            value: b"v",
            notify: Some((b"ch", b"n")),
        };
        assert_eq!(
            script_call(notifying, 9, true),
            [
                &b"EVALSHA"[..],
                RELEASE.digest,
                b"2",
                b"r",
                b"ch",
                b"v",
                b"n",
                b"9"
            ]
        );
        let extend = Command::Extend {
            resource: b"r",
            value: b"v",
            ttl_ms: 7,
        };
        assert_eq!(
            script_call(extend, 3, true),
            [&b"EVALSHA"[..], EXTEND.digest, b"1", b"r", b"v", b"7", b"3"]
        );
    }

    #[test]
    fn the_digests_match_the_bodies() {
        // The digest is what EVALSHA sends: a wrong one would make every
        // call fall back to EVAL. SHA-1 by hand is out of scope here, so
        // the values were computed with `redis-cli SCRIPT LOAD` and are
        // checked against a real server by the lock tests; this only
        // guards their shape.
        for script in SCRIPTS {
            assert_eq!(script.digest.len(), 40);
            assert!(script.digest.iter().all(u8::is_ascii_hexdigit));
        }
    }

    #[test]
    fn a_form_follows_the_connections_capabilities() {
        let acquire = Command::Acquire {
            resource: b"r",
            value: b"v",
            ttl_ms: 1,
        };
        let caps = |scripts_loaded, echo| Capabilities {
            scripts_loaded,
            echo,
        };
        assert_eq!(acquire.form(caps(true, true)), Form::SetThenEcho);
        assert_eq!(
            acquire.form(caps(false, false)),
            Form::Script {
                id: ScriptId::Acquire,
                by_digest: false
            }
        );
        assert_eq!(Command::Ping.form(caps(true, false)), Form::Ping);
    }

    #[test]
    fn judges_replies_by_their_tag() {
        assert!(matches!(
            judge_script(&Reply::Integer(85), 42),
            Ok(Vote::Yes)
        ));
        assert!(matches!(
            judge_script(&Reply::Integer(84), 42),
            Ok(Vote::No)
        ));
        // A reply carrying another command's tag, or the untagged answers
        // of an older protocol, cannot answer this one.
        for stale in [0, 1, 83, 86, -85] {
            assert!(
                matches!(
                    judge_script(&Reply::Integer(stale), 42),
                    Err(NodeError::Protocol(_))
                ),
                "{stale}"
            );
        }
        assert!(judge_script(&Reply::Simple(b"OK"), 1).is_err());
        let noscript = judge_script(&Reply::Error(b"NOSCRIPT No matching script."), 1).unwrap();
        assert!(is_noscript(&noscript));

        assert!(matches!(judge_set(&Reply::Simple(b"OK")), Ok(Vote::Yes)));
        assert!(matches!(judge_set(&Reply::Nil), Ok(Vote::No)));
        assert!(judge_set(&Reply::Integer(1)).is_err());
        let long = [b'x'; 500];
        match judge_set(&Reply::Bulk(&long)) {
            Err(NodeError::Protocol(ProtocolError::UnexpectedReply(text))) => {
                assert!(text.len() <= 64, "{text}")
            }
            other => panic!("{other:?}"),
        }

        assert!(matches!(check_tag(&Reply::Bulk(b"17"), 17), Ok(None)));
        assert!(check_tag(&Reply::Bulk(b"16"), 17).is_err());
        assert!(check_tag(&Reply::Simple(b"OK"), 17).is_err());
        assert!(matches!(
            check_tag(&Reply::Error(b"NOPERM no"), 17),
            Ok(Some(_))
        ));
    }
}
